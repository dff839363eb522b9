"""Helpers of the tests that run memstream as a user does: the command line in a child process."""

from __future__ import annotations

import os
import subprocess
import sys


def ms(home, *args, check=True, env=None, timeout=60):
    """``memstream ARGS`` with ``home`` as MEMSTREAM_HOME and the hash embedder; the finished process."""
    full_env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash", **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "memstream", *args], env=full_env, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"memstream {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc
