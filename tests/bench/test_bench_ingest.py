"""`memstream bench ingest` end to end on a tiny workload: every phase runs and counts
what it should. Timings are reported by the benchmark, never asserted here."""

from __future__ import annotations

import pytest

from memstream.bench.ingest import format_ingest, ingest


@pytest.mark.valkey
def test_bench_ingest_runs_every_phase_on_a_tiny_workload():
    # the model's phases embed every text (about 0.2 s of CPU a turn here): ten turns, and a
    # "high" rate of ten a second, check the same as more would
    result = ingest(
        events=10,
        runs=2,
        hash_events=60,
        rate=20.0,
        seconds=1.0,
        onnx_seconds=1.0,
        onnx_rate=5.0,
        onnx_high_rate=10.0,
        freshness_onnx=True,
    )
    assert result["hash"]["events"] == 60 and len(result["hash"]["per_run_events_per_s"]) == 2
    assert result["onnx"]["texts_embedded"] == result["onnx"]["turn_points"] > 0 and result["onnx"]["model"] == "onnx-minilm"
    assert result["raw"]["texts"] == result["onnx"]["texts_embedded"]
    # the dense stage stores the turns' token vectors (late interaction, on with a local model):
    # the raw phase runs the late-interaction model on the same texts
    assert 0 < result["raw"]["late_texts"] <= result["onnx"]["turn_points"]
    assert result["per_run_order"] == ["pipeline first", "raw first"]
    assert all(r > 0 for r in result["per_run_ratio"])
    # facts and sessions apart: drained by the child process, every group applied every event
    assert result["hash_apart"]["events"] == 60 and len(result["per_run_apart_ratio"]) == 2
    assert result["hash_apart"]["applied"] == {g: 60 for g in ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")}
    assert "apart" in result["hash_apart"]["consumer_seconds"]
    for phase in ("freshness_hash", "freshness_hash_apart", "freshness_onnx", "freshness_onnx_low", "freshness_onnx_high"):
        fresh = result[phase]
        assert fresh["visible"] == fresh["keyword_visible"] == fresh["sampled"] > 0, (phase, fresh)
        assert set(fresh["applied_at_end"].values()) == {fresh["events"]}, (phase, fresh)
        assert fresh["backlog_drain_s"] is not None, (phase, fresh)
        assert fresh["inline"] is phase.startswith("freshness_hash"), (phase, fresh)
        assert len(fresh["applied_at_end"]) == 4, (phase, fresh)
    assert set(result["met"]) >= {"ratio", "hash_events_per_s", "freshness_hash_p95"}
    assert "events/s" in format_ingest(result) and "the late-interaction model's passages too" in format_ingest(result)


@pytest.mark.valkey
def test_bench_ingest_with_the_hash_embedder_only_skips_the_model():
    result = ingest(events=40, runs=1, hash_events=40, rate=20.0, seconds=1.0, onnx=False, freshness_runs=2)
    assert "onnx" not in result and "ratio" not in result["met"]
    for phase in ("freshness_hash", "freshness_hash_apart"):  # two runs each, alternated: medians
        assert result[phase]["runs"] == 2 and len(result[phase]["per_run_keyword_p95_s"]) == 2
    assert result["hash_apart"]["applied"]["facts.v1"] == 40
    assert "facts and sessions apart" in format_ingest(result)
