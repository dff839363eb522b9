"""The ``facts`` projection: rule-extracted facts with supersession and provenance, in the
facts table (``memstream.projections.facts_table``).
"""

from __future__ import annotations

import json
from typing import Sequence

import redis
import structlog

from memstream.core import as_str, keys
from memstream.producers import (
    Event,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    Scope,
    TurnRecorded,
)
from memstream.projections.base import Delivery, group_name
from memstream.projections.counters import Counters
from memstream.projections.facts_table import Fact, FactsTable, fact_ids
from memstream.projections.memories import match_entry
from memstream.projections.tombstones import Tombstones
from memstream.text import BoilerplateFilter, FactCandidate, extract_facts, is_single_valued, redact

log = structlog.get_logger("memstream.projection")


class FactsProjection:
    """Rule-extracted facts with supersession and provenance, in the facts table."""

    name = "facts"
    FAMILIES = ("facts", "fact_sources")  # its versioned Redis keys (core.keys.VERSIONED_FAMILIES)
    version = FactsTable.version  # the table's keys carry it: a new version builds beside the live one

    def __init__(self, client: redis.Redis, prefix: str, min_confidence: float = 0.6, *, version: int | None = None) -> None:
        if version is not None:
            self.version = version
        self.client = client
        self.prefix = prefix
        self.table = FactsTable(client, prefix, version=self.version)
        self.counters = Counters(client, prefix, group_name(self))
        self.min_confidence = min_confidence
        self._boilerplate = BoilerplateFilter()
        self.tombstones = Tombstones(client, prefix)

    # Which memory entry each fact came from, per agent and target (MEMORY.md / USER.md):
    # ``P:fact_sources:v1:{tenant}:{agent}:{target}`` hash event id -> JSON [text, time].
    # A memory-tool remove or replace retracts the facts of the entry it removes.
    def _sources_key(self, scope: Scope, target: str) -> str:
        return keys.fact_sources(self.prefix, self.version, scope.tenant, scope.agent, target)

    def _track_entry(self, event: MemoryRemembered | MemoryWritten) -> None:
        text, _ = redact(event.content)
        self.client.hset(
            self._sources_key(event.scope, event.target), event.id, json.dumps([text, event.occurred_at.timestamp()])
        )

    def _retract_entry(self, event: MemoryWritten) -> None:
        key = self._sources_key(event.scope, event.target)
        entries = [(as_str(eid), *json.loads(raw)) for eid, raw in self.client.hgetall(key).items()]
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

    def _sources(self, event: Event) -> list[tuple[str, str]]:
        if isinstance(event, TurnRecorded):
            return [(self._boilerplate.clean(event.user_text), "user"), (event.assistant_text, "assistant")]
        if isinstance(event, MemoryWritten) and event.action != "remove":
            return [(event.content, "user" if event.target == "user" else "assistant")]
        if isinstance(event, MemoryRemembered):
            return [(event.content, "user" if event.target == "user" else "assistant")]
        return []

    def prepare(self) -> None:
        """Before the first batch: index the facts of tables written before the event →
        facts index existed (``FactsTable.index_existing``; once per tenant, then a look)."""
        indexed = self.table.index_existing()
        if indexed:
            log.info("facts.indexed", tenants=len(indexed), group=group_name(self))

    def apply(self, batch: Sequence[Delivery]) -> None:
        """Apply the batch in order. The facts of consecutive events are asserted together
        (``FactsTable.assert_facts``: one transaction); a forgotten event or a memory entry
        removed or replaced first asserts the facts before it, then retracts."""
        outcomes: dict[str, int] = {}
        gone = self.tombstones.of_batch(batch, (TurnRecorded, MemoryWritten, MemoryRemembered))
        extracted: list[tuple[Event, list[FactCandidate]]] = []  # facts waiting to be asserted, in order
        for d in batch:
            event = d.event
            if event.id in gone:
                outcomes["tombstoned"] = outcomes.get("tombstoned", 0) + 1
                continue
            if isinstance(event, MemoryForgotten):
                self._assert(extracted, outcomes)
                self.tombstones.add(event.scope.tenant, event.forgotten_id)
                removed = self.table.forget_event(event.scope.tenant, event.forgotten_id)
                removed += self.table.forget_fact(event.scope.tenant, event.forgotten_id)  # a fact's own id
                self._forget_entry(event)
                outcomes["forgotten"] = outcomes.get("forgotten", 0) + removed
                continue
            if isinstance(event, MemoryWritten) and event.action in ("replace", "remove"):
                self._assert(extracted, outcomes)
                self._retract_entry(event)
            if isinstance(event, MemoryRemembered) or (isinstance(event, MemoryWritten) and event.action != "remove"):
                self._track_entry(event)
            # every candidate counts towards the index, kept or not: ids stay put when the
            # confidence threshold changes
            candidates = [
                cand for text, speaker in self._sources(event) for cand in extract_facts(redact(text)[0], speaker=speaker)
            ]
            if candidates:
                extracted.append((event, candidates))
        self._assert(extracted, outcomes)
        self.counters.add(**outcomes)

    def _assert(self, extracted: list[tuple[Event, list[FactCandidate]]], outcomes: dict[str, int]) -> None:
        """Assert the facts of ``extracted`` (events and their candidates, in order) that
        are confident enough and not forgotten, in one transaction; count the outcomes;
        empty ``extracted``."""
        if not extracted:
            return
        kept: list[tuple[Event, str, FactCandidate]] = []
        for event, candidates in extracted:
            ids = fact_ids(event.id, 1, len(candidates))
            kept += [(event, fid, cand) for fid, cand in zip(ids, candidates) if cand.confidence >= self.min_confidence]
        forgotten = self.tombstones.among([(event.scope.tenant, fid) for event, fid, _ in kept]) if kept else set()
        facts = []
        for event, fid, cand in kept:
            if fid in forgotten:
                outcomes["tombstoned"] = outcomes.get("tombstoned", 0) + 1
                continue
            facts.append(
                (
                    Fact(
                        id=fid,
                        tenant=event.scope.tenant,
                        agent=event.scope.agent,
                        subject=cand.subject,
                        kind=cand.kind,
                        key=cand.key,
                        value=cand.value,
                        text=cand.text,
                        confidence=cand.confidence,
                        valid_from=event.occurred_at.timestamp(),
                        event_ids=[event.id],
                        session_id=event.scope.session_id,
                        retracts=cand.retracts,
                    ),
                    is_single_valued(cand.key),
                )
            )
        for outcome in self.table.assert_facts(facts):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        extracted.clear()
