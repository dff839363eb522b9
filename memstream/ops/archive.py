"""``memstream archive``: the cold part of the log into compressed files, then out of
Redis (``memstream.producers.archive``); and the check of an archive's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import Archive, ArchiveBusy, ArchiveError, entry_id_of
from memstream.producers import archive as archive_log

__all__ = ["archive", "archive_dir", "verify_archive"]


def archive_dir(settings: Settings, to: str | None = None) -> Path:
    """The archive directory: ``to`` when given, else ``MEMSTREAM_ARCHIVE_DIR`` (default
    ``$MEMSTREAM_HOME/archive``)."""
    return Path(to).expanduser() if to else settings.archive_path


def archive(
    settings: Settings,
    before: str | None = None,
    to: str | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Archive every entry below ``before`` (an entry id, a date or a time; None: per
    stream, everything every projection group has applied) into ``to``, then trim what
    every consumer group has applied from Redis. ``progress(task, done, total)`` as it
    goes. Returns what was archived and trimmed per stream; ``CommandError`` when the
    log is unreachable, a group is behind ``before`` (nothing done), another archiver is
    at work, or the archive cannot be written."""
    directory = archive_dir(settings, to)
    try:
        point = None if before is None else entry_id_of(before)
    except ValueError as exc:
        raise CommandError(f"--before: {exc}") from exc
    eventlog = connect(settings)
    from memstream.projections import running_versions

    # every version the workers run, builds included: none may lose what it has not read
    groups = [group for _, _, group in running_versions(eventlog.client, eventlog.prefix, settings.projections)]
    try:
        return archive_log(eventlog, Archive(directory), point, groups=groups, progress=progress)
    except (ArchiveError, ArchiveBusy) as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot write the archive {directory}: {exc}") from exc


def verify_archive(settings: Settings, to: str | None = None) -> dict[str, Any]:
    """Check every segment of the archive against its manifest (present, size, sha256):
    the totals checked; ``CommandError`` naming each file that fails."""
    directory = archive_dir(settings, to)
    if not directory.is_dir():
        raise CommandError(f"no archive at {directory} (MEMSTREAM_ARCHIVE_DIR, or --to DIR)")
    try:
        return {"directory": str(directory), **Archive(directory).verify()}
    except ArchiveError as exc:
        raise CommandError(str(exc)) from exc
