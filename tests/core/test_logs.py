"""Logging never raises: a line that cannot be written (a full disk, a closed stream) is
dropped and counted, and the thread that logged goes on (issue 26, finding 5)."""

from __future__ import annotations

import errno
import logging
import sqlite3

import structlog

from memstream.core import configure, is_transient
from memstream.core.logs import Unfailing


class FullDisk:
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def isatty(self) -> bool:
        return False


def test_a_log_line_on_a_full_disk_is_dropped_and_counted_never_raised():
    stream = Unfailing(FullDisk())  # type: ignore[arg-type]
    configure("INFO", json=True, stream=stream)  # type: ignore[arg-type]
    structlog.get_logger("memstream.test").error("consumer.step_failed", error="x")
    logging.getLogger("redis").error("a stdlib logger's line")
    assert stream.dropped >= 2


def test_configure_wraps_any_stream_so_that_its_writes_cannot_raise():
    configure("INFO", json=True, stream=FullDisk())  # type: ignore[arg-type]
    structlog.get_logger("memstream.test").warning("pipeline.consumer_restarted")
    logging.getLogger("memstream.test").warning("through the root handler")


def test_a_full_disk_is_transient_whatever_wraps_it():
    assert is_transient(OSError(errno.ENOSPC, "No space left on device"))
    assert is_transient(sqlite3.OperationalError("database or disk is full"))
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as exc:
            raise RuntimeError("the store could not write its segment") from exc
    except RuntimeError as wrapped:
        assert is_transient(wrapped)
    assert not is_transient(OSError(errno.EACCES, "Permission denied"))
    assert not is_transient(ValueError("No space left on device"))  # a message alone says nothing
