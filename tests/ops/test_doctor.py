"""``doctor`` as data: every check in order, each with ``ok``, its state and, when failed, why."""

from __future__ import annotations

import time

import pytest
import redis
from pipeline_support import memory, turn

from memstream.core import Settings
from memstream.ops import doctor
from memstream.ops.doctor import check_dense, check_spool, check_streams, state_of
from memstream.producers import parse_entry_id
from memstream.projections import group_names


def test_an_unreachable_log_fails_redis_and_streams_and_skips_what_needs_the_log(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)
    report = doctor(settings)
    assert list(report["checks"]) == ["config", "embedder", "redis", "streams", "spool"]
    assert report["ok"] is False
    assert report["checks"]["redis"]["error"] == ("no memstream service is running; start it with `memstream up --detach`")
    assert report["checks"]["streams"] == {"ok": False, "state": "failed", "error": "log unreachable"}
    assert report["state"] == "failed" and report["checks"]["redis"]["state"] == "failed"
    assert report["checks"]["spool"]["ok"] is True and report["checks"]["spool"]["segments"] == 0


def test_the_callers_check_comes_last_and_its_exception_is_a_failed_check(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)

    def hermes() -> dict:
        raise RuntimeError("config.yaml unreadable")

    report = doctor(settings, hermes=hermes)
    assert list(report["checks"])[-1] == "hermes"
    assert report["checks"]["hermes"] == {"ok": False, "state": "failed", "error": "RuntimeError: config.yaml unreadable"}


@pytest.mark.valkey
def test_a_reachable_log_without_workers_checks_every_registered_projection(valkey_server, tmp_path):
    redis.Redis.from_url(valkey_server.url).flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=valkey_server.url)
    report = doctor(settings, hermes=lambda: {"ok": True, "skipped": True})
    checks = report["checks"]
    assert list(checks) == [
        "config",
        "embedder",
        "redis",
        "streams",
        "logs",
        "queries",
        "tenants",
        "projections",
        "retention",
        "dense",
        "spool",
        "hermes",
    ]
    assert report["ok"] is True  # nothing waits: no projection is behind
    assert checks["redis"]["redis_version"] and checks["queries"]["answering"] is False
    assert list(checks["projections"]["groups"]) == list(group_names())


@pytest.mark.valkey
def test_no_query_server_answering_is_a_warning_that_keeps_the_report_ok(valkey_server, tmp_path):
    redis.Redis.from_url(valkey_server.url).flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=valkey_server.url)
    report = doctor(settings, hermes=lambda: {"ok": True, "skipped": True})
    queries = report["checks"]["queries"]
    assert (queries["ok"], queries["state"]) == (True, "warning")
    assert queries["warning"].startswith("no query server answered")
    assert report["ok"] is True and report["state"] == "warning"
    others = {name: c["state"] for name, c in report["checks"].items() if name != "queries"}
    assert set(others.values()) == {"ok"}, others
    assert all(list(c)[:2] == ["ok", "state"] for c in report["checks"].values())


def test_a_failure_outranks_a_warning_in_the_reports_state(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)
    report = doctor(settings, hermes=lambda: {"ok": True, "warning": "the installed plugin files differ"})
    assert report["checks"]["hermes"]["state"] == "warning" and report["checks"]["hermes"]["ok"] is True
    assert report["state"] == "failed" and report["ok"] is False  # the log is unreachable


def test_corrupt_regions_set_aside_in_the_spool_are_a_warning(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)
    assert "warning" not in check_spool(settings)
    (settings.spool_dir / "quarantine").mkdir(parents=True)
    (settings.spool_dir / "quarantine" / "seg-1-0.bad").write_bytes(b"\x00garbage")
    check = check_spool(settings)
    assert check["ok"] is True and check["quarantined"] == 1
    assert check["warning"] == (
        f"corrupt spool regions set aside in {settings.spool_dir}/quarantine: 1 (the events in them could not be read)"
    )


def test_the_config_check_says_where_each_value_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    monkeypatch.delenv("MEMSTREAM_METRICS_ADDR")  # set for every test by conftest
    settings = Settings.load(home=str(tmp_path / "ms-home"))
    config = doctor(settings)["checks"]["config"]
    assert config["home"] == str(tmp_path / "ms-home")
    assert config["sources"] == {"home": "given", "embedder": "MEMSTREAM_EMBEDDER", "autostart": "MEMSTREAM_AUTOSTART"}


def test_the_streams_check_counts_streams_and_events_and_when_they_were_appended(event_log):
    assert {k: v for k, v in check_streams(event_log).items() if k != "streams"} == {
        "ok": True,
        "count": 1,
        "events": 0,
        "first_at": None,
        "last_at": None,
    }
    first, _, last = event_log.append([turn("one"), memory("add", "two"), turn("three")])
    check = check_streams(event_log)
    assert (check["count"], check["events"]) == (1, 3)
    assert check["first_at"] == parse_entry_id(first)[0] / 1000 and check["last_at"] == parse_entry_id(last)[0] / 1000
    assert check["streams"][0]["first_id"] == first


@pytest.mark.valkey
def test_through_sentinels_the_redis_check_names_the_primary_and_too_few_replicas_for_wait_fail(tmp_path):
    from memstream.bench.testbed import ReplicatedValkey
    from memstream.ops.doctor import check_redis

    topology = ReplicatedValkey(tmp_path / "ha", replicas=1, sentinels=1).start()
    try:
        base = Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=topology.url)
        check, eventlog = check_redis(base)
        assert check["ok"] and check["primary"] == f"127.0.0.1:{topology.primary.port}"
        assert "replicas" not in check  # WAIT off: not asked
        eventlog.client.close()
        for wanted, ok in ((1, True), (2, False)):
            check, eventlog = check_redis(
                Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=topology.url, ship_replicas=wanted)
            )
            assert (check["ok"], check["replicas"]) == (ok, 1)
            assert ok or "MEMSTREAM_SHIP_REPLICAS=2 but the primary has 1 replicas" in check["error"]
            eventlog.client.close()
    finally:
        topology.stop()


def _deferred_turns(event_log):
    from memstream.projections import TurnsProjection
    from memstream.projections.embedders.factory import get_embedder
    from memstream.projections.stores.qdrant import QdrantStore

    return TurnsProjection(QdrantStore(), get_embedder("hash"), event_log.client, event_log.prefix, inline=False)


def _write(projection, *events) -> None:
    from memstream.projections.base import Delivery

    projection.apply([Delivery(stream="s", entry_id=f"{i + 1}-0", fields={}, event=e) for i, e in enumerate(events)])


def _dense_settings(tmp_path, **given) -> Settings:
    return Settings.load(home=str(tmp_path / "ms-home"), autostart=False, **given)


def test_the_dense_check_is_ok_without_a_backlog_and_while_a_stage_keeps_up(event_log, tmp_path):
    from memstream.workers import EmbedConsumer

    settings = _dense_settings(tmp_path)
    check = check_dense(event_log, settings)
    assert check["ok"] and "warning" not in check and check["groups"] == {}
    turns = _deferred_turns(event_log)
    _write(turns, *(turn(f"Build {i} shipped", index=i) for i in range(3)))
    check = check_dense(event_log, settings)
    assert check["ok"] and "warning" not in check
    assert check["groups"]["turns.v1"] == {
        "waiting": 3,
        "oldest_s": check["groups"]["turns.v1"]["oldest_s"],
        "readers": 0,
        "last_read_s": None,
        "dead_letters": 0,
    }
    assert EmbedConsumer(event_log.client, turns, "w1").drain() == 3
    check = check_dense(event_log, settings)
    assert check["ok"] and "warning" not in check
    assert check["groups"]["turns.v1"]["waiting"] == 0 and check["groups"]["turns.v1"]["readers"] == 1


def test_a_backlog_no_dense_stage_reads_fails_once_its_oldest_point_waited_past_the_stall_threshold(event_log, tmp_path):
    turns = _deferred_turns(event_log)
    _write(turns, turn("The deploy key rotates every Monday"))
    settings = _dense_settings(tmp_path, embed_warn_s=600.0, stall_after_s=60.0)
    assert check_dense(event_log, settings)["ok"]  # young: a stage may be starting
    later = time.time() + 120  # past MEMSTREAM_STALL_AFTER_S, before MEMSTREAM_EMBED_WARN_S: none reads
    check = check_dense(event_log, settings, now=later)
    assert (check["ok"], state_of(check)) == (False, "failed")
    assert "turns.v1: 1 points waited" in check["error"] and "no dense stage ever read the backlog" in check["error"]


def test_a_dense_stage_that_stopped_reading_fails_and_one_that_reads_but_lags_warns(event_log, tmp_path):
    from memstream.workers import EmbedConsumer

    turns = _deferred_turns(event_log)
    _write(turns, turn("The staging database runs Postgres 15"))
    stage = EmbedConsumer(event_log.client, turns, "w1")
    stage.ensure_group()
    stage._read(">", block=False)  # read, then the process stopped: the entry is pending on w1
    later = time.time() + 3600
    reading = check_dense(event_log, _dense_settings(tmp_path, stall_after_s=3000.0), now=later)
    assert (reading["ok"], state_of(reading)) == (True, "warning")
    assert "the oldest point waited" in reading["warning"] and "behind or failing" in reading["warning"]
    assert reading["groups"]["turns.v1"]["readers"] == 1
    wait_until_idle = time.monotonic() + 10
    settings = _dense_settings(tmp_path, stall_after_s=0.1)
    while time.monotonic() < wait_until_idle:  # the server counts the reader idle past 0.1 s
        stopped = check_dense(event_log, settings, now=later)
        if not stopped["ok"]:
            break
        time.sleep(0.05)
    assert state_of(stopped) == "failed" and "no dense stage read it for" in stopped["error"]


def test_a_long_backlog_and_dead_letters_of_the_dense_stage_are_warnings(event_log, tmp_path):
    from memstream.workers import EmbedConsumer

    turns = _deferred_turns(event_log)
    _write(turns, *(turn(f"Release {i} ships on Tuesday", index=i) for i in range(3)))
    check = check_dense(event_log, _dense_settings(tmp_path, embed_warn_points=2))
    assert state_of(check) == "warning" and "turns.v1: 3 points wait" in check["warning"]
    event_log.client.xadd(turns.backlog, {"id": "not-a-point", "text": "x"})
    assert EmbedConsumer(event_log.client, turns, "w1").drain() == 4
    check = check_dense(event_log, _dense_settings(tmp_path))
    assert state_of(check) == "warning" and check["groups"]["turns.v1"]["dead_letters"] == 1
    assert "1 backlog entries dead-lettered" in check["warning"] and "memstream dlq retry" in check["warning"]


@pytest.mark.valkey
def test_a_redis_at_its_maxmemory_fails_the_redis_check(valkey_server, tmp_path):
    """Under maxmemory (noeviction) every append fails with OOM: doctor must not say ok."""
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=valkey_server.url)
    assert doctor(settings)["checks"]["redis"]["ok"] is True
    client.config_set("maxmemory", "1")
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.xadd("ms-probe", {"a": "b"})  # what every append meets now
        report = doctor(settings)
    finally:
        client.config_set("maxmemory", "0")
    check = report["checks"]["redis"]
    assert report["ok"] is False and check["ok"] is False
    assert "maxmemory" in check["error"] and "OOM" in check["error"]
