"""Read replicas of the embedded store (workers/pipeline.py with ``PipelineConfig.replica``,
projections/replicas.py): a replica projects the vector projections into a store of its own
through groups of its own, and stays consistent with the primary (read-your-writes, forget,
replay activation, a restart after a kill). Real Valkey, real stores, real processes."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import redis
from metrics_support import Recorder, observing
from pipeline_support import make_pipeline, memory, remembered, texts, turn
from service_support import ms
from writepath import wait_for

from memstream import ops
from memstream.core import Settings, as_str, keys
from memstream.core.runfile import read_run_file
from memstream.producers import EventLog
from memstream.projections import Catalog, Replicas, memory_write_groups, registered, replica_group, replica_of
from memstream.query import CountRequest, RecallRequest
from memstream.service.sidecar import Sidecar
from memstream.workers import ReplicaRefused
from memstream.workers.positions import is_applied

pytestmark = pytest.mark.valkey

MEMORIES_R1 = "memories.v1~r1"
TURNS_R1 = "turns.v1~r1"


@pytest.fixture
def log(valkey_server, tmp_path):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), redis_url=valkey_server.url, autostart=False, embedder="hash")
    yield EventLog(client, settings.stream_prefix, settings.shards)
    client.close()


def _groups(eventlog: EventLog) -> set[str]:
    return {as_str(g["name"]) for s in eventlog.stream_keys for g in eventlog.client.xinfo_groups(s)}


def _recall(pipeline, query: str) -> list[str]:
    answer = pipeline.reads.handlers().recall(RecallRequest(tenant="t1", agent="a1", session="s1", query=query, k=5))
    return [item["text"] for item in answer.items]


def test_replica_groups_are_named_from_the_versions_group_and_read_back():
    assert replica_group("turns.v1", 2) == "turns.v1~r2"
    assert replica_group("turns.v1", 0) == "turns.v1"  # the primary's
    assert replica_of("turns.v1~r2") == ("turns.v1", 2)
    assert [replica_of(g) for g in ("turns.v1", "turns.v1~r", "turns.v1~r0", "turns.v1~rx", "~r1")] == [None] * 5
    with pytest.raises(ValueError, match="0 or more"):
        replica_group("turns.v1", -1)
    with pytest.raises(ValueError, match="vector projections only"):
        registered("facts").build(None, None, None, "p", replica=1)


def test_a_replica_projects_into_its_own_store_through_its_own_groups_and_answers(tmp_path, log):
    primary = make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=1)  # the same home: its own store path
    assert [r.name for r in replica.rows] == ["turns", "memories"]
    log.append([turn("I moved to Lisbon last spring", index=0), remembered("Deploys go out on Tuesdays")])
    replica.drain()
    assert {MEMORIES_R1, TURNS_R1} <= _groups(log)
    assert texts(replica.store, "memories_v1", "t1") == {"Deploys go out on Tuesdays"}
    assert texts(primary.store, "memories_v1", "t1") == set()  # the primary's groups have read nothing yet
    assert Path(tmp_path / "home" / "data" / "qdrant-replica-1").is_dir()
    assert "Deploys go out on Tuesdays" in _recall(replica, "when do deploys go out")
    counted = replica._count(CountRequest()).items  # `memstream stats` items, by the version: whoever answers
    assert set(counted) == {"turns.v1", "memories.v1"} and counted["memories.v1"] == 1
    # its records are its own group's; the catalog is the primary's alone
    assert log.client.exists(keys.positions(log.prefix, MEMORIES_R1))
    assert not log.client.exists(keys.positions(log.prefix, "memories.v1"))
    assert [v.version for v in Catalog(log.client, log.prefix).versions("memories")] == [1]


def test_a_replica_before_any_primary_runs_nothing_and_writes_no_catalog(tmp_path, log):
    replica = make_pipeline(tmp_path / "home", log, replica=1)
    assert replica.runs == {}
    assert Catalog(log.client, log.prefix).names() == []
    make_pipeline(tmp_path / "home2", log)  # the primary records the versions
    replica.sync_catalog()
    assert set(replica.runs) == {TURNS_R1, MEMORIES_R1}


def test_a_replica_refuses_a_qdrant_server_and_copies_nothing_new_of_a_log_with_an_archive(tmp_path, log, monkeypatch):
    with pytest.raises(ReplicaRefused, match="Qdrant server"):
        make_pipeline(tmp_path / "home", log, replica=1, qdrant_url="http://127.0.0.1:1")
    make_pipeline(tmp_path / "home", log)
    from memstream.workers.pipeline import Pipeline

    ran = make_pipeline(tmp_path / "home", log, replica=1)  # before the log had an archive
    ran.drain()
    ran._beat()
    ran.stop()
    monkeypatch.setattr(Pipeline, "_archived", lambda self: True)
    with pytest.raises(ReplicaRefused, match="archive"):
        make_pipeline(tmp_path / "home", log, replica=2)  # a new one would miss what was archived
    # the one that ran before resumes its groups (the archiver trims only what they applied) ...
    resumed = make_pipeline(tmp_path / "home", log, replica=1)
    assert set(resumed.runs) == {TURNS_R1, MEMORIES_R1}
    # ... but copies no version it has not run: a build would need the archive
    Catalog(log.client, log.prefix).add_build("memories", options=registered("memories").new_options)
    resumed.sync_catalog()
    assert set(resumed.runs) == {TURNS_R1, MEMORIES_R1}


def test_a_replicas_dense_stage_reads_its_own_backlog_and_the_shared_embedding_cache(tmp_path, log, monkeypatch):
    from memstream.projections import get_embedder

    def model(settings, spec):  # the hash embedder, costed as a model: deferred to the dense stage, cached
        embedder = get_embedder("hash")
        embedder.worth_caching = True
        return embedder

    monkeypatch.setattr("memstream.projections.configured_embedder", model)  # what the pipeline loads its embedders with
    primary = make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=1)
    log.append([remembered("Deploys go out on Tuesdays")])
    primary.drain()  # its dense stage embeds the text once, into data/embeddings.sqlite3
    replica.runs[MEMORIES_R1].consumer.drain()  # the keyword stage only: the dense work waits in its own backlog
    assert log.client.xlen(keys.embed_backlog(log.prefix, MEMORIES_R1)) == 1
    assert log.client.xlen(keys.embed_backlog(log.prefix, "memories.v1")) == 0
    replica.drain()
    assert log.client.xlen(keys.embed_backlog(log.prefix, MEMORIES_R1)) == 0
    [point] = replica.store.retrieve("memories_v1", [p.id for p in _points(replica)], with_vectors=True)
    assert point.dense is not None
    cached = replica._embedders["hash"]
    assert cached.stats()["misses"] == 0 and cached.stats()["disk_hits"] >= 1  # computed once, by the primary


def _points(pipeline):
    from pipeline_support import points

    return points(pipeline.store, "memories_v1", "t1")


def test_add_sync_waits_for_every_live_replicas_group(tmp_path, log):
    primary = make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=1)
    replica._beat()  # what its supervisor does every BEAT_EVERY_S once started
    assert memory_write_groups(log.client, log.prefix) == ("memories.v1", "facts.v1", MEMORIES_R1)
    event = memory("add", "The standup moved to 9:30")
    entry = log.append([event])[0]
    primary.drain()
    assert ops.wait_projected(log, event, entry, 0.2).startswith("logged (not yet projected")  # the replica lags
    replica.drain()
    assert ops.wait_projected(log, event, entry, 5.0) == "searchable"
    assert "The standup moved to 9:30" in _recall(replica, "when is the standup")
    # a replica whose beat has gone (stopped for good) is waited for no more
    log.client.delete(keys.replica_beat(log.prefix, 1))
    assert memory_write_groups(log.client, log.prefix) == ("memories.v1", "facts.v1")


def test_forget_waits_for_the_replicas_group_and_the_replica_drops_the_points(tmp_path, log, monkeypatch):
    settings = Settings.load(home=str(tmp_path / "home"), autostart=False)
    monkeypatch.setattr(sys.modules["memstream.ops.forget"], "connect", lambda settings: log)
    primary = make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=1)
    doomed = remembered("The vault code is 4417")
    log.append([doomed, remembered("Prefers green tea")])
    primary.drain()
    replica.drain()
    assert "The vault code is 4417" in texts(replica.store, "memories_v1", "t1")
    # the replica is down: forget says its group has not applied the tombstone
    first = ops.forget(settings, ops.Selector(events=(doomed.id,)), wait=0.5, rewrite_aof=False)
    assert first["projections"]["applied"] is False
    assert MEMORIES_R1 in first["projections"]["waiting"] and "memories.v1" in first["projections"]["waiting"]
    primary.start()
    replica.start()
    second = ops.forget(settings, ops.Selector(events=(doomed.id,)), wait=30.0, rewrite_aof=False)
    assert second["projections"] == {"applied": True, "waiting": []}
    assert texts(replica.store, "memories_v1", "t1") == {"Prefers green tea"}
    assert "The vault code is 4417" not in _recall(replica, "what is the vault code")


def test_a_replica_switches_to_a_new_active_version_only_once_its_own_group_caught_up(tmp_path, log):
    primary = make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=1)
    log.append([remembered("Deploys go out on Tuesdays")])
    primary.drain()
    replica.drain()
    assert replica.versions.collection("memories") == "memories_v1"
    catalog = Catalog(log.client, log.prefix)
    catalog.add_build("memories", options=registered("memories").new_options)
    primary.sync_catalog()
    primary.drain()  # the primary's build caught up: it activated v2
    assert catalog.active("memories").version == 2
    replica.sync_catalog()  # the replica runs v2 too, but its own group of it has read nothing
    assert "memories.v2~r1" in replica.runs
    replica.versions.refresh()
    assert replica.versions.collection("memories") == "memories_v1"
    replica._beat()
    assert memory_write_groups(log.client, log.prefix) == ("memories.v2", "facts.v1", MEMORIES_R1)
    assert "Deploys go out on Tuesdays" in _recall(replica, "when do deploys go out")  # answered from v1
    replica.drain()
    replica.versions.refresh()
    assert replica.versions.collection("memories") == "memories_v2"
    replica._beat()
    assert memory_write_groups(log.client, log.prefix) == ("memories.v2", "facts.v1", "memories.v2~r1")
    assert replica.store.active_version("memories") == 2  # kept across a restart
    assert "Deploys go out on Tuesdays" in _recall(replica, "when do deploys go out")
    # a version dropped in the catalog goes from the replica's store and the log's groups
    catalog.drop("memories", 1)
    primary.sync_catalog()
    replica.sync_catalog()
    assert MEMORIES_R1 not in replica.runs and MEMORIES_R1 not in _groups(log)
    assert 1 not in replica.store.versions("memories")
    assert MEMORIES_R1 not in Replicas(log.client, log.prefix).of_version("memories.v1")


def test_replicas_gone_for_good_are_retired_with_their_groups(tmp_path, log):
    make_pipeline(tmp_path / "home", log)
    replica = make_pipeline(tmp_path / "home", log, replica=2)
    replica.drain()
    replica._beat()
    registry = Replicas(log.client, log.prefix)
    assert registry.retire(1, log.stream_keys) == []  # still beating
    log.client.delete(keys.replica_beat(log.prefix, 2))
    assert registry.retire(1, log.stream_keys) == ["memories.v1~r2", "turns.v1~r2"]
    assert not {"memories.v1~r2", "turns.v1~r2"} & _groups(log)
    assert registry.groups() == {} and not log.client.exists(keys.positions(log.prefix, "memories.v1~r2"))


def test_a_killed_replica_restarts_and_resumes_its_groups_and_answers_the_request_lists(tmp_path, log):
    home = tmp_path / "home"
    make_pipeline(home, log)  # the primary's catalog; its query server is not running: the replica answers
    url = log.client.connection_pool.connection_kwargs
    settings = Settings.load(
        home=str(home), redis_url=f"redis://{url['host']}:{url['port']}", autostart=False, embedder="hash", metrics_addr=""
    )
    recorder = Recorder()
    replica = Sidecar(settings, settings.redis_url, ("turns", "memories"), replica=1)
    with observing(recorder):
        replica.start()
        try:
            _killed_and_resumed(replica, log, recorder)
        finally:
            replica.stop()
    assert replica.pid is None


def _killed_and_resumed(replica: Sidecar, log: EventLog, recorder: Recorder) -> None:
    from memstream.query import ask

    assert replica.wait_ready(60)
    first = replica.pid
    log.append([remembered("Deploys go out on Tuesdays")])
    wait_for(lambda: _applied(log, MEMORIES_R1), 60, "the replica applied the first memory")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: replica.restarts >= 1 and replica.pid not in (None, first), 60, "the replica restarted")
    log.append([remembered("The standup moved to 9:30")])
    wait_for(lambda: _applied(log, MEMORIES_R1), 60, "the restarted replica applied the second memory")
    assert MEMORIES_R1 in memory_write_groups(log.client, log.prefix)  # live all along: its beat outlives a restart
    answer = ask(log.client, log.prefix, RecallRequest(tenant="t1", agent="a1", query="when is the standup", k=5), timeout=30)
    assert "The standup moved to 9:30" in json.dumps(answer)
    assert consumers_of_replica_group(log) == 1  # one consumer of the replica's group: the restarted child took over the name
    # its figures reach the service's metrics: what its consumers applied, the queries it answered
    wait_for(lambda: any(op == "recall" for op, _ in recorder.answers), 30, "the replica's answer reported")
    assert any(group == MEMORIES_R1 for group, *_ in recorder.batches)


def _applied(eventlog: EventLog, group: str) -> bool:
    last = {s: eventlog.client.xrevrange(s, count=1) for s in eventlog.stream_keys}
    return all(is_applied(eventlog.client, s, group, as_str(e[0][0])) for s, e in last.items() if e)


def consumers_of_replica_group(eventlog: EventLog) -> int:
    """Consumers of the replica's memories group on the streams that hold entries."""
    names = set()
    for s in eventlog.stream_keys:
        try:
            names |= {as_str(c["name"]) for c in eventlog.client.xinfo_consumers(s, MEMORIES_R1)}
        except redis.ResponseError:
            continue
    return len(names)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the service's children in /proc")
def test_memstream_up_with_query_replicas_runs_them_and_add_sync_means_searchable_in_every_process(tmp_path):
    home = tmp_path / "home"
    info = json.loads(ms(home, "up", "--detach", "--json", "--query-replicas", "1").stdout)
    try:
        run = read_run_file(home / "run" / "service.json")
        client = redis.Redis.from_url(run["url"])
        prefix = Settings.load(home=str(home)).stream_prefix
        wait_for(lambda: Replicas(client, prefix).serving(["memories"]) == [MEMORIES_R1], 60, "the replica beats")
        added = json.loads(ms(home, "add", "--sync", "--json", "Deploys go out on Tuesdays").stdout)
        assert added["state"] == "searchable"
        health = {json.loads(v)["pid"] for v in client.hvals(keys.health(prefix, MEMORIES_R1))}
        assert health and info["pid"] not in health  # the replica is a process of its own
        assert (home / "data" / "qdrant-replica-1").is_dir()
        client.close()
    finally:
        ms(home, "down")
