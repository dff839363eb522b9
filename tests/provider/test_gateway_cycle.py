"""Hermes's gateway builds a new agent, hence a new provider (``initialize`` ... ``shutdown``),
for every message. A thousand such cycles in one process leave no thread, file descriptor
or connection behind, and every turn reaches the log, though ``shutdown`` waits for
nothing (the shipper finishes in the background)."""

from __future__ import annotations

import os
import sys
import threading
import traceback

import pytest
import redis
from writepath import logged_events, wait_for

from memstream.core.settings import Settings
from memstream.producers import TurnRecorded
from memstream.producers.stream import EventLog
from memstream.provider.provider import MemstreamProvider

CYCLES = 1000


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def _stacks(threads: set[threading.Thread]) -> str:
    frames = sys._current_frames()
    return "\n".join(f"{t.name}:\n" + "".join(traceback.format_stack(frames[t.ident])) for t in threads if t.ident in frames)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _connections(client: redis.Redis) -> int:
    return len(client.client_list()) - 1  # not the counting client itself


@pytest.mark.valkey
def test_a_thousand_gateway_cycles_leave_nothing_behind_and_lose_no_turn(valkey_server, tmp_path):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), redis_url=valkey_server.url, autostart=False)
    threads, fds, connections = _threads(), _fds(), _connections(client)
    for i in range(CYCLES):
        p = MemstreamProvider(settings)
        p.initialize(f"sess-{i}", platform="telegram", gateway_session_key=f"agent:main:telegram:dm:{i % 7}")
        assert p.initialized, p.stats()
        message = f"message {i}"
        transcript = [{"role": "user", "content": message}, {"role": "assistant", "content": f"answer {i}"}]
        p.on_turn_start(1, message)
        p.sync_turn(message, f"answer {i}", session_id=f"sess-{i}", messages=transcript)
        p.on_session_end(transcript)
        p.shutdown()
        assert p.stats().get("hook_errors", 0) == 0, p.stats()
    log = EventLog(client, settings.stream_prefix, settings.shards)

    def turns() -> int:
        return sum(1 for e in logged_events(log) if isinstance(e, TurnRecorded))

    wait_for(lambda: turns() == CYCLES, timeout=60, what="every turn in the log")
    # threads of earlier tests may end meanwhile: only the ones started here must be gone
    try:
        wait_for(lambda: not _threads() - threads, timeout=30, what="no thread left")
    except AssertionError:
        raise AssertionError(f"threads left: {_stacks(_threads() - threads)}") from None
    wait_for(lambda: _fds() <= fds, timeout=30, what="no file descriptor left")
    wait_for(lambda: _connections(client) <= connections, timeout=30, what="no connection left")
    assert sorted(e.scope.session_id for e in logged_events(log) if isinstance(e, TurnRecorded)) == sorted(
        f"sess-{i}" for i in range(CYCLES)
    )
    assert list(settings.spool_dir.glob("*.seg")) == []  # everything shipped, the segments removed
    client.close()
