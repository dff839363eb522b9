"""Progress of a long command: a bar for a person, JSON lines for a program.

Every long command (replay, import, archive) reports through one ``Progress``: the work in
``memstream.ops`` calls ``update(task, done, total, **extra)`` and never prints. On a
terminal the bars are rich's (events done of the total, rate, time left); with ``--json``
or when stderr is not a terminal, one JSON line per update at most every ``every``
seconds, on stdout with ``--json`` (``{"progress": task, "done": ..., "total": ...}``),
and nothing otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """``with Progress(json_lines) as progress: progress.update("turns.v2", 10, 100)``."""

    def __init__(self, json_lines: bool = False, every: float = 0.5, stream: TextIO | None = None) -> None:
        self.json_lines = json_lines
        self.every = every
        self.stream = stream
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._last: dict[str, float] = {}

    def __enter__(self) -> Progress:
        err = self.stream or sys.stderr
        if not self.json_lines and err.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bars

            self._bar = Bars(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                transient=False,
                console=_console(err),
            )
            self._bar.start()
        return self

    def update(self, task: str, done: int, total: int | None, **extra: Any) -> None:
        """``task`` has ``done`` of ``total`` (None: unknown) units; ``extra`` goes to JSON lines."""
        if self._bar is not None:
            rate = extra.get("rate")
            shown = f"{rate:,.0f}/s" if isinstance(rate, (int, float)) else ""
            if task not in self._tasks:
                self._tasks[task] = self._bar.add_task(task, total=total, rate=shown)
            self._bar.update(self._tasks[task], completed=done, total=total, rate=shown)
            return
        if not self.json_lines:
            return
        now = time.monotonic()
        final = total is not None and done >= total
        if not final and now - self._last.get(task, -1e9) < self.every:
            return
        self._last[task] = now
        print(
            json.dumps({"progress": task, "done": done, "total": total, **extra}, default=str),
            file=self.stream or sys.stdout,
            flush=True,
        )

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream)
