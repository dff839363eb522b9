"""The ``memories`` projection: memory-tool writes and remembered memories as points."""

from __future__ import annotations

from typing import Sequence

import structlog

from memstream.producers import MemoryForgotten, MemoryRemembered, MemoryWritten
from memstream.projections.base import Delivery
from memstream.projections.stores.port import Filter, Point
from memstream.projections.vector import VectorProjection, item_payload
from memstream.text import redact

log = structlog.get_logger("memstream.projection")


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


class MemoriesProjection(VectorProjection):
    """MEMORY.md / USER.md entries per agent, applied as Hermes's memory tool does."""

    name = "memories"

    def _entries(self, event: MemoryWritten) -> list[Point]:
        f = Filter(tenant=event.scope.tenant, agent=event.scope.agent, kind=event.target)
        out: list[Point] = []
        offset: str | None = None
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
        self._compact_if_due()

    def _add(self, event: MemoryRemembered | MemoryWritten, content: str, source: str) -> None:
        text, n = redact(content)
        if not text.strip():
            return
        payload = item_payload(event, event.target, text, source=source, target=event.target, chunks=1)
        self._index([(self.point_of(event.scope.tenant, event.id, 0), text, payload)])
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
        points = self._entries(event)
        entries = [(p.id, str(p.payload.get("text", "")), float(p.payload.get("occurred_at_ts", 0))) for p in points]
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
        if event.action == "remove":
            # Hermes's memory remove forgets as the forget tool does: the entry's event is
            # tombstoned, so no version projects it again and `memstream forget --tombstoned`
            # erases it from the log (the remove itself stays: the facts projection retracts by it)
            removed = next((str(p.payload.get("event_id", "")) for p in points if p.id == match), "")
            if removed:
                self.tombstones.add(event.scope.tenant, removed)
            self._compact_due = True  # and its text leaves the store's files
        if event.action == "replace":
            self._add(event, event.content, "memory_tool")
        self.counters.add(**{f"{event.action}d": 1})
