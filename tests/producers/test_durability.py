"""Durability end to end: the log server stops mid-stream, the agent process is SIGKILLed
right after its hooks returned; every event still arrives exactly once, in order per agent."""

from __future__ import annotations

import signal
import threading
from collections import defaultdict

import pytest
import redis
from writepath import logged_contents, logged_events, start_child, wait_for

from memstream.core.settings import Settings
from memstream.producers import writer as writer_module
from memstream.producers.stream import EventLog
from memstream.producers.writer import Writer
from memstream.provider.provider import MemstreamProvider
from memstream.service.valkey import ValkeyProcess, free_port


@pytest.fixture
def own_valkey(tmp_path):
    """A Valkey of this test alone (it gets stopped and restarted): AOF, appendfsync always."""
    proc = ValkeyProcess(tmp_path / "valkey", appendfsync="always").start()
    holder = {"proc": proc}
    yield holder
    if holder["proc"] is not None:
        holder["proc"].stop()


@pytest.mark.valkey
def test_events_appended_while_valkey_stops_and_restarts_arrive_once_in_order_per_agent(own_valkey, monkeypatch):
    proc = own_valkey["proc"]
    port, data_dir = proc.port, proc.data_dir
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", proc.url)
    monkeypatch.setenv("MEMSTREAM_SHARDS", "2")
    monkeypatch.setenv("MEMSTREAM_SPOOL_FSYNC", "always")
    providers = [MemstreamProvider() for _ in range(3)]
    for i, p in enumerate(providers):  # a gateway: several agents in one process, one writer
        p.initialize(f"sess-{i}", platform="gateway", gateway_session_key=f"agent:{i}")
    writer = providers[0].writer
    assert all(p.writer is writer for p in providers)

    emitted: list[tuple[str, str]] = []  # (agent, event id) in hook order
    real_emit = writer.emit

    def recording_emit(event):
        ok = real_emit(event)
        if ok:
            emitted.append((event.scope.agent, event.id))
        return ok

    monkeypatch.setattr(writer, "emit", recording_emit)
    stop = threading.Event()
    errors: list[BaseException] = []

    def agent_loop():
        try:
            n = 0
            while not stop.is_set():
                for p in providers:
                    p.on_memory_write("add", "memory", f"fact {n}", {"tool_call_id": f"c{n}"})
                n += 1
                stop.wait(0.001)  # pacing of a busy gateway, not a wait for work
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    client = redis.Redis.from_url(proc.url)
    log = EventLog(client, "memstream", shards=2)
    thread = threading.Thread(target=agent_loop, name="agents")
    thread.start()
    try:
        wait_for(lambda: sum(i["length"] for i in log.stream_info()) >= 30, what="first events shipped")
        proc.stop()  # mid-stream
        failures = writer.shipper.failures
        wait_for(lambda: writer.shipper.failures >= failures + 2, what="shipper retrying while down")
        spooled_while_down = len(emitted)
        wait_for(lambda: len(emitted) >= spooled_while_down + 30, what="hooks still appending while down")
        own_valkey["proc"] = proc = ValkeyProcess(data_dir, port=port, appendfsync="always").start()
        client = redis.Redis.from_url(proc.url)
        log = EventLog(client, "memstream", shards=2)
        wait_for(
            lambda: sum(i["length"] for i in log.stream_info()) >= spooled_while_down + 30,
            what="shipping resumed after the restart",
        )
    finally:
        stop.set()
        thread.join(10)
    assert not errors and not thread.is_alive()
    assert writer.flush(15)
    stats = providers[0].stats()
    for p in providers:
        p.shutdown()
    wait_for(lambda: writer._closed, what="the writer closed in the background after the last shutdown")

    logged = [(e.scope.agent, e.id) for e in logged_events(log)]
    assert len(logged) == len(set(logged)) == len(emitted)  # exactly once
    per_agent_logged, per_agent_emitted = defaultdict(list), defaultdict(list)
    for agent, event_id in logged:
        per_agent_logged[agent].append(event_id)
    for agent, event_id in emitted:
        per_agent_emitted[agent].append(event_id)
    assert per_agent_logged == per_agent_emitted  # and in hook order, per agent
    assert set(per_agent_logged) == {"agent:0", "agent:1", "agent:2"}
    assert stats.get("hook_errors", 0) == 0 and stats.get("refused", 0) == 0
    assert stats["failures"] >= 2
    client.close()


def _run_hooks_then_sigkill(n: int, redis_url: str) -> None:
    proc, _ = start_child("provider", str(n), env={"MEMSTREAM_REDIS_URL": redis_url}, expect="HOOKS-RETURNED")
    proc.send_signal(signal.SIGKILL)  # right after the line: no shutdown, no atexit
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.stdout.close()
    proc.stderr.close()


def test_hooks_that_returned_before_a_sigkill_with_the_log_down_are_shipped_by_the_next_process(
    redis_client, settings, event_log
):
    n = 300
    _run_hooks_then_sigkill(n, f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    assert list(settings.spool_dir.glob("*.seg"))

    nxt = Writer(settings, locator=lambda: event_log)  # the next process, the log reachable
    nxt.shipper.start()
    try:
        wait_for(lambda: len(logged_contents(event_log)) >= n, what="the dead process's events shipped")
        assert nxt.flush(10)
    finally:
        nxt.close(timeout=2)
    events = logged_events(event_log)
    assert [e.content for e in events] == [f"hook/{i}" for i in range(n)]
    assert {(e.scope.agent, e.scope.session_id) for e in events} == {("child-agent", "sess-child")}
    assert list(settings.spool_dir.glob("*.seg")) == []


@pytest.mark.valkey
def test_a_sigkill_while_shipping_to_a_live_log_loses_and_duplicates_nothing(valkey_server, settings):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, settings.stream_prefix)
    n = 2000
    _run_hooks_then_sigkill(n, valkey_server.url)  # the child ships some of it before it dies

    # the next process is a provider on the same home with the log reachable
    env_settings = Settings.load(redis_url=valkey_server.url)
    assert env_settings.spool_dir == settings.spool_dir
    p = MemstreamProvider(env_settings)
    p.initialize("sess-next", platform="cli")
    try:
        wait_for(lambda: len(logged_contents(log)) >= n, what="the rest shipped by the next process")
        assert p.writer.flush(10)
    finally:
        p.shutdown()
        for w in list(writer_module._registry.values()):
            w.close(timeout=0.5)
    assert logged_contents(log) == [f"hook/{i}" for i in range(n)]
    client.close()
