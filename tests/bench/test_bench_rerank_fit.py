"""``memstream bench rerank-fit`` on a tiny grid in the locomo bench's format (the real data is
CC BY-NC and never ships with memstream), with the real late-interaction model: the pairwise
fit, the conversation left out, the pairing with the hand sum."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from memstream.bench.command import BenchError
from memstream.bench.rerank_fit import add_arguments, fit_pairwise, format_fit, learned_rows, run
from memstream.query.rerank import LEARNED_FEATURES

CANDIDATES = 14


def _write(tmp_path):
    """Two conversations of 14 turns; per question the gold turn has the lowest fused score
    and the highest logit, and the other candidates a higher fused score and (but one) a
    logit a little lower: the hand sum puts the gold turn 13th, a weight on the logit first."""
    turns, qrels, scored = [], [], {}
    for conv in ("conv-26", "conv-30"):
        for i in range(CANDIDATES):
            turns.append(
                {
                    "sample_id": conv,
                    "dia_id": f"D{1 + i // 7}:{i % 7 + 1}",
                    "session": 1 + i // 7,
                    "session_date_time": "1:56 pm on 8 May, 2023",
                    "speaker": "Ana" if i % 2 else "Ben",
                    "text": f"Turn {i} of {conv}: the weather, the garden and the week's plans.",
                }
            )
        for qa in range(3):
            gold = f"D2:{qa + 1}"
            question = f"Question {qa} of {conv}?"
            qrels.append({"sample_id": conv, "qa_index": qa, "question": question, "category": 4, "gold_dia_ids": [gold]})
            dias = [t["dia_id"] for t in turns if t["sample_id"] == conv and t["dia_id"] != gold]
            cands = [[d, 1.0 - j / 100, 8.5 + 0.001 * j if j else 0.0] for j, d in enumerate(dias)] + [[gold, 0.5, 9.0]]
            scored[f"{conv}|{question}"] = cands
    (tmp_path / "locomo10_turns.jsonl").write_text("\n".join(map(json.dumps, turns)) + "\n")
    (tmp_path / "locomo10_qrels.jsonl").write_text("\n".join(map(json.dumps, qrels)) + "\n")
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"rerank_grid": {"scored": scored}}))
    return grid


def _args(tmp_path, grid, **extra):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    argv = ["--data", str(tmp_path), "--grid", str(grid), "--candidates", str(CANDIDATES), "--keep", str(CANDIDATES)]
    for name, value in extra.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return parser.parse_args(argv + ["--json"])


def test_the_pairwise_fit_puts_its_weight_on_the_feature_that_separates_gold():
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(40):
        x = rng.normal(size=(10, 3))
        y = np.zeros(10)
        y[int(np.argmax(x[:, 1]))] = 1  # the second feature's best is gold
        rows.append((x, y))
    w = fit_pairwise(rows, l2=0.001)
    assert w[1] > 0 and abs(w[1]) > 3 * max(abs(w[0]), abs(w[2]))
    assert sum(int(np.argmax(x @ w)) == int(np.argmax(y)) for x, y in rows) >= 36
    with pytest.raises(BenchError):
        fit_pairwise([(rng.normal(size=(3, 2)), np.zeros(3))], l2=0.001)  # no gold: nothing to fit


def test_rerank_fit_leaves_a_conversation_out_and_pairs_the_learned_order_with_the_hand_sum(tmp_path, capsys):
    grid = _write(tmp_path)
    assert run(_args(tmp_path, grid, l2="0.001")) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["questions"] == 6 and result["features"] == list(LEARNED_FEATURES)
    assert result["hand"]["any@10"] == 0.0  # the gold turn is the hand sum's 13th of 14
    (point,) = result["points"]
    assert point["keep"] == CANDIDATES and point["l2"] == 0.001 and len(point["weights"]) == len(LEARNED_FEATURES)
    # fit on the other conversation, each conversation's questions put their gold turn in the top 10
    assert point["cv"]["any@10"] == 100.0
    assert point["paired_with_hand"]["any@10"] == {"wins": 6, "losses": 0, "p": 0.0312}
    assert "learned, keep 14, l2 0.001 (CV)" in format_fit(result)


def test_learned_rows_are_the_cuts_scored_candidates_with_their_features(tmp_path):
    grid = _write(tmp_path)
    scored = json.loads(grid.read_text())["rerank_grid"]["scored"]
    from memstream.bench.rerank_fit import late_of_grid

    questions = late_of_grid(tmp_path, "dev", scored)
    ids, x, y, rest = learned_rows(questions[0], CANDIDATES, 5)
    assert len(ids) == 5 and x.shape == (5, len(LEARNED_FEATURES)) and len(rest) == CANDIDATES - 5
    assert sorted(ids + rest) == sorted(c[0] for c in questions[0][1]) and y.sum() == (questions[0][0]["gold_dia_ids"][0] in ids)


def test_rerank_fit_refuses_what_is_not_a_grid(tmp_path):
    _write(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(BenchError, match="rerank-grid"):
        run(_args(tmp_path, bad))
    with pytest.raises(BenchError, match="--keep"):
        run(_args(tmp_path, tmp_path / "grid.json", candidates=5))
