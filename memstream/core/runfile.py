"""The embedded service's run file: where a running service says where its log is.

``$MEMSTREAM_HOME/run/service.json`` (mode 0600) exists only while the service serves;
it holds its pid, the process's start time (``pid_start``: clock ticks since boot, field
22 of ``/proc/PID/stat``; null where there is no ``/proc``) and the URL of its Valkey,
password included. ``read_run_file`` returns it only when the process it names is alive
and is still that process: on Linux, started at ``pid_start`` and owned by the run file's
owner (a pid reused after a crash names some other process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["pid_alive", "process_start", "read_run_file"]

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
        return int(stat[stat.rindex(b")") + 2:].split()[19])
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


def read_run_file(path: Path) -> dict | None:
    """The running service's run file, or None if absent, unreadable or stale."""
    try:
        info = json.loads(path.read_text())
        owner = path.stat().st_uid
        pid = int(info.get("pid", 0)) if isinstance(info, dict) else 0
    except (OSError, ValueError, TypeError):
        return None
    if not pid_alive(pid) or not _is_that_process(pid, info.get("pid_start"), owner):
        return None
    return info
