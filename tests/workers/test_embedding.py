"""The dense stage's loop: it reads a version's backlog through its group, sets the vectors,
deletes what it applied, survives a crash between the stages, never drops work for a
transient failure, and a version is caught up only once its dense vectors are set too."""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from metrics_support import Recorder, observing
from pipeline_support import forgotten, make_pipeline, points, remembered, running, turn, wait_for

from memstream.core import keys
from memstream.projections import Catalog, EmbedderUnavailable, Filter, TurnsProjection, point_id, sparse_vector
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.registry import drop_version, registered
from memstream.projections.stores.qdrant import QdrantStore
from memstream.workers import DeadLetters, caught_up, embed_waiting
from memstream.workers.embedding import EMBED_GROUP, EMBED_TUNING, EmbedConsumer


@pytest.fixture
def deferred(monkeypatch):
    """Every vector projection made from here on defers its dense vectors (as with a model)."""
    monkeypatch.setattr("memstream.projections.vector.embeds_inline", lambda embedder: False)


def _turns(event_log, store=None) -> TurnsProjection:
    return TurnsProjection(store or QdrantStore(), get_embedder("hash"), event_log.client, event_log.prefix, inline=False)


def _apply(projection, *events):
    from memstream.projections.base import Delivery

    projection.apply([Delivery(stream="s", entry_id=f"{i + 1}-0", fields={}, event=e) for i, e in enumerate(events)])


def _dense_ids(projection) -> set[str]:
    ids = [p.id for p in points(projection.store, projection.collection, "t1")]
    return {p.id for p in projection.store.retrieve(projection.collection, ids, with_vectors=True) if p.dense is not None}


def test_the_dense_stage_sets_every_vector_and_deletes_what_it_applied(event_log):
    turns = _turns(event_log)
    events = [turn(f"Build {i} used compiler flag O{i}", index=i) for i in range(5)]
    _apply(turns, *events)
    waiting = embed_waiting(event_log.client, event_log.prefix, "turns.v1")
    assert waiting.entries == 5 and waiting.exists and waiting.since is not None
    assert waiting.since <= time.time() + 1
    stage = EmbedConsumer(event_log.client, turns, "w1", tuning=replace(EMBED_TUNING, batch=2))
    assert stage.drain() == 5
    assert stage.stats.embedded == 5 and stage.stats.batches == 3
    assert _dense_ids(turns) == {point_id(e.id, 0) for e in events}
    assert event_log.client.xlen(turns.backlog) == 0
    assert embed_waiting(event_log.client, event_log.prefix, "turns.v1").entries == 0
    assert embed_waiting(event_log.client, event_log.prefix, "memories.v1").exists is False


def test_entries_a_crashed_worker_held_are_reclaimed_and_applied_by_another(event_log):
    turns = _turns(event_log)
    _apply(turns, turn("The deploy key rotates every Monday"))
    crashed = EmbedConsumer(event_log.client, turns, "w1")
    crashed.ensure_group()
    assert len(crashed._read(">", block=False)) == 1  # read, then the process died: pending on w1
    other = EmbedConsumer(event_log.client, turns, "w2", tuning=replace(EMBED_TUNING, claim_idle_ms=0))
    assert other.step(block=False) == 1
    assert other.stats.reclaimed == 1 and len(_dense_ids(turns)) == 1
    assert event_log.client.xpending(turns.backlog, EMBED_GROUP)["pending"] == 0


class _Failing:
    """The hash embedder, failing with ``failure[0]`` (when set) on every call that holds a
    text containing ``poison`` (every call when ``poison`` is empty)."""

    def __init__(self, real, poison: str = "") -> None:
        self.real, self.poison = real, poison
        self.name, self.dim, self.max_tokens = real.name, real.dim, real.max_tokens
        self.failure: list[Exception | None] = [None]

    def embed(self, texts):
        if self.failure[0] is not None and any(self.poison in t for t in texts):
            raise self.failure[0]
        return self.real.embed(texts)


def test_a_transient_failure_keeps_the_entries_and_a_lasting_one_dead_letters_them_after_max_deliveries(
    event_log,
):
    turns = _turns(event_log)
    event = turn("The staging database runs Postgres 15")
    _apply(turns, event)
    failing = turns.embedder = _Failing(turns.embedder)
    failing.failure[0] = EmbedderUnavailable("model server down")
    stage = EmbedConsumer(
        event_log.client,
        turns,
        "w1",
        tuning=replace(EMBED_TUNING, max_deliveries=3, backoff_base=0.001, backoff_cap=0.001, transient_cap=0.001),
    )
    with running(stage):
        wait_for(lambda: stage.stats.transient_failures >= 5, 60, "transient failures")
    assert stage.stats.dead_lettered == 0 and event_log.client.xlen(turns.backlog) == 1
    failing.failure[0] = RuntimeError("the model cannot be loaded")
    with observing(Recorder()) as seen, running(stage):
        wait_for(lambda: stage.stats.dead_lettered == 1, 60, "the entry dead-lettered after its deliveries")
    assert seen.embed_dead == [("turns.v1", 1)]
    assert event_log.client.xlen(turns.backlog) == 0  # nothing waits: it is in the dead letters
    assert embed_waiting(event_log.client, event_log.prefix, "turns.v1").entries == 0
    assert stage.stats.errors >= 2
    hits = turns.store.search(turns.collection, sparse=sparse_vector("Postgres"), filter=Filter("t1"), limit=5)
    assert len(hits) == 1  # still findable by its keywords
    dlq = DeadLetters(event_log.client, event_log.prefix)
    (dead,) = dlq.list(group="turns.v1")
    assert dead["stream"] == turns.backlog and dead["stage"] == "dense" and dead["id"] == point_id(event.id, 0)
    assert dead["deliveries"] == "3" and "cannot be loaded" in dead["error"]
    assert dlq.count_by("stream") == {turns.backlog: 1}
    # the model is back: a retry re-embeds it, and the point is found by meaning too
    failing.failure[0] = None
    assert dlq.retry(dead["dlq_id"]) and dlq.count() == 0
    assert stage.drain() == 1 and stage.stats.embedded == 1
    assert _dense_ids(turns) == {point_id(event.id, 0)}
    assert event_log.client.xlen(turns.backlog) == 0


def test_an_entry_that_fails_alone_is_dead_lettered_and_the_rest_of_its_batch_applied(event_log):
    turns = _turns(event_log)
    events = [turn(f"Release {i} ships on Tuesday", index=i) for i in range(3)]
    poison = turn("A poison text the model chokes on", index=3)
    _apply(turns, events[0], poison, *events[1:])
    failing = turns.embedder = _Failing(turns.embedder, poison="poison")
    failing.failure[0] = ValueError("input the model refuses")
    stage = EmbedConsumer(
        event_log.client, turns, "w1", tuning=replace(EMBED_TUNING, max_deliveries=2, backoff_base=0.001, backoff_cap=0.001)
    )
    with running(stage):
        wait_for(lambda: stage.stats.dead_lettered == 1, 60, "the poison entry dead-lettered")
        wait_for(lambda: event_log.client.xlen(turns.backlog) == 0, 60, "the backlog emptied")
    assert stage.stats.embedded == 3
    assert _dense_ids(turns) == {point_id(e.id, 0) for e in events}
    (dead,) = DeadLetters(event_log.client, event_log.prefix).list()
    assert dead["id"] == point_id(poison.id, 0) and dead["group"] == "turns.v1"
    assert event_log.client.xpending(turns.backlog, EMBED_GROUP)["pending"] == 0


def test_a_malformed_backlog_entry_is_dead_lettered_and_the_others_applied(event_log):
    turns = _turns(event_log)
    event_log.client.xadd(turns.backlog, {"id": "not-a-point", "text": "x"})
    _apply(turns, turn("Lunch is at noon on Fridays"))
    stage = EmbedConsumer(event_log.client, turns, "w1")
    assert stage.drain() == 2
    assert stage.stats.dead_lettered == 1 and stage.stats.embedded == 1
    assert event_log.client.xlen(turns.backlog) == 0
    (dead,) = DeadLetters(event_log.client, event_log.prefix).list()
    assert dead["id"] == "not-a-point" and "malformed" in dead["error"] and dead["stream"] == turns.backlog


def test_a_pipeline_on_a_model_finds_by_keywords_at_once_and_by_meaning_once_the_stage_ran(deferred, tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        turns = pipeline.projection("turns")
        assert not turns.inline and pipeline.embedders
        event = turn("The billing deployment failed twice this morning")
        event_log.append([event, remembered("Ana prefers green tea")])
        pipeline.runs["turns.v1"].consumer.drain()
        hits = pipeline.searcher.search("billing deployment", tenant="t1", agent="a1", k=3, kinds=("turns",))
        assert [h["id"] for h in hits] == [event.id]  # by its keywords alone
        assert not caught_up(event_log.client, event_log.stream_keys, "turns.v1", turns.backlog)
        assert caught_up(event_log.client, event_log.stream_keys, "turns.v1")
        pipeline.drain()
        assert caught_up(event_log.client, event_log.stream_keys, "turns.v1", turns.backlog)
        assert len(_dense_ids(turns)) == 1
        memories = pipeline.projection("memories")
        assert event_log.client.xlen(memories.backlog) == 0
        ids = [p.id for p in points(memories.store, memories.collection, "t1")]
        assert all(p.dense is not None for p in memories.store.retrieve(memories.collection, ids, with_vectors=True))
        assert pipeline.health()["turns.v1:embed"]["embedded"] == 1
    finally:
        pipeline.stop()


def test_a_started_pipeline_gives_vectors_in_the_background_and_a_forget_between_stays_forgotten(deferred, tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log, claim_idle_ms=1000)
    turns = pipeline.projection("turns")
    kept, gone = turn("Our deploys go out on Tuesdays", index=0), turn("The VPN password is in the vault", index=1)
    consumer = pipeline.runs["turns.v1"].consumer
    event_log.append([kept, gone])
    consumer.drain()
    event_log.append([forgotten(gone.id)])
    consumer.drain()  # the forget, applied before any vector was made
    assert event_log.client.xlen(turns.backlog) == 2
    pipeline.start()
    try:
        wait_for(lambda: event_log.client.xlen(turns.backlog) == 0, 20, "the dense stage to empty the backlog")
        assert _dense_ids(turns) == {turns.point_of("t1", kept.id)}  # a new log's version: ids carry the tenant
        assert not turns.store.retrieve(turns.collection, [turns.point_of("t1", gone.id)])
    finally:
        pipeline.stop()


def test_a_build_on_a_model_is_activated_only_once_its_dense_vectors_are_set(deferred, tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        event_log.append([turn(f"Release {i} shipped on a Tuesday", index=i) for i in range(4)])
        pipeline.drain()
        catalog = Catalog(event_log.client, event_log.prefix)
        catalog.add_build("turns")
        pipeline.sync_catalog()
        build = pipeline.runs["turns.v2"]
        pipeline._backfill(build)
        build.consumer.drain()
        pipeline.sync_catalog()
        assert catalog.active("turns").version == 1  # its keywords are in, its vectors are not
        build.embedding.drain()
        pipeline.sync_catalog()
        assert catalog.active("turns").version == 2
        assert len(_dense_ids(build.projection)) == 4
    finally:
        pipeline.stop()


def test_dropping_a_version_deletes_its_backlog(event_log):
    turns = _turns(event_log)
    _apply(turns, turn("The office moves in March"))
    assert event_log.client.exists(turns.backlog)
    drop_version(registered("turns"), None, event_log.client, event_log.prefix, 1, event_log.stream_keys)
    assert not event_log.client.exists(keys.embed_backlog(event_log.prefix, "turns.v1"))


def test_the_dense_vector_set_later_is_the_one_written_at_once_with_the_same_embedder(event_log):
    store = QdrantStore()
    later = _turns(event_log, store)
    now = TurnsProjection(store, get_embedder("hash"), event_log.client, event_log.prefix, version=2)
    event = turn("The cache lives on the second disk")
    _apply(later, event)
    _apply(now, event)
    EmbedConsumer(event_log.client, later, "w1").drain()
    pid = point_id(event.id, 0)
    (a,) = store.retrieve(later.collection, [pid], with_vectors=True)
    (b,) = store.retrieve(now.collection, [pid], with_vectors=True)
    assert np.allclose(a.dense, b.dense) and a.payload == b.payload


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_the_dense_stage_runs_on_a_thread_of_lower_priority_than_the_process(event_log):
    """Its model calls yield the CPU to the recalls': the stage's thread is ``NICE`` levels
    below the thread that started it, and the rest of the process is left as it was."""
    stage = EmbedConsumer(event_log.client, _turns(event_log), "w1")
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    stop = threading.Event()
    thread = threading.Thread(target=stage.run, args=(stop,), name="dense-stage-under-test")
    thread.start()
    try:
        wait_for(lambda: thread.native_id is not None, what="the stage's thread to start")
        assert thread.native_id is not None
        tid = thread.native_id
        wait_for(
            lambda: os.getpriority(os.PRIO_PROCESS, tid) == min(19, mine + EmbedConsumer.NICE),
            what="the stage's thread to lower its priority",
        )
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # this thread unchanged
