"""A child process for the crash tests: it spools events, says so, then exits or waits.

python tests/child_writer.py spool DIR N exit|wait
    append N events (contents "child/0" … "child/N-1") to a Spool in DIR, print
    "WRITTEN", then leave without closing anything (exit) or wait to be killed (wait).

python tests/child_writer.py provider N
    build a MemstreamProvider from the environment (MEMSTREAM_HOME,
    MEMSTREAM_REDIS_URL, …), initialize it, call on_memory_write N times (contents
    "hook/0" …), print "HOOKS-RETURNED" and wait to be killed.
"""

from __future__ import annotations

import sys
import threading

from memstream.core.ids import new_event_id
from memstream.producers.events import MemoryRemembered, Scope, encode, utcnow
from memstream.producers.spool import Spool


def _park(mode: str) -> None:
    sys.stdout.flush()
    if mode == "wait":
        threading.Event().wait()  # until SIGKILL
    # "exit": die without closing the spool (no flush, no unlock by hand)
    import os

    os._exit(0)


def spool(directory: str, n: int, mode: str) -> None:
    s = Spool(directory)
    scope = Scope(tenant="t1", agent="child", session_id="s1")
    for i in range(n):
        ok = s.append(encode(MemoryRemembered(id=new_event_id(), occurred_at=utcnow(), scope=scope, content=f"child/{i}")))
        assert ok
    print("WRITTEN", s.segments[-1].id, flush=True)
    _park(mode)


def provider(n: int) -> None:
    from memstream.provider.provider import MemstreamProvider

    p = MemstreamProvider()
    p.initialize("sess-child", platform="cli", agent_identity="child-agent")
    assert p.initialized, "initialize failed"
    for i in range(n):
        p.on_memory_write("add", "memory", f"hook/{i}", {"session_id": "sess-child"})
    stats = p.stats()
    assert stats.get("hook_errors", 0) == 0 and stats.get("refused", 0) == 0, stats
    print("HOOKS-RETURNED", flush=True)
    _park("wait")


if __name__ == "__main__":
    if sys.argv[1] == "spool":
        spool(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "provider":
        provider(int(sys.argv[2]))
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}")
