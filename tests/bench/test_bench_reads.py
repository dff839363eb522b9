"""``memstream bench reads`` on a tiny workload: every thread count answers every caller."""

from memstream.bench.reads import format_reads, reads_bench


def test_the_read_capacity_bench_reports_each_thread_count_with_no_errors():
    result = reads_bench(memories=200, threads=(1, 2), clients=2, processes=1, seconds=1.0, rounds=1)
    assert [level["threads"] for level in result["levels"]] == [1, 2]
    for level in result["levels"]:
        assert level["errors"] == 0
        assert level["answered_per_s"] > 0
        assert 0 < level["round_trip_p50_ms"] <= level["round_trip_p95_ms"] <= level["round_trip_p99_ms"]
        assert level["handler_p50_ms"] > 0
    assert result["levels"][0]["ratio_to_first"] == 1.0
    assert result["default_threads"] >= 2
    assert "answered/s" in format_reads(result)
