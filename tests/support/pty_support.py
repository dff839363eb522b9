"""Run a long-lived ``memstream`` command as a person does on a terminal (stdin, stdout and
stderr on a pseudo-terminal) or as a program does (stdout and stderr to a file), until it
says something; then Ctrl-C it (SIGINT to its process group) and return all it printed."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_until(
    args: list[str], env: dict[str, str], until: str, *, tty: bool, log: Path | None = None, timeout: float = 60.0
) -> tuple[int, str]:
    """``python -m memstream ARGS`` until ``until`` appears in its output, then Ctrl-C: its
    exit code and its output (on a terminal: stdout and stderr as the terminal shows them,
    line ends as ``\\n``; else both streams through the file ``log``)."""
    command = [sys.executable, "-m", "memstream", *args]
    if tty:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(command, env=env, stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
        os.close(follower)
        read = _pty_reader(leader)
    else:
        assert log is not None
        with open(log, "w") as out:
            proc = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        leader = -1

        def read() -> str:
            return log.read_text()

    try:
        deadline = time.monotonic() + timeout
        text = read()
        while until not in text and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            text = read()
        assert until in text, f"{until!r} not printed: {text[-3000:]}"
        os.killpg(proc.pid, signal.SIGINT)
        # read on while it ends: a terminal holds only a few kB, and a command whose last frames
        # nobody reads blocks in its write and never exits
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            text = read()
            time.sleep(0.05)
        code = proc.wait(max(0.0, deadline - time.monotonic()))
        text = read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if leader >= 0:
            os.close(leader)
    return code, text.replace("\r\n", "\n")


def _pty_reader(fd: int):
    """A function returning everything read from the terminal ``fd`` so far."""
    chunks: list[bytes] = []

    def read() -> str:
        while select.select([fd], [], [], 0.05)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode("utf-8", "replace")

    return read
