"""The approximate index of a large scope (``DenseScopes`` with ``index_from``, HNSW built in
the background): it answers what the exact pass answers where the graph holds every
candidate, a narrow filter is answered exactly and never short, writes during and after a
build are answered (the tail, removals, forget), a search never waits on a build, and a
dropped copy drops its index and its build."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memstream.projections.stores.dense_index import EXPANSION_SEARCH, indexer
from memstream.projections.stores.dense_scope import REBUILD, DenseScopes
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.ids import point_id
from memstream.projections.stores.port import Filter, Point
from tests.support.dense_support import HeldIndexer
from tests.support.writepath import wait_for

DIM = 32
SCOPE = Filter("t1", agent="a1")


def _rows(n: int, seed: int = 1, start: int = 0) -> list[tuple[str, np.ndarray, dict]]:
    """``n`` points of one scope in 12 clusters (as real embeddings are), 4 sessions, 2 kinds."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, DIM))
    out = []
    for i in range(start, start + n):
        vector = centres[i % 12] + 0.35 * rng.standard_normal(DIM)
        payload = {"tenant": "t1", "agent": "a1", "session_id": f"s{i % 4}", "kind": ("turn", "memory")[i % 2]}
        payload["occurred_at_ts"] = float(i)
        out.append((point_id("p", i), vector.astype(np.float32), payload))
    return out


def _queries(rows: list[tuple[str, np.ndarray, dict]], m: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked = np.stack([rows[int(i)][1] for i in rng.choice(len(rows), m, replace=False)])
    q = picked + 0.2 * rng.standard_normal(picked.shape)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _pair(rows, index_from: int, builder=None) -> tuple[DenseScopes, DenseScopes]:
    indexed, exact = DenseScopes(DIM, index_from=index_from, indexer=builder), DenseScopes(DIM)
    indexed.put(rows)
    exact.put(rows)
    return indexed, exact


def _built(scopes: DenseScopes, rows: int, builder=None) -> None:
    assert (builder or indexer()).idle(60), "the build did not end"
    assert scopes.indexed() == rows


FILTERS = [
    SCOPE,
    Filter("t1", agent="a1", session_id=("s1", "s2")),
    Filter("t1", agent="a1", kind="memory"),
    Filter("t1", agent="a1", since_ts=10.0, until_ts=45.0),
]


@pytest.mark.parametrize("m", [1, 3, 8])
def test_an_indexed_scope_answers_the_exact_pass_where_its_graph_holds_every_candidate(m):
    """60 rows: the graph is asked for at least ``EXPANSION_SEARCH`` (64) candidates, so for
    every row it holds, and its answer is the exact one, scored by the same einsum (scores
    equal to the float), through every filter."""
    rows = _rows(60)
    assert len(rows) <= EXPANSION_SEARCH
    indexed, exact = _pair(rows, index_from=50)
    _built(indexed, 60)
    queries = _queries(rows, m)
    excluded = Filter("t1", agent="a1", exclude_ids=tuple(r[0] for r in rows[:10]))
    for f in [*FILTERS, excluded]:
        for limit in (1, 12, 50):
            assert indexed.search(f, queries, limit) == exact.search(f, queries, limit), (f, limit)
    assert indexed.approximate > 0 and indexed.fell_back == 0


def test_a_narrow_filter_is_answered_exactly_never_short():
    """One session of 8 points among 2,000: the graph's 4 x limit candidates hold too few of
    them, so the search is answered by the exact pass, all 8 points."""
    rows = _rows(2000)
    for i in range(0, 2000, 250):
        rows[i][2]["session_id"] = "rare"
    indexed, exact = _pair(rows, index_from=500)
    _built(indexed, 2000)
    queries = _queries(rows, 4)
    rare = Filter("t1", agent="a1", session_id="rare")
    found = indexed.search(rare, queries, 12)
    assert found == exact.search(rare, queries, 12)
    assert all(len(each) == 8 for each in found)
    assert indexed.fell_back > 0


def test_an_indexed_scope_finds_the_exact_top_12_of_a_larger_scope():
    """Where the graph is asked for a part of its rows, its top 12 is the exact one for
    nearly every query (recall@12 >= 0.98, as the bench measures on real questions)."""
    rows = _rows(4000)
    indexed, exact = _pair(rows, index_from=1000)
    _built(indexed, 4000)
    queries = _queries(rows, 50)
    got, want = indexed.search(SCOPE, queries, 12), exact.search(SCOPE, queries, 12)
    recall = np.mean([len({p for p, _ in g} & {p for p, _ in w}) / 12 for g, w in zip(got, want)])
    assert recall >= 0.98
    assert indexed.approximate > 0 and indexed.fell_back == 0


def test_a_search_never_waits_on_a_build_and_writes_during_it_are_answered():
    """The build is held between two of its steps: searches answer (exactly: no index yet)
    and writes go in meanwhile; once released and swapped in, the rows written during the
    build are the tail, a removed row is never answered and a row written again is answered
    with its new vector."""
    builder = HeldIndexer()
    rows = _rows(400)
    indexed, exact = _pair(rows, index_from=200, builder=builder)
    try:
        assert builder.held.wait(30), "the build did not start"
        queries = _queries(rows, 3)
        answered: list = []
        searcher = threading.Thread(target=lambda: answered.append(indexed.search(SCOPE, queries, 50)))
        searcher.start()
        searcher.join(30)
        assert answered, "a search waited on the build"
        assert answered[0] == exact.search(SCOPE, queries, 50)

        late = _rows(30, seed=3, start=1000)  # the tail
        moved = [(pid, -vector, payload) for pid, vector, payload in rows[:10]]  # written again: new vectors
        gone = [pid for pid, _, _ in rows[10:30]]
        for scopes in (indexed, exact):
            scopes.put(late)
            scopes.put(moved)
            scopes.remove(gone)
    finally:
        builder.release.set()
    assert builder.idle(60)
    assert indexed.indexed() == 400 - 30  # the rows written again and removed are not the index's any more
    for qs in (queries, _queries(late, 5), -_queries(rows[:10], 5)):
        got = indexed.search(SCOPE, qs, 50)
        assert got == exact.search(SCOPE, qs, 50)
        assert not {pid for each in got for pid, _ in each} & set(gone)
    assert indexed.approximate > 0


def test_an_index_is_built_again_once_its_tail_passes_the_bound():
    rows = _rows(1200)
    indexed, exact = _pair(rows, index_from=1000)
    _built(indexed, 1200)
    more = _rows(1024 + 1, seed=4, start=5000)  # past max(1024, 1200 // REBUILD) rows of tail
    assert 1200 // REBUILD < 1024
    indexed.put(more)
    exact.put(more)
    _built(indexed, 1200 + 1025)  # the new build holds every row


def test_a_closed_copy_drops_its_index_and_its_build_in_flight():
    builder = HeldIndexer()
    rows = _rows(400)
    indexed, exact = _pair(rows, index_from=200, builder=builder)
    assert builder.held.wait(30)
    indexed.close()
    builder.release.set()
    assert builder.idle(60)
    assert indexed.indexed() == 0  # the build stopped: nothing swapped in
    queries = _queries(rows, 2)
    assert indexed.search(SCOPE, queries, 12) == exact.search(SCOPE, queries, 12)  # still exact, if asked


def test_the_embedded_store_indexes_a_large_scope_forgets_through_it_and_drops_it_with_the_copy(tmp_path):
    rows = _rows(600)
    store = EdgeStore(tmp_path / "store", dense_index_from=300)
    try:
        c = store.ensure_collection("memories", 1, DIM)
        store.upsert(c, [Point(id=pid, dense=v.tolist(), payload=p) for pid, v, p in rows])
        queries = _queries(rows, 4)
        before = [[h.id for h in store.search(c, dense=q.tolist(), filter=SCOPE, limit=12)] for q in queries]
        shard = store._shards[c]
        scopes = shard.dense
        assert scopes is not None
        _built(scopes, 600)
        after = [[h.id for h in store.search(c, dense=q.tolist(), filter=SCOPE, limit=12)] for q in queries]
        assert after == before and scopes.approximate > 0

        forgotten = before[0][0]  # the best answer, forgotten: never answered again
        store.delete(c, [forgotten])
        assert forgotten not in [h.id for h in store.search(c, dense=queries[0].tolist(), filter=SCOPE, limit=50)]
        assert scopes.indexed() == 599

        store.compact(c)  # the engine swapped: the copy and its index dropped, built again from it
        assert shard.dense is None and scopes.indexed() == 0
        again = [h.id for h in store.search(c, dense=queries[0].tolist(), filter=SCOPE, limit=12)]
        assert again == before[0][1:] + [again[-1]] and forgotten not in again
        wait_for(lambda: shard.dense is not None and shard.dense.indexed() == 599, what="the new copy's index")
    finally:
        store.close()
