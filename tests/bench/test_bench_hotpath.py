"""`memstream bench hotpath` on a tiny workload: every condition and hook is measured in
interleaved rounds, nothing is lost, the gateway cycle runs, and a condition worse than
Redis-up beyond the noise is called out. Timings are never asserted here."""

from __future__ import annotations

import pytest

from memstream.bench.hotpath import HOOKS, compare, format_hotpath, hotpath


@pytest.mark.valkey
def test_bench_hotpath_measures_every_condition_interleaved_and_loses_nothing():
    result = hotpath(calls=8, rounds=2, cycles=3, slow_chunk=2, warmup=5, report_every=0.05)
    assert result["hook_errors"] == {name: 0 for name in result["conditions"]}  # shutdown's too
    assert set(result["conditions"]) == {
        "redis_up/0ms",
        "down_mid/0ms",
        "down_init/0ms",
        "report_off/0ms",
        "redis_up/20ms",
        "down_mid/20ms",
        "down_init/20ms",
        "report_off/20ms",
        "naive_xadd",
    }
    for name, entry in result["conditions"].items():
        for hook in HOOKS:
            assert entry[hook]["n"] == (8 if name.endswith("0ms") and "20ms" not in name or name == "naive_xadd" else 4)
            assert len(entry["rounds_p99_us"][hook]) == 2
        if name.startswith(("down_mid", "down_init")):
            assert set(entry["vs_redis_up"]) == set(HOOKS)
    assert result["lossless"], result["delivery"]
    # the fleet report: on (redis_up) against off (report_off), and what recording a duration costs
    assert set(result["reporting"]) == {"0ms", "20ms"}
    assert all(set(by_hook) == set(HOOKS) for by_hook in result["reporting"].values())
    assert result["reports_sent"]["redis_up/20ms"] >= 1 and result["reports_sent"]["report_off/20ms"] == 0
    assert result["tally_ns_per_hook"]["on_ns"] > 0 and result["tally_ns_per_hook"]["off_ns"] > 0
    gateway = result["gateway_cycle"]
    assert gateway["redis_up"]["initialize"]["n"] == gateway["redis_down"]["shutdown"]["n"] == 3
    assert gateway["redis_up"]["events_in_log"] == gateway["redis_up"]["events_expected"] == 6
    text = format_hotpath(result)
    assert "down_init/20ms" in text and "gateway cycle" in text and "fleet report every 0.05 s" in text


def test_a_condition_worse_in_every_round_beyond_the_noise_is_a_regression():
    ref_rounds = [40.0, 42.0, 41.0, 45.0, 39.0, 44.0, 40.0, 43.0]
    ref = [10_000] * 980 + [40_000] * 20
    worse = compare([10_000] * 980 + [90_000] * 20, [x * 2 for x in ref_rounds], ref, ref_rounds)
    assert worse["regression"] and worse["rounds_worse"] == 8 and worse["ratios"]["p99_us"] > worse["noise_p99"]
    same = compare(ref, [x * (1.05 if i % 2 else 0.95) for i, x in enumerate(ref_rounds)], ref, ref_rounds)
    assert not same["regression"]


def test_the_report_says_regression_loudly(monkeypatch):
    result = {
        "date": "d",
        "rounds": 2,
        "method": {"chunks": {"0ms": 1, "20ms": 1}},
        "warmup": 0,
        "rounds_s": 1,
        "machine": {"cpus": 2, "cpu_model": "x", "python": "3", "loadavg_at_start": []},
        "floor": {k: {"n": 1, "p50_us": 1.0, "p99_us": 1.0, "p999_us": 1.0, "max_us": 1.0} for k in ("python_work", "write_2kb")},
        "conditions": {},
        "meets_target": True,
        "regressions": ["down_init/0ms sync_turn: p99 2x"],
        "gateway_cycle": {
            k: {s: {"n": 1, "p50_us": 1.0, "p99_us": 1.0, "max_us": 1.0} for s in ("initialize", "shutdown")}
            | {"events_in_log": 2, "events_expected": 2}
            for k in ("redis_up", "redis_down")
        },
        "delivery": {},
        "lossless": True,
        "references": [],
    }
    assert "REGRESSION: down_init/0ms sync_turn: p99 2x" in format_hotpath(result).splitlines()
