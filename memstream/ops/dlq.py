"""``memstream dlq``: the dead letters, and replaying or dropping them."""

from __future__ import annotations

from typing import Literal

from memstream.core import Settings
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError

__all__ = ["dead_letters", "settle"]


def dead_letters(settings: Settings, count: int, group: str | None = None) -> list[dict]:
    """At most ``count`` dead letters, oldest first (only ``group``'s when given)."""
    from memstream.workers import DeadLetters

    eventlog = connect(settings)
    return DeadLetters(eventlog.client, eventlog.prefix).list(count=count, group=group or None)


def settle(settings: Settings, action: Literal["retry", "drop"], ids: list[str]) -> dict:
    """``retry`` (re-append for its group only) or ``drop`` each dead letter of ``ids``:
    ``{action: {DLQ id: the retried entry's new id, or True when dropped; None: no such
    dead letter}, "missing": [the ids that named none]}``. ``CommandError`` without ids."""
    from memstream.workers import DeadLetters

    eventlog = connect(settings)
    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    if not ids:
        raise CommandError(f"dlq {action} needs one or more DLQ ids (see `memstream dlq list`)")
    done: dict = {}
    for dlq_id in ids:
        done[dlq_id] = dlq.retry(dlq_id) if action == "retry" else (dlq.drop(dlq_id) or None)
    return {action: done, "missing": [i for i, v in done.items() if v is None]}
