"""memstream bench replay, small: every phase runs and reports what it measured."""

from __future__ import annotations

import pytest

from memstream.bench.replay import format_replay, replay_bench

pytestmark = pytest.mark.valkey


def test_bench_replay_measures_throughput_freshness_and_queries_during_activation():
    r = replay_bench(events=300, onnx_events=0, rate=20.0, seconds=1.0, qps=20.0, throughput_events=200)
    t = r["throughput_hash"]
    assert (
        t["events"] == 200
        and len(t["ratios"]) == 3
        and t["active_after"] == dict.fromkeys(["turns", "memories", "facts", "sessions"], 2)
    )
    f = r["freshness"]
    assert f["alone"]["visible"] == f["alone"]["sampled"] > 0
    d = f["during_replay"]
    assert d["replay_active"] == dict.fromkeys(["turns", "memories", "facts", "sessions"], 2)
    assert d["replay_s"] is not None and d["visible"] == d["sampled"]
    assert d["queries"]["asked"] > 0 and d["queries"]["errors"] == 0 and d["queries"]["empty"] == 0
    assert "throughput_onnx" not in r and set(r["met"]) == {
        "throughput_hash",
        "freshness_ratio",
        "freshness_p95",
        "activation_queries",
    }
    assert "the replay of all four projections took" in format_replay(r)
