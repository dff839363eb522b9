"""The agent's memstream tools: their schemas and the checking of their arguments.

Bare OpenAI function schemas, as Hermes expects from ``get_tool_schemas()`` (constant:
Hermes calls it several times at start-up). ``tool_request`` turns a query tool's
arguments into a request for the service; ``remember_args``/``forget_args`` check those
of ``memstream_remember`` and ``memstream_forget``, which append events instead. All of
them reject, with a ``ToolError`` the model can act on, anything the schema does not
allow: a key it does not list, a wrong type, a value out of range or not in an enum, a
string too long. Nothing is silently ignored or guessed, except numbers sent as digit
strings. The provider adds the tenant and agent from its configuration, so no argument
can choose the tenant.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard, TypeVar

from memstream.core import PermanentError
from memstream.producers import MemoryTarget
from memstream.text import FACT_KINDS

_T = TypeVar("_T")

__all__ = [
    "TOOL_SCHEMAS",
    "TOOL_NAMES",
    "ToolError",
    "tool_request",
    "search_note",
    "check_args",
    "remember_args",
    "forget_args",
    "finite",
    "one_of",
    "SEARCH_KINDS",
    "TARGETS",
    "MAX_CHARS",
]


class ToolError(PermanentError, ValueError):
    """A tool call the provider cannot run as asked; the message goes back to the model."""


SEARCH_KINDS: tuple[str, ...] = ("all", "turns", "memories", "facts")
TARGETS: tuple[MemoryTarget, ...] = ("memory", "user")
# the longest string each argument may be (characters); content is clipped to the
# configured max_text_bytes instead (and the answer says so)
MAX_CHARS = {"query": 2000, "scope": 200, "id": 200, "subject": 200, "reason": 500}


_SCOPE = {
    "type": "string",
    "description": "Whose memory: 'current' (this agent, default), 'session' (this session), "
    "'all' (every agent of the fleet), or another agent's name.",
}

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    {
        "name": "memstream_search",
        "description": "Search long-term memory (earlier conversation turns, saved memories and "
        "extracted facts) by meaning and keywords. Returns items with ids, dates, sources and a score "
        "in [0, 1], and a note of which agents it searched and how many items of other agents match.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "scope": _SCOPE,
                "kind": {"type": "string", "enum": list(SEARCH_KINDS), "description": "Which items (default all)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many (default 8)."},
            },
            "required": ["query"],
        },
    },
    {
        "name": "memstream_context",
        "description": "The conversation turns around a search hit, in its session (scroll around a hit).",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "An id from memstream_search."},
                "before": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Turns before (default 3)."},
                "after": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Turns after (default 3)."},
                "scope": _SCOPE,
            },
            "required": ["id"],
        },
    },
    {
        "name": "memstream_recent",
        "description": "Recent sessions, newest first, each with its first and last user message.",
        "parameters": {
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Sessions (default 5)."},
                "scope": _SCOPE,
            },
        },
    },
    {
        "name": "memstream_facts",
        "description": "Current facts extracted from conversations and memories (names, places, "
        "preferences, tools...), optionally with how they changed over time.",
        "parameters": {
            "type": "object",
            "properties": {
                "subject": {"type": "string", "description": "Only facts about this subject (e.g. 'user')."},
                "kind": {"type": "string", "enum": list(FACT_KINDS), "description": "Only facts of this kind."},
                "history": {"type": "boolean", "description": "Include superseded facts (default false)."},
                "scope": _SCOPE,
            },
        },
    },
    {
        "name": "memstream_remember",
        "description": "Keep something in long-term memory explicitly (a fact, a decision, a preference).",
        "parameters": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "What to remember, as one self-contained statement."},
                "target": {
                    "type": "string",
                    "enum": list(TARGETS),
                    "description": "'user' for facts about the user, 'memory' otherwise (default).",
                },
            },
            "required": ["content"],
        },
    },
    {
        "name": "memstream_forget",
        "description": "Forget an item (turn, memory or fact) by its id: it is removed everywhere and no longer recalled.",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "An id from memstream_search or memstream_facts."},
                "reason": {"type": "string", "description": "Why (kept in the log)."},
            },
            "required": ["id"],
        },
    },
)

TOOL_NAMES = tuple(schema["name"] for schema in TOOL_SCHEMAS)

_OPS = {"memstream_search": "search", "memstream_context": "context", "memstream_recent": "recent", "memstream_facts": "facts"}


_ACCEPTED = {s["name"]: tuple(s["parameters"]["properties"]) for s in TOOL_SCHEMAS}


def _show(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr, clipped."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_of(value: object, choices: tuple[_T, ...]) -> TypeGuard[_T]:
    """Whether ``value`` is one of ``choices`` (and so of their type)."""
    return value in choices


def check_args(name: str, args: Any) -> dict[str, Any]:
    """The arguments of tool ``name`` if they are a JSON object with only the schema's
    keys; else ``ToolError`` naming what is wrong and what the tool takes (an unknown key
    is an error, not ignored: ``tenant`` for one, which comes from configuration only)."""
    if not isinstance(args, dict):
        raise ToolError(f"{name} takes a JSON object of arguments, got {_show(args)}")
    accepted = _ACCEPTED[name]
    unknown = [k for k in args if k not in accepted]
    if unknown:
        raise ToolError(f"{name} has no argument {', '.join(_show(k, 40) for k in unknown[:5])}; it takes {', '.join(accepted)}")
    return args


def _int(args: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        try:
            value = int(value)  # models often send numbers as strings
        except ValueError:  # more digits than Python converts
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{key} must be an integer, got {_show(value)}")
    if not low <= value <= high:
        raise ToolError(f"{key} must be between {low} and {high}, got {_show(value)}")
    return value


def _str(args: dict[str, Any], key: str, required: bool = False) -> str | None:
    """A string argument, stripped; ``None`` if absent, null or blank (not required)."""
    value = args.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise ToolError(f"{key} is required")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{key} must be a non-empty string, got {_show(value)}")
    value = value.strip()
    limit = MAX_CHARS.get(key)
    if limit is not None and len(value) > limit:
        raise ToolError(f"{key} must be at most {limit} characters, got {len(value)}")
    return value


def _choice(args: dict[str, Any], key: str, choices: tuple[_T, ...], default: _T | None) -> _T | None:
    value = _str(args, key)
    if value is None:
        return default
    if not one_of(value, choices):
        raise ToolError(f"{key} must be one of {', '.join(map(str, choices))}; got {_show(value)}")
    return value


def _bool(args: dict[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(f"{key} must be true or false, got {_show(value)}")
    return value


def tool_request(name: str, args: Any) -> dict[str, Any]:
    """The service request of a query tool (without tenant/agent/session); ``ToolError``
    for arguments that are not the schema's (unknown key, wrong type, out of range,
    not one of an enum's values, too long)."""
    op = _OPS[name]
    args = check_args(name, args)
    request: dict[str, Any] = {"op": op}
    scope = _str(args, "scope")
    if scope:
        request["scope"] = scope
    if op == "search":
        request["query"] = _str(args, "query", required=True)
        request["kind"] = _choice(args, "kind", SEARCH_KINDS, "all")
        request["k"] = _int(args, "limit", 8, 1, 20)
    elif op == "context":
        request["id"] = _str(args, "id", required=True)
        request["before"] = _int(args, "before", 3, 0, 20)
        request["after"] = _int(args, "after", 3, 0, 20)
    elif op == "recent":
        request["limit"] = _int(args, "limit", 5, 1, 20)
    elif op == "facts":
        subject = _str(args, "subject")
        if subject:
            request["subject"] = subject
        kind = _choice(args, "kind", FACT_KINDS, None)
        if kind:
            request["kind"] = kind
        request["history"] = _bool(args, "history", False)
    return request


def search_note(answer: dict[str, Any]) -> str:
    """One sentence for the model on what a ``memstream_search`` answer searched and what
    its scope left out ("searched the memory of agent alice; 3 more items in other agents
    share words with the query: scope='all'"); "" when the answer does not say."""
    searched = answer.get("searched")
    if not isinstance(searched, dict):
        return ""  # a service from before answers said what they searched
    agents = searched.get("agents")
    if searched.get("scope") == "session":
        note = "searched this session's memory"
    elif agents is None:
        note = "searched the memory of every agent"
    else:
        note = f"searched the memory of agent {', '.join(map(str, agents))}"
    elsewhere = answer.get("elsewhere")
    counts = elsewhere.values() if isinstance(elsewhere, dict) else ()
    more: int = sum(n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n > 0)
    if more:
        note += f"; {more} more item{'s' if more != 1 else ''} in other agents share words with the query: scope='all'"
    return note


def remember_args(args: Any) -> tuple[str, MemoryTarget]:
    """``(content, target)`` of ``memstream_remember``; content unstripped (cleaned and
    clipped by the writer), target ``memory`` unless given."""
    args = check_args("memstream_remember", args)
    content = args.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolError(f"content must be a non-empty string, got {_show(content)}")
    return content, _choice(args, "target", TARGETS, "memory") or "memory"


def forget_args(args: Any) -> tuple[str, str]:
    """``(id, reason)`` of ``memstream_forget``."""
    args = check_args("memstream_forget", args)
    item_id = _str(args, "id", required=True) or ""
    reason = args.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ToolError(f"reason must be a string, got {_show(reason)}")
    reason = (reason or "").strip()
    if len(reason) > MAX_CHARS["reason"]:
        raise ToolError(f"reason must be at most {MAX_CHARS['reason']} characters, got {len(reason)}")
    return item_id, reason


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) made ``None``: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
