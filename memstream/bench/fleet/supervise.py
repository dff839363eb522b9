"""The bench process's hold on its children: their environment, start and lines, and the CPU
they and the machine spent (``/proc``); they are stopped by ``memstream.core.stop_process``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from memstream.bench.fleet.plan import CLK_TCK, TENANT


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far; None when it is gone."""
    if not pid:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _thread_kind(name: str | None) -> str:
    """What a thread of the service does, by its name (None: no Python thread: the store's
    or a library's native threads)."""
    if name is None:
        return "native"
    if name.startswith("memstream-queries"):
        return "queries"
    if name.startswith("memstream-") and name not in ("memstream-supervisor", "memstream-adopter"):
        return "projections"  # the consumers of the projection versions
    return "other"


def threads_cpu(pid: int | None, names: dict[int, str]) -> dict[str, float]:
    """CPU seconds so far of process ``pid``'s threads, summed by ``_thread_kind``."""
    out: dict[str, float] = {}
    if not pid:
        return out
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = _thread_kind(names.get(int(stat.parent.name)))
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def machine_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of every CPU of the machine so far."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(x) for x in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle, sum(values[:8])


def child_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_") and k != "HERMES_HOME"}
    env.update(MEMSTREAM_HOME=str(home), MEMSTREAM_TENANT=TENANT, MEMSTREAM_AUTOSTART="0", **extra)
    return env


class Child:
    """A child process speaking JSON lines on its stdout, read by a thread."""

    def __init__(
        self, args: list[str], env: dict[str, str], log: Path, on_line: Any = None, started: list[Child] | None = None
    ) -> None:
        """Start the process; with ``started``, add this child to it as soon as the process
        exists (in a ``finally``: a Ctrl-C landing between the start and the caller's own
        bookkeeping must not leave a child that nobody stops)."""
        try:
            with open(log, "ab") as err:
                self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                    args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True
                )  # Ctrl-C reaches the bench only; it stops the children
        finally:
            if started is not None and getattr(self, "proc", None) is not None:
                started.append(self)
        self.log = log
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.on_line = on_line
        self.reader = threading.Thread(target=self._read, name="fleet-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """The child's lines until its stdout ends; then the pipe is closed here, by its only
        reader (stopping the process closes its stdin alone)."""
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for raw in self.proc.stdout:
                try:
                    message = json.loads(raw)
                except ValueError:
                    continue
                if self.on_line is not None and self.on_line(message):
                    continue
                self.lines.put(message)
        self.lines.put({"exited": True})

    def expect(self, key: str, deadline: float) -> dict[str, Any]:
        """The next line holding ``key``; RuntimeError (with the log's tail) when the process
        exits or ``deadline`` (monotonic) passes first."""
        while True:
            try:
                message = self.lines.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"no {key!r} from pid {self.proc.pid} in time; {self.tail()}") from None
                continue
            if key in message:
                return message
            if message.get("exited"):
                raise RuntimeError(f"pid {self.proc.pid} exited ({self.proc.wait()}) before {key!r}; {self.tail()}")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        try:
            return "its log ends: " + self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return "no log"
