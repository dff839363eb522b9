"""The log as the commands reach it: the configured one, never started on the way."""

from __future__ import annotations

import redis

from memstream.core import Settings
from memstream.ops.errors import CommandError
from memstream.producers import EventLog, LogLocator

__all__ = ["connect"]


def connect(settings: Settings) -> EventLog:
    """The log ``settings`` name (no autostart); ``CommandError`` when it cannot be reached."""
    try:
        return LogLocator(settings, autostart=False)()
    except redis.RedisError as exc:
        raise CommandError(f"cannot reach the log: {exc}") from exc
