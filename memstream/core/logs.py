"""structlog set-up, once per entry point (never at import time).

JSON lines for services and pipes, the console renderer on a tty; stdlib loggers
(redis, rq) go through the same processors. Logs carry ids and counts, never memory text.
"""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure"]


def configure(level: str = "WARNING", json: bool | None = None, stream=None) -> None:
    stream = stream or sys.stderr
    use_json = (not stream.isatty()) if json is None else json
    renderer = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    shared = [
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
