"""`memstream bench metrics` end to end on a tiny workload: pairs of drains with metrics on
and off, order alternating, and the scrape costs. Timings are reported, never asserted."""

from __future__ import annotations

import pytest

from memstream.bench.metrics import format_metrics, metrics_bench
from memstream.core import observe


@pytest.mark.valkey
def test_bench_metrics_runs_pairs_on_and_off_and_measures_a_scrape():
    before = observe.current()
    result = metrics_bench(events=60, runs=2, scrape_every=0.05, scrapes=3, agents=30)
    assert [p["order"] for p in result["pairs"]] == ["on first", "off first"]
    assert all(p["ratio"] > 0 and p["cpu_ratio"] > 0 for p in result["pairs"])
    scrape = result["scrape"]
    assert scrape["scrapes"] == 3 and scrape["groups"] == 4
    assert scrape["bytes"] > scrape["gzip_bytes"] > 0 and scrape["samples"] > 0 and scrape["redis_commands"] > 0
    assert result["observer_us_per_entry"] > 0 and 0 < result["observer_share"]
    assert set(result["scrape_share_at"]) == {"1s", "15s", "60s"}
    fleet = result["fleet"]
    assert fleet["agents"] == 30 and fleet["scrapes"] == 3 and fleet["bytes"] > scrape["bytes"]
    assert 0 < fleet["report_bytes_p50"] <= fleet["report_bytes_max"] <= 4096
    assert set(result["met"]) == {"ratio", "fleet_scrape_p95_ms"}
    assert "ratio on/off" in format_metrics(result) and "30 agents reporting" in format_metrics(result)
    assert observe.current() is before  # the benchmark leaves the process's observer as it found it
