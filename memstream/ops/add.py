"""``memstream add``: a memory write by hand, from its text to the log (or the spool).

The text is bounded as the writer bounds it: at most ``MEMSTREAM_MAX_TEXT_BYTES`` UTF-8
bytes are read, and a longer text is stored clipped to that bound, flagged ``clipped``,
exactly as if it had been read whole.
"""

from __future__ import annotations

import time
from typing import BinaryIO, Literal

from memstream.core import Settings, backoff_delay, new_event_id
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.ops.sync import wait_projected, wait_searchable
from memstream.producers import EventLog, MemoryWritten, Scope, Writer, admit, append_through_door, utcnow
from memstream.text import clean_text

__all__ = ["add_logged", "add_spooled", "memory_event", "read_bounded", "source_text"]


def read_bounded(source: BinaryIO, name: str, limit: int) -> tuple[str, bool]:
    """(text, more): at most ``limit`` UTF-8 bytes of the binary stream ``source`` decoded
    (strictly: invalid UTF-8 is an error), ``more`` when the input goes on past them."""
    data = source.read(limit + 1)
    more = len(data) > limit
    data = data[:limit]
    try:
        return data.decode("utf-8"), more
    except UnicodeDecodeError as exc:
        if more and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8"), more  # a character cut by the bound
        raise CommandError(f"{name} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def source_text(limit: int, *, text: str | None, file: str | None, stdin: BinaryIO | None) -> tuple[str, str, bool]:
    """(text, where it came from, more than ``limit`` bytes): ``file`` when given, else
    ``stdin`` when ``text`` is ``-``, else ``text`` itself (``TEXT``)."""
    if file is not None:
        try:
            with open(file, "rb") as source:
                read, more = read_bounded(source, file, limit)
        except FileNotFoundError:
            raise CommandError(f"--file {file}: no such file") from None
        except IsADirectoryError:
            raise CommandError(f"--file {file}: is a directory, not a file") from None
        except OSError as exc:
            raise CommandError(f"--file {file}: cannot read it ({exc.strerror or exc})") from None
        except ValueError:  # a NUL in the path
            raise CommandError(f"--file {file!r} is not a valid path") from None
        return read, file, more
    if text == "-":
        if stdin is None:
            raise CommandError("`add -` reads the text from stdin, and there is no stdin")
        read, more = read_bounded(stdin, "stdin", limit)
        return read, "stdin", more
    if text is None:
        raise CommandError("nothing to add: give TEXT, `-` to read stdin, or --file PATH")
    return text, "TEXT", len(text.encode("utf-8", "replace")) > limit


def memory_event(
    settings: Settings,
    raw: str,
    where: str,
    more: bool,
    *,
    tenant: str | None,
    agent: str,
    session: str | None,
    target: Literal["memory", "user"],
) -> tuple[MemoryWritten, bool]:
    """(the memory write of ``raw``, whether its text was clipped to ``settings.max_text_bytes``).

    ``raw`` came from ``where`` (``source_text``); read from a file or stdin and whole,
    its final newline is not part of the memory. Empty text is a ``CommandError``."""
    if where != "TEXT" and not more:
        raw = raw.removesuffix("\n").removesuffix("\r")  # the file's (or echo's) final newline
    text, problems = clean_text(raw, settings.max_text_bytes)
    if more and "clipped" not in problems:
        # only the bound's worth was read: one more character makes clean_text clip it
        # exactly as the writer clips the whole text (the same prefix, the same mark)
        text, problems = clean_text(raw + " ", settings.max_text_bytes)
    if not text.strip():
        raise CommandError(f"nothing to add: the text ({where}) is empty")
    clipped = "clipped" in problems
    event = MemoryWritten(
        id=new_event_id(),
        occurred_at=utcnow(),
        scope=Scope(tenant=tenant or settings.tenant, app=settings.app, agent=agent, session_id=session or "", platform="cli"),
        clipped=["content"] if clipped else [],
        action="add",
        target=target,
        content=text,
        origin="memstream-cli",
    )
    return event, clipped


def add_logged(settings: Settings, event: MemoryWritten, timeout: float) -> dict:
    """Append ``event`` to the log now, through the log's door (``CommandError`` when it
    cannot be appended), and wait up to ``timeout`` seconds until it is searchable:
    ``{"id", "entry_id", "state", "checked"}``. ``checked`` False: the append landed but
    whether it is searchable could not be told (``state`` says why).

    The event's id is decided before the append, and the append is sent as a one-record
    segment named by it (the append script's dedup record, ``memstream.producers.stream``):
    an attempt whose reply was lost and is sent again lands once. Read-your-writes asks
    what the credentials may read: the projections' positions (``wait_projected``), or,
    for a tenant's user (which may not read them), the tenant's query channel
    (``exists``)."""
    eventlog = connect(settings)
    entry = _append_once(eventlog, event, settings)
    state, checked = _searchable(eventlog, event, entry, timeout)
    return {"id": event.id, "entry_id": entry, "state": state, "checked": checked}


APPEND_ATTEMPTS = 3


def _append_once(eventlog: EventLog, event: MemoryWritten, settings: Settings) -> str:
    """The entry id of ``event`` appended (once, whatever the retries); "" when an attempt
    whose reply was lost had appended it."""
    import redis

    admitted = admit(event, max_text_bytes=settings.max_text_bytes)
    segment = f"add:{event.id}"
    for attempt in range(1, APPEND_ATTEMPTS + 1):
        try:
            return append_through_door(eventlog, [admitted], segment=segment)[0] or ""
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if attempt == APPEND_ATTEMPTS:
                raise CommandError(
                    f"the log did not confirm the append of {event.id} ({exc}); it may have landed: "
                    "check with `memstream export` before adding it again"
                ) from exc
            time.sleep(backoff_delay(attempt, 0.2, 2.0))
        except redis.RedisError as exc:
            raise CommandError(f"the log refused the append of {event.id}: {exc}") from exc
    raise AssertionError("unreachable")


def _searchable(eventlog: EventLog, event: MemoryWritten, entry: str, timeout: float) -> tuple[str, bool]:
    """(read-your-writes' state, whether it could be checked): by the projections'
    positions when these credentials may read them, else through the query path."""
    import redis

    if entry:
        try:
            return wait_projected(eventlog, event, entry, timeout), True
        except redis.exceptions.NoPermissionError:
            pass  # a tenant's user: the positions are not its to read; its query channel is
    return wait_searchable(eventlog, event, timeout)


def add_spooled(settings: Settings, event: MemoryWritten) -> dict:
    """Hand ``event`` to this host's writer and wait up to ``settings.shutdown_timeout``
    for it to ship: ``{"id", "state"}``, ``state`` ``logged`` or ``spooled`` (it ships when
    the log is reachable); ``service_started`` (its pid and home) when no service ran and
    the writer started one in the background (``MEMSTREAM_AUTOSTART``)."""
    writer = Writer.shared(settings)
    writer.emit(event)
    shipped = writer.flush(settings.shutdown_timeout)
    started = writer.locator.started
    writer.release(0.5)
    out: dict = {"id": event.id, "state": "logged" if shipped else "spooled"}
    if started and not started.get("already_running"):
        out["service_started"] = {"pid": started.get("pid"), "home": str(settings.home)}
    return out
