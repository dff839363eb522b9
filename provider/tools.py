"""The agent's memstream tools: their schemas and the checking of their arguments.

Bare OpenAI function schemas, as Hermes expects from ``get_tool_schemas()`` (constant:
Hermes calls it several times at start-up). ``tool_request`` turns a query tool's
arguments into a request for the service and rejects bad ones with ``ToolError``; the
provider adds the tenant and agent from its configuration, so no argument can choose
the tenant. ``memstream_remember`` and ``memstream_forget`` append events instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOL_SCHEMAS", "TOOL_NAMES", "ToolError", "tool_request"]


class ToolError(ValueError):
    """A tool call the provider cannot run as asked; the message goes back to the model."""


_SCOPE = {
    "type": "string",
    "description": "Whose memory: 'current' (this agent, default), 'session' (this session), "
                   "'all' (every agent of the fleet), or another agent's name.",
}

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    {
        "name": "memstream_search",
        "description": "Search long-term memory (earlier conversation turns, saved memories and "
                       "extracted facts) by meaning and keywords. Returns items with ids, dates and sources.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "scope": _SCOPE,
                "kind": {"type": "string", "enum": ["all", "turns", "memories", "facts"],
                         "description": "Which items (default all)."},
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
                "kind": {"type": "string", "enum": ["identity", "preference", "dislike", "tool", "decision",
                                                    "constraint", "value", "note", "question", "done", "tentative"],
                         "description": "Only facts of this kind."},
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
                "target": {"type": "string", "enum": ["memory", "user"],
                           "description": "'user' for facts about the user, 'memory' otherwise (default)."},
            },
            "required": ["content"],
        },
    },
    {
        "name": "memstream_forget",
        "description": "Forget an item (turn, memory or fact) by its id: it is removed everywhere and "
                       "no longer recalled.",
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

_OPS = {"memstream_search": "search", "memstream_context": "context",
        "memstream_recent": "recent", "memstream_facts": "facts"}


def _int(args: dict, key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)  # models often send numbers as strings
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{key} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ToolError(f"{key} must be between {low} and {high}, got {value}")
    return value


def _str(args: dict, key: str, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise ToolError(f"{key} is required")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{key} must be a non-empty string, got {value!r}")
    return value.strip()


def tool_request(name: str, args: dict) -> dict:
    """The service request of a query tool (without tenant/agent/session)."""
    op = _OPS[name]
    request: dict[str, Any] = {"op": op}
    scope = _str(args, "scope")
    if scope:
        request["scope"] = scope
    if op == "search":
        request["query"] = _str(args, "query", required=True)
        kind = _str(args, "kind") or "all"
        if kind not in ("all", "turns", "memories", "facts"):
            raise ToolError(f"kind must be all, turns, memories or facts, got {kind!r}")
        request["kind"] = kind
        request["k"] = _int(args, "limit", 8, 1, 20)
    elif op == "context":
        request["id"] = _str(args, "id", required=True)
        request["before"] = _int(args, "before", 3, 0, 20)
        request["after"] = _int(args, "after", 3, 0, 20)
    elif op == "recent":
        request["limit"] = _int(args, "limit", 5, 1, 20)
    elif op == "facts":
        for key in ("subject", "kind"):
            value = _str(args, key)
            if value:
                request[key] = value
        history = args.get("history", False)
        if not isinstance(history, bool):
            raise ToolError(f"history must be true or false, got {history!r}")
        request["history"] = history
    return request
