"""Helpers shared by the write-path tests (events, connect callables, waiting)."""

from __future__ import annotations

import time
from typing import Callable

import redis

from memstream.core.ids import new_event_id
from memstream.producers.events import MemoryRemembered, Scope, utcnow
from memstream.producers.stream import EventLog


def wait_for(predicate: Callable[[], object], timeout: float = 15.0, what: str = "condition", every: float = 0.01):
    """``predicate()``'s first truthy value, asked every ``every`` s; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(every)


def remembered(content: str, tenant: str = "t1", agent: str = "a1", session: str = "s1") -> MemoryRemembered:
    """A small valid event, its content used as a label."""
    return MemoryRemembered(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant=tenant, agent=agent, session_id=session), content=content
    )


def logged_events(log: EventLog) -> list:
    """Every event in the log, oldest first (decoded)."""
    return [EventLog.decode_entry(fields) for _, _, fields in log.entries()]


def logged_contents(log: EventLog) -> list[str]:
    return [e.content for e in logged_events(log)]


class Switchable:
    """A connect callable for the shipper: raises ConnectionError while ``down``."""

    def __init__(self, log: EventLog, down: bool = False):
        self.log = log
        self.down = down
        self.calls = 0

    def __call__(self) -> EventLog:
        self.calls += 1
        if self.down:
            raise redis.ConnectionError("log is down (test)")
        return self.log


CHILD = __import__("pathlib").Path(__file__).with_name("child_writer.py")


def start_child(*args: str, env: dict | None = None, expect: str, timeout: float = 30.0):
    """Run tests/child_writer.py; return (process, the line starting with ``expect``)."""
    import os
    import select
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        if not ready:
            proc.kill()
            raise AssertionError(f"child did not print {expect!r} within {timeout}s")
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            raise AssertionError(f"child exited {proc.returncode} before {expect!r}: {proc.stderr.read()}")
        if line.startswith(expect):
            return proc, line.strip()
