"""The projections fed from the log: ``turns``, ``memories`` and ``facts`` (and
``sessions``, in ``memstream.projections.sessions``).

Each implements ``memstream.workers.consumer.Projection``: ``apply(batch)`` is idempotent (point
ids and fact ids derive from the event id), so a redelivery after a crash changes
nothing. Text is cleaned and redacted before anything is embedded or stored.

Tombstones (``MemoryForgotten``) are also recorded in ``P:tombstones:{tenant}``, and
nothing named there is ever projected again: with several shards, or in a replay, the
tombstone may be applied before the event it names (they can sit in different streams).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

import redis
import structlog

from memstream.core import as_str, keys
from memstream.producers import DelegationCompleted, MemoryForgotten, TurnRecorded
from memstream.projections.base import Delivery
from memstream.projections.embedders.port import Embedder
from memstream.projections.stores.port import Filter, Point, VectorStore, point_id
from memstream.projections.vector import VectorProjection, item_payload
from memstream.text import BoilerplateFilter, chunk, redact

__all__ = ["TurnsProjection", "turn_unit", "unit_date"]



log = structlog.get_logger("memstream.projection")












# English month names, fixed: the indexed text (and so a replay) never depends on the
# locale of the host that builds it (strftime's %B follows LC_TIME).
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def unit_date(when: datetime) -> str:
    """The date a unit's indexed text starts with: "[8 May 2023]" (questions name dates),
    in English whatever the locale."""
    return f"[{when.day} {_MONTHS[when.month - 1]} {when.year}]"


def turn_unit(when: datetime, piece: str, previous: str) -> str:
    """What a turn's chunk is indexed as: its date, its text, the start of the turn before."""
    return f"{unit_date(when)} {piece}" + (f"\n(previous: {previous})" if previous else "")


class TurnsProjection(VectorProjection):
    """Substantive turns (and delegation results), redacted and chunked, as points.

    What is embedded and keyword-indexed (the unit) is the turn's text after its date and
    followed by the start of the previous turn of the session; the payload keeps the turn's
    own text. The previous turn's text comes from ``P:turn_context:v1:{tenant}:{session}``
    (turn index -> its event id and first ``CONTEXT_CHARS`` characters, kept
    ``CONTEXT_TTL_S``), so a replay or a redelivery builds the same unit. A forgotten turn
    is never anyone's context: forgetting it removes its entry and re-indexes the turn
    after it without it, and a tombstoned entry is never used. Measured on LoCoMo dev, Recall_any@10:
    +2.2 points from the date, +2.2 more from the previous turn (BENCHMARKS.md).
    """

    name = "turns"
    FAMILIES = ("turn_context",)  # its versioned Redis keys (core.keys.VERSIONED_FAMILIES)
    CONTEXT_CHARS = 300
    CONTEXT_TTL_S = 30 * 86400

    def __init__(self, store: VectorStore, embedder: Embedder, client: redis.Redis, prefix: str, *,
                 version: int | None = None, boilerplate: BoilerplateFilter | None = None,
                 max_tokens: int = 200) -> None:
        super().__init__(store, embedder, client, prefix, version=version)
        self.boilerplate = boilerplate or BoilerplateFilter()
        self.max_tokens = max_tokens

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

    def _previous(self, turns: list[tuple[TurnRecorded, str]]) -> list[str]:
        """The previous turn's text for each turn: from the turns before it in this batch,
        else from Redis (as earlier batches left it); never a forgotten turn's. Records each
        remaining turn's text for the turns after it. A turn sees only what came before it
        in the log, so how the log is cut into batches (live, or a replay) changes nothing."""
        gone = self.tombstones.among([(event.scope.tenant, event.id) for event, _ in turns])
        local: dict[tuple[str, int], tuple[str, str]] = {}  # (key, index) -> (event id, text)
        found: list[tuple[str, str] | None] = []  # per turn: from an earlier turn of the batch
        wanted: list[tuple[str, int]] = []
        tenant_of: dict[str, str] = {}
        for event, text in turns:
            key = self._context_key(event.scope.tenant, event.scope.session_id)
            tenant_of[key] = event.scope.tenant
            want = (key, event.turn_index - 1)
            wanted.append(want)
            found.append(local.get(want))
            if event.id not in gone:
                local[(key, event.turn_index)] = (event.id, text[: self.CONTEXT_CHARS])
        missing = list(dict.fromkeys(w for w, f in zip(wanted, found) if f is None))
        pipe = self.client.pipeline(transaction=False)
        for key, index in missing:
            pipe.hget(key, str(index))
        fetched = {w: self._context_entry(v) for w, v in zip(missing, pipe.execute()) if v is not None}
        dead = self.tombstones.among([(tenant_of[w[0]], eid) for w, (eid, _) in fetched.items() if eid])
        pipe = self.client.pipeline(transaction=False)
        for (key, index), (event_id, text) in local.items():
            pipe.hset(key, str(index), f"{event_id}{self.CONTEXT_SEP}{text}")
            pipe.expire(key, self.CONTEXT_TTL_S)
        pipe.execute()
        known = {w: e for w, e in fetched.items() if e[0] not in dead}
        out = []
        for want, earlier in zip(wanted, found):
            entry = earlier if earlier is not None else known.get(want)
            out.append(entry[1] if entry is not None else "")
        return out

    CONTEXT_SEP = "\x1f"

    def _context_entry(self, raw: object) -> tuple[str, str]:
        """(event id, text) of a stored context entry ("" id for entries without one)."""
        value = as_str(raw)
        event_id, sep, text = value.partition(self.CONTEXT_SEP)
        return (event_id, text) if sep else ("", value)

    def _forget(self, event: MemoryForgotten) -> dict[str, Any] | None:
        """Besides deleting the turn: drop it from the session's context and re-index the
        turn after it, whose unit quoted it."""
        head = super()._forget(event)
        index = head.get("turn_index") if head else None
        if head is None or head.get("kind") != "turn" or not isinstance(index, int):
            return head
        tenant, session = head["tenant"], str(head.get("session_id") or "")
        self.client.hdel(self._context_key(tenant, session), str(index))
        after: list[Point] = []
        offset = None
        while True:  # a session's turns: a forget is rare and sessions are small
            page, offset = self.store.scroll(self.collection, Filter(tenant=tenant, session_id=session, kind="turn"),
                                             limit=256, offset=offset)
            after += [p for p in page if p.payload.get("turn_index") == index + 1]
            if offset is None:
                break
        docs = [(p.id, turn_unit(datetime.fromisoformat(p.payload["occurred_at"]), str(p.payload.get("text", "")), ""),
                 dict(p.payload)) for p in after]
        points = self._points(docs)
        if points:
            self.store.upsert(self.collection, points)
            self.counters.add(reindexed=len(points))
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
        previous = iter(self._previous(turns)) if turns else iter(())
        for d, kind, text, extra in units:
            event = d.event
            before = next(previous) if kind == "turn" else ""
            pieces = chunk(text, max_tokens=self.max_tokens, count_tokens=self.embedder.count_tokens) or [text]
            for i, piece in enumerate(pieces):
                payload = item_payload(event, kind, piece, chunk=i, entry_id=d.entry_id, **extra)
                if i == 0:
                    payload["chunks"] = len(pieces)
                docs.append((point_id(event.id, i), turn_unit(event.occurred_at, piece, before), payload))
        points = self._points(docs)
        if points:
            self.store.upsert(self.collection, points)
        self.counters.add(points=len(points), skipped_boilerplate=skipped, redactions=redactions)




