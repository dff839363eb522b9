"""The agent's memstream tools: their arguments as types, the schemas Hermes sees, and the
decoding of a call.

Each tool's arguments are a msgspec Struct with their bounds in the types
(``msgspec.Meta``): the one home of each limit and description. The bare OpenAI function
schemas Hermes expects from ``get_tool_schemas()`` are generated from these Structs
(``msgspec.json.schema_components``, inlined into a plain JSON-schema object: ``type``,
``properties``, ``required``, no ``$ref``), once, at import: Hermes calls it several times
at start-up. ``tool_args`` decodes a call's arguments into its Struct and rejects, with a
``ToolError`` the model can act on, anything the schema does not allow: a key it does not
list, a wrong type, a value out of range or not in an enum, a string too long. Nothing is
silently ignored or guessed, except numbers sent as digit strings and optional arguments
sent as null or blank (taken as absent). A query tool's arguments become the service's
typed request (``QueryArgs.request``) with the tenant and agent the provider adds from its
configuration, so no argument can choose the tenant; ``memstream_remember`` and
``memstream_forget`` append events instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeGuard, TypeVar, get_args, get_origin, get_type_hints

import msgspec
import msgspec.inspect as inspect

from memstream.core import PermanentError
from memstream.producers import MemoryTarget
from memstream.query import ContextRequest, FactsRequest, RecentRequest, Request, SearchKind, SearchRequest
from memstream.text import FACT_KINDS

_T = TypeVar("_T")

__all__ = [
    "TOOLS",
    "TOOL_SCHEMAS",
    "TOOL_NAMES",
    "Tool",
    "ToolArgs",
    "QueryArgs",
    "SearchArgs",
    "ContextArgs",
    "RecentArgs",
    "FactsArgs",
    "RememberArgs",
    "ForgetArgs",
    "ToolError",
    "tool_args",
    "search_note",
    "finite",
    "one_of",
    "SEARCH_KINDS",
    "TARGETS",
]


class ToolError(PermanentError, ValueError):
    """A tool call the provider cannot run as asked; the message goes back to the model."""


SEARCH_KINDS: tuple[SearchKind, ...] = get_args(SearchKind)
TARGETS: tuple[MemoryTarget, ...] = get_args(MemoryTarget)

if TYPE_CHECKING:
    FactKind = str
else:  # the kinds the extractor produces, as an enum of the schema and of the decoder
    FactKind = Literal[FACT_KINDS]


# -- the arguments ------------------------------------------------------------------------
Scope = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=200,
        description="Whose memory: 'current' (this agent, default), 'session' (this session), "
        "'all' (every agent of the fleet), or another agent's name.",
    ),
]


class ToolArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The arguments of one tool call, decoded (``tool_args``) within their bounds."""


class QueryArgs(ToolArgs):
    """The arguments of a tool the query service answers."""

    def request(self, tenant: str, agent: str, session: str) -> Request:
        """The service's typed request for these arguments, in ``tenant``'s name."""
        raise NotImplementedError


class SearchArgs(QueryArgs):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=2000, description="What to look for.")]
    scope: Scope = "current"
    kind: Annotated[SearchKind, msgspec.Meta(description="Which items (default all).")] = "all"
    limit: Annotated[int, msgspec.Meta(ge=1, le=20, description="At most this many (default 8).")] = 8

    def request(self, tenant: str, agent: str, session: str) -> SearchRequest:
        # reranked by the cross-encoder: a tool call can wait a few hundred ms (prefetch cannot)
        return SearchRequest(
            tenant=tenant,
            agent=agent,
            session=session,
            scope=self.scope,
            query=self.query,
            kind=self.kind,
            k=self.limit,
            rerank=True,
        )


class ContextArgs(QueryArgs):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=200, description="An id from memstream_search.")]
    before: Annotated[int, msgspec.Meta(ge=0, le=20, description="Turns before (default 3).")] = 3
    after: Annotated[int, msgspec.Meta(ge=0, le=20, description="Turns after (default 3).")] = 3
    scope: Scope = "current"

    def request(self, tenant: str, agent: str, session: str) -> ContextRequest:
        return ContextRequest(
            tenant=tenant, agent=agent, session=session, scope=self.scope, id=self.id, before=self.before, after=self.after
        )


class RecentArgs(QueryArgs):
    limit: Annotated[int, msgspec.Meta(ge=1, le=20, description="Sessions (default 5).")] = 5
    scope: Scope = "current"

    def request(self, tenant: str, agent: str, session: str) -> RecentRequest:
        return RecentRequest(tenant=tenant, agent=agent, session=session, scope=self.scope, limit=self.limit)


class FactsArgs(QueryArgs):
    subject: (
        Annotated[str, msgspec.Meta(min_length=1, max_length=200, description="Only facts about this subject (e.g. 'user').")]
        | None
    ) = None
    kind: Annotated[FactKind, msgspec.Meta(description="Only facts of this kind.")] | None = None
    history: Annotated[bool, msgspec.Meta(description="Include superseded facts (default false).")] = False
    scope: Scope = "current"

    def request(self, tenant: str, agent: str, session: str) -> FactsRequest:
        return FactsRequest(
            tenant=tenant,
            agent=agent,
            session=session,
            scope=self.scope,
            subject=self.subject,
            kind=self.kind,
            history=self.history,
        )


class RememberArgs(ToolArgs):
    # not stripped: cleaned and clipped to the configured max_text_bytes by the writer (the answer says so)
    content: Annotated[str, msgspec.Meta(min_length=1, description="What to remember, as one self-contained statement.")]
    target: Annotated[
        MemoryTarget, msgspec.Meta(description="'user' for facts about the user, 'memory' otherwise (default).")
    ] = "memory"


class ForgetArgs(ToolArgs):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=200, description="An id from memstream_search or memstream_facts.")]
    reason: Annotated[str, msgspec.Meta(max_length=500, description="Why (kept in the log).")] = ""


# string arguments kept as sent (every other one is stripped of surrounding white space)
_UNSTRIPPED = frozenset({"content"})


# -- the tools ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """One memstream tool: its name and description as the model sees them, and its arguments."""

    name: str
    description: str
    args: type[ToolArgs]


TOOLS: tuple[Tool, ...] = (
    Tool(
        "memstream_search",
        "Search long-term memory (earlier conversation turns, saved memories and "
        "extracted facts) by meaning and keywords. Returns items with ids, dates, sources and a score "
        "in [0, 1], and a note of which agents it searched and how many items of other agents match.",
        SearchArgs,
    ),
    Tool(
        "memstream_context",
        "The conversation turns around a search hit, in its session (scroll around a hit).",
        ContextArgs,
    ),
    Tool("memstream_recent", "Recent sessions, newest first, each with its first and last user message.", RecentArgs),
    Tool(
        "memstream_facts",
        "Current facts extracted from conversations and memories (names, places, "
        "preferences, tools...), optionally with how they changed over time.",
        FactsArgs,
    ),
    Tool(
        "memstream_remember",
        "Keep something in long-term memory explicitly (a fact, a decision, a preference).",
        RememberArgs,
    ),
    Tool(
        "memstream_forget",
        "Forget an item (turn, memory or fact) by its id: it is removed everywhere and no longer recalled.",
        ForgetArgs,
    ),
)

TOOL_NAMES = tuple(tool.name for tool in TOOLS)

_BY_NAME = {tool.name: tool for tool in TOOLS}

# each tool's arguments as the decoder sees them (msgspec.inspect), by name
_FIELDS: dict[type[ToolArgs], dict[str, Any]] = {
    tool.args: {f.name: f for f in inspect.type_info(tool.args).fields}  # type: ignore[attr-defined]  # a StructType's fields
    for tool in TOOLS
}


def _parameters(args: type[ToolArgs], component: dict[str, Any]) -> dict[str, Any]:
    """A Struct's JSON schema as the parameters of a function schema: a plain object schema,
    every property inlined with its own type (an enum's values in the order of its type)."""
    properties = {}
    for name, prop in component["properties"].items():
        prop = dict(prop)
        union = prop.pop("anyOf", None)
        if union is not None:  # X | None: a null is taken as absent, so the schema names X alone
            (own,) = [member for member in union if member != {"type": "null"}]
            prop = {**prop, **own}
            if prop.get("default", 0) is None:
                del prop["default"]
        if "enum" in prop:
            prop["enum"] = _declared(args, name)
            if "type" not in prop and all(isinstance(v, str) for v in prop["enum"]):
                prop["type"] = "string"
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": list(component.get("required", [])),
        "additionalProperties": False,
    }


def _declared(args: type[ToolArgs], name: str) -> list[Any]:
    """The values of an enum argument in the order its ``Literal`` lists them."""
    found = [get_type_hints(args, include_extras=True)[name]]
    while found:
        hint = found.pop()
        if get_origin(hint) is Literal:
            return list(get_args(hint))
        found.extend(get_args(hint))  # into Annotated[...] and X | None
    raise TypeError(f"{args.__name__}.{name} is not a Literal")


def _schemas(tools: tuple[Tool, ...]) -> tuple[dict[str, Any], ...]:
    _, components = msgspec.json.schema_components([tool.args for tool in tools])
    return tuple(
        {"name": tool.name, "description": tool.description, "parameters": _parameters(tool.args, components[tool.args.__name__])}
        for tool in tools
    )


# -- decoding a call ----------------------------------------------------------------------

_ABSENT = object()

_AT = re.compile(r"- at `\$\.([A-Za-z_]+)`")
_MISSING = re.compile(r"missing required field `([A-Za-z_]+)`")


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


def _own(t: Any) -> Any:
    """The type of an argument without its ``None`` (``X | None``: ``X``) and its description."""
    if isinstance(t, inspect.UnionType):
        (t,) = [member for member in t.types if not isinstance(member, inspect.NoneType)]
    while isinstance(t, inspect.Metadata):
        t = t.type
    return t


def _given(name: str, field: Any, value: Any) -> Any:
    """An argument as the decoder takes it: null (and a blank optional string) is absent, a
    string stripped, an integer sent as digits a number."""
    if value is None:
        return _ABSENT
    kind = _own(field.type)
    if isinstance(value, str):
        if isinstance(kind, inspect.IntType) and value.strip().lstrip("-").isdecimal():
            try:
                return int(value)  # models often send numbers as strings
            except ValueError:  # more digits than Python converts
                return value
        if isinstance(kind, (inspect.StrType, inspect.LiteralType)):
            stripped = value.strip()
            if not stripped:
                return "" if field.required else _ABSENT
            return value if name in _UNSTRIPPED else stripped
    return value


def tool_args(name: str, args: Any) -> ToolArgs:
    """The arguments of tool ``name`` decoded into its Struct (``KeyError`` for a name that
    is not in ``TOOLS``); ``ToolError`` naming what is wrong for arguments the schema does
    not allow: not a JSON object, a key it does not list (``tenant`` for one, which comes
    from configuration only), a wrong type, out of range, not one of an enum's values, too
    long."""
    tool = _BY_NAME[name]
    if not isinstance(args, dict):
        raise ToolError(f"{name} takes a JSON object of arguments, got {_show(args)}")
    fields = _FIELDS[tool.args]
    unknown = [k for k in args if k not in fields]
    if unknown:
        raise ToolError(f"{name} has no argument {', '.join(_show(k, 40) for k in unknown[:5])}; it takes {', '.join(fields)}")
    given = {}
    for key, value in args.items():
        value = _given(key, fields[key], value)
        if value is not _ABSENT:
            given[key] = value
    try:
        return msgspec.convert(given, tool.args)
    except msgspec.ValidationError as exc:
        raise ToolError(_explain(tool, given, str(exc))) from None


def _explain(tool: Tool, given: dict[str, Any], message: str) -> str:
    """What the decoder refused, said for the model: which argument, what it must be, what it got."""
    missing = _MISSING.search(message)
    if missing:
        return f"{missing.group(1)} is required"
    at = _AT.search(message)
    field = _FIELDS[tool.args].get(at.group(1)) if at else None
    if field is None:
        return f"{tool.name}: {message}"
    key, value, kind = field.name, given.get(field.name), _own(field.type)
    if isinstance(kind, inspect.IntType):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{key} must be an integer, got {_show(value)}"
        return f"{key} must be between {kind.ge} and {kind.le}, got {_show(value)}"
    if isinstance(kind, inspect.BoolType):
        return f"{key} must be true or false, got {_show(value)}"
    if isinstance(kind, inspect.LiteralType):
        if not isinstance(value, str) or not value:
            return f"{key} must be a non-empty string, got {_show(value)}"
        return f"{key} must be one of {', '.join(map(str, kind.values))}; got {_show(value)}"
    if isinstance(kind, inspect.StrType):
        if not isinstance(value, str):
            return f"{key} must be {'a non-empty string' if kind.min_length else 'a string'}, got {_show(value)}"
        if kind.max_length is not None and len(value) > kind.max_length:
            return f"{key} must be at most {kind.max_length} characters, got {len(value)}"
        return f"{key} must be a non-empty string, got {_show(value)}"
    return f"{tool.name}: {message}"


# the bare OpenAI function schemas of ``get_tool_schemas()``
TOOL_SCHEMAS: tuple[dict[str, Any], ...] = _schemas(TOOLS)


# -- answers --------------------------------------------------------------------------------
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


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) made ``None``: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
