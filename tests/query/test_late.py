"""Late interaction on the prefetch path (``memstream.query.late``): a recall's best turns
and memories reordered by their token vectors' match with the question, facts first, cut
to ``k``; the real model and read side on fakeredis and through a query server on real
Valkey; a model that cannot load leaves the ranking's order and is counted."""

from __future__ import annotations

import json
import time
import uuid

import fakeredis
import msgspec
import numpy as np
import pytest
import redis
from pipeline_support import pipeline_settings, remembered, turn, wait_for

from memstream.core import Settings, keys
from memstream.producers import EventLog
from memstream.projections import Filter, LateError, LatePassages, LateScorer, shared_cross_encoder
from memstream.query import Envelope, RecallRequest, SearchAnswer, SearchRequest, ask
from memstream.query.late import LATE_CANDIDATES, late_first, late_order, late_scores
from memstream.query.rerank import CE_WEIGHT, LATE_CE_WEIGHT, LATE_KEEP, learned_cut, rerank
from memstream.query.server import QueryServer

QUERY = "Which dog did Mira adopt from the shelter?"
MEMORIES = [
    # the words of the question, not its answer: the keyword side puts these first
    "Mira told us about the shelter fundraiser and the dog show schedule.",
    "Mira asked which shelter the city funds.",
    "Mira: we finally adopted Pepper, a three-legged beagle, from the rescue last weekend.",
    "The printer on the third floor is out of toner again.",
    "We had pasta for dinner on Friday.",
]
ANSWER = MEMORIES[2]


def _item(i: int, text: str, score: float, kind: str = "memory") -> dict:
    return {"id": f"e{i}", "kind": kind, "text": text, "score": score}


def test_late_order_keeps_the_facts_first_reorders_the_others_and_cuts_to_k():
    ranked = [
        _item(0, "Mira's dog is Pepper.", 0.99, kind="fact"),
        *[_item(i, t, 1.0 - i / 10) for i, t in enumerate(MEMORIES, start=1)],
        _item(9, "Mira's employer is a bakery.", 0.1, kind="fact"),  # past k: not kept first
    ]
    passages = LatePassages(None)
    alone = late_order([QUERY], [ranked], [4], passages, weight=1.0)[0]
    assert [i["id"] for i in alone][:1] == ["e0"] and len(alone) == 4
    assert alone[1]["text"] == ANSWER  # the model alone puts the answer first
    assert all(i["kind"] != "fact" for i in alone[1:])
    kept = late_order([QUERY], [ranked], [4], passages, weight=0.0)[0]  # the ranking alone
    assert [i["id"] for i in kept] == ["e0", "e1", "e2", "e3"]
    # a recall with one candidate, or none, is answered as ranked; several in one model call
    one = [_item(1, MEMORIES[0], 0.5)]
    both = late_order([QUERY, QUERY], [one, ranked], [3, 2], passages, weight=1.0)
    assert both[0] == one and [i["id"] for i in both[1]] == ["e0", "e3"]
    assert late_order([QUERY], [[]], [3], passages) == [[]]


def _pipeline(home, log, late: str = "on"):
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    settings = pipeline_settings(home, stream_prefix=log.prefix, shards=log.shards, late_rerank=late)
    return Pipeline(settings, log, PipelineConfig(embedder="hash", consumer="w1"))


def _recall(reads, k: int = 3) -> list[str]:
    (answer,) = reads.recall_many([RecallRequest(tenant="t1", agent="a1", query=QUERY, k=k)])
    return [i["text"] for i in answer.items]


def _broken() -> LateScorer:
    raise LateError("the late-interaction model is missing")


@pytest.fixture
def reads(tmp_path):
    """The read side of a pipeline that projected MEMORIES (hash embedder, the late interaction on)."""
    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    log.append([remembered(m) for m in MEMORIES])
    pipeline = _pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
        yield pipeline.reads
    finally:
        pipeline.stop()


def test_recall_reorders_with_the_late_interaction_and_keeps_the_ranking_when_the_model_fails(reads):
    assert isinstance(reads.late, LatePassages)
    late = _recall(reads)
    (hurried,) = reads.hurried()["recall"]([RecallRequest(tenant="t1", agent="a1", query=QUERY, k=3)])
    passages, reads.late = reads.late, None
    ranking = _recall(reads)
    assert reads.hurried() == {}  # nothing to leave out without the late interaction
    (candidates,) = reads.recall_many([RecallRequest(tenant="t1", agent="a1", query=QUERY, k=LATE_CANDIDATES)])
    reads.late = LatePassages(None, _broken)
    failed = _recall(reads)
    assert reads.late_failures == 1
    reads.late = passages
    assert len(late) == len(ranking) == 3
    expected = late_order([QUERY], [candidates.items], [3], passages)[0]
    assert late == [i["text"] for i in expected]
    assert late != ranking  # the model moved something
    assert ANSWER in late and (ANSWER not in ranking or late.index(ANSWER) <= ranking.index(ANSWER)), (late, ranking)
    assert failed == ranking
    assert [i["text"] for i in hurried.items] == ranking  # a recall that waited too long: the ranking's order


def test_a_search_without_the_rerank_has_the_prefetchs_late_order_with_each_fact_in_its_place(reads):
    """What the agent's tool answers when the reranker is busy or not asked (``memstream search
    --no-rerank``): the turns and memories of the ranking's best LATE_CANDIDATES in the late
    interaction's order, a fact kept where the ranking put it, cut to k; hurried (the take
    waited), or with a late model that fails (counted), the ranking's order."""
    late = _search(reads, k=3).results
    (hurried,) = reads.hurried()["search"]([SearchRequest(tenant="t1", agent="a1", query=QUERY, kind="memories", k=3)])
    passages, reads.late = reads.late, None
    ranking = _search(reads, k=3).results
    candidates = _search(reads, k=LATE_CANDIDATES).results
    reads.late = LatePassages(None, _broken)
    failed = _search(reads, k=3).results
    assert reads.late_failures == 1
    reads.late = passages
    fact = {"id": "f1", "kind": "fact", "text": "Mira's dog is Pepper.", "score": 0.9}
    mixed = reads._late_first(QUERY, [candidates[0], fact, *candidates[1:]], passages)
    expected = late_first(QUERY, [dict(c) for c in candidates], passages)[:3]
    assert [i["text"] for i in late] == [i["text"] for i in expected] and len(late) == 3
    assert [i["text"] for i in late] != [i["text"] for i in ranking]  # the model moved something
    texts, ranked = [i["text"] for i in late], [i["text"] for i in ranking]
    assert ANSWER in texts and (ANSWER not in ranked or texts.index(ANSWER) <= ranked.index(ANSWER)), (texts, ranked)
    assert [i["text"] for i in hurried.results] == [i["text"] for i in ranking] == [i["text"] for i in failed]
    assert mixed[1] is fact and [i["text"] for i in mixed[:1] + mixed[2:]] == [
        i["text"] for i in late_first(QUERY, [dict(c) for c in candidates], passages)
    ]


def test_the_setting_turns_it_on_with_a_local_model_and_off_with_hash(tmp_path):
    assert pipeline_settings(tmp_path, late_rerank="auto").late_reranks("bge-small")
    assert pipeline_settings(tmp_path, late_rerank="auto").late_reranks("onnx-minilm")
    assert not pipeline_settings(tmp_path, late_rerank="auto").late_reranks("hash")
    assert not pipeline_settings(tmp_path, late_rerank="auto").late_reranks("openai:text-embedding-3-small")
    assert not pipeline_settings(tmp_path, late_rerank="off").late_reranks("bge-small")
    assert pipeline_settings(tmp_path, late_rerank="on").late_reranks("hash")
    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    pipeline = _pipeline(tmp_path / "home", log, late="auto")
    try:
        assert pipeline.reads.late is None  # the hash embedder
    finally:
        pipeline.stop()


@pytest.mark.valkey
def test_a_batch_of_recalls_through_the_query_server_on_valkey(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "ms", 1)
    log.append([remembered(m) for m in MEMORIES])
    pipeline = _pipeline(tmp_path / "home", log)
    server = None
    try:
        pipeline.drain()
        expected = _recall(pipeline.reads, k=2)
        (ranked,) = pipeline.reads.hurried()["recall"]([RecallRequest(tenant="t1", agent="a1", query=QUERY, k=2)])
        server = QueryServer(
            client,
            "ms",
            pipeline.reads.handlers(),
            threads=1,
            batched=pipeline.reads.batched(),
            hurried=pipeline.reads.hurried(),
            hurry_after_s=5.0,
        ).start()
        answers = [ask(client, "ms", RecallRequest(tenant="t1", agent="a1", query=QUERY, k=2), timeout=30) for _ in range(3)]
        # a recall asked a minute ago (its caller's clock) is answered without the late interaction
        rid = uuid.uuid4().hex
        request = RecallRequest(tenant="t1", agent="a1", query=QUERY, k=2)
        waited = Envelope(id=rid, deadline=time.time() + 60, req=request, asked_at=time.time() - 60)
        client.rpush(keys.queries("ms"), msgspec.json.encode(waited))
        got = client.blpop([keys.reply(keys.queries("ms"), rid)], timeout=30)
        # counted once its answer left
        wait_for(lambda: int(client.hget(keys.query_counters("ms"), "late_shed") or 0) == 1, what="the shed recall's count")
    finally:
        if server is not None:
            server.stop()
        pipeline.stop()
        client.close()
    for answer in answers:
        assert "error" not in answer and [i["text"] for i in answer["items"]] == expected
    assert got is not None and [i["text"] for i in json.loads(got[1])["items"]] == [i["text"] for i in ranked.items]
    assert [i["text"] for i in ranked.items] != expected


class _Counted:
    """The real cross-encoder, with the texts it was asked to score kept."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self) -> _Counted:
        return self

    def score(self, query: str, texts: list[str]):
        self.asked.append(list(texts))
        return shared_cross_encoder().score(query, texts)


def _search(reads, **extra) -> SearchAnswer:
    request = SearchRequest(tenant="t1", agent="a1", query=QUERY, kind="memories", **{"k": 5, **extra})
    answer = reads.handlers().search(request)
    assert isinstance(answer, SearchAnswer), answer
    return answer


def test_a_reranked_search_gives_the_cross_encoder_the_late_interactions_best_and_all_when_it_fails(tmp_path):
    """30 memories: the best 40 of the ranking are all of them (but near-repeats); the late interaction orders
    them and the cross-encoder scores only its best LATE_KEEP, ordered by the learned weights
    (``learned_cut``), the rest following in the late order; with the learned order off, by
    the hand sum at LATE_CE_WEIGHT. A late model that fails leaves the cross-encoder every
    candidate at CE_WEIGHT (counted)."""
    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    fillers = [f"Mira mentioned the shelter's volunteer rota for week {i} and the dog walking slots." for i in range(25)]
    log.append([remembered(m) for m in MEMORIES + fillers])
    pipeline = _pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
        reads = pipeline.reads
        counted = _Counted()
        reads.cross_encoder = counted
        passages, reads.late = reads.late, None
        candidates = _search(reads, k=40).results  # the ranking's order
        reads.late = passages
        assert len(candidates) > LATE_KEEP  # (near-repeats of the fillers collapse)
        cut = _search(reads, rerank=True)
        reads.learned_rerank = False
        hand = _search(reads, rerank=True)
        reads.learned_rerank = True
        passages, reads.late = reads.late, LatePassages(None, _broken)
        whole = _search(reads, rerank=True)
        assert reads.late_failures == 1
        reads.late = passages
        asked = list(counted.asked)
        few = _search(reads, rerank=True, rerank_candidates=LATE_KEEP)  # nothing to cut: the late model is not asked
        assert counted.asked[len(asked) :] == [[c["text"] for c in candidates[:LATE_KEEP]]]
        assert few.reranked is True and reads.late_failures == 1
    finally:
        pipeline.stop()
    assert cut.reranked is True and hand.reranked is True and whole.reranked is True
    ordered = late_first(QUERY, [dict(c) for c in candidates], passages)
    assert asked[0] == asked[1] == [c["text"] for c in ordered[:LATE_KEEP]]  # both orders score the same cut
    (late,) = late_scores([QUERY], [candidates], passages)
    expected = learned_cut(QUERY, [dict(c) for c in candidates], late, 5, counted)
    assert [(r["id"], r["score"]) for r in cut.results] == [(r["id"], r["score"]) for r in expected]
    assert cut.results[0]["text"] == ANSWER
    expected = rerank(QUERY, ordered, 5, counted, LATE_KEEP, LATE_CE_WEIGHT)
    assert [(r["id"], r["score"]) for r in hand.results] == [(r["id"], r["score"]) for r in expected]
    assert asked[2] == [c["text"] for c in candidates]  # the late model failed: every candidate
    expected = rerank(QUERY, [dict(c) for c in candidates], 5, counted, 40, CE_WEIGHT)
    assert [(r["id"], r["score"]) for r in whole.results] == [(r["id"], r["score"]) for r in expected]


def test_the_late_model_runs_with_the_embedders_threads_and_scores_the_same(tmp_path):
    from memstream.projections.embedders.onnx import default_threads
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    scorers = {}
    for threads in (1, 0):
        settings = pipeline_settings(tmp_path / f"home{threads}", stream_prefix="ms", late_rerank="on", embed_threads=threads)
        pipeline = Pipeline(settings, log, PipelineConfig(embedder="hash", consumer="w1"))
        try:
            assert pipeline.late is not None
            scorers[threads] = pipeline.late.scorer()
        finally:
            pipeline.stop()
    assert scorers[1].threads == 1 and scorers[0].threads == default_threads()
    # texts neither scorer has made rows for (a scorer keeps its recent rows, made in other batches)
    fresh = [f"{t} ({uuid.uuid4().hex[:6]})" for t in (QUERY, *MEMORIES[:2])]
    one, default = (scorers[t].queries(fresh) for t in (1, 0))
    assert all(np.array_equal(a, b) for a, b in zip(one, default))  # one thread: the same vectors


@pytest.mark.valkey
def test_colbert_small_projects_and_recalls_with_one_model_call_a_text_on_valkey(tmp_path, valkey_server, monkeypatch):
    """``MEMSTREAM_EMBEDDER=colbert-small``: the dense stage's vector and stored token vectors
    of a memory come from one model call, and so do a recall's question vector and its late
    interaction; the question is embedded with its own view (not the passage's)."""
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    runs: list[int] = []
    run = LateScorer._run

    def counted(self: LateScorer, rows: list[list[int]]) -> list[np.ndarray]:
        runs.append(len(rows))
        return run(self, rows)

    monkeypatch.setattr(LateScorer, "_run", counted)
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "ms", 1)
    texts = [f"{m} (note {uuid.uuid4().hex[:6]})" for m in MEMORIES]  # never scored before in this process
    chat = [f"We talked about the {w} plans for the weekend ({uuid.uuid4().hex[:6]})" for w in ("hiking", "baking")]
    log.append([remembered(t) for t in texts] + [turn(c, "Sounds good.", when=i, index=i) for i, c in enumerate(chat)])
    settings = Settings.load(home=str(tmp_path / "home"), autostart=False, stream_prefix=log.prefix, embedder="colbert-small")
    pipeline = Pipeline(settings, log, PipelineConfig(embedder="colbert-small", consumer="w1"))
    server = None
    try:
        pipeline.drain()
        points, _ = pipeline.store.scroll(pipeline.versions.collection("turns"), Filter(tenant="t1"))
        shown = [p.payload["text"] for p in points]
        assert sorted(shown) == sorted(f"User: {c}" for c in chat), shown  # the acknowledgement is boilerplate
        stored = len(texts) + len(shown)
        assert pipeline.late is not None and pipeline.late.stats()["warmed"] == stored
        # each memory and turn ran the model once: its vector and its token vectors (a turn's
        # dense text is the text it shows, not the unit with its date)
        assert sum(runs) == stored
        embedder = pipeline.versions.embedder("memories")
        assert embedder.name.endswith(":query") and embedder.name.startswith("colbert-small:")
        server = QueryServer(client, "ms", pipeline.reads.handlers(), threads=1, batched=pipeline.reads.batched()).start()
        runs.clear()
        question = f"{QUERY} ({uuid.uuid4().hex[:6]})"
        answer = ask(client, "ms", RecallRequest(tenant="t1", agent="a1", query=question, k=3), timeout=60)
        assert "error" not in answer, answer
        assert texts[2] in [i["text"] for i in answer["items"]], answer["items"]
        assert runs == [1]  # the question once: its dense vector and its late interaction
    finally:
        if server is not None:
            server.stop()
        pipeline.stop()
