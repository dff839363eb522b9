"""``memstream bench reads`` on a tiny workload: each tree's query process answers every
caller, and the CPU per recall is reported by stage beside the floor of the same work."""

import argparse
import random
from pathlib import Path

from memstream.bench import reads, reads_child
from memstream.bench.reads import format_reads, reads_bench
from memstream.bench.reads_child import _Timed
from memstream.bench.workload import fresh_question


def test_the_read_bench_measures_two_trees_by_stage_with_no_errors():
    here = Path(reads.__file__).resolve().parents[2]
    result = reads_bench(memories=200, clients=2, processes=1, seconds=1.0, rounds=1, stage_questions=16, against=str(here))
    assert result["questions"] == "fresh"
    assert set(result["trees"]) == {"this", "against"}
    for tree in result["trees"].values():
        assert tree["late_interaction"] is False  # the hash embedder's read side has none
        s = tree["summary"]
        assert s["errors"] == 0 and s["recalls_per_s"] > 0
        assert 0 < s["round_trip_p50_ms"] <= s["round_trip_p95_ms"]
        assert s["cpu_ms_per_recall"] > 0 and s["floor_lone_ms"] > 0 and s["floor_batch_ms"] > 0
        # the served CPU split: the serving threads answered every recall in batches counted by size
        served = s["served"]
        assert 0 < served["handle_ms"] and served["take_ms"] >= 0 and served["callers_ms"] > 0
        assert sum(size * n for size, n in s["batch_sizes"].items()) >= 1 and served["batch_mean"] >= 1
        for mode in ("lone", "batch"):  # this tree answers recalls in batches too
            stages = s["stages"][mode]
            assert stages["handler"] > 0 and stages["searches"] > 0 and stages["embed"] > 0
    assert result["ratio"]["recalls_per_s"] > 0
    text = format_reads(result)
    assert "questions: fresh" in text and "per-hit" in text and "floor lone" in text and "handle_batch" in text


def test_the_read_bench_measures_two_query_processes_a_replica_answering_beside_the_tree():
    result = reads_bench(memories=200, clients=4, processes=1, seconds=1.0, rounds=1, stage_questions=8, query_processes=2)
    spread = result["replicas"]
    assert spread["errors"] == 0 and spread["recalls_per_s"] > 0 and spread["cpu_ms_per_recall"] > 0
    assert spread["ratio_to_one"] > 0 and len(spread["rss_mb"]) == 2 and min(spread["rss_mb"]) > 0
    assert "2 query processes" in format_reads(result)


def test_the_read_bench_splits_the_late_interaction_of_a_model_recall_and_embeds_once():
    # bge-small: the late interaction on; the tree before's dense stage reads the first tree's vectors
    here = Path(reads.__file__).resolve().parents[2]
    result = reads_bench(
        memories=30, clients=2, processes=1, seconds=0.5, rounds=1, stage_questions=8, embedder="bge-small", against=str(here)
    )
    assert result["embeddings_from_first_tree"] is True
    for tree in result["trees"].values():
        s = tree["summary"]
        assert s["errors"] == 0 and tree["late_interaction"] is True
        for stages in s["stages"].values():
            assert stages["late_query"] > 0 and stages["late_passages"] > 0 and stages["late_rest"] > 0
            assert stages["late_computed"] == 0  # every passage's token vectors stored by the dense stage
            assert stages["per_hit"] < stages["handler"]
    assert result["late_interaction"] is True and result["late_rerank"] == "auto"
    assert "late (query" in format_reads(result) and "(late interaction on, setting auto)" in format_reads(result)


class _Nested:
    """Two methods that spend a known CPU on a fake clock: ``inner`` 2, ``outer`` 3 and an ``inner``."""

    def __init__(self) -> None:
        self.clock = 0.0

    def now(self) -> float:
        return self.clock

    def inner(self) -> None:
        self.clock += 2

    def outer(self) -> None:
        self.clock += 3
        self.inner()


def test_a_timed_call_inside_another_counts_for_its_own_stage_only(monkeypatch):
    nested, timed = _Nested(), _Timed()
    monkeypatch.setattr(reads_child, "_cpu", nested.now)
    timed.wrap(nested, "outer", "outer")
    timed.wrap(nested, "inner", "inner")
    nested.outer()
    nested.inner()
    assert timed.cpu == {"outer": 3, "inner": 4}
    timed.undo()
    assert "outer" not in vars(nested) and "inner" not in vars(nested)  # the class's methods again


def test_fresh_questions_do_not_repeat():
    rng = random.Random(1)
    asked = [fresh_question(rng) for _ in range(2000)]
    assert len(set(asked)) == len(asked)


def test_the_options_are_the_commands_and_run_takes_them():
    parser = argparse.ArgumentParser()
    reads.add_arguments(parser)
    args = parser.parse_args(["--memories", "50", "--cached", "--rounds", "1", "--against", "/x"])
    assert (args.memories, args.cached, args.rounds, args.against, args.embedder) == (50, True, 1, "/x", "hash")
    assert args.late_rerank == "" and parser.parse_args(["--late-rerank", "off"]).late_rerank == "off"
