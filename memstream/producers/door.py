"""The one door into the log: every event memstream appends goes through ``append``.

The shipper (the hooks' events, from the spool), ``memstream add --sync``, the importers
(Hermes's ``state.db`` and memory files, export files), the tombstones of ``forget`` and
retention, and ``EventLog.append``: each hands its events to ``append`` (or ``admit`` then
``append``), which

* redacts every free-text field (``memstream.producers.redact``: the ``[REDACTED:<kind>]``
  marks of ``memstream.text.redaction``), so the shared log, ``export``, the archive, the
  dead letters and Redis's own files never hold a secret redaction recognises, whoever
  appended it;
* clips every text field to ``max_text_bytes`` UTF-8 bytes (``clip_event``: the mark of
  ``memstream.text.clean_text``, the field named in the event's ``clipped``), as the
  hooks and admission clip it;
* then appends with ``EventLog.append_batch`` (atomic per tenant, exactly-once with a
  segment: see ``memstream.producers.stream``).

Redaction comes before clipping: a secret is never cut in two by the clip and half kept.
An event with nothing to redact or clip keeps its encoded payload (``admit``'s ``data``)
byte for byte. ``tests/producers/test_door.py`` fails when code of the package other than
this module appends to a stream of the log by any other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Protocol, Sequence

import msgspec

from memstream.producers.events import Event
from memstream.producers.record import Record
from memstream.producers.redact import redact_event

__all__ = ["Admitted", "admit", "append", "clip_event"]


class Log(Protocol):
    """Where the door appends: ``EventLog`` (its ``append_batch`` says the guarantees)."""

    def append_batch(
        self, records: list[Record], segment: str = "", replicas: int = 0, replica_timeout_ms: int = 1000
    ) -> list[str | None]: ...


@dataclass(frozen=True, slots=True)
class Admitted:
    """An event through the door: its record (redacted, clipped, encoded), how many secrets
    were replaced and which fields were clipped."""

    record: Record
    redacted: int
    clipped: tuple[str, ...]


@cache
def _default_max_text_bytes() -> int:
    """The ``max_text_bytes`` setting's default (a caller with settings passes its own)."""
    from memstream.core import Settings

    return next(int(f.default) for f in msgspec.structs.fields(Settings) if f.name == "max_text_bytes")


def admit(event: Event, *, seq: int = 0, data: bytes | None = None, max_text_bytes: int | None = None) -> Admitted:
    """``event`` redacted and clipped, as the record to append (``seq``: its spool sequence;
    ``data``: its encoding when at hand, kept when nothing changed). Never raises for an
    event that encodes."""
    limit = _default_max_text_bytes() if max_text_bytes is None else max_text_bytes
    redacted, marks = redact_event(event)
    clipped_event, clipped = clip_event(redacted, limit)
    same = clipped_event is event
    return Admitted(Record.of(clipped_event, seq=seq, data=data if same else None), marks, clipped)


def append(
    eventlog: Log,
    items: Sequence[Event | Admitted],
    *,
    segment: str = "",
    replicas: int = 0,
    replica_timeout_ms: int = 1000,
    max_text_bytes: int | None = None,
) -> list[str | None]:
    """Append ``items`` in order (events are admitted here; ``Admitted`` ones as they are);
    each one's entry id, None for a record the segment's dedup found already in the log.
    The guarantees and errors are ``EventLog.append_batch``'s."""
    if not items:
        return []
    records = [(i if isinstance(i, Admitted) else admit(i, max_text_bytes=max_text_bytes)).record for i in items]
    return eventlog.append_batch(records, segment=segment, replicas=replicas, replica_timeout_ms=replica_timeout_ms)


# -- clipping: every text field within the bound ----------------------------------------------


def _clip_text(value: str, max_bytes: int) -> str | None:
    """``value`` clipped as the producers clip it, or None when it is within the bound."""
    if len(value) * 4 <= max_bytes:  # at most 4 UTF-8 bytes a character: certainly within
        return None
    from memstream.text import clean_text

    text, problems = clean_text(value, max_bytes)
    return text if "clipped" in problems else None


def clip_event(event: Event, max_bytes: int) -> tuple[Event, tuple[str, ...]]:
    """Every text field of ``event`` (tool calls' included) within ``max_bytes``; the
    names of those clipped are added to ``event.clipped``. The same object when none is."""
    changes: dict[str, object] = {}
    for name in event.__struct_fields__:
        if name in ("id", "scope", "clipped"):
            continue
        value = getattr(event, name)
        if isinstance(value, str):
            clipped = _clip_text(value, max_bytes)
            if clipped is not None:
                changes[name] = clipped
        elif name == "tool_calls" and value:
            calls, any_clipped = [], False
            for call in value:
                parts = {f: _clip_text(getattr(call, f), max_bytes) for f in call.__struct_fields__}
                parts = {f: v for f, v in parts.items() if v is not None}
                any_clipped |= bool(parts)
                calls.append(msgspec.structs.replace(call, **parts) if parts else call)
            if any_clipped:
                changes[name] = calls
    if not changes:
        return event, ()
    names = tuple(changes)
    flagged = list(event.clipped) + [n for n in names if n not in event.clipped]
    return msgspec.structs.replace(event, clipped=flagged, **changes), names
