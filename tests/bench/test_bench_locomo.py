"""``memstream bench locomo`` on a tiny synthetic conversation set in LoCoMo's file format
(the real data is CC BY-NC and never ships with memstream)."""

from __future__ import annotations

import json

import pytest

from memstream.bench.locomo import BM25, BenchDataError, format_locomo, locomo

pytestmark = pytest.mark.valkey

FACTS = ["adopted a grey cat named Pixel", "ran the Lisbon half marathon", "started learning the cello",
         "moved into a flat near the harbour", "painted a mural of sunflowers", "visited the glacier museum"]


def _write(tmp_path):
    turns, qrels = [], []
    for c, conv in enumerate(("conv-26", "conv-30")):
        for session in (1, 2):
            date = f"1:56 pm on {8 + session} May, 2023"
            for i, fact in enumerate(FACTS):
                speaker = "Ana" if i % 2 else "Ben"
                dia = f"D{session}:{2 * i + 1}"
                text = f"Guess what, I {fact} last week!" if session == 1 else f"How is the weather there? ({c}{i})"
                turns.append({"sample_id": conv, "dia_id": dia, "session": session, "session_date_time": date,
                              "speaker": speaker, "text": text})
                turns.append({"sample_id": conv, "dia_id": f"D{session}:{2 * i + 2}", "session": session,
                              "session_date_time": date, "speaker": "Ana" if speaker == "Ben" else "Ben",
                              "text": "That is great news, tell me more."})
        for i, fact in enumerate(FACTS):
            who = "Ana" if i % 2 else "Ben"
            qrels.append({"sample_id": conv, "qa_index": i, "question": f"What did {who} do: {fact.split()[-1]}?",
                          "category": 1 + i % 5, "gold_dia_ids": [f"D1:{2 * i + 1}"]})
        qrels.append({"sample_id": conv, "qa_index": 99, "question": "unanswerable", "category": 5, "gold_dia_ids": []})
    (tmp_path / "locomo10_turns.jsonl").write_text("\n".join(map(json.dumps, turns)) + "\n")
    (tmp_path / "locomo10_qrels.jsonl").write_text("\n".join(map(json.dumps, qrels)) + "\n")
    return turns, qrels


def test_bench_locomo_runs_the_real_path_and_scores_against_baselines(tmp_path):
    _write(tmp_path)
    result = locomo(tmp_path, split="dev", embedder="hash")
    assert result["index"]["turns"] == 48 and result["index"]["points"] == 48
    ours = result["memstream"]
    assert ours["cats_1_5"]["n"] == 12  # the question without evidence is excluded
    assert ours["cats_1_4"]["n"] == 10 and sum(m["n"] for m in ours["per_category"].values()) == 12
    # each question names its fact's rarest word: every system finds it in the top 10
    assert ours["cats_1_5"]["any@10"] == 100.0 and result["baselines"]["bm25"]["cats_1_5"]["any@10"] == 100.0
    assert 0 < ours["cats_1_5"]["ndcg@10"] <= 100
    assert set(result["ratios"]) == {"bm25", "dense"} and result["ratios"]["bm25"]["any@10"] == 1.0
    assert result["latency_ms"]["n"] == 12 and result["injected_tokens"]["at_10_mean"] > 0
    assert "ratio to bm25" in format_locomo(result)


def test_bench_locomo_rejects_what_is_not_locomo(tmp_path):
    with pytest.raises(BenchDataError, match="not found"):
        locomo(tmp_path, split="dev", embedder="hash")
    (tmp_path / "locomo10_turns.jsonl").write_text('{"nope": 1}\n')
    (tmp_path / "locomo10_qrels.jsonl").write_text("{}\n")
    with pytest.raises(BenchDataError, match="not LoCoMo data"):
        locomo(tmp_path, split="dev", embedder="hash")
    with pytest.raises(BenchDataError, match="split must be"):
        locomo(tmp_path, split="train", embedder="hash")


def test_bm25_ranks_the_rare_term_first():
    index = BM25([("a", "the cat sat"), ("b", "the dog ran far"), ("c", "cats and dogs")])
    assert index.top("dogs ran", 2) == ["b", "c"]  # stemmed: "dogs" meets "dog"
    assert index.top("zebra", 5) == []
