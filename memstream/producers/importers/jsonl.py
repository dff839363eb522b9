"""The events of a ``memstream export`` file: one JSON object a line, each an event as
``to_builtins`` writes it (its ``type`` tag, id and payload) with the ``stream`` and
``entry_id`` it had in the log it came from.

Guarantee: ``read_jsonl`` returns every event of the file, ids and payloads as exported,
in the file's order, or raises ``ImportFileError`` naming the line of the first problem
(not JSON, cut short, not an event of this schema, or refused by admission). Blank lines
are ignored. Nothing is read from or written to the log here.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from memstream.producers.events import Event
from memstream.producers.importers.checks import ImportFileError, check_event

__all__ = ["read_jsonl"]

_LOG_FIELDS = ("stream", "entry_id")  # where the event was in the exporting log, not the event


def read_jsonl(path: str | Path) -> list[Event]:
    """Every event in the file at ``path``, in its order (see the module doc)."""
    name = str(path)
    try:
        with open(path, "rb") as source:
            lines = source.read().split(b"\n")
    except FileNotFoundError:
        raise ImportFileError(name, "", "no such file") from None
    except IsADirectoryError:
        raise ImportFileError(name, "", "is a directory, not a file") from None
    except OSError as exc:
        raise ImportFileError(name, "", f"cannot read it ({exc.strerror or exc})") from None
    events: list[Event] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ImportFileError(name, where, f"not UTF-8 (invalid byte at column {exc.start + 1})") from None
        except json.JSONDecodeError as exc:
            cut = number == len(lines) or exc.pos >= len(raw.rstrip())
            raise ImportFileError(
                name, where, f"{'cut short' if cut else 'not JSON'} ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(obj, dict):
            raise ImportFileError(name, where, f"a JSON {type(obj).__name__}, not an event object")
        for field in _LOG_FIELDS:
            obj.pop(field, None)
        try:
            event = msgspec.convert(obj, Event)
        except msgspec.ValidationError as exc:
            raise ImportFileError(name, where, f"not an event of this schema ({exc})") from None
        try:
            check_event(event)
        except ValueError as exc:
            raise ImportFileError(name, where, f"an event admission would refuse ({exc})") from None
        events.append(event)
    return events
