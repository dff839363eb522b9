"""memstream's metrics as a real Prometheus sees them (Debian's ``prometheus`` package:
``apt-get install prometheus``; ``.ci/run`` installs it): a Prometheus on the loopback
scrapes a running pipeline's ``/metrics`` on a real Valkey, its query API returns the
figures Redis holds, and it loads ``deploy/prometheus/rules.yml`` and fires on real data;
``promtool`` checks the rules against their unit tests and the example configuration."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import redis
from pipeline_support import all_applied, make_pipeline, pipeline_settings, remembered, turn, wait_for

from memstream.core import stop_process
from memstream.producers.stream import EventLog
from memstream.projections import group_names, group_of
from memstream.service import free_port
from memstream.service.metrics import start_metrics
from memstream.workers.deadletters import DeadLetters

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
ALERTS = {
    "MemstreamLagGrowing",
    "MemstreamDeadLetters",
    "MemstreamFreshnessSlow",
    "MemstreamNoConsumer",
    "MemstreamMetricsAbsent",
    "MemstreamRedisUnreadable",
    "MemstreamSpoolBackingUp",
    "MemstreamLogBroken",
    "MemstreamRetentionFailing",
}

pytestmark = pytest.mark.prometheus
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="the prometheus binary is absent: `apt-get install prometheus` (.ci/run does)"
)
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is absent: `apt-get install prometheus` (.ci/run does)")


def _get(base: str, path: str, **params: str) -> dict:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def _query(base: str, promql: str) -> dict[str, float]:
    """The instant vector ``promql`` gives: its series' ``group`` (or "") -> value."""
    found = _get(base, "/api/v1/query", query=promql)["data"]["result"]
    return {r["metric"].get("group", ""): float(r["value"][1]) for r in found}


@pytest.fixture
def prometheus(tmp_path):
    """Start a Prometheus on the loopback that scrapes ``targets`` every second and loads
    the rules; yields a function that starts it and returns its base URL."""
    procs = []

    def start(target: str) -> str:
        port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            json.dumps(
                {  # JSON is YAML
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(DEPLOY / "rules.yml")],
                    "scrape_configs": [{"job_name": "memstream", "static_configs": [{"targets": [target]}]}],
                }
            )
        )
        log = open(tmp_path / "prometheus.log", "w")  # closed with the process, below
        procs.append(
            (
                subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as reply:
                    return reply.status == 200
            except OSError:
                assert procs[-1][0].poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
                return False

        wait_for(ready, timeout=60, what="Prometheus to be ready")
        return base

    yield start
    for proc, log in procs:
        stop_process(proc, 20)
        log.close()


@needs_prometheus
@pytest.mark.valkey
def test_prometheus_scrapes_a_running_pipeline_and_its_queries_return_what_redis_holds(tmp_path, valkey_server, prometheus):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    log.append(
        [turn(f"Release {i} ships the parser fix number {i}", index=i) for i in range(8)]
        + [remembered("the on-call rotation changes on Mondays")]
    )
    DeadLetters(client, log.prefix).add(group_of("facts"), log.stream_keys[0], "1-1", {b"data": b"\xff"}, "malformed", 1)
    pipeline = make_pipeline(tmp_path / "home", log)
    metrics = start_metrics(
        pipeline_settings(tmp_path / "home", metrics_addr="127.0.0.1:0"),
        EventLog(redis.Redis.from_url(valkey_server.url), "memstream"),
        consumers=lambda: pipeline.consumers,
    )
    try:
        assert metrics is not None and metrics.address is not None
        pipeline.start()  # as the service does: metrics first, so they see every batch
        wait_for(lambda: all_applied(log), what="the pipeline to apply the log")
        base = prometheus(f"127.0.0.1:{metrics.address[1]}")
        wait_for(lambda: _query(base, "memstream_projection_applied_total"), timeout=60, what="Prometheus to scrape memstream")
        length = client.xlen(log.stream_keys[0])
        assert _query(base, 'up{job="memstream"}') == {"": 1.0}
        assert _query(base, f'memstream_stream_entries{{stream="{log.stream_keys[0]}"}}') == {"": float(length)}
        assert _query(base, "sum by (group) (memstream_projection_applied_total)") == {
            group: float(length) for group in group_names()
        }
        assert _query(base, "max by (group) (memstream_projection_lag_entries)") == {group: 0.0 for group in group_names()}
        assert _query(base, 'sum(memstream_events_appended_total{type="turn.recorded"})') == {"": 8.0}
        assert _query(base, "memstream_projection_dead_letters") == {g: float(g == group_of("facts")) for g in group_names()}
        assert _query(base, f'memstream_projection_freshness_seconds_count{{group="{group_of("turns")}"}}') == {
            group_of("turns"): float(length)
        }

        # the rules: loaded, evaluated without error, and the one the data calls for is pending
        def evaluated() -> list[dict] | None:
            groups = _get(base, "/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return rules if rules and all(r["health"] == "ok" for r in rules) else None

        rules = wait_for(evaluated, timeout=60, what="every rule to be evaluated")
        assert {r["name"] for r in rules} == ALERTS
        assert all(r["type"] == "alerting" and not r.get("lastError") for r in rules)

        # (an evaluation before the first scrape may have seen no metrics: that alert resolves)
        seen: list[dict[str, str]] = []

        def alerts() -> bool:
            found = _get(base, "/api/v1/alerts")["data"]["alerts"]
            seen.append({a["labels"]["alertname"]: a["labels"].get("group", "") for a in found})
            return seen[-1] == {"MemstreamDeadLetters": group_of("facts")}

        try:
            wait_for(alerts, timeout=60, what="the alert on the dead letter, alone")
        except AssertionError:
            raise AssertionError(f"the alerts Prometheus last showed: {seen[-1]}") from None
    finally:
        if metrics is not None:
            metrics.stop()
        pipeline.stop()
        client.close()


def _evaluate(base: str, promql: str) -> tuple[str | None, list]:
    """(Prometheus's error or None, the result) of the instant query ``promql``."""
    try:
        reply = _get(base, "/api/v1/query", query=promql)
    except urllib.error.HTTPError as exc:  # 400 and 422 carry Prometheus's error in JSON
        body = json.loads(exc.read() or b"{}")
        return f"{exc.code} {body.get('errorType')}: {body.get('error')}", []
    return (reply.get("error") if reply["status"] != "success" else None), reply["data"]["result"]


@needs_prometheus
@pytest.mark.valkey
def test_every_expression_of_the_grafana_dashboard_evaluates_in_prometheus_and_returns_what_is_reported(
    tmp_path, valkey_server, prometheus
):
    from dashboard_support import concrete, dashboard, expressions, scan

    from memstream.query import CountRequest, ask

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    log.append([turn(f"Release {i} ships the parser fix number {i}", index=i) for i in range(4)])
    pipeline = make_pipeline(tmp_path / "home", log)
    metrics = start_metrics(
        pipeline_settings(tmp_path / "home", metrics_addr="127.0.0.1:0"),
        EventLog(redis.Redis.from_url(valkey_server.url), "memstream"),
        consumers=lambda: pipeline.consumers,
    )
    try:
        assert metrics is not None and metrics.address is not None
        pipeline.start()
        wait_for(lambda: all_applied(log), what="the pipeline to apply the log")
        ask(client, "memstream", CountRequest(), timeout=10)  # a query handler's seconds
        base = prometheus(f"127.0.0.1:{metrics.address[1]}")
        wait_for(lambda: _query(base, "memstream_query_seconds_count"), timeout=60, what="Prometheus to scrape memstream")
        board = expressions(dashboard())
        errors = {where: error for where, expr in board if (error := _evaluate(base, concrete(expr))[0])}
        assert not errors, errors
        # an expression over figures this process reports returns series once they are scraped
        # twice (the rates); the others (a build's progress, the agents' figures) may be empty
        reported = {name for where, expr in board for name in scan(expr).metrics if _evaluate(base, f"count({name})")[1]}
        expected = [
            (where, concrete(expr))
            for where, expr in board
            if all(n.startswith("memstream_") and n in reported for n in scan(expr).metrics)
        ]
        assert len(expected) >= 15, expected
        empty: list[str] = []

        def answered() -> bool:
            empty[:] = [where for where, expr in expected if not _evaluate(base, expr)[1]]
            return not empty

        try:
            wait_for(answered, timeout=60, what="every expression over reported figures to return series")
        except AssertionError:
            raise AssertionError(f"expressions that returned nothing: {empty}") from None
    finally:
        if metrics is not None:
            metrics.stop()
        pipeline.stop()
        client.close()


@needs_promtool
def test_the_alert_rules_pass_their_unit_tests_and_the_example_configuration_is_valid():
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", str(DEPLOY / "rules_test.yml")], capture_output=True, text=True, timeout=120
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    checked = subprocess.run(
        [PROMTOOL, "check", "config", str(DEPLOY / "prometheus.yml")], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_alert_rule_is_unit_tested():
    import yaml

    rules = {r["alert"] for g in yaml.safe_load((DEPLOY / "rules.yml").read_text())["groups"] for r in g["rules"]}
    tests = yaml.safe_load((DEPLOY / "rules_test.yml").read_text())["tests"]
    tested = {case["alertname"] for t in tests for case in t["alert_rule_test"] if case["exp_alerts"]}
    assert rules == tested == ALERTS
