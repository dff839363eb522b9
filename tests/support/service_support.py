"""Helpers of the tests that run memstream as a user does: the command line in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def isolate(env: pytest.MonkeyPatch, root: Path) -> None:
    """What every test runs with (tests/conftest.py's autouse ``_isolated_env``): a memstream
    home and a Hermes home (one that does not exist) under ``root``, no service started by
    surprise, metrics on a port the kernel chose, no Redis URL or tenant from outside."""
    env.setenv("MEMSTREAM_HOME", str(root / "ms-home"))
    env.setenv("MEMSTREAM_AUTOSTART", "0")
    env.setenv("MEMSTREAM_METRICS_ADDR", "127.0.0.1:0")
    env.delenv("MEMSTREAM_REDIS_URL", raising=False)
    env.delenv("MEMSTREAM_TENANT", raising=False)
    env.setenv("HERMES_HOME", str(root / "no-hermes-home"))


@contextmanager
def isolated(root: Path) -> Iterator[None]:
    """``isolate`` for a module-scoped fixture (a service the module's tests share), which is
    set up before the autouse per-test fixture."""
    with pytest.MonkeyPatch.context() as env:
        isolate(env, root)
        yield


def ms(home, *args, check=True, env=None, timeout=60):
    """``memstream ARGS`` with ``home`` as MEMSTREAM_HOME and the hash embedder; the finished process."""
    full_env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash", **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "memstream", *args], env=full_env, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"memstream {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc
