"""``memstream bench prefetch`` on a tiny workload: every phase runs and reports (no timing asserted)."""

from __future__ import annotations

import pytest

from memstream.bench.prefetch import format_prefetch, prefetch_bench
from memstream.provider.prefetch import WAKEUP_SLACK_S

pytestmark = pytest.mark.valkey


def test_bench_prefetch_runs_every_phase_on_a_tiny_workload():
    result = prefetch_bench(sizes=(150, 300), queries=12, embedder="hash", budget_ms=150)
    assert [s["memories"] for s in result["sizes"]] == [150, 300]
    for size in result["sizes"]:
        # every memory of every scope became a point; every prefetch had an outcome
        assert size["points"] == size["memories"] + 2 * (size["memories"] // 10)
        assert sum(size["outcomes"].values()) == 12
        assert size["fresh_query_ms"]["n"] == 12 and size["prefetch_ms"]["n"] == 12
        assert 0.0 <= size["fresh_fraction"] <= 1.0
    assert result["sizes"][-1]["outcomes"]["prefetch_fresh"] > 0  # the service answered
    assert result["sizes"][-1]["non_empty_blocks"] > 0  # ... with the bench tenant's memories
    stalled = result["stalled"]
    assert stalled["over_budget_ms"]["n"] == 12 and stalled["floor_over_budget_ms"]["n"] == 12
    # it waited its budget less the wake-up slack, no more needed
    assert stalled["over_budget_ms"]["p50"] >= -1000 * WAKEUP_SLACK_S - 0.01
    assert result["verdict"]["met_fresh_query"] is False  # 300 memories is not the 100k target
    assert "prefetch p50" in format_prefetch(result)
