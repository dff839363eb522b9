"""The metrics of a process (``memstream.service.metrics``): what a scrape shows against what
Redis holds, the README's table against what is exported, the figures that are not
known, Redis down, and the address: off, taken, a free port."""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

import fakeredis
import pytest
import redis
from metrics_support import families, observing, samples, scrape, value
from pipeline_support import make_pipeline, pipeline_settings, remembered, turn
from redis.backoff import NoBackoff
from redis.retry import Retry
from structlog.testing import capture_logs

from memstream.core import keys
from memstream.producers.stream import EventLog
from memstream.projections import Catalog, group_names, group_of
from memstream.service.metrics import FAMILIES, Metrics, start_metrics
from memstream.workers.deadletters import DeadLetters

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `([a-z_]+)` \| (\w+) \| (.*?) \| (.*?) \| (Redis|process) \| (.*) \|$")


def _readme_rows() -> dict[str, tuple[str, tuple[str, ...], str, str, str]]:
    section = (ROOT / "README.md").read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for m in map(ROW.match, section.splitlines()):
        if m:
            name, kind, labels, unit, source, meaning = m.groups()
            rows[name] = (kind, tuple(re.findall(r"`(\w+)`", labels)), unit, source, meaning)
    return rows


@pytest.fixture
def served(tmp_path, event_log):
    """A pipeline on the test's log and this process's metrics on a free loopback port."""
    pipeline = make_pipeline(tmp_path / "home", event_log)
    settings = pipeline_settings(
        tmp_path / "home", metrics_addr="127.0.0.1:0", stream_prefix=event_log.prefix, shards=event_log.shards
    )
    metrics = start_metrics(settings, event_log, consumers=lambda: pipeline.consumers)
    assert metrics is not None
    yield pipeline, metrics
    metrics.stop()
    pipeline.stop()


def test_the_readme_table_lists_every_exported_metric_with_its_type_labels_unit_and_meaning(served, event_log):
    pipeline, metrics = served
    event_log.append([turn("The deploy key rotates every ninety days", index=0), remembered("tea, no sugar")])
    pipeline.drain()
    text = scrape(metrics)
    rows = _readme_rows()
    exported = families(text)
    assert set(rows) == set(exported), "README.md's Metrics table and /metrics name different metrics"
    assert {n: rows[n][0] for n in rows} == {n: f.type for n, f in exported.items()}
    for f in FAMILIES:
        kind, labels, unit, source, meaning = rows[f.name]
        assert (labels, unit, source.lower(), meaning) == (f.labels, f.unit or "none", f.source, f.help + "."), f.name
    for family in exported.values():
        allowed = set(rows[family.name + ("_total" if family.type == "counter" else "")][1]) | {"le"}
        assert all(set(s.labels) <= allowed for s in family.samples), family.name


def test_a_scrape_shows_what_redis_holds_and_what_this_process_applied(served, event_log):
    pipeline, metrics = served
    event_log.append(
        [turn(f"Build {i} shipped with flag O{i}", index=i) for i in range(6)]
        + [remembered("the staging database is read-only on Fridays")]
    )
    handled = pipeline.drain()
    text = scrape(metrics)
    stream = event_log.stream_keys[0]
    length = event_log.client.xlen(stream)
    assert value(text, "memstream_stream_entries", stream=stream) == length == 7
    assert value(text, "memstream_events_appended_total", type="turn.recorded") == 6
    assert value(text, "memstream_events_appended_total", type="memory.remembered") == 1
    assert (
        value(text, "memstream_stream_first_entry_age_seconds", stream=stream)
        >= value(text, "memstream_stream_last_entry_age_seconds", stream=stream)
        >= 0
    )
    for group in group_names():
        assert value(text, "memstream_projection_state", group=group, state="active") == 1
        assert value(text, "memstream_projection_state", group=group, state="building") == 0
        assert value(text, "memstream_projection_applied_total", group=group) == length
        assert value(text, "memstream_projection_lag_entries", group=group) == 0
        assert value(text, "memstream_projection_lag_seconds", group=group) == 0
        assert value(text, "memstream_projection_pending_entries", group=group) == 0
        assert value(text, "memstream_projection_consumers", group=group) == 1
        assert value(text, "memstream_projection_freshness_seconds_count", group=group) == length
        assert value(text, "memstream_projection_stage_seconds_count", group=group, stage="apply") >= 1
    assert handled == length * len(group_names())
    assert value(text, "memstream_projection_embed_batch_texts_sum", group=group_of("memories")) == 1
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_info", role="service") == 1


def test_the_query_path_shows_its_queue_outcomes_and_handler_seconds(served, event_log):
    from memstream.query.client import ask

    pipeline, metrics = served
    client = event_log.client
    client.rpush(keys.queries(event_log.prefix), b"not json")  # refused: no id to answer
    pipeline.queries.serve_once()
    pipeline.queries.start()
    ask(client, event_log.prefix, {"op": "count"}, timeout=10)
    pipeline.queries.stop()
    client.rpush(keys.queries(event_log.prefix), b"{}", b"{}")  # two waiting
    text = scrape(metrics)
    assert value(text, "memstream_query_queue_length", channel="operator") == 2
    assert value(text, "memstream_query_queue_length", channel="tenants") == 0
    assert value(text, "memstream_queries_total", outcome="refused") == 1
    assert value(text, "memstream_queries_total", outcome="answered") == 1
    assert value(text, "memstream_query_seconds_count", op="count") == 1


@pytest.mark.valkey
def test_a_lag_the_server_cannot_count_is_absent_never_zero(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    ids = log.append([remembered(f"note {i}") for i in range(4)])
    pipeline = make_pipeline(tmp_path / "home", log)
    for c in pipeline.consumers:
        c.ensure_groups()
    client.xdel(log.stream_keys[0], ids[1])  # a deleted entry: XINFO's lag becomes unknown
    metrics = Metrics(log, pipeline_settings(tmp_path / "home"))
    try:
        text = scrape(metrics)
    finally:
        pipeline.stop()
    stream = log.stream_keys[0]
    for group in group_names():
        assert value(text, "memstream_projection_lag_entries", group=group) is None
        # the age of the oldest entry waiting is known all the same: the stream's first
        assert value(text, "memstream_projection_lag_seconds", group=group) == pytest.approx(
            value(text, "memstream_stream_first_entry_age_seconds", stream=stream), abs=1e-6
        )
        assert value(text, "memstream_projection_pending_entries", group=group) == 0


def test_a_log_no_worker_reads_yet_lags_by_its_whole_length_and_the_age_of_its_first_entry(tmp_path):
    client = fakeredis.FakeRedis()
    log = EventLog(client, "memstream")
    log.append([remembered(f"note {i}") for i in range(3)])
    text = scrape(Metrics(log, pipeline_settings(tmp_path / "home")))
    group = group_of("turns")
    assert value(text, "memstream_projection_lag_entries", group=group) == 3
    assert value(text, "memstream_projection_lag_seconds", group=group) == pytest.approx(
        value(text, "memstream_stream_first_entry_age_seconds", stream=log.stream_keys[0]), abs=1e-6
    )
    assert value(text, "memstream_projection_consumers", group=group) == 0
    assert samples(text, "memstream_projection_state") == []  # no catalog yet: no state to tell
    assert value(text, "memstream_stream_bytes", stream=log.stream_keys[0]) is None  # no MEMORY USAGE here


def test_a_building_version_shows_its_replay_progress(tmp_path, event_log):
    event_log.append([remembered(f"note {i}") for i in range(5)])
    pipeline = make_pipeline(tmp_path / "home", event_log)
    pipeline.drain()
    built = Catalog(event_log.client, event_log.prefix).add_build("turns")
    metrics = Metrics(event_log, pipeline_settings(tmp_path / "home"), consumers=lambda: pipeline.consumers)
    text = scrape(metrics)
    assert value(text, "memstream_projection_state", group=built.group, state="building") == 1
    assert value(text, "memstream_replay_log_entries", group=built.group) == 5
    assert value(text, "memstream_replay_applied_entries", group=built.group) == 0
    assert value(text, "memstream_replay_log_entries", group=group_of("turns")) is None  # active: no replay
    pipeline.sync_catalog()
    pipeline.drain()
    text = scrape(metrics)
    assert value(text, "memstream_projection_state", group=built.group, state="active") == 1
    assert value(text, "memstream_projection_state", group=group_of("turns"), state="retired") == 1
    assert value(text, "memstream_projection_applied_total", group=built.group) == 5
    pipeline.stop()


def test_a_builds_progress_is_absent_while_the_archive_cannot_be_read(tmp_path, event_log):
    event_log.append([remembered("note")])
    settings = pipeline_settings(tmp_path / "home")
    built = Catalog(event_log.client, event_log.prefix).add_build("turns")
    settings.archive_path.mkdir(parents=True)
    (settings.archive_path / "manifest.json").write_text("{not json")
    text = scrape(Metrics(event_log, settings))
    assert value(text, "memstream_projection_state", group=built.group, state="building") == 1
    assert value(text, "memstream_replay_log_entries", group=built.group) is None
    assert value(text, "memstream_replay_applied_entries", group=built.group) is None
    assert value(text, "memstream_redis_up") == 1


def test_dead_letters_are_counted_per_group_and_recounted_when_the_stream_changes(tmp_path, event_log):
    dlq = DeadLetters(event_log.client, event_log.prefix)
    turns, facts = group_of("turns"), group_of("facts")
    for group in (turns, turns, facts):
        dlq.add(group, event_log.stream_keys[0], "1-1", {b"data": b"\xff"}, "malformed", 1)
    metrics = Metrics(event_log, pipeline_settings(tmp_path / "home"))
    text = scrape(metrics)
    assert value(text, "memstream_projection_dead_letters", group=turns, projection="turns") == 2
    assert value(text, "memstream_projection_dead_letters", group=facts) == 1
    assert value(text, "memstream_projection_dead_letters", group=group_of("sessions")) == 0  # known: none
    dlq.drop(dlq.list()[0]["dlq_id"])
    text = scrape(metrics)
    assert value(text, "memstream_projection_dead_letters", group=turns) == 1


def test_an_event_type_outside_the_contract_counts_as_other(tmp_path, event_log):
    event_log.client.hincrby(keys.types(event_log.prefix), "x" * 300, 3)
    event_log.client.hincrby(keys.types(event_log.prefix), "turn.recorded", 2)
    text = scrape(Metrics(event_log, pipeline_settings(tmp_path / "home")))
    assert {s.labels["type"]: s.value for s in samples(text, "memstream_events_appended_total")} == {
        "other": 3,
        "turn.recorded": 2,
    }


def test_a_count_in_redis_that_is_no_number_is_counted_and_left_out_never_failing_the_scrape(tmp_path, event_log):
    """A counter anyone who may write its hash can fill with garbage (a tenant its own):
    left out of the sums and counted, and every other figure is read (issue 26, finding 2)."""
    event_log.append([remembered("tea, no sugar")])
    event_log.client.hset(keys.types(event_log.prefix), mapping={"turn.recorded": "many", "session.ended": "NaN"})
    event_log.client.hset(keys.spool_counters(event_log.prefix), mapping={"unreplicated": "NaN", "refused": "-3"})
    text = scrape(Metrics(event_log, pipeline_settings(tmp_path / "home")))
    assert value(text, "memstream_redis_up") == 1 and samples(text, "memstream_stream_entries")
    assert value(text, "memstream_counters_unreadable") == 4
    assert value(text, "memstream_events_appended_total", type="memory.remembered") == 1
    assert value(text, "memstream_spool_unreplicated_batches_total") == 0


def test_with_redis_unreadable_a_scrape_says_so_and_reports_no_redis_figure(tmp_path):
    from memstream.service import free_port

    # no retries: redis-py's default retries a refused connection ten times with a growing
    # back-off, seconds a command, which is not what this test is about
    dead = redis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0))
    metrics = start_metrics(pipeline_settings(tmp_path / "home", metrics_addr="127.0.0.1:0"), EventLog(dead, "memstream"))
    assert metrics is not None
    try:
        with capture_logs() as logs:
            text = scrape(metrics)  # over HTTP: the scrape itself succeeds
    finally:
        metrics.stop()
    assert value(text, "memstream_redis_up") == 0
    redis_sourced = {f.name for f in FAMILIES if f.source == "redis"}
    assert not [s for name in redis_sourced for s in samples(text, name)]
    assert "memstream_stream_entries" in families(text)  # described all the same
    assert [e["event"] for e in logs] == ["metrics.redis_unreadable"]


def test_an_empty_address_turns_metrics_off(tmp_path, event_log):
    assert start_metrics(pipeline_settings(tmp_path / "home", metrics_addr=""), event_log) is None


def test_a_second_process_on_a_taken_port_warns_and_goes_on_without_metrics(tmp_path, event_log):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with capture_logs() as logs:
            metrics = start_metrics(pipeline_settings(tmp_path / "home", metrics_addr=f"127.0.0.1:{port}"), event_log)
    assert metrics is None
    warning = next(e for e in logs if e["event"] == "metrics.not_served")
    assert warning["log_level"] == "warning" and warning["address"] == f"127.0.0.1:{port}"
    assert "MEMSTREAM_METRICS_ADDR" in warning["action"]


def test_port_zero_serves_on_a_free_port_and_stopping_frees_it_and_the_observer(tmp_path, event_log):
    from memstream.core import observe

    with observing(None):
        metrics = start_metrics(pipeline_settings(tmp_path / "home", metrics_addr="127.0.0.1:0"), event_log)
        assert metrics is not None and metrics.address is not None and metrics.address[1] > 0
        assert observe.current() is metrics
        with urllib.request.urlopen(metrics.url, timeout=10) as reply:
            assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/plain")
        host, port = metrics.address
        metrics.stop()
        assert observe.current() is None and metrics.url is None
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the scrape's TIME_WAIT, not a listener
        again.bind((host, port))
        again.listen()  # free again


def test_a_batch_histogram_exposes_what_a_prometheus_histogram_does_for_the_same_values():
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from memstream.service.metrics import FRESHNESS_BUCKETS, BatchHistogram

    family = next(f for f in FAMILIES if f.name == "memstream_projection_freshness_seconds")
    values = [0.0, 0.01, 0.010001, 0.3, 1.0, 2.5, 7.0, 3600.0, 3600.5, 1e9] * 3
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    batched = BatchHistogram(family, FRESHNESS_BUCKETS)
    ours.register(batched)
    reference = Histogram(family.name, family.help, family.labels, registry=theirs, buckets=FRESHNESS_BUCKETS)
    for start in range(0, len(values), 7):  # batches of any size
        batched.observe(("g.v1", "g", "1"), values[start : start + 7])
    for v in values:
        reference.labels("g.v1", "g", "1").observe(v)
    created = re.compile(r".*_created.*\n")
    assert generate_latest(ours).decode() == created.sub("", generate_latest(theirs).decode())


def test_the_points_waiting_for_their_dense_vector_are_the_dense_stages_lag(tmp_path, event_log, monkeypatch):
    monkeypatch.setattr("memstream.projections.vector.embeds_inline", lambda embedder: False)
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        metrics = Metrics(
            event_log, pipeline_settings(tmp_path / "home", stream_prefix=event_log.prefix, shards=event_log.shards)
        )
        group = group_of("turns")
        assert value(scrape(metrics), "memstream_projection_embed_waiting_points", group=group) is None  # no backlog
        event_log.append([turn(f"Build {i} shipped with flag O{i}", index=i) for i in range(3)])
        pipeline.runs[group].consumer.drain()  # keywords only: the model has not caught up
        text = scrape(metrics)
        assert value(text, "memstream_projection_embed_waiting_points", group=group) == 3
        assert value(text, "memstream_projection_embed_waiting_seconds", group=group) >= 0
        assert value(text, "memstream_projection_lag_entries", group=group) == 0  # the log's part is done
        pipeline.drain()
        text = scrape(metrics)
        assert value(text, "memstream_projection_embed_waiting_points", group=group) == 0
        assert value(text, "memstream_projection_embed_waiting_seconds", group=group) == 0
        assert value(text, "memstream_projection_embed_waiting_points", group=group_of("facts")) is None
    finally:
        pipeline.stop()


def test_batches_too_few_replicas_confirmed_are_counted_over_every_hosts_shippers(served, event_log):
    _, metrics = served
    assert value(scrape(metrics), "memstream_spool_unreplicated_batches_total") == 0
    # what two hosts' shippers added (Shipper._report_losses)
    event_log.client.hincrby(keys.spool_counters(event_log.prefix), "unreplicated", 2)
    event_log.client.hincrby(keys.spool_counters(event_log.prefix), "unreplicated", 3)
    assert value(scrape(metrics), "memstream_spool_unreplicated_batches_total") == 5


def test_a_scrape_counts_the_backlog_entries_a_dense_stage_of_this_process_dead_lettered(served, event_log):
    from memstream.projections import TurnsProjection
    from memstream.projections.embedders.factory import get_embedder
    from memstream.projections.stores.qdrant import QdrantStore
    from memstream.workers import EmbedConsumer

    _, metrics = served
    turns = TurnsProjection(QdrantStore(), get_embedder("hash"), event_log.client, event_log.prefix, inline=False)
    group = group_of("turns")
    assert value(scrape(metrics), "memstream_projection_embed_dead_lettered_total", group=group) is None
    for _ in range(2):
        event_log.client.xadd(turns.backlog, {"id": "not-a-point", "text": "x"})
    assert EmbedConsumer(event_log.client, turns, "w1").drain() == 2
    text = scrape(metrics)
    assert value(text, "memstream_projection_embed_dead_lettered_total", group=group, projection="turns", version="1") == 2
    assert value(text, "memstream_projection_dead_letters", group=group) == 2
