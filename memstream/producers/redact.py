"""Secrets out of an event before it leaves the host: ``redact_event(event) -> (event, count)``.

The shipper thread (``memstream.producers.shipper``) calls it on every record it reads from
the spool, before the batch is appended to the shared log, so the stream, ``memstream
export``, the dead letters and anything replayed or archived hold the redacted text. The
agent's hooks never call it: they only spool (the spool keeps the raw text, mode 0600, and
each segment is deleted once shipped). The workers redact again, for events appended by
other means.

Every free-text field is redacted with ``memstream.text.redaction.redact`` (the same
``[REDACTED:<kind>]`` marks): a turn's user and assistant text and its tool calls'
arguments and results, a memory's content and old text, a delegation's task and result,
a forget's reason. Ids, names and the scope are left as they are. An event without a
secret comes back as the same object, with count 0. The text stage is imported on first
use (on the shipper thread), so the agent's process does not load it at start.
"""

from __future__ import annotations

from typing import Callable

import msgspec

from memstream.producers.events import (
    DelegationCompleted,
    Event,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    ToolCall,
    TurnRecorded,
)

__all__ = ["redact_event", "TEXT_FIELDS"]

# the free-text fields of each event type (the rest are ids, names, counts and flags)
TEXT_FIELDS: dict[type, tuple[str, ...]] = {
    TurnRecorded: ("user_text", "assistant_text"),
    MemoryWritten: ("content", "old_text"),
    DelegationCompleted: ("task", "result"),
    MemoryRemembered: ("content",),
    MemoryForgotten: ("reason",),
}


def _redactor() -> Callable[[str], tuple[str, int]]:
    from memstream.text import redact

    return redact


def redact_event(event: Event, redactor: Callable[[str], tuple[str, int]] | None = None) -> tuple[Event, int]:
    """(``event`` with every secret in its text fields replaced by a mark, number of marks).
    Never raises; the same object when nothing was found. ``redactor``: another version's
    ``redact`` (the redaction benchmark's baseline)."""
    fields = TEXT_FIELDS.get(type(event))
    if not fields:
        return event, 0
    redact = redactor or _redactor()
    changes: dict[str, object] = {}
    total = 0
    for name in fields:
        text, n = redact(getattr(event, name))
        if n:
            changes[name] = text
            total += n
    if isinstance(event, TurnRecorded) and event.tool_calls:
        calls: list[ToolCall] = []
        for call in event.tool_calls:
            arguments, a = redact(call.arguments)
            result, r = redact(call.result)
            calls.append(msgspec.structs.replace(call, arguments=arguments, result=result) if a or r else call)
            total += a + r
        if any(new is not old for new, old in zip(calls, event.tool_calls)):
            changes["tool_calls"] = calls
    if not changes:
        return event, 0
    return msgspec.structs.replace(event, **changes), total
