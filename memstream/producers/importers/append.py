"""The append side of an import: which events the log already holds, and appending the
others in atomic batches.

Guarantee: an event whose id is in the log (or earlier in the same import) is not
appended again, so an import run twice appends its events once.
"""

from __future__ import annotations

from typing import Callable, Sequence

from memstream.core import lossless
from memstream.producers.archive import Archive, history
from memstream.producers.door import append
from memstream.producers.events import Event
from memstream.producers.stream import EventLog

__all__ = ["BATCH", "append_events", "existing_ids", "new_events"]

BATCH = 500  # events per append (one atomic script call each)


def existing_ids(eventlog: EventLog, archive: Archive | None = None) -> set[str]:
    """The ``id`` field of every entry in the log (the data is not decoded): the archive's
    too when it is given (``history``: the archive, then the streams)."""
    ids: set[str] = set()
    entries = eventlog.entries() if archive is None else history(eventlog, archive)
    for _stream, _entry, fields in entries:
        value = fields.get(b"id", fields.get("id"))
        if value is not None:
            ids.add(lossless(value))
    return ids


def new_events(events: Sequence[Event], known: set[str]) -> list[Event]:
    """The events whose id is neither in ``known`` nor earlier in ``events``, in order;
    ``known`` grows by their ids."""
    fresh: list[Event] = []
    for event in events:
        if event.id not in known:
            known.add(event.id)
            fresh.append(event)
    return fresh


def append_events(
    eventlog: EventLog,
    events: Sequence[Event],
    batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None,
    max_text_bytes: int | None = None,
) -> int:
    """Append ``events`` in order through the log's door (``memstream.producers.door``:
    redacted, each text within ``max_text_bytes``), ``batch`` at a time (each batch
    atomic); how many. ``progress(done, total)`` after each batch. Raises
    ``redis.RedisError``: the batches before stay appended (the import run again appends
    the rest, deduplicated by id)."""
    total = len(events)
    if progress is not None:
        progress(0, total)
    step = max(1, batch)
    for start in range(0, total, step):
        append(eventlog, events[start : start + step], max_text_bytes=max_text_bytes)
        if progress is not None:
            progress(min(start + step, total), total)
    return total
