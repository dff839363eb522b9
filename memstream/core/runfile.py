"""The embedded service's run file: where a running service says where its log is, and
the one way to start that service in the background.

``$MEMSTREAM_HOME/run/service.json`` (mode 0600) exists only while the service serves;
it holds its pid, the process's start time (``pid_start``: clock ticks since boot, field
22 of ``/proc/PID/stat``; null where there is no ``/proc``) and the URL of its Valkey,
password included. ``read_run_file`` returns it only when the process it names is alive
and is still that process: on Linux, started at ``pid_start`` and owned by the run file's
owner (a pid reused after a crash names some other process). ``start_service`` starts
``memstream up`` in the background (``memstream up --detach`` and the producers'
autostart both use it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.core.files import open_private, private_dir

if TYPE_CHECKING:
    from memstream.core.settings import Settings

__all__ = ["SERVICE_LOG", "pid_alive", "process_start", "read_run_file", "start_service", "stop_process"]

SERVICE_LOG = "service.log"  # beside the run file: what the background service prints

_PROC = Path("/proc")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field
    22), or None without ``/proc`` or such a process."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
        # field 2, the command name, is in parentheses and may hold spaces and ")"
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _is_that_process(pid: int, started: object, owner: int) -> bool:
    """Whether live ``pid`` is the process a run file owned by ``owner`` recorded."""
    if not _PROC.is_dir():
        return True  # no /proc: liveness is all there is to check
    try:
        if (_PROC / str(pid)).stat().st_uid != owner:
            return False  # another user's process now has the pid
    except OSError:
        return False  # gone meanwhile
    # a run file written before pid_start was recorded: the pid and owner checks only
    return started is None or process_start(pid) == started


def read_run_file(path: Path) -> dict[str, Any] | None:
    """The running service's run file, or None if absent, unreadable or stale."""
    try:
        info = json.loads(path.read_text())
        owner = path.stat().st_uid
        pid = int(info.get("pid", 0)) if isinstance(info, dict) else 0
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(info, dict) or not pid_alive(pid) or not _is_that_process(pid, info.get("pid_start"), owner):
        return None
    return info


def start_service(settings: Settings, wait: float | None = 20.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the service (``python -m memstream up``) of ``settings.home`` in the background,
    unless one serves already.

    The service runs in its own session (it outlives the process that starts it and
    ignores its terminal's Ctrl-C), reads nothing, and appends its output to
    ``service.log`` (mode 0600) in the run file's directory (mode 0700); its environment
    is this process's with ``MEMSTREAM_HOME`` set to ``settings.home`` (and ``env``'s
    variables, when given, over it). Its exit is always
    collected, so a service that dies leaves no zombie that ``pid_alive`` takes for alive.

    Returns the run file's info with ``already_running`` True when a service serves already.
    With ``wait`` (seconds): returns the run file's info once a service serves,
    ``already_running`` False when it is the one started here (True when another starter
    won the race); raises RuntimeError naming the log when it exits first or does not serve
    within ``wait``. With ``wait=None``: returns at once, ``{"pid": ..., "already_running":
    False}``. Raises OSError when the run directory, the log or the process cannot be made.
    """
    existing = read_run_file(settings.run_file)
    if existing:
        return {**existing, "already_running": True}
    run_dir = private_dir(settings.run_file.parent)
    log_path = run_dir / SERVICE_LOG
    with os.fdopen(open_private(log_path), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memstream", "up"],
            env=dict(dict(os.environ, **(env or {})), MEMSTREAM_HOME=str(settings.home)),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
    if wait is None:
        _reap(proc)
        return {"pid": proc.pid, "already_running": False}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        info = read_run_file(settings.run_file)
        if info:
            _reap(proc)
            return {**info, "already_running": info.get("pid") != proc.pid}
        if proc.poll() is not None:
            info = read_run_file(settings.run_file)
            if info:  # lost a race with another starter: that one serves
                return {**info, "already_running": True}
            raise RuntimeError(f"the service exited with {proc.returncode}; see {log_path}")
        time.sleep(0.05)
    _reap(proc)
    raise RuntimeError(f"the service did not start within {wait}s; see {log_path}")


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Collect ``proc``'s exit whenever it comes, from a daemon thread."""
    threading.Thread(target=proc.wait, name="memstream-service-reaper", daemon=True).start()


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """Stop a child process: SIGTERM, up to ``timeout`` s for it to exit, then SIGKILL; reaped.
    Its exit code."""
    proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
