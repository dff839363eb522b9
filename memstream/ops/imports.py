"""``memstream import hermes|jsonl``: history from elsewhere into the log.

Each import reads and checks its whole input first (``memstream.producers`` importers): a
file it rejects is a ``CommandError`` naming the file and the line or table, and nothing
of it is appended. Then it reads the ids the log holds once and appends, in atomic
batches, only the events it does not hold: an import run twice appends its events once.
A dry run reads and counts and appends nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import (
    Archive,
    ArchiveError,
    Event,
    EventLog,
    ImportFileError,
    append_events,
    existing_ids,
    new_events,
)

__all__ = ["import_hermes", "import_jsonl"]

Progress = Callable[[int, int], None]

ALREADY = "already in the log"
DUPLICATE = "repeated in the input"


def import_hermes(
    settings: Settings,
    home: Path,
    *,
    agent: str | None = None,
    tenant: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Hermes's history under ``home`` (state.db, memories/): the counts read, and the
    events appended and skipped (with why). ``agent``/``tenant`` override the scope
    (defaults: each session's agent as the provider resolves it; ``settings.tenant``).
    ``progress(done, total)`` as events are appended."""
    from memstream.producers import read_hermes

    if not home.is_dir():
        raise CommandError(f"no Hermes home at {home} (give --home DIR; the default is $HERMES_HOME or ~/.hermes)")
    try:
        history = read_hermes(
            home, tenant=tenant or settings.tenant, app=settings.app, agent=agent, max_text_bytes=settings.max_text_bytes
        )
    except ImportFileError as exc:
        raise CommandError(f"{exc}; nothing was imported") from exc
    if not history.state_db and not history.memory_files:
        raise CommandError(f"nothing to import in {home}: no state.db and no memories/MEMORY.md or USER.md")
    result: dict[str, Any] = {
        "source": "hermes",
        "home": str(home),
        "dry_run": dry_run,
        "sessions": history.sessions,
        "turns": history.turns,
        "memories": history.memories,
        "session_ends": history.session_ends,
        "session_switches": history.session_switches,
        "events": len(history.events),
    }
    result.update(
        _append(connect(settings), history.events, dry_run, progress, dict(history.skipped), _archive(settings), settings)
    )
    return result


def import_jsonl(settings: Settings, path: Path, *, dry_run: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """The events of a ``memstream export`` file at ``path`` (ids kept, in the file's order):
    how many, and those appended and skipped. ``progress(done, total)`` as they are appended."""
    from memstream.producers import read_jsonl

    try:
        events = read_jsonl(path)
    except ImportFileError as exc:
        raise CommandError(f"{exc}; nothing was imported") from exc
    result: dict[str, Any] = {"source": "jsonl", "file": str(path), "dry_run": dry_run, "events": len(events)}
    result.update(_append(connect(settings), events, dry_run, progress, {}, _archive(settings), settings))
    return result


def _archive(settings: Settings) -> Archive | None:
    """The log's archive when it holds anything: its events count as in the log."""
    try:
        return Archive.holding(settings.archive_path)
    except ArchiveError as exc:
        raise CommandError(
            f"the archive is unreadable, so the events already in the log are unknown: {exc}; nothing was imported"
        ) from exc


def _append(
    eventlog: EventLog,
    events: Sequence[Event],
    dry_run: bool,
    progress: Progress | None,
    skipped: dict[str, int],
    archive: Archive | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    unique = new_events(events, set())
    fresh = new_events(unique, existing_ids(eventlog, archive))
    for reason, n in ((DUPLICATE, len(events) - len(unique)), (ALREADY, len(unique) - len(fresh))):
        if n:
            skipped[reason] = n
    limit = settings.max_text_bytes if settings is not None else None
    appended = 0 if dry_run else append_events(eventlog, fresh, progress=progress, max_text_bytes=limit)
    return {"new": len(fresh), "appended": appended, "skipped": skipped}
