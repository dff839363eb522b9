"""``memstream bench rerank`` on a tiny conversation in LoCoMo's file format (the real data
is CC BY-NC and never ships with memstream), with the real cross-encoder."""

from __future__ import annotations

import argparse
import json

import pytest

from memstream.bench.command import BenchError
from memstream.bench.rerank import _counts, _counts_of_tokens, format_rerank, rerank_cost


def _write(tmp_path):
    turns = [
        {
            "sample_id": "conv-26",
            "dia_id": f"D1:{i + 1}",
            "session": 1,
            "session_date_time": "1:56 pm on 8 May, 2023",
            "speaker": "Ana" if i % 2 else "Ben",
            "text": text,
        }
        for i, text in enumerate(
            [
                "I adopted a grey cat named Pixel last week.",
                "That is great news, tell me more about the cat and how the first days at home went for both of you.",
                "We ran the Lisbon half marathon in May.",
                "The weather was hot.",
                "I started learning the cello.",
            ]
        )
    ]
    qrels = [
        {"sample_id": "conv-26", "qa_index": i, "question": q, "category": 4, "gold_dia_ids": [g]}
        for i, (q, g) in enumerate([("What cat did Ben adopt?", "D1:1"), ("Which race did they run?", "D1:3")])
    ]
    (tmp_path / "locomo10_turns.jsonl").write_text("\n".join(map(json.dumps, turns)) + "\n")
    (tmp_path / "locomo10_qrels.jsonl").write_text("\n".join(map(json.dumps, qrels)) + "\n")


def test_every_batch_size_is_timed_on_the_same_candidates_with_its_padding(tmp_path):
    _write(tmp_path)
    result = rerank_cost(tmp_path, pairs=(2, 4), batch_sizes=(4, 1), questions=2, rounds=2, threads=1)
    runs = {(r["pairs"], r["batch_size"]): r for r in result["runs"]}
    assert all(r["threads"] == 1 and r["max_length"] == 256 for r in result["runs"])
    assert set(runs) == {(2, 4), (2, 1), (4, 4), (4, 1)}
    assert all(r["calls"] == 2 * 2 and r["p95_ms"] >= r["p50_ms"] > 0 for r in runs.values())
    # one pair a call pads nothing; four pairs of different lengths in one call do
    assert runs[(4, 1)]["padded_over_real_tokens"] == 1.0 < runs[(4, 4)]["padded_over_real_tokens"]
    assert result["questions"] == 2 and result["threads"] == 1 and 8 < result["pair_tokens"]["max"] < 64
    assert "padded/real" in format_rerank(result)


def test_threads_and_token_caps_are_timed_beside_each_other_with_the_pairs_a_cap_cuts(tmp_path):
    _write(tmp_path)
    result = rerank_cost(tmp_path, pairs=(4,), batch_sizes=(4,), questions=2, rounds=1, threads=(1, 2), max_lengths=(256, 16))
    settings = {(r["threads"], r["max_length"]): r for r in result["runs"]}
    assert set(settings) == {(1, 256), (1, 16), (2, 256), (2, 16)} and all(r["calls"] == 2 for r in settings.values())
    cut = result["pair_tokens"]["cut_share"]
    assert cut["256"] == 0.0 < cut["16"] <= 1.0  # every pair fits 256 tokens; some are over 16
    # a cut pair pads less: its batch is no wider than the cap
    assert settings[(1, 16)]["padded_over_real_tokens"] <= settings[(1, 256)]["padded_over_real_tokens"]
    assert result["threads"] == [1, 2] and "pairs a cap cuts" in format_rerank(result)


def test_bad_counts_and_missing_data_are_refused(tmp_path):
    assert _counts("16,4") == (16, 4)
    assert _counts_of_tokens("256,128") == (256, 128)
    for bad in ("", "4", "513", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            _counts_of_tokens(bad)
    for bad in ("", "x", "0", "101"):
        with pytest.raises(argparse.ArgumentTypeError):
            _counts(bad)
    with pytest.raises(BenchError, match="not found"):
        rerank_cost(tmp_path)
