"""structlog set-up, once per entry point (never at import time).

``configure``: memstream's own processes (the CLI, the service, the workers): JSON lines
for services and pipes, the console renderer on a tty; stdlib loggers (redis, rq) go
through the same processors. Logging never raises: a line that cannot be written (a full
disk, a closed pipe) is dropped and counted (``Unfailing``). ``configure_in_host``: inside another program (the Hermes
plugin), memstream's lines go to stdlib ``logging``, never to stdout. Logs carry ids and
counts, never memory text.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

import structlog
from structlog.typing import Processor

__all__ = ["Unfailing", "configure", "configure_in_host", "logs_json"]

_host_lock = threading.Lock()


class Unfailing:
    """A text stream whose writes never raise: a full disk, a closed pipe or a closed file
    drops the line (counted in ``dropped``) and the thread that logged goes on. Every log
    line of memstream's processes goes through one (``configure``): a log that cannot be
    written must never stop a worker, a supervisor or a query server."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.dropped = 0

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except (OSError, ValueError):  # ENOSPC, EPIPE, EIO; a closed file
            self.dropped += 1
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.dropped += 1

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError):
            return False


def configure(level: str = "WARNING", json: bool | None = None, stream: TextIO | None = None) -> None:
    """memstream's log lines on ``stream`` (stderr), through an ``Unfailing`` stream."""
    target = stream or sys.stderr
    use_json = (not Unfailing(target).isatty()) if json is None else json
    stream = target if isinstance(target, Unfailing) else Unfailing(target)  # type: ignore[assignment]  # a TextIO's writes
    renderer: Processor = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=shared + [structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processor=renderer, foreign_pre_chain=shared))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def logs_json() -> bool | None:
    """Whether ``configure`` made this process's lines JSON (True) or console lines (False);
    None when it did not configure them (a child process then decides as ``configure`` does)."""
    processors = structlog.get_config().get("processors") or []
    last = processors[-1] if processors else None
    if isinstance(last, structlog.processors.JSONRenderer):
        return True
    if isinstance(last, structlog.dev.ConsoleRenderer) and structlog.is_configured():
        return False
    return None


def configure_in_host() -> bool:
    """Inside a host program (the Hermes plugin): send memstream's structlog lines to the
    stdlib logger of the same name (``memstream.provider``, ``memstream.shipper``... all
    under ``memstream``), so the host's logging configuration decides their level and
    where they go; unconfigured structlog would print them on the host's stdout.

    Changes nothing when structlog is already configured (by the host, or by an earlier
    call): structlog's configuration is process-wide. Returns whether it configured it.
    """
    with _host_lock:
        if structlog.is_configured():
            return False
        structlog.configure(
            processors=[
                structlog.stdlib.filter_by_level,  # the stdlib logger's level, checked first
                structlog.contextvars.merge_contextvars,
                structlog.processors.format_exc_info,
                structlog.processors.KeyValueRenderer(key_order=["event"]),
            ],
            logger_factory=structlog.stdlib.LoggerFactory(),
            wrapper_class=structlog.stdlib.BoundLogger,
            cache_logger_on_first_use=False,
        )
        return True
