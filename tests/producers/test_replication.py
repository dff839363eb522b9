"""Shipping to a primary with replicas, on real Valkey processes (a primary and one replica,
and Sentinels where a test needs them): a batch leaves the spool only once the replicas
asked for have it, dedup records included; short confirmations keep it and count it."""

from __future__ import annotations

import msgspec
import pytest
import redis
from writepath import logged_contents, remembered

from memstream.bench.testbed import ReplicatedValkey
from memstream.core import keys
from memstream.producers.connect import LogLocator, redis_client
from memstream.producers.events import encode
from memstream.producers.record import Record
from memstream.producers.shipper import Shipper
from memstream.producers.spool import Spool
from memstream.producers.stream import EventLog, NotReplicated
from memstream.producers.writer import Writer

pytestmark = pytest.mark.valkey


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A primary and one replica, no Sentinels."""
    topology = ReplicatedValkey(tmp_path_factory.mktemp("pair"), replicas=1, sentinels=0).start()
    yield topology
    topology.stop()


@pytest.fixture
def primary(pair):
    client = pair.primary.client()
    client.flushall()
    client.wait(1, 5000)
    yield client
    client.close()


@pytest.fixture
def replica(pair):
    client = pair.replicas[0].client()
    yield client
    client.close()


def _records(n: int, start: int = 0) -> list[Record]:
    return [Record.of(remembered(f"r{i}"), seq=i) for i in range(start, start + n)]


def test_a_confirmed_batch_is_on_the_replica_with_its_dedup_record(primary, replica):
    log = EventLog(primary, "memstream")
    ids = log.append_batch(_records(5), segment="seg-1", replicas=1, replica_timeout_ms=5000)
    assert all(ids)
    # WAIT returned: the replica already has the entries and the dedup record, nothing to wait for
    assert replica.xlen(keys.events("memstream", 0)) == 5
    assert replica.hget(keys.shipped("memstream", "t1"), "seg-1") == b"4"


def test_fewer_confirmations_than_asked_raise_and_a_resend_appends_nothing_twice(primary, replica):
    log = EventLog(primary, "memstream")
    with pytest.raises(NotReplicated) as raised:
        log.append_batch(_records(3), segment="seg-2", replicas=2, replica_timeout_ms=50)
    assert raised.value.wanted == 2 and raised.value.confirmed < 2
    assert all(raised.value.ids)  # the primary appended them
    again = log.append_batch(_records(4), segment="seg-2", replicas=1, replica_timeout_ms=5000)
    assert again[:3] == [None] * 3 and again[3]  # only the record the primary lacked
    assert logged_contents(log) == ["r0", "r1", "r2", "r3"]


def test_a_script_cache_flushed_under_the_shipper_is_loaded_again(primary):
    log = EventLog(primary, "memstream")
    primary.script_flush()  # as on a replica promoted after a failover: scripts are not replicated
    assert all(log.append_batch(_records(2), segment="seg-3", replicas=1, replica_timeout_ms=5000))
    assert logged_contents(log) == ["r0", "r1"]


def test_the_shipper_keeps_what_too_few_replicas_confirmed_counts_it_and_ships_it_once_later(tmp_path, primary, replica):
    log = EventLog(primary, "memstream")
    spool = Spool(tmp_path / "spool")
    shipper = Shipper(spool, lambda: log, batch=4, replicas=2, replica_timeout_ms=20)
    labels = [f"e{i}" for i in range(10)]
    for label in labels:
        assert spool.append(encode(remembered(label)))
    shipper.ship_once()
    assert shipper.unreplicated == 1 and shipper.retry_in > 0 and shipper.connected
    assert not spool.drained()  # kept: the only replica is not the two asked for
    assert logged_contents(log) == labels[:4]  # the primary has the first batch
    assert primary.hget(keys.spool_counters("memstream"), "unreplicated") == b"1"
    shipper.replicas, shipper.replica_timeout_ms = 1, 5000  # as when the second replica is back
    shipper.ship_once()
    assert spool.drained()
    assert logged_contents(log) == labels
    assert (shipper.shipped, shipper.duplicates) == (10, 0)  # the re-sent batch counted as shipped once
    assert replica.xlen(keys.events("memstream", 0)) == 10
    spool.close()


def test_a_writer_configured_for_replicas_ships_through_a_sentinel_url(tmp_path, settings):
    topology = ReplicatedValkey(tmp_path / "ha", replicas=1, sentinels=3).start()
    try:
        configured = msgspec.structs.replace(settings, redis_url=topology.url, ship_replicas=1, ship_replica_timeout_ms=2000)
        locator = LogLocator(configured)
        writer = Writer(configured, locator=locator)
        writer.shipper.start()
        try:
            for i in range(20):
                assert writer.emit(remembered(f"w{i}"))
            assert writer.flush(15)
            assert writer.stats()["unreplicated"] == 0
        finally:
            writer.close(timeout=1)
        with topology.replicas[0].client() as replica:
            assert logged_contents(EventLog(replica, "memstream")) == [f"w{i}" for i in range(20)]
        client = redis_client(topology.url)
        assert client.connection_pool.get_master_address() == ("127.0.0.1", topology.primary.port)
        client.close()
    finally:
        topology.stop()


def test_a_sentinel_url_naming_no_running_sentinel_fails_as_a_connection_error(settings):
    from memstream.service.valkey import free_port

    locator = LogLocator(msgspec.structs.replace(settings, redis_url=f"redis+sentinel://127.0.0.1:{free_port()}/svc"))
    with pytest.raises(redis.ConnectionError):
        locator()


def test_a_batch_the_replica_never_got_is_kept_and_shipped_once_to_the_promoted_replica(tmp_path):
    """The loss WAIT prevents, step by step: the replica stalls (SIGSTOP) and its link is
    cut, the primary appends a batch and dies (SIGKILL), the replica is promoted. With WAIT the batch is
    still in the spool and lands once on the new primary; without, the spool had let it go."""
    import signal

    topology = ReplicatedValkey(tmp_path / "ha", replicas=1, sentinels=0).start()
    old, new = topology.primary, topology.replicas[0]
    try:
        with old.client() as c:
            first = EventLog(c, "memstream")
            waiting = Shipper(Spool(tmp_path / "waits"), lambda: first, batch=8, replicas=1, replica_timeout_ms=5000)
            trusting = Shipper(Spool(tmp_path / "trusts"), lambda: first, batch=8)
            for shipper, name in ((waiting, "kept"), (trusting, "lost")):
                for i in range(4):
                    assert shipper.spool.append(encode(remembered(f"{name}-early{i}")))
                shipper.ship_once()
                assert shipper.spool.drained()
            c.wait(1, 5000)  # the early events are on the replica
            assert new.proc is not None
            new.proc.send_signal(signal.SIGSTOP)  # the replica stalls and cannot reconnect,
            c.client_kill_filter(_type="replica")  # and its link is cut: nothing more reaches it
            waiting.replica_timeout_ms = 100  # no confirmation can come now: do not wait long for it
            try:
                for shipper, name in ((waiting, "kept"), (trusting, "lost")):
                    for i in range(4):
                        assert shipper.spool.append(encode(remembered(f"{name}-late{i}")))
                    shipper.ship_once()
                assert waiting.unreplicated == 1 and not waiting.spool.drained()
                assert trusting.spool.drained()  # without WAIT the spool let them go
                assert len(logged_contents(first)) == 16  # the primary had them all
            finally:
                old.kill()
                new.proc.send_signal(signal.SIGCONT)
        with new.client() as c:
            c.replicaof("NO", "ONE")  # what a Sentinel does to the replica it promotes
            promoted = EventLog(c, "memstream")
            waiting._connect = lambda: promoted
            waiting._events = None
            waiting.replicas = 0  # the new primary has no replica of its own here
            waiting.ship_once()
            assert waiting.spool.drained()
            contents = logged_contents(promoted)
            assert sorted(x for x in contents if x.startswith("kept")) == sorted(
                [f"kept-early{i}" for i in range(4)] + [f"kept-late{i}" for i in range(4)]
            )
            assert not any(x.startswith("lost-late") for x in contents)  # what no WAIT loses
            assert waiting.duplicates == 0 and waiting.shipped == 8
        for shipper in (waiting, trusting):
            shipper.spool.close()
    finally:
        topology.stop()
