"""``memstream bench queries`` on a tiny workload: both transports answer, figures add up."""

import threading

from memstream.bench.queries import format_queries, queries_bench


def test_the_query_transport_bench_measures_both_transports():
    result = queries_bench(queries=20, rounds=2)
    for name in ("lists", "rq"):
        assert 0 < result[name]["p50"] <= result[name]["p95"]
    assert result["ratio_rq_over_lists_p50"] > 0
    assert "rq / lists" in format_queries(result)


def test_the_rq_worker_of_the_bench_is_gone_when_the_bench_returns():
    queries_bench(queries=5, rounds=1)
    assert not [t for t in threading.enumerate() if t.name == "memstream-bench-rq"]
