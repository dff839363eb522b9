"""``memstream export``: every event in the log, oldest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.producers import EventLog, to_builtins

__all__ = ["Undecodable", "export"]


@dataclass(frozen=True)
class Undecodable:
    """A log entry that is no valid event (skipped by the export)."""

    stream: str
    entry_id: str
    error: str


def export(settings: Settings, since: str | None = None) -> Iterator[dict | Undecodable]:
    """Each entry after ``since`` (every one when None) in log order: the event as plain
    data with its ``stream`` and ``entry_id`` first, or ``Undecodable``. Connects before
    returning (``CommandError`` when the log is unreachable)."""
    return _entries(connect(settings), since or "-")


def _entries(eventlog: EventLog, since: str) -> Iterator[dict | Undecodable]:
    for stream, entry_id, fields in eventlog.entries(since=since):
        try:
            event = to_builtins(eventlog.decode_entry(fields))
        except ValueError as exc:
            yield Undecodable(stream, entry_id, str(exc))
            continue
        yield {"stream": stream, "entry_id": entry_id, **event}
