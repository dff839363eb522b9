"""The embedded service's run file: where a running service says where its log is, and
the one way to start that service in the background.

``$MEMSTREAM_HOME/run/service.json`` (mode 0600) exists only while the service serves;
it holds its pid, the process's start time (``pid_start``: clock ticks since boot, field
22 of ``/proc/PID/stat``; null where there is no ``/proc``) and the URL of its Valkey,
password included. ``read_run_file`` returns it only when the process it names is alive
and is still that process: on Linux, started at ``pid_start`` and owned by the run file's
owner (a pid reused after a crash names some other process). ``start_service`` starts
``memstream up`` in the background (``memstream up --detach`` and the producers'
autostart both use it). Until the service has written its run file, the start marker beside
it (``service.starting``, the same fields) names the process that is starting, so that
``memstream down`` right after a background start stops it instead of finding nothing
(``starting_service``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.core.files import open_private, private_dir, write_private

if TYPE_CHECKING:
    from memstream.core.settings import Settings

__all__ = [
    "READY_FD",
    "SERVICE_LOG",
    "STARTING",
    "last_error_line",
    "pid_alive",
    "process_start",
    "read_run_file",
    "say_ready",
    "start_service",
    "starting_service",
    "stop_process",
    "stop_processes",
    "take_ready_fd",
]

SERVICE_LOG = "service.log"  # beside the run file: what the background service prints
STARTING = "service.starting"  # beside the run file: the process a background start began

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
    With ``wait`` (seconds): the child is given a pipe (``MEMSTREAM_READY_FD``) and says
    ``ready`` on it once its consumers wrote their first health record (``say_ready``);
    returns the run file's info then, ``already_running`` False when it is the one started
    here (True when another starter won the race), ``warning`` when it serves with a
    problem (its projections failed to start); raises RuntimeError with the child's last
    error line (what it said on the pipe, else the log's) when it exits first, or with its
    last error when it does not say ready within ``wait``. With ``wait=None``: returns at once, ``{"pid": ..., "already_running":
    False}``. Raises OSError when the run directory, the log or the process cannot be made.
    """
    existing = read_run_file(settings.run_file)
    if existing:
        return {**existing, "already_running": True}
    run_dir = private_dir(settings.run_file.parent)
    log_path = run_dir / SERVICE_LOG
    child_env = dict(dict(os.environ, **(env or {})), MEMSTREAM_HOME=str(settings.home))
    child_env.pop(READY_FD, None)
    ready_r, ready_w = os.pipe() if wait is not None else (-1, -1)
    if wait is not None:
        child_env[READY_FD] = str(ready_w)
    try:
        with os.fdopen(open_private(log_path), "ab") as out:
            proc = subprocess.Popen(
                # -P: the caller's working directory is not on the path, so a `memstream/` folder
                # there cannot shadow the installed package
                [sys.executable, "-P", "-m", "memstream", "up"],
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                close_fds=True,
                pass_fds=(ready_w,) if wait is not None else (),
            )
    finally:
        if ready_w >= 0:
            os.close(ready_w)  # the child holds the only writing end: its exit is our EOF
    marker = {"pid": proc.pid, "pid_start": process_start(proc.pid)}
    with contextlib.suppress(OSError):  # a full disk: the child says why; `down` then waits for no marker
        write_private(run_dir / STARTING, json.dumps(marker) + "\n")
    if wait is None:
        _reap(proc)
        return {"pid": proc.pid, "already_running": False}
    try:
        said = _wait_ready(ready_r, wait)
    finally:
        os.close(ready_r)
    info = read_run_file(settings.run_file)
    if said.state == "ready" and info:
        _reap(proc)
        out_info = {**info, "already_running": info.get("pid") != proc.pid}
        if said.warning:
            out_info["warning"] = said.warning
        return out_info
    if said.state == "eof":  # the child closed the pipe without saying ready: it exited (or is exiting)
        try:
            code = proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        info = read_run_file(settings.run_file)
        if info and info.get("pid") != proc.pid:  # lost a race with another starter: that one serves
            return {**info, "already_running": True}
        error = said.error or last_error_line(log_path)
        raise RuntimeError(
            f"the service exited with {code if code is not None else 'an error'}"
            + (f": {error}" if error else "")
            + f" (its log: {log_path})"
        )
    _reap(proc)
    raise RuntimeError(
        f"the service did not report healthy within {wait:g}s"
        + (f"; its last error: {said.error}" if said.error else "")
        + f" (its log: {log_path}; it may still come up: `memstream doctor` says)"
    )


def starting_service(settings: Settings, timeout: float) -> dict[str, Any] | None:
    """The run file of the service, waiting up to ``timeout`` seconds for it while the
    process a background start began (the start marker, ``STARTING``) is alive and has not
    written it yet: None when no service runs or starts, or the starting one does not write
    its run file in time (or exits first)."""
    marker = settings.run_file.parent / STARTING
    deadline = time.monotonic() + timeout
    while True:
        info = read_run_file(settings.run_file)
        if info or read_run_file(marker) is None or time.monotonic() >= deadline:
            return info
        time.sleep(0.05)


READY_FD = "MEMSTREAM_READY_FD"  # the child's end of the pipe it says ready (or its error) on


class _Said:
    """What a starting service said on its ready pipe: ``state`` ``ready``, ``eof`` (it
    closed the pipe first: exited) or ``waiting`` (nothing conclusive within the wait); its
    last ``error`` line and a ``warning``."""

    def __init__(self) -> None:
        self.state = "waiting"
        self.error = ""
        self.warning = ""


def _wait_ready(fd: int, wait: float) -> _Said:
    """Read the lines a starting service writes on its ready pipe (``say_ready``) for up to
    ``wait`` seconds."""
    import select

    said = _Said()
    buffer = b""
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            said.state = "eof"
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            if line == "ready":
                said.state = "ready"
                return said
            kind, _, text = line.partition(": ")
            if kind in ("error", "failed"):
                said.error = text[:500]
            elif kind == "warning":
                said.warning = text[:500]
    return said


def say_ready(line: str) -> None:
    """In the service started by ``start_service``: write ``line`` on the pipe its starter
    waits on: ``ready``, ``failed: TEXT`` (it exits: both close the pipe), ``error: TEXT``
    (its last error while it is not ready yet), ``warning: TEXT``. Does nothing in a
    service started otherwise; never raises."""
    global _ready_fd
    if _ready_fd is None:
        return
    try:
        os.write(_ready_fd, (" ".join(line.split()) + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    if line == "ready" or line.startswith("failed:"):
        try:
            os.close(_ready_fd)
        except OSError:
            pass
        _ready_fd = None


_ready_fd: int | None = None


def take_ready_fd(environ: dict[str, str] | os._Environ[str]) -> None:
    """The entry point's part (it reads the environment): take the ready pipe ``start_service``
    passed (``MEMSTREAM_READY_FD``), so that ``say_ready`` writes on it; removes the
    variable, so no process this one starts inherits it."""
    global _ready_fd
    raw = environ.pop(READY_FD, None)
    if raw is None:
        return
    try:
        fd = int(raw)
        os.fstat(fd)
    except (ValueError, OSError):
        return
    os.set_inheritable(fd, False)
    _ready_fd = fd


def last_error_line(log_path: Path, tail: int = 16384) -> str:
    """The last line of the log at ``log_path`` that tells an error (a traceback's last
    line, ``... error: ...``, a JSON line of level error or critical), else its last line;
    "" when none can be read."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            lines = [ln.decode("utf-8", "replace").strip() for ln in f.read().splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    for line in reversed(lines):
        if line.startswith("{"):  # a JSON log line: an error only by its level
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("level") in ("error", "critical"):
                return line[:500]
            continue
        if "error" in line.lower() or "exception" in line.lower():
            return line[:500]
    return lines[-1][:500] if lines else ""


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Collect ``proc``'s exit whenever it comes, from a daemon thread."""
    threading.Thread(target=proc.wait, name="memstream-service-reaper", daemon=True).start()


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0, *, by_stdin: bool = False, group: bool = False) -> int:
    """Stop a child process (``stop_processes`` of one); its exit code (``-SIGKILL``: it
    had to be killed)."""
    return stop_processes([proc], timeout, by_stdin=by_stdin, group=group)[0]


def stop_processes(
    procs: Sequence[subprocess.Popen[Any]], timeout: float = 10.0, *, by_stdin: bool = False, group: bool = False
) -> list[int]:
    """Stop child processes, all at once: ask each to stop (SIGTERM; with ``by_stdin``,
    close its stdin: a child that stops at the end of its input; with ``group``, SIGTERM
    to its process group, its own children included), up to ``timeout`` s for them all to
    exit, then SIGKILL (to the group with ``group``); each reaped and its stdin pipe closed.
    Their exit codes, in order (``-SIGKILL``: it had to be killed)."""
    for proc in procs:
        if by_stdin:
            _close_stdin(proc)
        elif proc.poll() is None:
            _signal(proc, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    codes = []
    for proc in procs:
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL, group)
            code = proc.wait()
        _close_stdin(proc)
        codes.append(code)
    return codes


def _signal(proc: subprocess.Popen[Any], sig: signal.Signals, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def _close_stdin(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(OSError):  # a child gone with its end of the pipe: what is left to flush is dropped
        if proc.stdin is not None:
            proc.stdin.close()
