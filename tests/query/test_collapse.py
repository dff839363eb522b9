"""A fleet's paraphrases collapsed (memstream.query.ranking, step 6): one item per thing
said, the newest wording shown, ``agree`` saying how many agents wrote it; distinct facts,
one agent's own items, other tenants and other scopes stay apart. On fakeredis and real
Valkey (``event_log``), with the real pipeline, store and query handlers."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_support import make_pipeline, remembered
from query_support import answer

from memstream.query.protocol import AGREE
from memstream.query.ranking import _best, _Item

# the hash embedder's space (the tests' model): these wordings are 0.87-0.93 apart, the
# other sentences 0.85 or less from them and from each other
SIMILARITY = 0.86
DARK = [
    "Dana prefers the dark mode theme in every editor",
    "Dana prefers the dark mode theme in every single editor",
    "Dana really prefers the dark mode theme in every editor",
]
LIGHT = "Dana prefers the light mode theme in every terminal"
PORTS = ["The billing service runs on port 8081", "The billing service runs on port 9090"]


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    p.searcher.similarity = SIMILARITY
    yield p
    p.stop()


def _search(pipeline, query, **kw):
    kw.setdefault("tenant", "t1")
    kw.setdefault("agent", "a1")
    kw.setdefault("scope", "all")
    return pipeline.searcher.search(query, k=10, kinds=("memories",), **kw)


def test_paraphrases_of_agents_collapse_to_the_newest_with_how_many_agents_agree(pipeline, event_log):
    writes = [remembered(DARK[i % 3], agent=f"a{i}", when=float(i)) for i in range(5)]
    event_log.append([*writes, remembered(LIGHT, agent="a9", when=1.0), *(remembered(t, agent="a8") for t in PORTS)])
    pipeline.drain()

    found = _search(pipeline, "which dark mode theme does Dana prefer in the editor")
    dark = [r for r in found if "dark" in r["text"]]
    assert len(dark) == 1, found
    assert dark[0][AGREE] == 5
    assert dark[0]["id"] == writes[-1].id and dark[0]["text"] == DARK[4 % 3]  # the newest speaks
    assert dark[0]["score"] == max(r["score"] for r in found)  # at the best one's place
    assert any(r["text"] == LIGHT and AGREE not in r for r in found)  # alike, but not the same: apart

    ports = _search(pipeline, "which port does the billing service run on")
    assert sorted(r["text"] for r in ports if "billing" in r["text"]) == sorted(PORTS)
    assert all(AGREE not in r for r in ports if "billing" in r["text"])


def test_recall_answers_the_collapsed_item_with_its_agreeing_count(pipeline, event_log):
    event_log.append([remembered(DARK[i % 3], agent=f"a{i}", when=float(i)) for i in range(4)])
    pipeline.drain()
    recalled = answer(
        pipeline.reads.handlers(),
        {"op": "recall", "tenant": "t1", "agent": "a1", "scope": "all", "query": "dark mode theme editor", "k": 10},
    )
    memories = [i for i in recalled["items"] if i["kind"] == "memory"]
    assert [i[AGREE] for i in memories] == [4]
    assert not any(key.startswith("_") for i in recalled["items"] for key in i)  # nothing private leaks


def test_one_agents_own_alike_items_are_not_collapsed_but_its_exact_repeats_are(pipeline, event_log):
    event_log.append([remembered(t, agent="a1", when=float(i)) for i, t in enumerate(DARK)])
    event_log.append([remembered(DARK[0], agent="a1", when=9.0)])
    pipeline.drain()
    found = _search(pipeline, "dark mode theme editor", scope="current")
    assert sorted(r["text"] for r in found) == sorted(DARK)
    assert all(AGREE not in r for r in found)  # one agent: nobody else agrees


def test_tenants_and_scopes_never_mix_in_a_collapse(pipeline, event_log):
    event_log.append(
        [
            remembered(DARK[0], tenant="t1", agent="a1", when=1.0),
            remembered(DARK[1], tenant="t1", agent="a2", when=2.0),
            *(remembered(DARK[i % 3], tenant="t2", agent=f"b{i}", when=3.0 + i) for i in range(6)),
        ]
    )
    pipeline.drain()
    everyone = _search(pipeline, "dark mode theme editor")
    assert [(r["text"], r[AGREE]) for r in everyone] == [(DARK[1], 2)]  # t2's six agents are not counted

    own = _search(pipeline, "dark mode theme editor", scope="current")
    assert [(r["text"], r.get(AGREE)) for r in own] == [(DARK[0], None)]  # a2 is not in a1's scope

    other = _search(pipeline, "dark mode theme editor", tenant="t2", agent="b0")
    assert [r[AGREE] for r in other] == [6]


def test_without_a_threshold_only_exact_repeats_collapse(pipeline, event_log):
    pipeline.searcher.similarity = 0.0
    event_log.append([remembered(DARK[i % 3], agent=f"a{i}", when=float(i)) for i in range(6)])
    pipeline.drain()
    found = _search(pipeline, "dark mode theme editor")
    assert sorted((r["text"], r[AGREE]) for r in found) == sorted((t, 2) for t in DARK)


def test_vectors_of_two_collections_are_never_compared():
    vector = np.ones(4, dtype=np.float32) / 2.0
    scored = [
        (score, _Item(iid, "", answer={"id": iid, "kind": kind, "text": text, "agent": agent}, kind=kind, agent=agent, ts=0.0))
        for score, iid, kind, text, agent in [
            (2.0, "m", "memory", "a", "x"),
            (1.0, "t", "turn", "b", "y"),
            (0.5, "m2", "memory", "c", "z"),
        ]
    ]
    points = {"m": ("memories_v1", "p1"), "t": ("turns_v2", "p2"), "m2": ("memories_v1", "p3")}
    out = _best(scored, 10, {"m": vector, "t": vector, "m2": vector}, points, 0.99)
    assert [(r["id"], r.get(AGREE)) for r in out] == [("m", 2), ("t", None)]  # m2 folds into m, t stays


def test_a_session_of_several_agents_collapses_their_paraphrases_and_one_named_agent_keeps_its_own(pipeline, event_log):
    writes = [remembered(DARK[i], agent=f"a{i}", when=float(i)) for i in range(3)]
    event_log.append([*writes, remembered(DARK[0], agent="a1", when=5.0), remembered(DARK[1], agent="a1", when=6.0)])
    pipeline.drain()

    session = _search(pipeline, "dark mode theme editor", scope="session", session="s1")  # every agent of the session
    assert [(r["text"], r[AGREE]) for r in session] == [(DARK[1], 3)]  # a1's newest speaks for the three agents

    named = _search(pipeline, "dark mode theme editor", scope="a1")  # one agent's: its alike items stay apart
    assert sorted((r["text"], r.get(AGREE)) for r in named) == sorted([(DARK[0], None), (DARK[1], None)])
