"""A search's ``rerank`` option: the protocol's bounds, the combination of the fused and the
cross-encoder scores, and the handler path (the real read side and cross-encoder, on
fakeredis and through a query server on real Valkey); a cross-encoder that cannot load
leaves the ranking's order and says why."""

from __future__ import annotations

import json
import time
import uuid

import fakeredis
import msgspec
import numpy as np
import pytest
import redis
from pipeline_support import make_pipeline, remembered

from memstream.producers import EventLog
from memstream.projections import CrossEncoder, shared_cross_encoder
from memstream.projections.embedders.crossencoder import model_files
from memstream.query import ask
from memstream.query.protocol import RERANK_CANDIDATES, QueryRefused, SearchAnswer, SearchRequest, decode_envelope, most
from memstream.query.rerank import (
    CE_WEIGHT,
    LATE_WEIGHT,
    LEARNED_FEATURES,
    LEARNED_WEIGHTS,
    combine,
    learned_cut,
    learned_features,
    rerank,
)
from memstream.query.server import QueryServer

QUERY = "Where did Caroline move last year?"
MEMORIES = [
    # the words of the question, not its answer: the keyword side puts these first
    "Caroline asked where the year went and whether to move the meeting; Caroline did not say where.",
    "Where to move the Caroline project next year is still open, Caroline said.",
    "Caroline said: last summer I finally relocated to Lisbon, close to the sea.",
    "The printer on the third floor is out of toner again.",
    "We had pasta for dinner on Friday.",
]
ANSWER = MEMORIES[2]


def _envelope(request: dict) -> bytes:
    return json.dumps({"id": uuid.uuid4().hex, "deadline": time.time() + 60, "req": request}).encode()


def test_rerank_is_a_search_option_with_its_candidates_bounded_by_the_protocol():
    request = decode_envelope(_envelope({"op": "search", "tenant": "t1", "query": "q", "rerank": True})).req
    assert isinstance(request, SearchRequest) and request.rerank and request.rerank_candidates == RERANK_CANDIDATES
    assert decode_envelope(_envelope({"op": "search", "tenant": "t1", "query": "q"})).req.rerank is False
    assert most("search", "rerank_candidates") == 50
    for bad in (1, 51, "30", True):
        with pytest.raises(QueryRefused):
            decode_envelope(_envelope({"op": "search", "tenant": "t1", "query": "q", "rerank": True, "rerank_candidates": bad}))
    with pytest.raises(QueryRefused):  # recall (the prefetch) has no rerank
        decode_envelope(_envelope({"op": "recall", "tenant": "t1", "query": "q", "rerank": True}))


def test_combine_weighs_each_score_min_max_normalised_over_the_candidates():
    final = combine([0.9, 0.5, 0.1], [-5.0, 7.0, 1.0], weight=0.5)
    assert np.allclose(final, [0.5 * 1 + 0.5 * 0, 0.5 * 0.5 + 0.5 * 1, 0.5 * 0 + 0.5 * 0.5])
    assert np.allclose(combine([0.9, 0.5], [1.0, 2.0], weight=0.0), [1.0, 0.0])  # the ranking alone
    assert np.allclose(combine([0.3, 0.3], [2.0, 2.0]), [1.0, 1.0])  # all equal: no division by zero
    assert combine([], []).shape == (0,)
    with pytest.raises(ValueError):
        combine([0.1], [1.0, 2.0])
    assert 0.0 < CE_WEIGHT <= 1.0


def test_combine_puts_the_logit_through_a_sigmoid_or_both_scores_on_reciprocal_ranks():
    # sigmoid: the logit as a probability (a candidate the cross-encoder finds irrelevant stays low
    # when all are), the fused score min-max normalised
    final = combine([0.9, 0.5, 0.1], [0.0, 2.0, -2.0], weight=0.5, fusion="sigmoid")
    sig = 1.0 / (1.0 + np.exp(-np.array([0.0, 2.0, -2.0])))
    assert np.allclose(final, 0.5 * np.array([1.0, 0.5, 0.0]) + 0.5 * sig)
    # rank: 1 / (60 + rank) of each score, weighed; only the orders count, not the gaps
    final = combine([0.9, 0.5, 0.1], [-5.0, 700.0, 1.0], weight=0.5, fusion="rank")
    assert np.allclose(final, 0.5 * np.array([1 / 61, 1 / 62, 1 / 63]) + 0.5 * np.array([1 / 63, 1 / 61, 1 / 62]))
    assert np.allclose(combine([0.3, 0.3], [1.0, 1.0], fusion="rank"), [1 / 61, 1 / 62])  # ties: by position
    assert combine([], [], fusion="sigmoid").shape == (0,)
    with pytest.raises(ValueError, match="fusion"):
        combine([0.1], [1.0], fusion="mean")


def test_rerank_orders_the_candidates_by_the_combined_score_and_cuts_to_k():
    results = [{"id": str(i), "text": t, "score": 1.0 - i / 10} for i, t in enumerate(MEMORIES)]
    out = rerank(QUERY, [dict(r) for r in results], k=3, encoder=CrossEncoder, candidates=5, weight=1.0)
    assert [r["text"] for r in out][0] == ANSWER and len(out) == 3
    assert [r["score"] for r in out] == sorted((r["score"] for r in out), reverse=True)
    # past the candidates, the ranking's order is kept after them
    out = rerank(QUERY, [dict(r) for r in results], k=5, encoder=CrossEncoder, candidates=3, weight=1.0)
    assert [r["id"] for r in out[3:]] == ["3", "4"] and out[0]["text"] == ANSWER
    # a passage longer than the cross-encoder takes is cut, not a failure of the rerank
    huge = [{"id": "h", "text": "Caroline moved to Lisbon last year. " * 2000, "score": 0.2}] + [dict(r) for r in results]
    assert rerank(QUERY, huge, k=6, encoder=CrossEncoder, candidates=6, weight=1.0)[0]["id"] == "h"
    # the weight 0 keeps the ranking's order
    out = rerank(QUERY, [dict(r) for r in results], k=5, encoder=CrossEncoder, candidates=5, weight=0.0)
    assert [r["id"] for r in out] == ["0", "1", "2", "3", "4"]


def test_learned_features_follow_the_cut_and_describe_each_scored_candidate():
    fused = [0.9, 0.8, 0.7, 0.6, 0.5]
    late = [0.0, 30.0, 20.0, 10.0, 29.0]
    cut = combine(fused, late, LATE_WEIGHT)
    order, rows = learned_features(fused, late, [2.0, -4.0, 8.0], ["s1", "s1", "s2"], [40, 400, 4])
    assert list(order) == list(np.argsort(-cut, kind="stable")) and list(order[:3]) == [1, 2, 4]
    assert rows.shape == (3, len(LEARNED_FEATURES)) == (3, len(LEARNED_WEIGHTS))
    col = {name: rows[:, i] for i, name in enumerate(LEARNED_FEATURES)}
    assert list(col["fused"]) == pytest.approx([0.75, 0.5, 0.0])  # min-max over all five, of the three scored
    assert list(col["late"]) == pytest.approx([1.0, 20 / 30, 29 / 30])
    assert list(col["ce"]) == pytest.approx([0.5, 0.0, 1.0]) and list(col["ce_logit"]) == pytest.approx([0.2, -0.4, 0.8])
    assert list(col["fused_place"]) == pytest.approx([1 / 2, 1 / 3, 1 / 5])  # places 1, 2, 4 of the ranking
    assert list(col["late_place"]) == pytest.approx([1, 1 / 2, 1 / 3]) and list(col["ce_place"]) == pytest.approx(
        [1 / 2, 1 / 3, 1]
    )
    assert list(col["ce_probability"]) == pytest.approx(list(1 / (1 + np.exp(-np.array([2.0, -4.0, 8.0])))))
    assert list(col["same_session"]) == pytest.approx([1 / 5, 1 / 5, 0.0])  # the other of s1 among the best five
    assert list(col["length"]) == pytest.approx(list(np.log1p([40, 400, 4]) / 6))
    with pytest.raises(ValueError):
        learned_features(fused, late[:4], [1.0], ["s"], [1])
    assert learned_features(fused, late, [], [], [])[1].shape == (0, len(LEARNED_FEATURES))
    # candidates of no session (memories written outside one) share none, with each other either
    _, rows = learned_features(fused, late, [2.0, -4.0, 8.0], [None, None, ""], [40, 400, 4])
    assert list(rows[:, LEARNED_FEATURES.index("same_session")]) == [0.0, 0.0, 0.0]


def test_learned_cut_scores_the_late_orders_best_and_orders_them_by_the_weights():
    results = [{"id": str(i), "text": t, "score": 1.0 - i / 10, "session": "s"} for i, t in enumerate(MEMORIES)]
    late = [5.0, 4.0, 3.0, 2.0, 1.0]  # the cut keeps the ranking's order: the answer (2) is third, past a keep of 2
    out = learned_cut(QUERY, [dict(r) for r in results], late, k=5, encoder=CrossEncoder, keep=2)
    assert [r["id"] for r in out] == ["0", "1", "2", "3", "4"]
    assert [r["score"] for r in out[2:]] == [0.8, 0.7, 0.6]  # not scored: as ranked
    only_ce = [1.0 if name == "ce_logit" else 0.0 for name in LEARNED_FEATURES]
    out = learned_cut(QUERY, [dict(r) for r in results], late, k=3, encoder=CrossEncoder, keep=5, weights=only_ce)
    assert out[0]["text"] == ANSWER and len(out) == 3
    logits = CrossEncoder().score(QUERY, MEMORIES)
    assert [r["score"] for r in out] == pytest.approx(sorted(logits / 10, reverse=True)[:3], abs=1e-5)
    only_fused = [1.0 if name == "fused" else 0.0 for name in LEARNED_FEATURES]
    out = learned_cut(QUERY, [dict(r) for r in results], late, k=5, encoder=CrossEncoder, keep=5, weights=only_fused)
    assert [r["id"] for r in out] == ["0", "1", "2", "3", "4"]
    with pytest.raises(ValueError):
        learned_cut(QUERY, [dict(r) for r in results], late[:3], k=5, encoder=CrossEncoder)


def _broken() -> CrossEncoder:
    model, tokenizer = model_files()
    return CrossEncoder(model_path=tokenizer, tokenizer_path=tokenizer)  # not the model: refused by its checksum


def _search(handler, **extra) -> SearchAnswer:
    request = msgspec.convert({"op": "search", "tenant": "t1", "agent": "a1", "query": QUERY, "k": 3, **extra}, SearchRequest)
    answer = handler(request)
    assert isinstance(answer, SearchAnswer), answer
    return answer


def test_the_search_handler_reranks_when_asked_and_says_why_it_could_not(tmp_path):
    """The real read side (hash embedder, fakeredis) and cross-encoder: the best candidates of
    the ranking, reordered by ``rerank``; the keyword match ranks the question's words
    first, the cross-encoder moves the answer up."""
    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    log.append([remembered(m) for m in MEMORIES])
    pipeline = make_pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
        search = pipeline.reads.handlers().search
        plain = _search(search, kind="memories")
        candidates = _search(search, kind="memories", k=5).results
        reranked = _search(search, kind="memories", rerank=True, rerank_candidates=5)
        pipeline.reads.cross_encoder = _broken
        fallback = _search(search, kind="memories", rerank=True, rerank_candidates=5)
    finally:
        pipeline.stop()
    texts = [r["text"] for r in plain.results]
    assert plain.reranked is None and texts[0] != ANSWER
    expected = rerank(QUERY, candidates, k=3, encoder=shared_cross_encoder, candidates=5)
    assert reranked.reranked is True and reranked.rerank_error is None
    assert [(r["id"], r["score"]) for r in reranked.results] == [(r["id"], r["score"]) for r in expected]
    assert [r["text"] for r in reranked.results] != texts  # the cross-encoder moved something
    got = [r["text"] for r in reranked.results]
    assert ANSWER not in texts[:1] and (ANSWER not in texts or got.index(ANSWER) <= texts.index(ANSWER))
    assert fallback.reranked is False and "sha256" in (fallback.rerank_error or "")
    assert [r["id"] for r in fallback.results] == [r["id"] for r in plain.results]


@pytest.mark.valkey
def test_a_reranked_search_through_the_query_server_on_valkey(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "ms", 1)
    log.append([remembered(m) for m in MEMORIES])
    pipeline = make_pipeline(tmp_path / "home", log)
    server = None
    try:
        pipeline.drain()
        server = QueryServer(client, "ms", pipeline.reads.handlers(), threads=1).start()
        request = SearchRequest(tenant="t1", agent="a1", query=QUERY, kind="memories", k=2)
        plain = ask(client, "ms", request, timeout=30)
        answer = ask(client, "ms", msgspec.structs.replace(request, rerank=True, rerank_candidates=5), timeout=30)
    finally:
        if server is not None:
            server.stop()
        pipeline.stop()
        client.close()
    assert "error" not in answer and answer["reranked"] is True and len(answer["results"]) == 2
    assert [r["id"] for r in answer["results"]] != [r["id"] for r in plain["results"]]
    assert "reranked" not in plain
