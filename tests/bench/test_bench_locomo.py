"""``memstream bench locomo`` on a tiny synthetic conversation set in LoCoMo's file format
(the real data is CC BY-NC and never ships with memstream)."""

from __future__ import annotations

import json

import pytest

from memstream.bench.locomo import BM25, BenchDataError, format_locomo, locomo, paired, paired_runs, parse_options

pytestmark = pytest.mark.valkey

FACTS = [
    "adopted a grey cat named Pixel",
    "ran the Lisbon half marathon",
    "started learning the cello",
    "moved into a flat near the harbour",
    "painted a mural of sunflowers",
    "visited the glacier museum",
]


def _write(tmp_path):
    turns, qrels = [], []
    for c, conv in enumerate(("conv-26", "conv-30")):
        for session in (1, 2):
            date = f"1:56 pm on {8 + session} May, 2023"
            for i, fact in enumerate(FACTS):
                speaker = "Ana" if i % 2 else "Ben"
                dia = f"D{session}:{2 * i + 1}"
                text = f"Guess what, I {fact} last week!" if session == 1 else f"How is the weather there? ({c}{i})"
                turns.append(
                    {
                        "sample_id": conv,
                        "dia_id": dia,
                        "session": session,
                        "session_date_time": date,
                        "speaker": speaker,
                        "text": text,
                    }
                )
                turns.append(
                    {
                        "sample_id": conv,
                        "dia_id": f"D{session}:{2 * i + 2}",
                        "session": session,
                        "session_date_time": date,
                        "speaker": "Ana" if speaker == "Ben" else "Ben",
                        "text": "That is great news, tell me more.",
                    }
                )
        for i, fact in enumerate(FACTS):
            who = "Ana" if i % 2 else "Ben"
            qrels.append(
                {
                    "sample_id": conv,
                    "qa_index": i,
                    "question": f"What did {who} do: {fact.split()[-1]}?",
                    "category": 1 + i % 5,
                    "gold_dia_ids": [f"D1:{2 * i + 1}"],
                }
            )
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
    # per path: prefetch (recall), the tool's search, the same reranked; each paired with prefetch
    paths = result["paths"]
    assert list(paths) == ["prefetch", "search", "search+rerank"]
    for name, figures in paths.items():
        assert figures["metrics"]["cats_1_4"]["n"] == 10 and figures["latency_ms"]["n"] == 12, name
        assert set(result["retrieved_paths"][name]) == set(result["retrieved"])
    assert "paired_with_prefetch" not in paths["prefetch"]
    test = paths["search+rerank"]["paired_with_prefetch"]["cats_1_4"]["all@10"]
    assert test["wins"] == test["losses"] == 0  # every path finds every fact here
    assert result["index"]["build_s_per_1000_turns"] == round(result["index"]["build_s"] * 1000 / 48, 1)
    assert set(result["verdict"]) == {"prefetch", "search", "search+rerank", "note"}
    assert result["verdict"]["search+rerank"]["all@10"] is True
    text = format_locomo(result)
    assert "search+rerank" in text and "targets of prefetch" in text


def test_bench_locomo_runs_the_paths_asked_and_tunes_the_rerank_on_one_scoring(tmp_path):
    _write(tmp_path)
    result = locomo(tmp_path, split="dev", embedder="hash", paths=("search",), grid=True)
    assert list(result["paths"]) == ["search"] and "paired_with_prefetch" not in result["paths"]["search"]
    grid = result["rerank_grid"]
    assert [(p["fusion"], p["candidates"], p["weight"]) for p in grid["points"]][:2] == [("minmax", 20, 0.3), ("minmax", 20, 0.5)]
    assert len(grid["points"]) == 3 * 4 * 6 and all(p["cats_1_4"]["n"] == 10 for p in grid["points"])
    assert {p["fusion"] for p in grid["points"]} == {"minmax", "sigmoid", "rank"}
    # what was scored is kept per question, the ranking's order: a dia id, the fused score and the logit
    assert len(grid["scored"]) == 12 and all(len(c) == 3 for cands in grid["scored"].values() for c in cands)
    assert "rerank grid" in format_locomo(result)
    # the turns beside the best candidates: scored once when not among them, and reranked with them
    beside = grid["neighbour_points"]
    assert [(p["candidates"], p["neighbours_of"], p["weight"]) for p in beside][:2] == [(20, 3, 0.5), (20, 3, 0.7)]
    assert len(beside) == 3 * 3 * 2 and all(p["cats_1_4"]["n"] == 10 for p in beside)
    scored = {d for cands in grid["scored"].values() for d, _, _ in cands}
    outside = [(d, x) for found in grid["scored_neighbours"].values() for d, x in found]
    assert all(isinstance(x, float) for _, x in outside)
    assert all(
        d not in {c for c, _, _ in grid["scored"][key]} for key, found in grid["scored_neighbours"].items() for d, _ in found
    )
    assert scored and "turns beside the best" in format_locomo(result)


def test_bench_locomo_pairs_the_rerank_against_the_cross_encoder_over_all_its_candidates(tmp_path, monkeypatch):
    """With the late interaction on, ``search+rerank`` (its first cut, then the cross-encoder)
    is paired question by question with ``search+rerank-ce40`` (the late interaction off
    around that path: the cross-encoder over all the candidates) and with
    ``search+rerank-hand`` (the learned order off around that path: the hand sum)."""
    monkeypatch.setenv("MEMSTREAM_LATE_RERANK", "on")
    _write(tmp_path)
    paths = ("search+rerank", "search+rerank-ce40", "search+rerank-hand")
    result = locomo(tmp_path, split="dev", embedder="hash", paths=paths)
    assert result["late_interaction"] is True
    assert list(result["paths"]) == list(paths)
    for baseline in paths[1:]:
        pair = result["paths"]["search+rerank"][f"paired_with_{baseline}"]["cats_1_4"]
        assert set(pair) >= {"any@10", "all@10"} and all(pair[x]["wins"] >= 0 for x in ("any@10", "all@10"))
        assert f"vs {baseline}" in format_locomo(result)


def test_bench_locomo_refuses_a_path_it_does_not_know(tmp_path):
    import argparse

    from memstream.bench.command import BenchError
    from memstream.bench.locomo import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(BenchError, match="--paths"):
        run(parser.parse_args(["--data", str(tmp_path), "--paths", "search,telepathy"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(tmp_path), "--rerank-candidates", "51"])


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


def test_bench_locomo_compare_rebuilds_v2_from_the_same_events_and_reports_both(tmp_path):
    _write(tmp_path)
    result = locomo(tmp_path, split="dev", embedder="hash", compare={"keyword_context_turns": 1})
    c = result["compare"]
    assert (c["v1"]["collection"], c["v2"]["collection"]) == ("turns_v1", "turns_v2")
    assert c["v1"]["points"] == c["v2"]["points"] == 48
    assert c["v1"]["options"]["keyword_context_turns"] == 0 and c["v2"]["options"]["keyword_context_turns"] == 1
    assert c["v1"]["metrics"] == result["memstream"]
    assert c["v2"]["metrics"]["cats_1_5"]["n"] == 12 and c["v2"]["latency_ms"]["n"] == 12
    assert set(c["paired"]["cats_1_4"]) == {"any@10", "all@10"}
    text = format_locomo(result)
    assert "v1 against v2" in text and "turns_v2" in text


def test_compare_options_are_parsed_and_checked_before_anything_runs(tmp_path):
    assert parse_options("context_turns=2, date=false,x=a b") == {"context_turns": 2, "date": False, "x": "a b"}
    assert parse_options("") == {}
    with pytest.raises(BenchDataError, match="OPTION=VALUE"):
        parse_options("context_turns")
    with pytest.raises(BenchDataError, match="colour"):
        locomo(tmp_path, split="dev", embedder="hash", compare={"colour": 1})


def test_paired_counts_the_questions_each_version_alone_gets():
    qs = [
        {"gold_dia_ids": ["a", "b"], "category": 1},
        {"gold_dia_ids": ["c"], "category": 4},
        {"gold_dia_ids": ["d"], "category": 4},
    ]
    v1 = [(qs[0], ["a"]), (qs[1], ["c"]), (qs[2], ["x"])]
    v2 = [(qs[0], ["a", "b"]), (qs[1], ["x"]), (qs[2], ["x"])]
    result = paired(v1, v2)
    assert result["cats_1_4"]["all@10"] == {"wins": 1, "losses": 1, "p": 1.0}
    assert result["cats_1_4"]["any@10"] == {"wins": 0, "losses": 1, "p": 1.0}
    assert result["1 multi-hop"]["all@10"]["wins"] == 1 and result["4 single-hop"]["all@10"]["losses"] == 1


def test_two_runs_pair_per_question_through_what_each_retrieved(tmp_path):
    _write(tmp_path)
    a = locomo(tmp_path, split="dev", embedder="hash")
    questions = [q for q in map(json.loads, (tmp_path / "locomo10_qrels.jsonl").read_text().splitlines()) if q["gold_dia_ids"]]
    assert len(a["retrieved"]) == len(questions)
    assert paired_runs(a, a, tmp_path)["cats_1_4"]["all@10"] == {"wins": 0, "losses": 0, "p": 1.0}
    # b finds nothing: every question a answered is a loss of b's
    b = {**a, "retrieved": {key: [] for key in a["retrieved"]}}
    got = sum(
        1
        for q in questions
        if q["category"] != 5 and set(q["gold_dia_ids"]) & set(a["retrieved"][f"{q['sample_id']}|{q['question']}"])
    )
    assert got and paired_runs(a, b, tmp_path)["cats_1_4"]["any@10"]["losses"] == got
    with pytest.raises(BenchDataError, match="different splits"):
        paired_runs(a, {**b, "split": "test"}, tmp_path)


def test_bench_locomo_tries_the_prefetch_weights_and_puts_the_defaults_back(tmp_path):
    from memstream.bench.locomo.prefetch_grid import PREFETCH_POINTS
    from memstream.query import ranking

    _write(tmp_path)
    defaults = (ranking.DENSE_WEIGHT, ranking.RECALL_CANDIDATES, ranking.SCORE_MAX)
    result = locomo(tmp_path, split="dev", embedder="hash", paths=("prefetch",), prefetch_points=True)
    points = result["prefetch_grid"]
    assert [{n: v for n, v in p.items() if n.isupper()} for p in points] == list(PREFETCH_POINTS)
    assert all(p["cats_1_4"]["n"] == 10 and p["latency_ms"]["n"] == 12 for p in points)
    # every fact is found by every setting here: each point pairs with the defaults at +0 -0
    assert all(p["paired"]["any@10"]["wins"] == p["paired"]["any@10"]["losses"] == 0 for p in points)
    assert (ranking.DENSE_WEIGHT, ranking.RECALL_CANDIDATES, ranking.SCORE_MAX) == defaults
    assert "prefetch grid" in format_locomo(result) and "DENSE_WEIGHT 0.3" in format_locomo(result)
    with pytest.raises(BenchDataError, match="prefetch path"):
        locomo(tmp_path, split="dev", embedder="hash", paths=("search",), prefetch_points=True)


def test_the_prefetch_grid_sets_each_point_while_it_asks_and_restores_it_when_asking_fails():
    from memstream.bench.locomo.prefetch_grid import prefetch_grid
    from memstream.query import ranking

    seen = []

    def ask(request):
        seen.append((ranking.DENSE_WEIGHT, ranking.RECENCY_WEIGHT, ranking.SCORE_MAX))
        if ranking.RECENCY_WEIGHT == 0.3:
            raise RuntimeError("the server went away")
        return [], 1.0

    questions = [{"sample_id": "conv-26", "qa_index": 0, "question": "what?", "category": 1, "gold_dia_ids": ["D1:1"]}]
    default = (ranking.DENSE_WEIGHT, ranking.RECENCY_WEIGHT, ranking.SCORE_MAX)
    with pytest.raises(RuntimeError, match="went away"):
        prefetch_grid(questions, ask, lambda item_id: item_id, [(questions[0], [])])
    assert (0.3, default[1], default[2]) in seen  # the first point, asked with its dense weight
    no_recency = [m for d, r, m in seen if r == 0.0]
    assert no_recency and all(m == pytest.approx(default[2] - default[1]) for m in no_recency)  # SCORE_MAX follows
    assert (ranking.DENSE_WEIGHT, ranking.RECENCY_WEIGHT, ranking.SCORE_MAX) == default
