"""``memstream bench hnsw`` on a small scope (the hash embedder): the index is built, both
paths answer every question, the index's recall against the exact pass is reported, and
the table shows each size."""

from __future__ import annotations

import argparse

import pytest

from memstream.bench.command import BenchError
from memstream.bench.hnsw import _corpus, add_arguments, format_hnsw, hnsw_bench


def test_a_small_run_builds_the_index_and_reports_recall_against_the_exact_pass():
    result = hnsw_bench((600, 1200), "hash", questions=16, rounds=1)
    assert [s["rows"] for s in result["sizes"]] == [600, 1200]
    for size in result["sizes"]:
        assert size["questions"] == 16
        assert 0.0 <= size["recall_at_12"] <= 1.0 and 0.0 <= size["recall_at_50"] <= 1.0
        # 600 rows and a search list of 4 x 50: the graph is asked for a third of the scope
        assert size["recall_at_12"] >= 0.9
        assert size["exact_lone_ms"] > 0 and size["hnsw_lone_ms"] > 0
        assert size["build_cpu_s"] >= 0
    table = format_hnsw(result)
    assert "recall@12" in table and "1200" in table


def test_a_data_directory_without_locomo_files_is_refused(tmp_path):
    with pytest.raises(BenchError, match="locomo10_turns.jsonl"):
        _corpus(10, str(tmp_path), 7)


def test_sizes_must_ascend():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--rows", "1000,2000"]).rows == (1000, 2000)
    with pytest.raises(SystemExit):
        parser.parse_args(["--rows", "2000,1000"])
