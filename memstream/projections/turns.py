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

import json
from datetime import datetime
from typing import Sequence

import redis
import structlog

from memstream.producers.events import (
    DelegationCompleted,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    TurnRecorded,
)
from memstream.projections.facts_table import Fact, FactsTable
from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.port import Filter, Point, VectorStore, point_id

from memstream.text.boilerplate import BoilerplateFilter
from memstream.text.chunking import chunk
from memstream.workers.consumer import Delivery
from memstream.text.facts.extract import extract_facts, is_single_valued
from memstream.text.redact import redact

__all__ = ["TurnsProjection", "MemoriesProjection", "FactsProjection", "Counters", "Tombstones",
           "match_entry"]


def _str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

log = structlog.get_logger("memstream.projection")


class Counters:
    """Per-group counters in Redis (``P:counters:{group}``), read by ``memstream stats``."""

    def __init__(self, client: redis.Redis, prefix: str, group: str):
        self.client = client
        self.key = f"{prefix}:counters:{group}"

    def add(self, **counts: int) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if counts:
            pipe = self.client.pipeline(transaction=False)
            for k, v in counts.items():
                pipe.hincrby(self.key, k, v)
            pipe.execute()

    def get(self) -> dict[str, int]:
        return {(k.decode() if isinstance(k, bytes) else k): int(v)
                for k, v in self.client.hgetall(self.key).items()}


def _payload(event, kind: str, text: str, **extra) -> dict:
    scope = event.scope
    return {
        "tenant": scope.tenant, "agent": scope.agent, "session_id": scope.session_id,
        "kind": kind, "event_id": event.id, "occurred_at_ts": event.occurred_at.timestamp(),
        "occurred_at": event.occurred_at.isoformat(), "platform": scope.platform,
        "text": text, **extra,
    }


class Tombstones:
    """The ids forgotten in each tenant (a Redis set per tenant, shared by all projections)."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.prefix = prefix

    def _key(self, tenant: str) -> str:
        return f"{self.prefix}:tombstones:{tenant}"

    def add(self, tenant: str, item_id: str) -> None:
        self.client.sadd(self._key(tenant), item_id)

    def has(self, tenant: str, item_id: str, any_cache: dict[str, bool]) -> bool:
        """Whether ``item_id`` was forgotten; skips the lookup for a tenant without tombstones
        (``any_cache`` remembers that for the batch)."""
        if tenant not in any_cache:
            any_cache[tenant] = bool(self.client.scard(self._key(tenant)))
        return any_cache[tenant] and bool(self.client.sismember(self._key(tenant), item_id))

    def of_batch(self, batch: Sequence[Delivery], kinds: tuple[type, ...]) -> set[str]:
        """Ids of the batch's events of ``kinds`` that are forgotten: by a stored tombstone,
        or by one in the batch itself (the projections drain concurrently: another may not
        have stored it yet)."""
        here = {(d.event.scope.tenant, d.event.forgotten_id) for d in batch if isinstance(d.event, MemoryForgotten)}
        pairs = [(d.event.scope.tenant, d.event.id) for d in batch if isinstance(d.event, kinds)]
        return {eid for tenant, eid in pairs if (tenant, eid) in here} | self.among(pairs)

    def among(self, pairs: Sequence[tuple[str, str]]) -> set[str]:
        """The ids of ``(tenant, id)`` pairs that were forgotten (one round trip per tenant)."""
        by_tenant: dict[str, list[str]] = {}
        for tenant, item_id in pairs:
            by_tenant.setdefault(tenant, []).append(item_id)
        out: set[str] = set()
        for tenant, ids in by_tenant.items():
            flags = self.client.smismember(self._key(tenant), ids)
            out.update(i for i, flag in zip(ids, flags) if flag)
        return out


def match_entry(entries: Sequence[tuple[str, str, float]], old_text: str) -> tuple[str | None, bool]:
    """The entry a memory-tool ``replace``/``remove`` targets, as Hermes's memory tool picks
    it: the entries (id, text, time) containing ``old_text``; several with different texts
    are ambiguous (Hermes rejects those; here the oldest is taken and flagged).
    Returns (entry id or None, ambiguous)."""
    if not old_text:
        return None, False
    matches = sorted((e for e in entries if old_text in e[1]), key=lambda e: e[2])
    if not matches:
        return None, False
    return matches[0][0], len({e[1] for e in matches}) > 1


class _VectorProjection:
    name = ""
    version = 1

    def __init__(self, store: VectorStore, embedder, client: redis.Redis, prefix: str):
        self.store = store
        self.embedder = embedder
        self.client = client
        self.prefix = prefix
        self.collection = store.ensure_collection(self.name, self.version, embedder.dim)
        if store.active_version(self.name) is None:
            store.set_active_version(self.name, self.version)
        self.counters = Counters(client, prefix, f"{self.name}.v{self.version}")
        self.tombstones = Tombstones(client, prefix)

    def _points(self, docs: list[tuple[str, str, dict]]) -> list[Point]:
        """(point id, text, payload) -> points, embedded in one batch; a forgotten event's
        documents are left out."""
        if not docs:
            return []
        gone = self.tombstones.among([(d[2]["tenant"], d[2]["event_id"]) for d in docs])
        if gone:
            docs = [d for d in docs if d[2]["event_id"] not in gone]
            self.counters.add(tombstoned=len(gone))
            if not docs:
                return []
        vectors = self.embedder.embed([text for _, text, _ in docs])
        return [Point(id=pid, dense=vectors[i], sparse=sparse_vector(text), payload=payload)
                for i, (pid, text, payload) in enumerate(docs)]

    def _forget(self, event: MemoryForgotten) -> dict | None:
        """Record the tombstone and delete the item's points; returns the payload of the
        item's first point when this projection held it (None otherwise)."""
        self.tombstones.add(event.scope.tenant, event.forgotten_id)
        head = self.store.retrieve(self.collection, [point_id(event.forgotten_id, 0)])
        n = int(head[0].payload.get("chunks", 1)) if head else 1
        ids = [point_id(event.forgotten_id, i) for i in range(n)]
        if head and head[0].payload.get("tenant") != event.scope.tenant:
            return None  # never across tenants
        self.store.delete(self.collection, ids)
        self.counters.add(forgotten=1 if head else 0)
        return dict(head[0].payload) if head else None


def unit_date(when) -> str:
    """The date a unit's indexed text starts with: "[8 May 2023]" (questions name dates)."""
    return f"[{when.day} {when:%B %Y}]"


def turn_unit(when, piece: str, previous: str) -> str:
    """What a turn's chunk is indexed as: its date, its text, the start of the turn before."""
    return f"{unit_date(when)} {piece}" + (f"\n(previous: {previous})" if previous else "")


class TurnsProjection(_VectorProjection):
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
    CONTEXT_CHARS = 300
    CONTEXT_TTL_S = 30 * 86400

    def __init__(self, *args, boilerplate: BoilerplateFilter | None = None, max_tokens: int = 200, **kw):
        super().__init__(*args, **kw)
        self.boilerplate = boilerplate or BoilerplateFilter()
        self.max_tokens = max_tokens

    def _turn_text(self, event: TurnRecorded) -> tuple[str, str | None]:
        user = self.boilerplate.clean(event.user_text)
        user_reason = self.boilerplate.reason(event.user_text)
        assistant_reason = self.boilerplate.reason(event.assistant_text)
        if user_reason is not None and assistant_reason is not None:
            return "", user_reason
        parts = []
        if user_reason is None and user.strip():
            parts.append(f"User: {user.strip()}")
        if assistant_reason is None and event.assistant_text.strip():
            parts.append(f"Assistant: {event.assistant_text.strip()}")
        return "\n".join(parts), None

    def _context_key(self, tenant: str, session: str) -> str:
        return f"{self.prefix}:turn_context:v{self.version}:{tenant}:{session}"

    def _previous(self, turns: list[tuple[TurnRecorded, str]]) -> list[str]:
        """The previous turn's text for each turn: from this batch, else from Redis; never a
        forgotten turn's. Records each remaining turn's text for the turns after it."""
        gone = self.tombstones.among([(event.scope.tenant, event.id) for event, _ in turns])
        local: dict[tuple[str, int], tuple[str, str]] = {}  # (key, index) -> (event id, text)
        wanted: list[tuple[str, int]] = []
        tenant_of: dict[str, str] = {}
        for event, text in turns:
            key = self._context_key(event.scope.tenant, event.scope.session_id)
            tenant_of[key] = event.scope.tenant
            wanted.append((key, event.turn_index - 1))
            if event.id not in gone:
                local[(key, event.turn_index)] = (event.id, text[: self.CONTEXT_CHARS])
        missing = [w for w in dict.fromkeys(wanted) if w not in local]
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
        known = {**{w: e for w, e in fetched.items() if e[0] not in dead}, **local}
        return [known[w][1] if w in known else "" for w in wanted]

    CONTEXT_SEP = "\x1f"

    def _context_entry(self, raw) -> tuple[str, str]:
        """(event id, text) of a stored context entry ("" id for entries without one)."""
        value = _str(raw)
        event_id, sep, text = value.partition(self.CONTEXT_SEP)
        return (event_id, text) if sep else ("", value)

    def _forget(self, event: MemoryForgotten) -> dict | None:
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
        docs: list[tuple[str, str, dict]] = []
        skipped = redactions = 0
        units: list[tuple[Delivery, str, str, dict]] = []  # delivery, kind, redacted text, extra
        for d in batch:
            event = d.event
            if isinstance(event, MemoryForgotten):
                self._forget(event)
                continue
            if isinstance(event, TurnRecorded):
                text, reason = self._turn_text(event)
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
        turns = [(u[0].event, u[2]) for u in units if u[1] == "turn"]
        previous = iter(self._previous(turns)) if turns else iter(())
        for d, kind, text, extra in units:
            event = d.event
            before = next(previous) if kind == "turn" else ""
            pieces = chunk(text, max_tokens=self.max_tokens, count_tokens=self.embedder.count_tokens) or [text]
            for i, piece in enumerate(pieces):
                payload = _payload(event, kind, piece, chunk=i, entry_id=d.entry_id, **extra)
                if i == 0:
                    payload["chunks"] = len(pieces)
                docs.append((point_id(event.id, i), turn_unit(event.occurred_at, piece, before), payload))
        points = self._points(docs)
        if points:
            self.store.upsert(self.collection, points)
        self.counters.add(points=len(points), skipped_boilerplate=skipped, redactions=redactions)


class MemoriesProjection(_VectorProjection):
    """MEMORY.md / USER.md entries per agent, applied as Hermes's memory tool does."""

    name = "memories"

    def _entries(self, event) -> list[Point]:
        f = Filter(tenant=event.scope.tenant, agent=event.scope.agent, kind=event.target)
        out, offset = [], None
        while True:
            page, offset = self.store.scroll(self.collection, f, limit=256, offset=offset)
            out.extend(page)
            if offset is None:
                return out

    def apply(self, batch: Sequence[Delivery]) -> None:
        for d in batch:  # in order: replace/remove depend on what came before
            event = d.event
            if isinstance(event, MemoryForgotten):
                self._forget(event)
            elif isinstance(event, MemoryRemembered):
                self._add(event, event.content, "remembered")
            elif isinstance(event, MemoryWritten):
                self._write(event)

    def _add(self, event, content: str, source: str) -> None:
        text, n = redact(content)
        if not text.strip():
            return
        payload = _payload(event, event.target, text, source=source, target=event.target, chunks=1)
        self.store.upsert(self.collection, self._points([(point_id(event.id, 0), text, payload)]))
        self.counters.add(points=1, redactions=n)

    def _write(self, event: MemoryWritten) -> None:
        if event.action == "add":
            redacted, _ = redact(event.content)
            if any(p.payload.get("text") == redacted for p in self._entries(event)):
                self.counters.add(duplicate_adds=1)  # Hermes: "Entry already exists"
                return
            self._add(event, event.content, "memory_tool")
            return
        old, _ = redact(event.old_text)
        entries = [(p.id, str(p.payload.get("text", "")), float(p.payload.get("occurred_at_ts", 0)))
                   for p in self._entries(event)]
        match, ambiguous = match_entry(entries, old)
        if ambiguous:
            self.counters.add(ambiguous_matches=1)  # Hermes rejects these; keep the oldest rule
            log.warning("memories.ambiguous_old_text", event_id=event.id)
        if match is None:
            self.counters.add(unmatched=1)
            log.warning("memories.old_text_not_found", event_id=event.id, action=event.action)
            if event.action == "replace":
                self._add(event, event.content, "memory_tool")  # keep the new content
            return
        self.store.delete(self.collection, [match])
        if event.action == "replace":
            self._add(event, event.content, "memory_tool")
        self.counters.add(**{f"{event.action}d": 1})


class FactsProjection:
    """Rule-extracted facts with supersession and provenance, in the facts table."""

    name = "facts"
    version = 1

    def __init__(self, client: redis.Redis, prefix: str, min_confidence: float = 0.6):
        self.client = client
        self.prefix = prefix
        self.table = FactsTable(client, prefix)
        self.counters = Counters(client, prefix, f"{self.name}.v{self.version}")
        self.min_confidence = min_confidence
        self._boilerplate = BoilerplateFilter()
        self.tombstones = Tombstones(client, prefix)

    # Which memory entry each fact came from, per agent and target (MEMORY.md / USER.md):
    # ``P:fact_sources:v1:{tenant}:{agent}:{target}`` hash event id -> JSON [text, time].
    # A memory-tool remove or replace retracts the facts of the entry it removes.
    def _sources_key(self, scope, target: str) -> str:
        return f"{self.prefix}:fact_sources:v{self.version}:{scope.tenant}:{scope.agent}:{target}"

    def _track_entry(self, event) -> None:
        text, _ = redact(event.content)
        self.client.hset(self._sources_key(event.scope, event.target), event.id,
                         json.dumps([text, event.occurred_at.timestamp()]))

    def _retract_entry(self, event: MemoryWritten) -> None:
        key = self._sources_key(event.scope, event.target)
        entries = [(_str(eid), *json.loads(raw)) for eid, raw in self.client.hgetall(key).items()]
        old, _ = redact(event.old_text)
        match, _ = match_entry(entries, old)
        if match is None:
            return
        removed = self.table.retract_event(event.scope.tenant, match)
        self.client.hdel(key, match)
        self.counters.add(retracted=removed)

    def _forget_entry(self, event: MemoryForgotten) -> None:
        for target in ("memory", "user"):
            self.client.hdel(self._sources_key(event.scope, target), event.forgotten_id)

    def _sources(self, event) -> list[tuple[str, str]]:
        if isinstance(event, TurnRecorded):
            return [(self._boilerplate.clean(event.user_text), "user"), (event.assistant_text, "assistant")]
        if isinstance(event, MemoryWritten) and event.action != "remove":
            return [(event.content, "user" if event.target == "user" else "assistant")]
        if isinstance(event, MemoryRemembered):
            return [(event.content, "user" if event.target == "user" else "assistant")]
        return []

    def apply(self, batch: Sequence[Delivery]) -> None:
        outcomes: dict[str, int] = {}
        gone = self.tombstones.of_batch(batch, (TurnRecorded, MemoryWritten, MemoryRemembered))
        forgotten: dict[str, bool] = {}  # tenant -> has any tombstone (fact ids are checked then)
        for d in batch:
            event = d.event
            if event.id in gone:
                outcomes["tombstoned"] = outcomes.get("tombstoned", 0) + 1
                continue
            if isinstance(event, MemoryForgotten):
                self.tombstones.add(event.scope.tenant, event.forgotten_id)
                removed = self.table.retract_event(event.scope.tenant, event.forgotten_id)
                removed += self.table.forget_fact(event.scope.tenant, event.forgotten_id)  # a fact's own id
                self._forget_entry(event)
                outcomes["forgotten"] = outcomes.get("forgotten", 0) + removed
                continue
            if isinstance(event, MemoryWritten) and event.action in ("replace", "remove"):
                self._retract_entry(event)
            if isinstance(event, MemoryRemembered) or (isinstance(event, MemoryWritten)
                                                        and event.action != "remove"):
                self._track_entry(event)
            index = 0
            for text, speaker in self._sources(event):
                redacted, _ = redact(text)
                for cand in extract_facts(redacted, speaker=speaker):
                    index += 1
                    if cand.confidence < self.min_confidence:
                        continue
                    fact_id = point_id("fact", event.id, index)
                    if self.tombstones.has(event.scope.tenant, fact_id, forgotten):
                        outcomes["tombstoned"] = outcomes.get("tombstoned", 0) + 1
                        continue
                    fact = Fact(
                        id=fact_id, tenant=event.scope.tenant,
                        agent=event.scope.agent, subject=cand.subject, kind=cand.kind, key=cand.key,
                        value=cand.value, text=cand.text, confidence=cand.confidence,
                        valid_from=event.occurred_at.timestamp(), event_ids=[event.id],
                        session_id=event.scope.session_id)
                    outcome = self.table.assert_fact(fact, is_single_valued(cand.key))
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
        self.counters.add(**outcomes)
