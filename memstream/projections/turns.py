"""The ``turns`` projection (``TurnsProjection``): the conversation's turns as points, and the
text a turn is indexed by (``turn_unit``, ``unit_date``). Its siblings fed from the same log:
``memories`` (``memstream.projections.memories``), ``facts`` (``memstream.projections.facts``),
``sessions`` (``memstream.projections.sessions``).

It implements ``memstream.projections.base.Projection``: ``apply(batch)`` is idempotent
(point ids derive from the event id), so a redelivery after a crash changes nothing. Text
is cleaned and redacted before anything is embedded or stored. A turn's points are written
with their keywords at once and get their dense vectors from the version's dense stage
when the embedder is a model (``memstream.projections.vector``).

Nothing forgotten (``MemoryForgotten``, recorded in ``P:tombstones:{tenant}`` by
``memstream.projections.tombstones``) is ever projected again: with several shards, or in a
replay, the tombstone may be applied before the event it names (they can sit in different
streams).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Mapping, Sequence

import redis

from memstream.core import as_str, keys
from memstream.producers import DelegationCompleted, MemoryForgotten, TurnRecorded
from memstream.projections.base import Delivery
from memstream.projections.embedders.port import Embedder, innermost
from memstream.projections.stores.port import Filter, Point, VectorStore
from memstream.projections.vector import VectorProjection, item_payload
from memstream.text import BoilerplateFilter, chunk, redact

__all__ = ["TurnsProjection", "turn_unit", "unit_date"]


# English month names, fixed: the indexed text (and so a replay) never depends on the
# locale of the host that builds it (strftime's %B follows LC_TIME).
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def unit_date(when: datetime) -> str:
    """The date a unit's indexed text starts with: "[8 May 2023]" (questions name dates),
    in English whatever the locale."""
    return f"[{when.day} {_MONTHS[when.month - 1]} {when.year}]"


def turn_unit(when: datetime, piece: str, previous: str, *earlier: str, date: bool = True) -> str:
    """What a turn's chunk is indexed as: its date, its text, the start of the turn before
    (and of the turns before that, nearest first, when given); empty ones are left out."""
    head = f"{unit_date(when)} {piece}" if date else piece
    quoted = "".join(f"\n(previous: {t})" for t in (previous,) if t)
    return head + quoted + "".join(f"\n(before that: {t})" for t in earlier if t)


class TurnsProjection(VectorProjection):
    """Substantive turns (and delegation results), redacted and chunked, as points.

    What is embedded and keyword-indexed (the unit) is the turn's text after its date and
    followed by the start of the previous turn of the session; the payload keeps the turn's
    own text. The previous turn's text comes from ``P:turn_context:v1:{tenant}:{session}``
    (turn index -> its event id and first ``context_chars`` characters, kept
    ``CONTEXT_TTL_S``), so a replay or a redelivery builds the same unit. A forgotten turn
    is never anyone's context: forgetting it removes its entry and re-indexes the turn
    after it without it, and a tombstoned entry is never used. Measured on LoCoMo dev, Recall_any@10:
    +2.2 points from the date, +2.2 more from the previous turn (BENCHMARKS.md).

    What is indexed is chosen by ``options`` (``OPTIONS`` holds the names and the defaults,
    which are the behaviour above), so that a version rebuilt from the log can index
    otherwise beside the live one; the version (``version``, default the class's) names the
    consumer group, the collection and the context hash. Options:

    - ``context_turns``: earlier turns of the session quoted in the unit (0: none);
    - ``context_chars``: characters kept of each quoted turn;
    - ``keyword_context_turns``: turns before those that the keyword (sparse) side alone
      also sees: their words match, the dense vector is not diluted by them;
    - ``date``: whether the unit starts with the session's date;
    - ``tenant_ids``: whether point ids carry the tenant (``VectorProjection``: every version
      built since records True; one recorded before keeps its ids).

    None of them changes the payload (the turn's own text) or what the read side must do:
    the ranking reads every version's collection the same way.
    """

    name = "turns"
    FAMILIES = ("turn_context",)  # its versioned Redis keys (core.keys.VERSIONED_FAMILIES)
    OPTIONS: ClassVar[dict[str, Any]] = {
        **VectorProjection.OPTIONS,
        "context_turns": 1,
        "context_chars": 300,
        "keyword_context_turns": 0,
        "date": True,
    }
    OPTION_BOUNDS: ClassVar[dict[str, tuple[int, int]]] = {
        "context_turns": (0, 8),
        "context_chars": (1, 4000),
        "keyword_context_turns": (0, 8),
    }
    CONTEXT_TTL_S = 30 * 86400

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        client: redis.Redis,
        prefix: str,
        *,
        boilerplate: BoilerplateFilter | None = None,
        max_tokens: int = 200,
        options: Mapping[str, Any] | None = None,
        version: int | None = None,
        inline: bool | None = None,
        replica: int = 0,
    ) -> None:
        super().__init__(store, embedder, client, prefix, version=version, inline=inline, options=options, replica=replica)
        self.boilerplate = boilerplate or BoilerplateFilter()
        self.max_tokens = max_tokens
        self.context_chars = int(self.options["context_chars"])
        self.context_turns = int(self.options["context_turns"])
        self.keyword_turns = int(self.options["keyword_context_turns"])
        self.depth = self.context_turns + self.keyword_turns  # earlier turns a unit reads
        # an embedder whose vectors come from the late interaction's call (colbert-small) embeds
        # the text a point shows, which the late interaction reads: one model call for both
        self.dense_shown = bool(getattr(innermost(embedder), "embeds_shown_text", False))

    def _unit(self, when: datetime, piece: str, earlier: Sequence[str]) -> tuple[str, str]:
        """(the dense side's text, the keyword side's) of a chunk, ``earlier`` the texts of
        the turns before it, nearest first: the unit, and the unit with the keyword side's
        earlier turns; the chunk itself on the dense side when the embedder embeds the shown
        text (``dense_shown``)."""
        quoted = list(earlier[: self.context_turns]) or [""]
        unit = turn_unit(when, piece, quoted[0], *quoted[1:], date=bool(self.options["date"]))
        extra = [t for t in earlier[self.context_turns : self.depth] if t]
        return piece if self.dense_shown else unit, unit + "".join(f"\n{t}" for t in extra)

    @staticmethod
    def turn_text(boilerplate: BoilerplateFilter, event: TurnRecorded) -> tuple[str, str | None]:
        """What of ``event`` is indexed, and why nothing is (the filter's reason, else None)."""
        user = boilerplate.clean(event.user_text)
        user_reason = boilerplate.reason(event.user_text)
        assistant_reason = boilerplate.reason(event.assistant_text)
        if user_reason is not None and assistant_reason is not None:
            return "", user_reason
        parts = []
        if user_reason is None and user.strip():
            parts.append(f"User: {user.strip()}")
        if assistant_reason is None and event.assistant_text.strip():
            parts.append(f"Assistant: {event.assistant_text.strip()}")
        return "\n".join(parts), None

    def _context_key(self, tenant: str, session: str) -> str:
        return keys.turn_context(self.prefix, self.version, tenant, session)

    def _earlier(self, turns: list[tuple[TurnRecorded, str]]) -> list[list[str]]:
        """The texts of the ``depth`` turns before each turn, nearest first ("" where there
        is none): from the turns before it in this batch, else from Redis (as earlier
        batches left it); never a forgotten turn's. Records each remaining turn's text for
        the turns after it. A turn sees only what came before it in the log, so how the log
        is cut into batches (live ingest, or a replay) changes nothing."""
        if not self.depth:
            return [[] for _ in turns]
        gone = self.tombstones.among([(event.scope.tenant, event.id) for event, _ in turns])
        local: dict[tuple[str, int], tuple[str, str]] = {}  # (key, index) -> (event id, text)
        wanted: list[list[tuple[str, int]]] = []
        before: list[dict[tuple[str, int], tuple[str, str]]] = []  # per turn: from earlier turns of the batch
        tenant_of: dict[str, str] = {}
        for event, text in turns:
            key = self._context_key(event.scope.tenant, event.scope.session_id)
            tenant_of[key] = event.scope.tenant
            ws = [(key, event.turn_index - j) for j in range(1, self.depth + 1)]
            wanted.append(ws)
            before.append({w: local[w] for w in ws if w in local})
            if event.id not in gone:
                local[(key, event.turn_index)] = (event.id, text[: self.context_chars])
        missing = list(dict.fromkeys(w for ws, b in zip(wanted, before) for w in ws if w not in b))
        stored = self._lookup(missing, tenant_of)
        pipe = self.client.pipeline(transaction=False)
        for (key, index), (event_id, text) in local.items():
            pipe.hset(key, str(index), f"{event_id}{self.CONTEXT_SEP}{text}")
            pipe.expire(key, self.CONTEXT_TTL_S)
        pipe.execute()
        out = []
        for ws, b in zip(wanted, before):
            entries = [b.get(w) or stored.get(w) for w in ws]
            out.append([e[1] if e is not None else "" for e in entries])
        return out

    def _lookup(self, wanted: list[tuple[str, int]], tenant_of: dict[str, str]) -> dict[tuple[str, int], tuple[str, str]]:
        """The stored context entries (key, index) -> (event id, text) among ``wanted``,
        a tombstoned event's left out."""
        if not wanted:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for key, index in wanted:
            pipe.hget(key, str(index))
        fetched = {w: self._context_entry(v) for w, v in zip(wanted, pipe.execute()) if v is not None}
        dead = self.tombstones.among([(tenant_of[w[0]], eid) for w, (eid, _) in fetched.items() if eid])
        return {w: e for w, e in fetched.items() if e[0] not in dead}

    CONTEXT_SEP = "\x1f"

    def _context_entry(self, raw: object) -> tuple[str, str]:
        """(event id, text) of a stored context entry ("" id for entries without one)."""
        value = as_str(raw)
        event_id, sep, text = value.partition(self.CONTEXT_SEP)
        return (event_id, text) if sep else ("", value)

    def _forget(self, event: MemoryForgotten) -> dict[str, Any] | None:
        """Besides deleting the turn: drop it from the session's context and re-index the
        turns after it whose units quoted it."""
        head = super()._forget(event)
        index = head.get("turn_index") if head else None
        if head is None or head.get("kind") != "turn" or not isinstance(index, int):
            return head
        tenant, session = head["tenant"], str(head.get("session_id") or "")
        key = self._context_key(tenant, session)
        self.client.hdel(key, str(index))
        if not self.depth:
            return head
        after: list[Point] = []
        offset = None
        targets = range(index + 1, index + self.depth + 1)
        while True:  # a session's turns: a forget is rare and sessions are small
            page, offset = self.store.scroll(
                self.collection, Filter(tenant=tenant, session_id=session, kind="turn"), limit=256, offset=offset
            )
            after += [p for p in page if p.payload.get("turn_index") in targets]
            if offset is None:
                break
        context = self._lookup([(key, i) for i in range(index + 1 - self.depth, index + self.depth)], {key: tenant})
        docs, keywords = [], {}
        for p in after:
            at = int(p.payload["turn_index"])
            earlier = [context[(key, at - j)][1] if (key, at - j) in context else "" for j in range(1, self.depth + 1)]
            unit, words = self._unit(datetime.fromisoformat(p.payload["occurred_at"]), str(p.payload.get("text", "")), earlier)
            docs.append((p.id, unit, dict(p.payload)))
            keywords[p.id] = words
        reindexed = self._index(docs, keywords)
        if reindexed:
            self.counters.add(reindexed=reindexed)
        return head

    def apply(self, batch: Sequence[Delivery]) -> None:
        docs: list[tuple[str, str, dict[str, Any]]] = []
        skipped = redactions = 0
        units: list[tuple[Delivery, str, str, dict[str, Any]]] = []  # delivery, kind, redacted text, extra
        extra: dict[str, Any]
        for d in batch:
            event = d.event
            if isinstance(event, MemoryForgotten):
                self._forget(event)
                continue
            if isinstance(event, TurnRecorded):
                text, reason = self.turn_text(self.boilerplate, event)
                if reason is not None or not text:
                    skipped += 1
                    continue
                kind, extra = "turn", {"turn_index": event.turn_index}
                if event.author:
                    extra["author"] = event.author
            elif isinstance(event, DelegationCompleted):
                text = f"Delegated task: {event.task}\nResult: {event.result}"
                kind, extra = "delegation", {"child_session_id": event.child_session_id}
            else:
                continue
            text, n = redact(text)
            redactions += n
            units.append((d, kind, text, extra))
        turns = [(d.event, text) for d, _, text, _ in units if isinstance(d.event, TurnRecorded)]
        previous = iter(self._earlier(turns)) if turns else iter(())
        keywords: dict[str, str] = {}
        for d, kind, text, extra in units:
            event = d.event
            before = next(previous) if kind == "turn" else []
            pieces = chunk(text, max_tokens=self.max_tokens, count_tokens=self.embedder.count_tokens) or [text]
            for i, piece in enumerate(pieces):
                payload = item_payload(event, kind, piece, chunk=i, entry_id=d.entry_id, **extra)
                if i == 0:
                    payload["chunks"] = len(pieces)
                pid = self.point_of(event.scope.tenant, event.id, i)
                unit, keywords[pid] = self._unit(event.occurred_at, piece, before)
                docs.append((pid, unit, payload))
        written = self._index(docs, keywords)
        self.counters.add(points=written, skipped_boilerplate=skipped, redactions=redactions)
        self._compact_if_due()
