"""Pieces of the query side (memstream.query.ranking); a search says what it searched: its
scope, what other agents have, scores in [0, 1], no zero-score hits, facts as sentences."""

from __future__ import annotations

import pytest
from pipeline_support import make_pipeline, pipeline_settings, remembered, turn
from query_support import answer

from memstream.cli import output
from memstream.provider.tools import search_note
from memstream.text import fact_sentence

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

    recalled = answer(
        pipeline.reads.handlers(), {"op": "recall", "tenant": "t1", "agent": "a1", "query": "which languages do I love", "k": 50}
    )
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
        recalled = answer(
            p.reads.handlers(), {"op": "recall", "tenant": "t1", "agent": "a1", "query": "greyhound Zephyr", "k": 5}
        )
        assert recalled["items"][0]["id"] == new.id
    finally:
        p.stop()


def test_a_narrow_search_says_its_scope_and_how_many_other_agents_match(pipeline, event_log):
    event_log.append(
        [
            remembered("The staging database listens on port 5433", agent="alice"),
            remembered("The staging database is backed up nightly", agent="alice"),
            remembered("Bob's staging database password rotates monthly", agent="bob"),
            remembered("Lunch is at noon on Fridays", agent="default"),
        ]
    )
    pipeline.drain()
    question = "what port is the staging database on"
    searched = answer(pipeline.reads.handlers(), {"op": "search", "tenant": "t1", "agent": "default", "query": question})
    assert searched["searched"] == {"scope": "current", "agents": ["default"]}
    assert searched["elsewhere"] == {"alice": 2, "bob": 1}
    text = output.search_text(searched, defaulted=True)
    assert text.splitlines()[0].startswith("searched agent default (no --agent given: the agent `default`)")
    assert text.splitlines()[-1] == "3 more in other agents (alice 2, bob 1): --scope all, or --scope AGENT"
    assert search_note(searched).endswith("3 more items in other agents share words with the query: scope='all'")

    everyone = answer(
        pipeline.reads.handlers(), {"op": "search", "tenant": "t1", "agent": "default", "query": question, "scope": "all"}
    )
    assert everyone["searched"] == {"scope": "all", "agents": None} and "elsewhere" not in everyone
    assert "more in other agents" not in output.search_text(everyone)
    recalled = answer(pipeline.reads.handlers(), {"op": "recall", "tenant": "t1", "agent": "default", "query": question})
    assert "elsewhere" not in recalled  # prefetch pays for no extra query


def test_scores_are_in_0_1_and_zero_score_hits_are_not_listed(pipeline, event_log):
    # turns of one session that name an author and neighbour each other: every boost at once
    event_log.append(
        [turn(f"Caroline said the release train leaves on day {i}", index=i, when=i) for i in range(6)]
        + [remembered(f"Unrelated note number {i} about gardening") for i in range(4)]
    )
    pipeline.drain()
    for query in ("latest release train Caroline", "what did Caroline say recently about the release"):
        found = pipeline.searcher.search(query, tenant="t1", agent="a1", k=50)
        assert found
        assert all(0.0 < r["score"] <= 1.0 for r in found), [(r["kind"], r["score"]) for r in found]


def test_facts_read_as_sentences(pipeline, event_log):
    event_log.append([turn("Our app targets iOS 16 and I love Rust.")])
    pipeline.drain()
    facts = pipeline.searcher.search("iOS Rust", tenant="t1", agent="a1", kinds=("facts",), k=10)
    texts = {r["text"] for r in facts}
    assert "the project targets ios 16" in texts or "the project targets iOS 16" in texts, texts
    assert "the user likes Rust" in texts, texts
    assert not any(":" in t.split(" ", 2)[1] for t in texts), texts


@pytest.mark.parametrize(
    ("subject", "key", "value", "sentence"),
    [
        ("project", "version:ios", "16", "the project targets ios 16"),
        ("user", "likes", "tea", "the user likes tea"),
        ("user", "name", "Ana", "the user's name is Ana"),
        ("user", "favorite:color", "blue", "the user's favorite color is blue"),
        ("project", "decision:database", "Postgres", "the project decided on database: Postgres"),
        ("staging db", "port", "5433", "staging db's port is 5433"),
        ("user", "some_new:key", "x", "the user's some new key is x"),
    ],
)
def test_each_kind_of_fact_key_reads_as_a_sentence(subject, key, value, sentence):
    assert fact_sentence(subject, key, value) == sentence


def test_a_recall_takes_the_candidates_its_setting_says_a_side_and_never_fewer_than_its_k(tmp_path, event_log):
    from memstream.query import ranking
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    settings = pipeline_settings(tmp_path / "few", stream_prefix=event_log.prefix, shards=event_log.shards, recall_candidates=30)
    few = Pipeline(settings, event_log, PipelineConfig(embedder="hash", consumer="few"))
    event_log.append([remembered(f"The release train number {i} leaves on a Friday") for i in range(60)])
    limits: list[tuple[int, ...]] = []

    def asked(pipe, request):
        pipe.drain()
        store, inner = pipe.searcher.store, pipe.searcher.store.search_many

        def recorded(collection, searches):
            limits.append(tuple(s.limit for s in searches))
            return inner(collection, searches)

        store.search_many = recorded
        try:
            return answer(pipe.reads.handlers(), {"tenant": "t1", "agent": "a1", "query": "release train Friday", **request})
        finally:
            store.search_many = inner

    try:
        assert len(asked(few, {"op": "recall", "k": 12})["items"]) == 12
        assert set(limits.pop()) == {30}  # the memories', dense and keyword
        assert len(asked(few, {"op": "recall", "k": 45})["items"]) == 45
        assert set(limits.pop()) == {45}  # a recall's k past its candidates: k a side
        assert len(asked(few, {"op": "search", "k": 5})["results"]) == 5
        assert set(limits.pop()) == {ranking.CANDIDATES}  # a search's are not the setting's
        few.reads.recall_candidates = 0  # unset: the ranking's own
        assert len(asked(few, {"op": "recall", "k": 12})["items"]) == 12
        assert set(limits.pop()) == {ranking.RECALL_CANDIDATES} != {30}
    finally:
        few.stop()
