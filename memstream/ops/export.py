"""``memstream export``: every event in the log, oldest first: the archive, then the streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import Archive, ArchiveError, EntryFields, EventLog, history, to_builtins

__all__ = ["Undecodable", "export"]


@dataclass(frozen=True)
class Undecodable:
    """A log entry that is no valid event (skipped by the export)."""

    stream: str
    entry_id: str
    error: str


def export(settings: Settings, since: str | None = None) -> Iterator[dict | Undecodable]:
    """Each entry after ``since`` (every one when None) in log order, the archive's
    (``MEMSTREAM_ARCHIVE_DIR``) then the streams' (``memstream.producers.history``): the
    event as plain data with its ``stream`` and ``entry_id`` first, or ``Undecodable``.
    Connects and reads the archive's manifest before returning (``CommandError`` when the
    log is unreachable or the archive unreadable; also while iterating, for a corrupt
    segment or an archive that lacks what the log archived)."""
    eventlog = connect(settings)
    try:
        entries = history(eventlog, Archive(settings.archive_path), since or "-")
    except ArchiveError as exc:
        raise CommandError(str(exc)) from exc
    return _entries(eventlog, entries)


def _entries(eventlog: EventLog, entries: Iterator[tuple[str, str, EntryFields]]) -> Iterator[dict | Undecodable]:
    try:
        for stream, entry_id, fields in entries:
            try:
                event = to_builtins(eventlog.decode_entry(fields))
            except ValueError as exc:
                yield Undecodable(stream, entry_id, str(exc))
                continue
            yield {"stream": stream, "entry_id": entry_id, **event}
    except ArchiveError as exc:
        raise CommandError(str(exc)) from exc
