"""The dashboard (``memstream.service.dashboard``): ``/api/summary`` against what ``/metrics``
reports from the same registry, rates and percentiles from samples, figures that are not
known, the fleet's figures when the registry has them, the bounded history, no memory
text, and the HTTP server: routes, headers, a clean stop, the page's files in the wheel."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import redis
from metrics_support import scrape, value
from pipeline_support import make_pipeline, pipeline_settings, remembered, turn
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from structlog.testing import capture_logs

from memstream.producers.stream import EventLog
from memstream.projections import Catalog, group_names, group_of
from memstream.service.dashboard import FLEET, History, quantile
from memstream.service.metrics import Metrics, start_metrics
from memstream.workers.deadletters import DeadLetters

ROOT = Path(__file__).resolve().parents[2]
STATIC = ("index.html", "dashboard.js", "dashboard.css")


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _summary(metrics: Metrics, fresh: bool = True) -> dict:
    """``/api/summary`` over HTTP, after a sample taken now when ``fresh``."""
    if fresh:
        metrics.history.record(metrics.sample())
    status, _, body = _get(metrics.base_url + "/api/summary")
    assert status == 200
    return json.loads(body)


@pytest.fixture
def served(tmp_path, event_log):
    """A pipeline on the test's log and this process's metrics and dashboard on a free port."""
    pipeline = make_pipeline(tmp_path / "home", event_log)
    settings = pipeline_settings(
        tmp_path / "home", metrics_addr="127.0.0.1:0", stream_prefix=event_log.prefix, shards=event_log.shards
    )
    metrics = start_metrics(settings, event_log, consumers=lambda: pipeline.consumers)
    assert metrics is not None
    yield pipeline, metrics
    metrics.stop()
    pipeline.stop()


# -- synthetic samples -------------------------------------------------------------------------
def _counter(name: str, label: str, values: dict[str, float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, "help", labels=[label])
    for key, v in values.items():
        family.add_metric([key], v)
    return family


def _gauge(name: str, labels: tuple[str, ...], rows: dict[tuple[str, ...], float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, "help", labels=list(labels))
    for key, v in rows.items():
        family.add_metric(list(key), v)
    return family


def _histogram(name: str, label: str, series: dict[str, list[tuple[str, float]]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, "help", labels=[label])
    for key, buckets in series.items():
        family.add_metric([key], buckets, sum_value=0.0)
    return family


GROUP = ("group", "projection", "version")


def test_the_summary_shows_what_the_metrics_report_for_streams_types_versions_and_queries(served, event_log):
    pipeline, metrics = served
    event_log.append(
        [turn(f"Build {i} shipped with flag O{i}", index=i) for i in range(6)]
        + [remembered("the staging database is read-only on Fridays")]
    )
    DeadLetters(event_log.client, event_log.prefix).add(
        group_of("facts"), event_log.stream_keys[0], "1-1", {b"data": b"\xff"}, "malformed", 1
    )
    pipeline.drain()
    summary = _summary(metrics)
    text = scrape(metrics)
    stream = event_log.stream_keys[0]
    assert summary["redis_up"] is True and summary["process"]["role"] == "service"
    assert summary["streams"] == [
        {
            "stream": stream,
            "entries": value(text, "memstream_stream_entries", stream=stream),
            "bytes": value(text, "memstream_stream_bytes", stream=stream),
        }
    ]
    assert summary["events_in"]["by_type"]["turn.recorded"]["total"] == 6
    assert summary["events_in"]["total"] == 7
    rows = {r["group"]: r for r in summary["projections"]}
    assert set(rows) == set(group_names())
    for group, r in rows.items():
        assert r["state"] == "active"
        assert r["lag_entries"] == value(text, "memstream_projection_lag_entries", group=group) == 0
        assert r["lag_seconds"] == value(text, "memstream_projection_lag_seconds", group=group) == 0
        assert r["pending"] == value(text, "memstream_projection_pending_entries", group=group)
        assert r["dead_letters"] == value(text, "memstream_projection_dead_letters", group=group)
        assert r["consumers"] == value(text, "memstream_projection_consumers", group=group) == 1
        assert r["applied_total"] == value(text, "memstream_projection_applied_total", group=group) == 7
        assert r["freshness_p50"] is not None and r["freshness_p95"] >= r["freshness_p50"] >= 0
        assert r["replay"] is None
    assert rows[group_of("facts")]["dead_letters"] == 1
    assert summary["queries"]["queue"] == {"operator": 0, "tenants": 0}
    assert summary["queries"]["outcomes"]["answered"]["total"] == 0
    assert summary["fleet"] is None  # no agent reports in this registry
    assert len(summary["history"]["t"]) >= 1


def test_a_building_version_shows_its_replay_progress_and_an_unknown_lag_is_null(tmp_path, event_log):
    event_log.append([remembered(f"note {i}") for i in range(5)])
    pipeline = make_pipeline(tmp_path / "home", event_log)
    pipeline.drain()
    built = Catalog(event_log.client, event_log.prefix).add_build("turns")
    metrics = Metrics(event_log, pipeline_settings(tmp_path / "home"), consumers=lambda: pipeline.consumers)
    history = History()
    history.record(metrics.sample())
    rows = {r["group"]: r for r in history.summary()["projections"]}
    assert rows[built.group]["state"] == "building"
    assert rows[built.group]["replay"] == {"applied": 0, "total": 5, "fraction": 0.0}
    assert rows[group_of("turns")]["replay"] is None
    pipeline.stop()


@pytest.mark.valkey
def test_a_lag_the_server_cannot_count_is_null_in_the_summary_never_zero(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    ids = log.append([remembered(f"note {i}") for i in range(4)])
    pipeline = make_pipeline(tmp_path / "home", log)
    for c in pipeline.consumers:
        c.ensure_groups()
    client.xdel(log.stream_keys[0], ids[1])  # a deleted entry: XINFO's lag becomes unknown
    history = History()
    history.record(Metrics(log, pipeline_settings(tmp_path / "home")).sample())
    pipeline.stop()
    summary = history.summary()
    for r in summary["projections"]:
        assert r["lag_entries"] is None and r["lag_seconds"] is not None
    assert all(v == [None] for v in summary["history"]["lag_entries"].values())


def test_with_redis_down_the_summary_says_so_and_shows_no_redis_figure(tmp_path):
    from memstream.service import free_port

    dead = redis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1)
    history = History()
    history.record(Metrics(EventLog(dead, "memstream"), pipeline_settings(tmp_path / "home")).sample())
    summary = history.summary()
    assert summary["redis_up"] is False
    assert summary["streams"] == [] and summary["events_in"]["total"] is None
    assert all(r[f] is None for r in summary["projections"] for f in ("lag_entries", "lag_seconds", "state"))


def test_rates_come_from_counters_between_samples_and_a_counter_that_went_down_restarted():
    history = History(interval=2.0, rate_window=10.0)

    def sample(at: float, turns: float, memories: float, applied: float) -> None:
        out = CounterMetricFamily("memstream_projection_applied_total", "help", labels=list(GROUP))
        out.add_metric(["turns.v1", "turns", "1"], applied)
        history.record(
            [_counter("memstream_events_appended_total", "type", {"turn.recorded": turns, "memory.remembered": memories}), out],
            at=at,
        )

    sample(1000.0, 100, 10, 0)
    first = history.summary()
    assert first["events_in"]["per_s"] is None  # one sample: no rate yet
    assert first["history"]["events_in"] == [None]
    for i in range(1, 6):
        sample(1000.0 + 2 * i, 100 + 20 * i, 10 + 2 * i, 5 * i)
    summary = history.summary()
    assert summary["events_in"]["by_type"]["turn.recorded"] == {"total": 200, "per_s": 10.0}
    assert summary["events_in"]["by_type"]["memory.remembered"]["per_s"] == 1.0
    assert summary["events_in"]["per_s"] == 11.0
    assert summary["history"]["events_in"][1:] == [11.0] * 5
    assert summary["projections"][0]["applied_per_s"] == 2.5
    assert summary["history"]["events_out"] == {"turns.v1": [None] + [2.5] * 5}
    sample(1012.0, 30, 22, 25)  # the turns counter went down: restarted, 30 is its increase
    restarted = history.summary()  # over the rate window, from the sample at 1002 (turns 120, memories 12)
    assert restarted["history"]["events_in"][-1] == restarted["events_in"]["per_s"] == pytest.approx((30 + 10) / 10)


def test_a_series_new_since_the_last_sample_counts_from_zero_unless_redis_was_unreadable_then():
    def redis_up(up: float) -> GaugeMetricFamily:
        return _gauge("memstream_redis_up", (), {(): up})

    history = History(rate_window=2.0)  # each rate from the sample before
    history.record([redis_up(1), _counter("memstream_events_appended_total", "type", {"turn.recorded": 10})], at=0.0)
    history.record(
        [redis_up(1), _counter("memstream_events_appended_total", "type", {"turn.recorded": 10, "memory.remembered": 4})], at=2.0
    )
    assert history.summary()["events_in"]["by_type"]["memory.remembered"]["per_s"] == 2.0  # a type first appended
    history.record([redis_up(0), CounterMetricFamily("memstream_events_appended_total", "help", labels=["type"])], at=4.0)
    history.record(
        [redis_up(1), _counter("memstream_events_appended_total", "type", {"turn.recorded": 12, "memory.remembered": 4})], at=6.0
    )
    assert history.summary()["history"]["events_in"] == [None, 2.0, None, None]  # no spike after an outage


def test_percentiles_come_from_the_buckets_filled_in_the_last_window():
    history = History(interval=2.0, window=60.0)
    name = "memstream_projection_freshness_seconds"

    def sample(at: float, fast: float, slow: float) -> None:
        # cumulative buckets: `fast` observations <= 0.1 s, `slow` more <= 10 s
        family = HistogramMetricFamily(name, "help", labels=list(GROUP))
        family.add_metric(
            ["turns.v1", "turns", "1"], [("0.1", fast), ("10.0", fast + slow), ("+Inf", fast + slow)], sum_value=0.0
        )
        history.record([family], at=at)

    sample(0.0, 0, 0)
    sample(10.0, 100, 0)  # a hundred fast ones
    fast = history.summary()["projections"][0]
    assert fast["freshness_p50"] == pytest.approx(0.05) and fast["freshness_p95"] == pytest.approx(0.095)
    sample(80.0, 100, 100)  # a minute later: a hundred slow ones, the fast ones out of the window
    slow = history.summary()["projections"][0]
    assert slow["freshness_p50"] == pytest.approx(0.1 + 9.9 * 0.5)
    sample(150.0, 100, 100)  # nothing observed in the last minute: unknown, never 0
    quiet = history.summary()
    assert quiet["projections"][0]["freshness_p50"] is None
    assert quiet["history"]["freshness_p95"]["turns.v1"][-1] is None


def test_histogram_series_told_apart_by_other_labels_are_added_up():
    family = HistogramMetricFamily("memstream_hook_seconds", "help", labels=["hook", "host"])
    family.add_metric(["sync_turn", "a"], [("0.1", 1.0), ("1.0", 1.0), ("+Inf", 1.0)], sum_value=0.0)
    family.add_metric(["sync_turn", "b"], [("0.1", 0.0), ("1.0", 3.0), ("+Inf", 3.0)], sum_value=0.0)
    history = History()
    history.record([family], at=0.0)
    hook = history.summary()["fleet"]["hooks"]["sync_turn"]
    assert hook["count"] == 4 and hook["p50"] == pytest.approx(0.1 + 0.9 * (2 - 1) / 3)


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, [(1.0, 10), (2.0, 20), (float("inf"), 20)], 1.0),
        (0.75, [(1.0, 10), (2.0, 20), (float("inf"), 20)], 1.5),
        (0.5, [(1.0, 0), (2.0, 0), (float("inf"), 10)], 2.0),  # in +Inf: the highest finite bound
        (0.99, [(0.5, 0), (float("inf"), 0)], None),  # nothing observed
        (0.5, [], None),
    ],
)
def test_a_quantile_interpolates_within_its_bucket_as_prometheus_does(q, buckets, expected):
    assert quantile(q, buckets) == expected


def test_the_fleet_figures_show_when_the_registry_has_them_with_the_top_agents_and_the_rest_as_other(tmp_path, event_log):
    metrics = Metrics(event_log, pipeline_settings(tmp_path / "home"))
    backlog = {(f"agent-{i}",): float(i) for i in range(8)}

    class Fleet:
        def collect(self):
            yield _gauge("memstream_agents_active", (), {(): 8.0})
            yield _gauge("memstream_agent_spool_backlog_events", ("agent",), backlog)
            yield _counter("memstream_agent_spool_refusals_total", "agent", {"agent-1": 3.0})
            yield _histogram("memstream_hook_seconds", "hook", {"sync_turn": [("0.001", 5.0), ("0.01", 10.0), ("+Inf", 10.0)]})
            yield _counter("memstream_prefetch_total", "outcome", {"fresh": 4.0, "cached": 5.0, "empty": 1.0})

    # the service's own fleet figures (read from Redis: no agent has reported) left out, then these
    fleet_names = {name.removesuffix("_total") for name in FLEET}  # a counter's family drops its _total
    own = [family for family in metrics.sample() if family.name not in fleet_names]
    history = History()
    history.record(own)
    assert history.summary()["fleet"] is None
    history.record(own + list(Fleet().collect()))
    fleet = history.summary()["fleet"]
    assert fleet["agents_active"] == 8
    assert fleet["spool_backlog"]["total"] == 28
    assert fleet["spool_backlog"]["agents"] == [
        {"agent": "agent-7", "events": 7},
        {"agent": "agent-6", "events": 6},
        {"agent": "agent-5", "events": 5},
        {"agent": "agent-4", "events": 4},
        {"agent": "agent-3", "events": 3},
        {"agent": "other", "events": 3, "agents": 3},
    ]
    assert fleet["refusals"]["total"] == 3 and fleet["refusals"]["agents"] == [{"agent": "agent-1", "events": 3}]
    assert fleet["hooks"]["sync_turn"]["p50"] == pytest.approx(0.001) and fleet["hooks"]["sync_turn"]["count"] == 10
    assert {k: v["total"] for k, v in fleet["prefetch"].items()} == {"fresh": 4, "cached": 5, "empty": 1}
    assert history.summary()["history"]["agents_active"] == [None, 8.0]
    assert history.summary()["history"]["spool_backlog"] == [None, 28.0]


def test_the_history_keeps_a_bounded_number_of_points_and_since_returns_the_newer_ones():
    history = History(interval=2.0, keep=20.0, window=6.0, rate_window=4.0)
    for i in range(50):
        history.record([_counter("memstream_events_appended_total", "type", {"turn.recorded": float(i)})], at=100.0 + 2 * i)
    assert len(history) == 10
    assert history.summary()["history"]["t"] == [100.0 + 2 * i for i in range(40, 50)]
    assert history.summary(since=194.0)["history"]["t"] == [196.0, 198.0]
    assert len(history._snaps) <= 5  # the snapshots of the last window only (and the one just before)


def test_no_memory_text_reaches_the_summary_or_the_page(served, event_log):
    pipeline, metrics = served
    secret = "zebra-kumquat-7731 rotates the vault key"
    event_log.append([turn(secret, "the assistant said quokka-5519", index=0), remembered("marmot-2288 likes tea")])
    pipeline.drain()
    _summary(metrics)
    bodies = b"".join(
        _get(metrics.base_url + path)[2]
        for path in ("/api/summary", "/", "/static/dashboard.js", "/static/dashboard.css", "/metrics")
    )
    for word in (b"zebra", b"kumquat", b"quokka", b"marmot", b"vault"):
        assert word not in bodies


def test_the_server_serves_the_page_its_files_and_the_summary_with_a_strict_content_policy(served):
    _, metrics = served
    base = metrics.base_url
    status, headers, body = _get(base + "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'src="static/dashboard.js"' in body and b"http" not in body.split(b"<footer")[0].lower()  # nothing remote
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "connect-src 'self'" in headers["content-security-policy"]
    for name, kind in (("dashboard.js", "text/javascript"), ("dashboard.css", "text/css")):
        status, headers, body = _get(f"{base}/static/{name}")
        assert status == 200 and headers["content-type"].startswith(kind) and body
        assert b"https://" not in body and b"http://" not in body.replace(b"http://www.w3.org/2000/svg", b"")
    assert _get(base + "/static/index.html")[0] == 404
    assert _get(base + "/static/..%2Fmetrics.py")[0] == 404
    status, headers, body = _get(base + "/api/summary")
    assert status == 200 and headers["content-type"] == "application/json" and json.loads(body)["sampled_at"]
    assert _get(base + "/api/summary?since=soon")[0] == 400


def test_metrics_are_served_gzipped_when_asked_and_restricted_by_name(served):
    _, metrics = served
    status, headers, body = _get(metrics.url, {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert b"memstream_redis_up" in gzip.decompress(body)
    _, _, body = _get(metrics.url + "?name[]=memstream_redis_up")
    names = {line.split()[0] for line in body.decode().splitlines() if line and not line.startswith("#")}
    assert names == {"memstream_redis_up"}
    status, headers, _ = _get(metrics.url, {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["content-type"].startswith("application/openmetrics-text")


def test_stopping_the_server_leaves_no_thread_and_frees_its_port(tmp_path, event_log):
    before = set(threading.enumerate())
    metrics = start_metrics(pipeline_settings(tmp_path / "home", metrics_addr="127.0.0.1:0"), event_log)
    assert metrics is not None
    host, port = metrics.address
    for path in ("/", "/api/summary", "/metrics", "/static/dashboard.js"):
        assert _get(metrics.base_url + path)[0] == 200
    keep_alive = socket.create_connection((host, port))  # an idle connection does not hold the stop
    metrics.stop()
    assert set(threading.enumerate()) == before
    assert keep_alive.recv(1) == b""  # closed by the server
    keep_alive.close()
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind((host, port))
        again.listen()


def test_the_sampler_logs_nothing_while_redis_is_down_and_a_scrape_still_warns(tmp_path):
    from memstream.service import free_port

    dead = redis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1)
    metrics = Metrics(EventLog(dead, "memstream"), pipeline_settings(tmp_path / "home"))
    with capture_logs() as logs:
        History().record(metrics.sample())
    assert logs == []
    with capture_logs() as logs:
        scrape(metrics)
    assert [e["event"] for e in logs] == ["metrics.redis_unreadable"]


def test_the_page_and_its_files_ship_in_the_wheel_a_non_editable_install_installs(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next(tmp_path.glob("memstream-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in STATIC:
        assert f"memstream/service/static/{name}" in names


def test_a_fleet_whose_agents_never_reported_shows_no_agent_reports_yet(tmp_path, event_log):
    metrics = Metrics(event_log, pipeline_settings(tmp_path / "home"))
    sample = list(metrics.sample())
    assert {f.name for f in sample} >= {"memstream_agents_active", "memstream_agent_spool_backlog_events"}
    history = History()
    history.record(sample)
    assert history.summary()["fleet"] is None


def test_the_headline_describes_the_active_versions_and_shows_a_build_apart():
    """After two replays of turns: v1 retired, v2 active, v3 building. The headline's rates,
    lag and freshness are the active versions' only; the build's progress and freshness
    stand apart; the log's entries are the streams' (what forget removed said apart)."""
    versions = {  # group -> (state, lag, lag seconds, applied per 10 s, dead letters)
        "turns.v1": ("retired", 900, 3000.0, 0, 2),
        "turns.v2": ("active", 3, 1.5, 50, 0),
        "turns.v3": ("building", 4000, 2000.0, 400, 0),
        "memories.v1": ("active", 7, 0.5, 40, 1),
    }

    def labels(group: str) -> tuple[str, str, str]:
        name, _, version = group.rpartition(".v")
        return (group, name, version)

    def sample(at: float, n: int) -> None:
        state = GaugeMetricFamily("memstream_projection_state", "help", labels=[*GROUP, "state"])
        applied = CounterMetricFamily("memstream_projection_applied_total", "help", labels=list(GROUP))
        fresh = HistogramMetricFamily("memstream_projection_freshness_seconds", "help", labels=list(GROUP))
        for group, (s, _, _, per_10s, _) in versions.items():
            for each in ("building", "active", "retired"):
                state.add_metric([*labels(group), each], 1.0 if each == s else 0.0)
            applied.add_metric(list(labels(group)), per_10s * n)
            slow = 100.0 * n if s == "retired" else 0.0  # a retired version's old observations: slow
            fast = 10.0 * n
            fresh.add_metric(list(labels(group)), [("1.0", fast), ("3600.0", fast + slow), ("+Inf", fast + slow)], 0.0)
        history.record(
            [
                _gauge("memstream_redis_up", (), {(): 1.0}),
                _gauge("memstream_stream_entries", ("stream",), {("memstream:events:0",): 70.0, ("tenants",): 5.0}),
                _counter("memstream_events_appended_total", "type", {"turn.recorded": 80.0 + 5 * n}),
                _counter("memstream_forgotten_total", "place", {"stream_entries": 3.0, "archive_entries": 2.0}),
                _counter("memstream_retention_erased_total", "kind", {"turns": 0.0}),
                state,
                _gauge("memstream_projection_lag_entries", GROUP, {labels(g): v[1] for g, v in versions.items()}),
                _gauge("memstream_projection_lag_seconds", GROUP, {labels(g): v[2] for g, v in versions.items()}),
                _gauge("memstream_projection_dead_letters", GROUP, {labels(g): v[4] for g, v in versions.items()}),
                _gauge("memstream_replay_applied_entries", GROUP, {labels("turns.v3"): 25.0}),
                _gauge("memstream_replay_log_entries", GROUP, {labels("turns.v3"): 100.0}),
                applied,
                fresh,
            ],
            at=at,
        )

    history = History(interval=2.0, rate_window=10.0, window=60.0)
    sample(1000.0, 0)
    sample(1010.0, 1)
    summary = history.summary()
    h = summary["headline"]
    assert h["serving"] == ["memories.v1", "turns.v2"]
    assert h["events_in_per_s"] == summary["events_in"]["per_s"] == 0.5
    assert summary["history"]["events_in"][-1] == h["events_in_per_s"]  # the chart's newest point is the tile's
    assert h["log_entries"] == 75 and h["forgotten"] == 3 and h["expired"] == 0
    assert h["applied"] == {"per_s": 4.0, "group": "memories.v1", "versions": 2}  # not 49/s summed over versions
    assert h["lag_entries"] == {"group": "memories.v1", "value": 7}  # not the build's 4,000 nor the retired 900
    assert h["lag_seconds"] == {"group": "turns.v2", "value": 1.5}
    assert h["freshness_p95"]["group"] in h["serving"] and h["freshness_p95"]["value"] <= 1.0
    assert h["dead_letters"] == 3
    assert h["building"] == [
        {
            "group": "turns.v3",
            "fraction": 0.25,
            "applied": 25,
            "total": 100,
            "applied_per_s": 40.0,
            "freshness_p95": summary["projections"][[r["group"] for r in summary["projections"]].index("turns.v3")][
                "freshness_p95"
            ],
        }
    ]


def test_a_p95_between_five_minutes_and_an_hour_is_read_from_fine_buckets():
    """Entries 400 s to 590 s old (a log 10 minutes old): the p95 stays under 10 minutes
    (the buckets from 300 s to 3,600 s read it as 52 minutes)."""
    from memstream.service.metrics import FAMILIES, FRESHNESS_BUCKETS, BatchHistogram

    family = next(f for f in FAMILIES if f.name == "memstream_projection_freshness_seconds")
    assert family.buckets == FRESHNESS_BUCKETS
    inside = [b for b in FRESHNESS_BUCKETS if 60 <= b <= 3600]
    assert inside[0] == 60 and inside[-1] == 3600
    assert all(high / low <= 1.5 for low, high in zip(inside, inside[1:]) if low >= 300)
    histogram = BatchHistogram(family, FRESHNESS_BUCKETS)
    history = History(window=60.0)
    history.record(histogram.collect(), at=0.0)
    histogram.observe(("turns.v1", "turns", "1"), [400.0 + 2 * i for i in range(96)])
    history.record(histogram.collect(), at=10.0)
    (row,) = history.summary()["projections"]
    assert 585.0 <= row["freshness_p95"] <= 600.0
