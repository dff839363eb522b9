"""The consumer under failure: a worker killed mid-batch, workers racing on one group,
entries of a dead consumer reclaimed, poison and malformed entries dead-lettered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import redis
from pipeline_support import all_applied, memory, points, running, turn, wait_for

from memstream.core import stop_process
from memstream.producers.stream import EventLog
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.turns import TurnsProjection
from memstream.workers.consumer import Consumer
from memstream.workers.deadletters import DeadLetters
from memstream.workers.loop import Tuning
from memstream.workers.positions import is_applied

HERE = Path(__file__).parent


class Recording:
    """A projection that records what it applied; raises for the ``poison`` event ids."""

    version = 1

    def __init__(self, name: str = "flaky", poison=(), inner=None):
        self.name = name
        self.poison = set(poison)
        self.inner = inner
        self.applied: Counter[str] = Counter()
        self._lock = threading.Lock()

    def apply(self, batch):
        for d in batch:
            if d.event.id in self.poison:
                raise ValueError(f"cannot apply {d.event.id}")
        if self.inner is not None:
            self.inner.apply(batch)
        with self._lock:
            self.applied.update(d.event.id for d in batch)


def _valkey(valkey_server) -> redis.Redis:
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    return client


# -- 2. SIGKILL mid-batch ----------------------------------------------------------------------
def _worker(url: str, home: Path, mode: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(HERE.parent / "support" / "crash_worker.py"), url, str(home), mode],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.valkey
def test_a_worker_killed_mid_batch_and_restarted_projects_every_event_exactly_once(tmp_path, valkey_server):
    client = _valkey(valkey_server)
    log = EventLog(client, "memstream")
    turns = [turn(f"Host number {i} in rack {i % 7} runs the ingest service version {i}") for i in range(150)]
    adds = [memory("add", f"Rack {i} is in the north hall") for i in range(15)]
    events = [e for pair in zip(turns[:15], adds) for e in pair] + turns[15:]
    log.append(events)
    home = tmp_path / "worker-home"

    first = _worker(valkey_server.url, home, "stall")
    try:
        wait_for(lambda: client.get("test:stalled") or first.poll() is not None, 30, "the worker to stall")
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        pending = client.xpending(log.stream_keys[0], "turns.v1")
        assert pending["pending"] > 0  # the batch in hand: delivered, partly written, not acked
        first.send_signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
    finally:
        stop_process(first, 0)  # SIGKILLed already, or killed now; reaped, its pipes closed below
        first.stderr.close()

    second = _worker(valkey_server.url, home, "run")
    try:
        wait_for(lambda: all_applied(log) or second.poll() is not None, 30, "the restarted worker")
        assert second.poll() is None, second.stderr.read().decode()[-2000:]
    finally:
        code = stop_process(second, 15)
        second.stderr.close()
    assert code == 0

    store = EdgeStore(home / "data" / "qdrant")  # the dead and the stopped process let go of it
    try:
        turn_ids = [p.payload["event_id"] for p in points(store, "turns", "t1")]
        memory_ids = [p.payload["event_id"] for p in points(store, "memories", "t1")]
    finally:
        store.close()
    assert len(turn_ids) == len(set(turn_ids)) == len(turns)
    assert set(turn_ids) == {e.id for e in turns}
    assert sorted(memory_ids) == sorted(e.id for e in adds)
    client.close()


# -- 3. racing workers and reclaim ----------------------------------------------------------------
@pytest.mark.valkey
def test_two_workers_racing_on_one_group_apply_each_event_once_and_miss_none(tmp_path, valkey_server):
    client = _valkey(valkey_server)
    log = EventLog(client, "memstream")
    store = EdgeStore(tmp_path / "store")
    embedder = get_embedder("hash")
    recorders = [Recording("turns", inner=TurnsProjection(store, embedder, client, "memstream")) for _ in range(2)]
    consumers = [Consumer(log, r, f"worker-{i}", tuning=Tuning(batch=8, block_ms=100)) for i, r in enumerate(recorders)]
    for c in consumers:
        c.ensure_groups()
    events = [turn(f"Ticket {i} is about the flaky payment webhook number {i}") for i in range(240)]
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop,)) for c in consumers]
    for t in threads:
        t.start()
    try:
        for i in range(0, len(events), 12):  # fed while both consume
            log.append(events[i : i + 12])
        wait_for(lambda: all_applied(log, groups=("turns.v1",)), 30, "both workers to drain the group")
    finally:
        stop.set()
        for t in threads:
            t.join(10)

    applied = recorders[0].applied + recorders[1].applied
    assert set(applied) == {e.id for e in events}
    assert max(applied.values()) == 1  # no event applied by both, or twice
    assert sorted(p.payload["event_id"] for p in points(store, "turns", "t1")) == sorted(e.id for e in events)
    assert sum(c.stats.transient_failures for c in consumers) == 0
    store.close()
    client.close()


def test_entries_idle_on_a_dead_consumer_are_reclaimed_and_applied_once(event_log):
    events = [turn(f"Note {i}") for i in range(20)]
    event_log.append(events)
    recorder = Recording()
    live = Consumer(event_log, recorder, "live", tuning=Tuning(batch=8, claim_idle_ms=20, claim_every=0))
    live.ensure_groups()
    key = event_log.stream_keys[0]
    # a consumer that read half the log and died before acking any of it
    event_log.client.xreadgroup(live.group, "dead", {key: ">"}, count=10)

    wait_for(
        lambda: live.step(block=False) is not None and len(recorder.applied) == len(events),
        10,
        "the live consumer to reclaim the dead one's entries",
    )

    assert max(recorder.applied.values()) == 1
    assert live.stats.reclaimed == 10
    assert event_log.client.xpending(key, live.group)["pending"] == 0


def test_a_batch_whose_position_cannot_be_recorded_stays_pending_and_is_redelivered(event_log):
    """Acks commit with the position, after the apply: if recording the position fails,
    nothing of the batch is acked, and the next read applies it again (harmlessly)."""
    events = [turn(f"Line {i} of the runbook") for i in range(6)]
    event_log.append(events)
    recorder = Recording()
    consumer = Consumer(event_log, recorder, "c1", tuning=Tuning(batch=10, claim_every=3600))
    consumer.ensure_groups()
    key = event_log.stream_keys[0]
    real_record = consumer.positions.record

    def failing_record(*args, **kwargs):
        raise redis.ConnectionError("connection lost while recording the position")

    consumer.positions.record = failing_record
    with pytest.raises(redis.ConnectionError):
        consumer.step(block=False)
    assert sorted(recorder.applied) == sorted(e.id for e in events)  # applied once...
    assert event_log.client.xpending(key, consumer.group)["pending"] == len(events)  # ...not acked
    assert consumer.positions.get(consumer.group) == {}

    consumer.positions.record = real_record
    consumer._pending_done = False  # what run() does after a transient failure
    consumer.drain()
    assert all(recorder.applied[e.id] == 2 for e in events)  # redelivered and re-applied
    assert event_log.client.xpending(key, consumer.group)["pending"] == 0
    last = event_log.client.xrevrange(key, count=1)[0][0].decode()
    assert consumer.positions.get(consumer.group)[key]["position"] == last


def test_a_store_or_embedder_outage_backs_off_and_dead_letters_nothing(event_log):
    """StoreUnavailable / EmbedderUnavailable are the dependency's failure, not the
    event's: the batch stays pending, the consumer backs off, and once the store is back
    everything is applied; no delivery limit is spent on the outage."""
    from memstream.projections.embedders.port import EmbedderUnavailable
    from memstream.projections.stores.port import StoreUnavailable

    events = [turn(f"Deploy step {i}") for i in range(5)]
    event_log.append(events)
    outages = [StoreUnavailable("qdrant unreachable"), EmbedderUnavailable("ollama down"), StoreUnavailable("qdrant unreachable")]

    class Flaky(Recording):
        def apply(self, batch):
            if outages:
                raise outages.pop(0)
            super().apply(batch)

    projection = Flaky()
    consumer = Consumer(event_log, projection, "c1", tuning=Tuning(batch=10, max_deliveries=2, claim_every=3600))
    with running(consumer):
        wait_for(lambda: len(projection.applied) == len(events), 20, "the consumer to recover")
    assert consumer.stats.transient_failures == 3
    assert consumer.stats.dead_lettered == 0 and consumer.dlq.count() == 0
    assert max(projection.applied.values()) == 1
    assert event_log.client.xpending(event_log.stream_keys[0], consumer.group)["pending"] == 0


def test_any_transient_error_spends_no_delivery_not_only_the_adapters_it_knows(event_log):
    """The consumer asks ``is_transient``, which takes every ``TransientError``: a kind of
    outage no list names (here one the consumer has never heard of) backs off too."""
    from memstream.core import TransientError

    class QueueDown(TransientError):
        pass

    events = [turn(f"Deploy step {i}") for i in range(3)]
    event_log.append(events)
    outages = [QueueDown("down"), QueueDown("still down")]

    class Flaky(Recording):
        def apply(self, batch):
            if outages:
                raise outages.pop(0)
            super().apply(batch)

    projection = Flaky()
    consumer = Consumer(
        event_log,
        projection,
        "c1",
        tuning=Tuning(batch=10, max_deliveries=1, claim_every=3600, backoff_base=0.01, transient_cap=0.05),
    )
    with running(consumer):
        wait_for(lambda: len(projection.applied) == len(events), 20, "the consumer to recover")
    assert consumer.stats.transient_failures == 2
    assert consumer.stats.dead_lettered == 0 and consumer.dlq.count() == 0


def test_a_permanent_store_error_counts_deliveries_before_it_is_dead_lettered(event_log):
    """A ``PermanentError`` of a dependency (a store refusing a call) is retried up to
    ``max_deliveries`` like any other error: a store misconfigured for a moment does not
    send the whole backlog to the dead letters on its first refusal."""
    from memstream.projections.stores.port import StoreError

    events = [turn(f"Entry {i}") for i in range(3)]
    event_log.append(events)
    refusals = [StoreError("collection busy being rebuilt")]

    class Refusing(Recording):
        def apply(self, batch):
            if refusals and len(batch) == 1:
                raise refusals.pop(0)
            if len(batch) > 1:
                raise ValueError("apply one by one")
            super().apply(batch)

    projection = Refusing()
    consumer = Consumer(event_log, projection, "w1", tuning=Tuning(max_deliveries=3))

    consumer.drain()

    assert set(projection.applied) == {e.id for e in events}
    assert consumer.stats.retried == 1
    assert consumer.stats.dead_lettered == 0 and consumer.dlq.count() == 0


# -- 4. poison and malformed entries --------------------------------------------------------------
def test_a_poison_event_is_dead_lettered_after_max_deliveries_and_the_rest_flows_on(event_log):
    events = [turn(f"Entry {i}") for i in range(10)]
    poison = events[4]
    event_log.append(events)
    recorder = Recording(poison=[poison.id])
    consumer = Consumer(event_log, recorder, "w1", tuning=Tuning(max_deliveries=3))

    consumer.drain()

    assert set(recorder.applied) == {e.id for e in events} - {poison.id}
    assert max(recorder.applied.values()) == 1
    [dead] = DeadLetters(event_log.client, event_log.prefix).list()
    assert dead["group"] == "flaky.v1"
    assert dead["id"] == poison.id and dead["type"] == "turn.recorded"
    assert dead["deliveries"] == "3"
    assert f"ValueError: cannot apply {poison.id}" in dead["error"]
    assert event_log.client.xpending(event_log.stream_keys[0], consumer.group)["pending"] == 0


def test_malformed_entries_are_dead_lettered_at_once_and_the_rest_flows_on(event_log):
    before, after = turn("Before the garbage"), turn("After the garbage")
    key = event_log.stream_keys[0]
    event_log.append([before])
    bad_data = event_log.client.xadd(key, {"id": "x", "type": "turn.recorded", "data": b"\xc1\xff garbage"})
    no_type = event_log.client.xadd(key, {"garbage": "yes"})
    event_log.append([after])
    recorder = Recording()
    consumer = Consumer(event_log, recorder, "w1", tuning=Tuning(max_deliveries=5))

    consumer.drain()

    assert set(recorder.applied) == {before.id, after.id}
    dead = {d["entry_id"]: d for d in DeadLetters(event_log.client, event_log.prefix).list()}
    assert set(dead) == {bad_data.decode(), no_type.decode()}
    for d in dead.values():
        assert d["deliveries"] == "1"
        assert d["error"].startswith("malformed")
    assert consumer.stats.skipped_unknown == 0
    assert event_log.client.xpending(key, consumer.group)["pending"] == 0


def test_a_retried_dead_letter_is_reapplied_for_its_group_only_and_drop_removes_one(event_log):
    events = [turn(f"Entry {i}") for i in range(5)]
    poison = events[2]
    event_log.append(events)
    failing, healthy = Recording("alpha", poison=[poison.id]), Recording("beta")
    consumers = [Consumer(event_log, p, "w1", tuning=Tuning(max_deliveries=2)) for p in (failing, healthy)]
    for c in consumers:
        c.drain()
    dlq = DeadLetters(event_log.client, event_log.prefix)
    [dead] = dlq.list()
    assert dead["group"] == "alpha.v1"

    failing.poison.clear()  # the projection was fixed
    new_entry = dlq.retry(dead["dlq_id"])
    for c in consumers:
        c.drain()

    assert new_entry and dlq.list() == []
    assert failing.applied[poison.id] == 1
    assert healthy.applied[poison.id] == 1  # the retry was not meant for beta
    key = event_log.stream_keys[0]
    assert all(is_applied(event_log.client, key, c.group, new_entry) for c in consumers)

    event_log.client.xadd(key, {"id": "y", "type": "memory.written", "data": b"nope"})
    for c in consumers:
        c.drain()
    assert dlq.count() == 1  # malformed for every group alike: one letter, shared
    [drop] = dlq.list()
    assert drop["every_group"] == "1"
    assert dlq.drop(drop["dlq_id"]) is True
    assert dlq.list() == []
    assert dlq.drop(drop["dlq_id"]) is False
    assert dlq.retry(drop["dlq_id"]) is None
