"""Pieces of the query side (memstream.query.ranking)."""

from __future__ import annotations

import pytest
from pipeline_support import make_pipeline, turn

LANGUAGES = [
    "Rust",
    "Go",
    "Python",
    "Zig",
    "Haskell",
    "OCaml",
    "Elixir",
    "Kotlin",
    "Swift",
    "Scala",
    "Ruby",
    "Perl",
    "Lua",
    "Julia",
]


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    yield p
    p.stop()


def test_every_fact_of_an_event_is_found_by_search_and_prefetch_however_many_it_has(pipeline, event_log):
    event_log.append([turn(f"I love {', '.join(LANGUAGES[:-1])} and {LANGUAGES[-1]}.")])
    pipeline.drain()
    assert pipeline.facts.count("t1") == len(LANGUAGES) > 12

    found = pipeline.searcher.search("which languages do I love", tenant="t1", agent="a1", k=50, kinds=("facts",))
    assert sorted(r["value"] for r in found) == sorted(LANGUAGES)

    recalled = pipeline.reads.recall({"tenant": "t1", "agent": "a1", "query": "which languages do I love", "k": 50})
    assert sorted(i["value"] for i in recalled["items"] if i["kind"] == "fact") == sorted(LANGUAGES)


def test_search_and_recall_rank_turns_that_have_keywords_but_no_dense_vector_yet(tmp_path, event_log, monkeypatch):
    monkeypatch.setattr("memstream.projections.vector.embeds_inline", lambda embedder: False)
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    try:
        old, new = (
            turn("The billing service deploys on Tuesdays", index=0),
            turn("Zephyr the greyhound pulls on the lead", index=1),
        )
        event_log.append([old])
        p.drain()  # both stages: this one has its dense vector
        event_log.append([new])
        p.runs["turns.v1"].consumer.drain()  # keywords only, as while the model catches up
        found = p.searcher.search("greyhound Zephyr", tenant="t1", agent="a1", k=5, kinds=("turns",))
        assert found and found[0]["id"] == new.id  # the sparse side alone ranks it
        assert {r["id"] for r in p.searcher.search("billing deploys", tenant="t1", agent="a1", k=5, kinds=("turns",))} >= {old.id}
        recalled = p.reads.recall({"tenant": "t1", "agent": "a1", "query": "greyhound Zephyr", "k": 5})
        assert recalled["items"][0]["id"] == new.id
    finally:
        p.stop()
