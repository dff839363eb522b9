"""memstream's errors: one base, and whether retrying can help.

Every exception class memstream defines derives from exactly one of ``TransientError``
(retry later: a dependency is down or busy; nothing is wrong with the input) and
``PermanentError`` (this input, or this configuration, can never succeed: retrying the
same call fails the same way). A library's exceptions are translated into these once, at
the adapter that calls the library (``raise ... from``); Redis's own are judged by
``is_transient`` where they surface.
"""

from __future__ import annotations

__all__ = ["MemstreamError", "TransientError", "PermanentError", "is_transient"]


class MemstreamError(Exception):
    """The base of every exception memstream defines."""


class TransientError(MemstreamError):
    """Retry later: a dependency is down, unreachable or busy; the input is not at fault."""


class PermanentError(MemstreamError):
    """This input (or configuration) can never succeed: retrying the same call fails the same way."""


# Replies of a server that cannot take writes now (full, a replica after a failover,
# loading, a busy script): the server's state, not the input's fault.
_SERVER_STATE_CODES = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "MISCONF", "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of a dependency, which no input causes: any
    ``TransientError``, a Redis connection or timeout error, or a reply of a server in a
    state that refuses writes for now (OOM, READONLY, LOADING, BUSY, MASTERDOWN, MISCONF,
    NOREPLICAS, TRYAGAIN, CLUSTERDOWN, also as a MULTI reply), or a full disk (``ENOSPC``,
    ``EDQUOT``, SQLite's "database or disk is full", also as the cause of another error).
    Retry later without counting it against the input."""
    if isinstance(exc, TransientError) or _disk_full(exc):
        return True
    import redis  # here, not at the top: core stays light for the layers without Redis

    if isinstance(
        exc,
        (
            redis.ConnectionError,
            redis.TimeoutError,
            redis.exceptions.OutOfMemoryError,
            redis.exceptions.ReadOnlyError,
            redis.exceptions.BusyLoadingError,
            redis.exceptions.MasterDownError,
            redis.exceptions.TryAgainError,
            redis.exceptions.ClusterDownError,
        ),
    ):
        return True
    if isinstance(exc, redis.ResponseError):
        # a MULTI reply names the command first: "Command # 1 (...) of pipeline caused error: OOM ..."
        message = str(exc).rsplit("caused error: ", 1)[-1]
        return message.split(" ", 1)[0].upper() in _SERVER_STATE_CODES
    return False


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, says the disk is full: it passes
    when space returns (never dead-letter an entry for it)."""
    import errno

    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if type(current).__module__ == "sqlite3" and "database or disk is full" in str(current):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False
