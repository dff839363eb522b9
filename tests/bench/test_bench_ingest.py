"""`memstream bench ingest` end to end on a tiny workload: every phase runs and counts
what it should. Timings are reported by the benchmark, never asserted here."""

from __future__ import annotations

import pytest

from memstream.bench.ingest import format_ingest, ingest


@pytest.mark.valkey
def test_bench_ingest_runs_every_phase_on_a_tiny_workload():
    result = ingest(events=40, runs=2, hash_events=60, rate=20.0, seconds=1.0,
                    onnx_seconds=1.0, onnx_rate=5.0, onnx_high_rate=40.0, freshness_onnx=True)
    assert result["hash"]["events"] == 60 and len(result["hash"]["per_run_events_per_s"]) == 2
    assert result["onnx"]["texts_embedded"] == result["onnx"]["turn_points"] > 0
    assert result["raw"]["texts"] == result["onnx"]["texts_embedded"]
    assert result["per_run_order"] == ["pipeline first", "raw first"]
    assert all(r > 0 for r in result["per_run_ratio"])
    for phase in ("freshness_hash", "freshness_onnx", "freshness_onnx_low", "freshness_onnx_high"):
        fresh = result[phase]
        assert fresh["visible"] == fresh["keyword_visible"] == fresh["sampled"] > 0, (phase, fresh)
        assert set(fresh["applied_at_end"].values()) == {fresh["events"]}, (phase, fresh)
        assert fresh["backlog_drain_s"] is not None, (phase, fresh)
        assert fresh["inline"] is (phase == "freshness_hash"), (phase, fresh)
    assert set(result["met"]) >= {"ratio", "hash_events_per_s", "freshness_hash_p95"}
    assert "events/s" in format_ingest(result)
