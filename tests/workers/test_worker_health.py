"""Workers that nothing stops: a Redis error in a step, a full server, a thread killed
anyway; and health that other processes read (``memstream doctor`` / ``stats``)."""

from __future__ import annotations

import json

import pytest
import redis
from pipeline_support import all_applied, make_pipeline, memory, running, turn, wait_for

from memstream.cli import main
from memstream.core import backoff_delay, is_transient
from memstream.producers.stream import EventLog
from memstream.workers.consumer import Consumer
from memstream.workers.health import Health, projection_health, read_health
from memstream.workers.loop import Tuning

GROUPS = ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")


class Recorder:
    name, version = "rec", 1

    def __init__(self, fail=None):
        self.applied: list[str] = []
        self.fail = fail  # None, or a callable that raises

    def apply(self, batch):
        if self.fail is not None:
            self.fail()
        self.applied += [d.event.id for d in batch]


def _valkey(valkey_server) -> redis.Redis:
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    return client


# -- the loop never dies ---------------------------------------------------------------------------
def test_backoff_is_jittered_exponential_and_capped():
    for n in range(1, 40):
        delays = {backoff_delay(n, 0.2, 30.0) for _ in range(20)}
        top = min(30.0, 0.2 * 2 ** min(n, 30))
        assert all(max(0.2, top / 2) <= d <= top for d in delays)  # never sooner than base
    for n in (1, 8, 50):
        assert len({round(backoff_delay(n), 6) for _ in range(20)}) > 1  # jittered, the first retry too
    assert max(backoff_delay(50) for _ in range(200)) <= 30.0


def test_server_state_errors_are_transient_and_event_errors_are_not():
    assert is_transient(redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."))
    assert is_transient(redis.exceptions.ReadOnlyError("You can't write against a read only replica."))
    assert is_transient(
        redis.ResponseError(
            "Command # 1 (HSET k f v) of pipeline caused error: OOM command not allowed when used memory > 'maxmemory'."
        )
    )
    assert is_transient(redis.ResponseError("MISCONF Errors writing to the AOF file"))
    assert not is_transient(redis.ResponseError("NOGROUP No such key 'k' or consumer group 'g'"))
    assert not is_transient(ValueError("bad event"))


def test_run_survives_any_error_of_a_step_counts_it_and_resumes(event_log):
    """An error that is no dependency's (a Redis reply the consumer does not expect, a bug)
    is logged, counted, backed off and retried: the thread lives on and resumes."""
    errors = [
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        KeyError("boom"),
        RuntimeError("a bug"),
    ]

    def fail():
        if errors:
            raise errors.pop(0)

    event_log.append([turn("The deploy freeze starts Monday")])
    recorder = Recorder(fail=lambda: None)
    consumer = Consumer(
        event_log, recorder, "w1", tuning=Tuning(block_ms=50, backoff_base=0.01, backoff_cap=0.05, claim_every=3600)
    )
    real_read = consumer._read

    def flaky_read(start, block):
        fail()
        return real_read(start, block)

    consumer._read = flaky_read
    with running(consumer) as thread:
        wait_for(lambda: len(recorder.applied) == 1, 20, "the consumer to resume")
        assert thread.is_alive()
        event_log.append([turn("The freeze ends Friday")])
        wait_for(lambda: len(recorder.applied) == 2, 20, "the next event")
    assert not thread.is_alive()
    assert consumer.stats.errors == 3 and consumer.stats.transient_failures == 0
    assert "RuntimeError: a bug" == consumer.stats.last_error
    record = read_health(event_log.client, event_log.prefix, consumer.group)["w1"]
    assert record["errors"] == 3 and record["state"] == "stopped" and record["applied"] == 2


@pytest.mark.valkey
def test_workers_survive_a_full_server_and_resume_when_it_has_room(tmp_path, valkey_server):
    """Valkey with ``maxmemory`` reached under ``noeviction`` refuses every write (OOM):
    the threads back off without spending the events' deliveries and resume after."""
    client = _valkey(valkey_server)
    log = EventLog(client, "memstream")
    home = tmp_path / "home"
    before = make_pipeline(home, log).start()
    try:
        log.append([turn("The primary database runs on host tern")])
        wait_for(lambda: all_applied(log), 30, "the first event")
    finally:
        before.stop()
    log.append([memory("add", "The standby runs on host petrel")])
    old = client.config_get("maxmemory*")
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) - 64 * 1024))
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("probe", "x")
        pipeline = make_pipeline(home, log).start()  # starts on a full server
        wait_for(
            lambda: sum(c.stats.transient_failures for c in pipeline.consumers) >= 4, 30, "the workers to meet the full server"
        )
        assert all(t.is_alive() for t in pipeline._threads)
        assert not all_applied(log)
    finally:
        client.config_set("maxmemory", old.get("maxmemory", "0"))
        client.config_set("maxmemory-policy", old.get("maxmemory-policy", "noeviction"))
    try:
        after = memory("add", "The failover drill is on the first Tuesday")
        log.append([after])
        wait_for(lambda: all_applied(log), 60, "the workers to resume")
        assert all(t.is_alive() for t in pipeline._threads)
        assert client.xlen("memstream:dlq") == 0  # the server's state is no event's fault
        assert all(c.stats.errors == 0 for c in pipeline.consumers)
    finally:
        pipeline.stop()
        client.close()


@pytest.mark.valkey
def test_workers_recreate_their_groups_when_the_stream_is_deleted_under_them(tmp_path, valkey_server):
    client = _valkey(valkey_server)
    log = EventLog(client, "memstream")
    pipeline = make_pipeline(tmp_path / "home", log).start()
    try:
        log.append([turn("The office moves in June")])
        wait_for(lambda: all_applied(log), 30, "the first event")
        client.delete(log.stream_keys[0])  # NOGROUP on the next read of every consumer
        wait_for(lambda: all(c.stats.errors for c in pipeline.consumers), 30, "the NOGROUP errors")
        later = memory("add", "The new office is on Rua Augusta")
        log.append([later])
        wait_for(
            lambda: all_applied(log) and all(c.stats.applied >= 2 for c in pipeline.consumers),
            60,
            "the recreated groups to apply the new event",
        )
        assert all(t.is_alive() for t in pipeline._threads)
    finally:
        pipeline.stop()
        client.close()


class Killed(BaseException):
    """Nothing catches this but the pipeline's thread wrapper (like a stray SystemExit)."""


@pytest.mark.valkey
def test_a_consumer_thread_killed_anyway_is_restarted_by_the_supervisor(tmp_path, valkey_server):
    client = _valkey(valkey_server)
    log = EventLog(client, "memstream")
    pipeline = make_pipeline(tmp_path / "home", log)
    facts = pipeline.projection("facts")
    real_apply = facts.apply
    kills = [Killed("killed mid-batch")]

    def apply(batch):
        if kills:
            raise kills.pop()
        real_apply(batch)

    facts.apply = apply
    pipeline.start()
    try:
        first_thread = pipeline._threads[2]
        log.append([turn("My name is Ana and I live in Lisbon")])
        wait_for(lambda: not first_thread.is_alive(), 20, "the facts thread to die")
        wait_for(lambda: all_applied(log), 30, "the restarted thread to apply the event")
        consumer = pipeline.consumers[2]
        assert consumer.stats.restarts == 1 and pipeline._threads[2] is not first_thread
        assert all(t.is_alive() for t in pipeline._threads)
        assert all(c.stats.restarts == 0 for c in pipeline.consumers if c is not consumer)
        wait_for(
            lambda: read_health(client, log.prefix, "facts.v1").get("w1", {}).get("restarts") == 1,
            10,
            "the restart in the health record",
        )
        assert pipeline.health()["facts.v1"]["alive"] is True
    finally:
        pipeline.stop()
    assert not any(t.is_alive() for t in pipeline._threads)
    client.close()


# -- health ----------------------------------------------------------------------------------------
def test_health_is_written_at_most_once_a_second_and_never_raises(event_log):
    health = Health(event_log.client, event_log.prefix, "g.v1", "w1")
    consumer = Consumer(event_log, Recorder(), "w1")
    assert health.beat(consumer.stats) is True
    assert health.beat(consumer.stats) is False  # throttled
    assert health.beat(consumer.stats, force=True) is True
    broken = Health(redis.Redis(port=1, socket_connect_timeout=0.1), "p", "g.v1", "w1")
    assert broken.beat(consumer.stats) is False
    event_log.client.hset(f"{event_log.prefix}:health:g.v1", "junk", b"\xff not json")
    assert set(read_health(event_log.client, event_log.prefix, "g.v1")) == {"w1"}


def test_a_projection_with_entries_waiting_and_no_progress_is_stalled(event_log):
    event_log.append([turn("The printer is on floor 3")])
    keys, prefix = event_log.stream_keys, event_log.prefix
    client = event_log.client
    never = projection_health(client, prefix, keys, "rec.v1", threshold=0.0)
    assert never["status"] == "stalled" and never["exists"] is False and not never["ok"]
    assert projection_health(client, prefix, keys, "rec.v1", threshold=3600)["status"] == "not started"

    recorder = Recorder(fail=lambda: (_ for _ in ()).throw(redis.exceptions.ReadOnlyError("READONLY replica")))
    consumer = Consumer(event_log, recorder, "w1", tuning=Tuning(claim_every=3600))
    with pytest.raises(redis.exceptions.ReadOnlyError):
        consumer.step(block=False)
    consumer.health.error("ReadOnlyError: READONLY replica")
    consumer.health.beat(consumer.stats, force=True)
    stuck = projection_health(client, prefix, keys, "rec.v1", threshold=0.0)
    assert stuck["status"] == "stalled" and stuck["waiting"] == 1  # delivered, pending
    assert stuck["last_error"] == "ReadOnlyError: READONLY replica"
    assert projection_health(client, prefix, keys, "rec.v1", threshold=3600)["status"] == "ok"

    recorder.fail = None
    consumer._pending_done = False
    consumer.drain()
    done = projection_health(client, prefix, keys, "rec.v1", threshold=0.0)
    assert done["status"] == "idle" and done["ok"] and done["waiting"] == 0


@pytest.mark.valkey
def test_doctor_and_stats_report_a_stalled_projection_with_its_group_and_last_error(tmp_path, valkey_server, monkeypatch, capsys):
    client = _valkey(valkey_server)
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", valkey_server.url)
    monkeypatch.setenv("MEMSTREAM_STALL_AFTER_S", "0.5")
    log = EventLog(client, "memstream")
    pipeline = make_pipeline(tmp_path / "home", log)
    facts = pipeline.projection("facts")
    real_apply = facts.apply
    broken = [True]

    def apply(batch):  # a replica after a failover: retried forever, never dead-lettered
        if broken[0]:
            raise redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
        real_apply(batch)

    facts.apply = apply
    pipeline.start()

    def doctor() -> tuple[int, dict]:
        code = main(["doctor", "--json"])
        return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    try:
        log.append([turn("My name is Ana and I live in Lisbon")])
        wait_for(lambda: all_applied(log, groups=("turns.v1", "memories.v1", "sessions.v1")), 30, "the others")
        code, report = wait_for(lambda: (lambda r: r if r[0] == 1 else None)(doctor()), 30, "doctor to see the stall")
        check = report["checks"]["projections"]
        assert report["ok"] is False and check["ok"] is False
        assert check["error"].startswith("facts.v1 not advancing: 1 entries waiting")
        assert "ReadOnlyError: You can't write against a read only replica." in check["error"]
        assert check["groups"]["facts.v1"]["status"] == "stalled"
        assert {check["groups"][g]["status"] for g in ("turns.v1", "memories.v1", "sessions.v1")} == {"idle"}
        assert pipeline._threads[2].is_alive()
        assert main(["doctor"]) == 1
        text = capsys.readouterr().out
        assert "[FAIL] projections: facts.v1 not advancing" in text and "NOT OK" in text
        assert main(["stats"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert any(l.startswith("facts.v1:") and "stalled for" in l and "ReadOnlyError" in l for l in lines)
        assert any(l.startswith("turns.v1:") and l.endswith("idle") for l in lines)

        broken[0] = False  # the server takes writes again: the same thread resumes
        wait_for(lambda: all_applied(log), 30, "the facts projection to resume")
        code, report = doctor()
        assert code == 0 and report["checks"]["projections"]["ok"] is True
        assert pipeline.consumers[2].stats.transient_failures >= 1
    finally:
        pipeline.stop()

    # no worker at all: what was appended since waits, and nothing progresses
    log.append([memory("add", "The office plant needs water on Mondays")])
    code, report = wait_for(lambda: (lambda r: r if r[0] == 1 else None)(doctor()), 30, "doctor to see no workers")
    assert set(report["checks"]["projections"]["error"].split("; ")) and all(
        f"{g} not advancing: 1 entries waiting" in report["checks"]["projections"]["error"] for g in GROUPS
    )
    client.close()
