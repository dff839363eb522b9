"""The log as the commands reach it: the configured one, never started on the way."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

import redis

from memstream.core import Settings
from memstream.ops.errors import CommandError
from memstream.producers import EventLog, LogLocator

__all__ = ["connect", "user_url"]


def connect(settings: Settings) -> EventLog:
    """The log ``settings`` name (no autostart); ``CommandError`` when it cannot be reached."""
    try:
        return LogLocator(settings, autostart=False)()
    except redis.RedisError as exc:
        raise CommandError(f"cannot reach the log: {exc}") from exc


def user_url(settings: Settings, user: str, password: str) -> str:
    """The configured log's URL (scheme, host, port, db) with ``user`` and ``password``;
    for Sentinels, the same Sentinels and service (their own credentials, in the query, kept)."""
    from memstream.core import is_sentinel_url

    base = urlsplit(LogLocator(settings, autostart=False).url() or "")
    if is_sentinel_url(base.geturl()):
        netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@" + base.netloc.rpartition("@")[2]
        return urlunsplit((base.scheme, netloc, base.path, base.query, ""))
    host = base.hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}" + (f":{base.port}" if base.port else "")
    return urlunsplit((base.scheme or "redis", netloc, base.path or "/0", "", ""))
