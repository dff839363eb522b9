"""The query protocol: typed requests with their limits, and the envelope they travel in.

A request is one of the msgspec Structs below, a tagged union on ``op`` with its limits in
the types; the envelope carries its id, deadline and request as JSON. Decoding never
trusts what it reads: anything that is not one of these requests within its limits is
``QueryRefused``. Each op's answer is a Struct too (``SearchAnswer``, ...; ``Refusal`` for
an error), and ``Handlers`` is the server's table: one typed callable per op, the request
in, its answer out. The limits are checked here, once: a handler trusts its request.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Union, get_args

import msgspec

from memstream.core import PermanentError

MAX_ENVELOPE_BYTES = 64 * 1024

MAX_QUERY_CHARS = 16 * 1024

Name = Annotated[str, msgspec.Meta(max_length=256)]

ItemId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


# not blank: at least one character that is not white space
QueryText = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S")]


# what a search reads: one kind of item, or all of them
SearchKind = Literal["all", "turns", "memories", "facts"]


class _Request(msgspec.Struct, kw_only=True, tag_field="op", forbid_unknown_fields=True):
    tenant: Annotated[str, msgspec.Meta(max_length=128)] = ""
    agent: Name = "default"
    session: Name = ""
    scope: Name = "current"


# how many of the ranking's best a cross-encoder reranks (a search's ``rerank``): at most 50,
# its cost grows with each (``memstream.query.rerank``; the default chosen on LoCoMo dev: 40
# beat 30 question by question, BENCHMARKS.md "The rerank's cost").
# Recall (the synchronous prefetch, and the warm-up after a turn, which holds the provider's
# one recall thread) has no rerank.
RerankCandidates = Annotated[int, msgspec.Meta(ge=2, le=50)]
RERANK_CANDIDATES = 40


class RecallRequest(_Request, tag="recall"):
    query: QueryText
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 12


class SearchRequest(_Request, tag="search"):
    query: QueryText
    kind: SearchKind = "all"
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    history: bool = False
    # the best ``rerank_candidates`` reordered by a cross-encoder (a few hundred ms more)
    rerank: bool = False
    rerank_candidates: RerankCandidates = RERANK_CANDIDATES


class ContextRequest(_Request, tag="context"):
    id: ItemId
    before: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3
    after: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3


class RecentRequest(_Request, tag="recent"):
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5


class FactsRequest(_Request, tag="facts"):
    subject: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    kind: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    history: bool = False
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] = 20


class ExistsRequest(_Request, tag="exists"):
    id: ItemId


class CountRequest(_Request, tag="count"):
    pass


Request = Union[RecallRequest, SearchRequest, ContextRequest, RecentRequest, FactsRequest, ExistsRequest, CountRequest]

OPS: tuple[str, ...] = tuple(cls.__struct_config__.tag for cls in get_args(Request))


@functools.cache  # the types do not change: about 85 us a look-up, once per request before
def most(op: str, field: str) -> int:
    """The largest value the protocol allows for ``op``'s integer ``field`` (the ``le`` of
    its type): the one home of each bound, for a caller that states it (the command line's
    arguments). ``KeyError`` for an op or field without one."""
    import msgspec.inspect as inspect

    for cls in get_args(Request):
        if cls.__struct_config__.tag == op:
            for f in inspect.type_info(cls).fields:  # type: ignore[attr-defined]  # a StructType's fields
                if f.name == field and isinstance(f.type, inspect.IntType) and f.type.le is not None:
                    return int(f.type.le)
    raise KeyError(f"{op}.{field}")


# The query server's counter (``P:counters:queries``) of reranked searches answered without the
# rerank because its lane was busy: each is also counted ``answered``.
RERANK_SHED = "rerank_shed"
# ... and of recalls and searches answered without the late interaction because a request of their
# op in their take waited on the list past the server's ``hurry_after_s`` (``MEMSTREAM_LATE_SHED_MS``):
# each also ``answered``.
LATE_SHED = "late_shed"

OP_OF: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(Request)}


# -- the answers ---------------------------------------------------------------------------
class Answer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a handler returns. The server sets how long the request took to answer
    (``took_ms``) and how long it waited in the channel before (``queued_ms``)."""

    took_ms: float | None = None
    queued_ms: float | None = None


class Refusal(Answer):
    """A request that is answered with an error (the message says why)."""

    error: str


# An item of a recall or search answer: {id, kind, text, score, agent, session, occurred_at,
# event_ids} (facts also subject, key, value, valid_to, superseded_by, ...), and ``agree``
# (an int, at least 2) when that many agents wrote the same thing in their own words or in
# the same words: those items were collapsed into this one, the newest wording shown
# (``memstream.query.ranking``, step 6). No ``agree``: one agent's item.
AGREE = "agree"


class RecallAnswer(Answer):
    items: list[dict[str, Any]]  # best first, facts leading; each as above (``AGREE``)


class Searched(msgspec.Struct):
    """The scope a search read: its agents (None: every agent of the tenant)."""

    scope: str
    agents: list[str] | None


class SearchAnswer(Answer):
    results: list[dict[str, Any]]  # best first, each as a recall's item (``AGREE``)
    searched: Searched
    # per other agent, how many of its items share words with the query (not for scope all or session)
    elsewhere: dict[str, int] | None = None
    # when rerank was asked: whether the results were reranked, and why not (the results
    # are then the ranking's, as without rerank)
    reranked: bool | None = None
    rerank_error: str | None = None


class ContextAnswer(Answer):
    anchor: dict[str, Any]
    turns: list[dict[str, Any]]


class RecentAnswer(Answer):
    sessions: list[dict[str, Any]]


class FactsAnswer(Answer):
    facts: list[dict[str, Any]]
    total: int


class ExistsAnswer(Answer):
    exists: bool
    kind: str | None = None
    agent: str | None = None


class CountAnswer(Answer):
    items: dict[str, int]
    tiers: dict[str, dict[str, int]] | None = None


@dataclass(frozen=True)
class Handlers:
    """What answers each op on a server: the typed request in, its typed answer (or a
    ``Refusal``) out, a new one each call (the server sets its times on it); None: this
    server does not answer the op. One field per op of the protocol (a test keeps them in
    step)."""

    recall: Callable[[RecallRequest], RecallAnswer | Refusal] | None = None
    search: Callable[[SearchRequest], SearchAnswer | Refusal] | None = None
    context: Callable[[ContextRequest], ContextAnswer | Refusal] | None = None
    recent: Callable[[RecentRequest], RecentAnswer | Refusal] | None = None
    facts: Callable[[FactsRequest], FactsAnswer | Refusal] | None = None
    exists: Callable[[ExistsRequest], ExistsAnswer | Refusal] | None = None
    count: Callable[[CountRequest], CountAnswer | Refusal] | None = None

    def of(self, op: str) -> Callable[[Any], Answer] | None:
        """The handler of ``op`` (None: not answered here); it takes ``op``'s request."""
        handler: Callable[[Any], Answer] | None = getattr(self, op, None)
        return handler


# What answers several requests of one op taken together: their answers, in order (a
# request it cannot answer gets its error answer; the others are answered all the same).
BatchHandler = Callable[[list[Any]], Sequence[Answer]]  # a list of one op's requests


class Envelope(msgspec.Struct, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")]
    deadline: float
    req: Request
    asked_at: float = 0.0


class _Loose(msgspec.Struct):
    id: str = ""


_envelope = msgspec.json.Decoder(Envelope)

_loose = msgspec.json.Decoder(_Loose)

_encoder = msgspec.json.Encoder()

_ID_AT_START = re.compile(rb'^\s*\{\s*"id"\s*:\s*"([0-9a-f]{32})"')


class QueryRefused(PermanentError, ValueError):
    """A request the protocol refuses (too big, malformed, out of its limits). ``kind``
    names the refusal without quoting the request (``too_big``, ``nested``, ``bad``):
    what a log may keep, where the message may echo the request's values."""

    def __init__(self, reason: str, request_id: str = "", kind: str = "bad"):
        super().__init__(reason)
        self.request_id = request_id
        self.kind = kind


def decode_envelope(raw: bytes) -> Envelope:
    """The envelope in ``raw``; raises QueryRefused (with the id when it can be read) and
    nothing else, whatever ``raw`` holds (deep nesting included)."""
    if len(raw) > MAX_ENVELOPE_BYTES:
        found = _ID_AT_START.search(raw[:200])  # not parsed whole: only its id, if it leads
        raise QueryRefused(
            f"request of {len(raw)} bytes is over the {MAX_ENVELOPE_BYTES}-byte limit",
            found.group(1).decode() if found else "",
            kind="too_big",
        )
    try:
        env = _envelope.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise QueryRefused(f"bad request: {exc}", _id_of(raw)) from None
    except RecursionError:  # nested deeper than the decoder goes: refused like any bad request
        raise QueryRefused("bad request: nested too deeply", _id_of(raw), kind="nested") from None
    except Exception as exc:  # noqa: BLE001  whatever a request makes the decoder raise: refused, never the server's failure
        raise QueryRefused(f"bad request: it could not be decoded ({type(exc).__name__})", _id_of(raw)) from None
    if not math.isfinite(env.deadline):
        raise QueryRefused("bad request: deadline must be a finite number", env.id)
    return env


def _id_of(raw: bytes) -> str:
    """The request's id when it can be read (any failure to read it: none)."""
    try:
        rid = _loose.decode(raw).id
    except Exception:  # noqa: BLE001  msgspec's errors, RecursionError on deep nesting: no id
        found = _ID_AT_START.search(raw[:200])
        return found.group(1).decode() if found else ""
    return rid if len(rid) == 32 and all(c in "0123456789abcdef" for c in rid) else ""
