"""The embedded store's dense searches by scope (``DenseScopes``): what they answer equals an
exact scan of what the engine holds, through every kind of write, a compaction and a reopen,
and a deleted point is never answered."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memstream.projections.stores.dense_index import indexer
from memstream.projections.stores.dense_scope import BLAS_FROM, DenseScopes
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.ids import point_id
from memstream.projections.stores.port import Filter, Point, Search

DIM = 16
TENANTS = ("t1", "t2")
AGENTS = ("a1", "a2", "a3")
SESSIONS = ("s1", "s2", "s3")
KINDS = ("turn", "memory")


class Oracle:
    """What the engine should hold: each point's dense vector (or None) and payload."""

    def __init__(self) -> None:
        self.points: dict[str, tuple[np.ndarray | None, dict]] = {}

    def search(self, f: Filter, query: np.ndarray, limit: int) -> list[str]:
        q = query / np.linalg.norm(query)
        scored = []
        for pid, (dense, p) in self.points.items():
            if dense is None or p["tenant"] != f.tenant or pid in f.exclude_ids:
                continue
            if not _in(p.get("agent"), f.agent) or not _in(p.get("session_id"), f.session_id) or not _in(p.get("kind"), f.kind):
                continue
            ts = p.get("occurred_at_ts")
            if f.since_ts is not None and not (ts is not None and ts >= f.since_ts):
                continue
            if f.until_ts is not None and not (ts is not None and ts < f.until_ts):
                continue
            scored.append((-float(dense @ q / np.linalg.norm(dense)), pid))
        return [pid for _, pid in sorted(scored)[:limit]]


def _in(value, wanted) -> bool:
    if wanted is None:
        return True
    return value in ((wanted,) if isinstance(wanted, str) else wanted)


def _point(rng: random.Random, i: int, *, dense: bool = True, **fixed) -> Point:
    payload = {
        "tenant": rng.choice(TENANTS),
        "agent": rng.choice(AGENTS),
        "session_id": rng.choice(SESSIONS),
        "kind": rng.choice(KINDS),
        "occurred_at_ts": float(rng.randrange(1000)),
        "event_id": f"e{i}",
        **fixed,
    }
    vector = [rng.gauss(0, 1) for _ in range(DIM)] if dense else None
    return Point(id=point_id("p", i), dense=vector, payload=payload)


def _filters(rng: random.Random, ids: list[str]) -> list[Filter]:
    out = [Filter(t) for t in TENANTS] + [Filter(t, agent=a) for t in TENANTS for a in AGENTS]
    out += [
        Filter("t1", agent=("a1", "a3")),
        Filter("t2", agent="a2", session_id="s1"),
        Filter("t1", session_id=("s2", "s3")),  # a session of every agent: the engine's path
        Filter("t1", agent="a1", kind="memory"),
        Filter("t2", agent="a3", since_ts=300.0, until_ts=700.0),
        Filter("t1", agent="a2", exclude_ids=tuple(rng.sample(ids, min(20, len(ids))))),
        Filter("t1", agent="nobody"),
        Filter("t3"),
    ]
    return out


def _check(store: EdgeStore, c: str, oracle: Oracle, rng: random.Random) -> None:
    assert indexer().idle(60), "the indexes' builds did not end"  # a store with dense_index_from: searched through them
    filters = _filters(rng, list(oracle.points))
    # as many queries a scope as a batch holds: the BLAS product's path (BLAS_FROM), against einsum's alone
    queries = [np.asarray([rng.gauss(0, 1) for _ in range(DIM)]) for _ in range(BLAS_FROM + 1)]
    asked = [Search(filter=f, dense=q.tolist(), limit=limit) for f in filters for q in queries for limit in (1, 7, 400)]
    batch = store.search_many(c, asked)
    for search, many in zip(asked, batch):
        want = oracle.search(search.filter, np.asarray(search.dense), search.limit)
        alone = store.search(c, dense=search.dense, filter=search.filter, limit=search.limit)
        assert [h.id for h in alone] == want, search.filter
        assert [h.id for h in many] == [h.id for h in alone]
        assert np.allclose([h.score for h in many], [h.score for h in alone], atol=1e-6)
        assert all(h.payload["tenant"] == search.filter.tenant for h in alone)


@pytest.mark.parametrize("index_from", [None, 1], ids=["exact", "indexed"])
@pytest.mark.parametrize("seed", [1, 2])
def test_dense_searches_by_scope_answer_an_exact_scan_of_what_the_engine_holds_through_every_write(tmp_path, seed, index_from):
    """Also with every scope indexed (``dense_index_from=1``): its scopes are small enough
    that the graph is asked for most of their rows, and answers as the exact scan."""
    rng = random.Random(seed)
    oracle = Oracle()
    store = EdgeStore(tmp_path / "store", auto_optimize=150, dense_index_from=index_from)
    try:
        c = store.ensure_collection("turns", 1, DIM)
        store.search(c, dense=[1.0] * DIM, filter=Filter("t1"), limit=3)  # the copy is built (empty) before the writes
        points = [_point(rng, i) for i in range(400)]
        for start in range(0, 400, 100):
            store.upsert(c, points[start : start + 100])
        for p in points:
            oracle.points[p.id] = (np.asarray(p.dense), dict(p.payload))
        _check(store, c, oracle, rng)

        # written again without a dense vector (the keyword stage first), then given one
        again = [_point(rng, i, dense=False, dense_key=f"k{i}") for i in range(0, 60)]
        store.upsert(c, again)
        for p in again:
            oracle.points[p.id] = (None, dict(p.payload))
        _check(store, c, oracle, rng)
        vectors = [(p.id, [rng.gauss(0, 1) for _ in range(DIM)], f"k{i}") for i, p in enumerate(again[:30])]
        vectors.append((again[30].id, [1.0] * DIM, "not its key"))  # left without a vector
        assert store.set_dense(c, vectors) == 30
        for pid, dense, _ in vectors[:30]:
            oracle.points[pid] = (np.asarray(dense), oracle.points[pid][1])
        _check(store, c, oracle, rng)

        # deleted (a forget), deleted by scope, moved to another agent
        gone = rng.sample([p.id for p in points], 50)
        store.delete(c, gone)
        for pid in gone:
            oracle.points.pop(pid, None)
        store.delete_where(c, Filter("t2", agent="a1", session_id="s2"))
        for pid, (_, p) in list(oracle.points.items()):
            if (p["tenant"], p["agent"], p["session_id"]) == ("t2", "a1", "s2"):
                del oracle.points[pid]
        moved = [pid for pid, (_, p) in oracle.points.items() if p["agent"] == "a3"][:25]
        store.set_payload(c, moved, {"agent": "a2", "occurred_at_ts": 500.0})
        for pid in moved:
            oracle.points[pid][1].update(agent="a2", occurred_at_ts=500.0)
        _check(store, c, oracle, rng)

        assert store.compact(c) == len(oracle.points)
        _check(store, c, oracle, rng)
    finally:
        store.close()
    reopened = EdgeStore(tmp_path / "store", dense_index_from=index_from)  # the copy is built from the engine on open
    try:
        _check(reopened, c, oracle, rng)
        for pid in gone:
            assert all(h.id != pid for h in reopened.search(c, dense=[1.0] * DIM, filter=Filter("t1"), limit=1000))
    finally:
        reopened.close()


def test_dense_searches_by_scope_rank_as_the_engines_own_exact_search(tmp_path):
    rng = random.Random(7)
    store = EdgeStore(tmp_path / "store")
    try:
        c = store.ensure_collection("turns", 1, DIM)
        store.upsert(c, [_point(rng, i, tenant="t1") for i in range(500)])
        shard = store._shards[c]
        import qdrant_edge as qe

        from memstream.projections.stores.edge import _filter

        for agent in (*AGENTS, None):
            f = Filter("t1", agent=agent)
            query = [rng.gauss(0, 1) for _ in range(DIM)]
            engine = shard.shard.query(
                qe.QueryRequest(
                    limit=20,
                    query=qe.Query.Nearest(query, using="dense"),
                    filter=_filter(f),
                    with_payload=False,
                    params=qe.SearchParams(exact=True),
                )
            )
            ours = store.search(c, dense=query, filter=f, limit=20)
            assert [h.id for h in ours] == [str(p.id) for p in engine]
            assert np.allclose([h.score for h in ours], [p.score for p in engine], atol=1e-5)
    finally:
        store.close()


def test_a_failed_write_drops_the_dense_copy_and_the_next_search_reads_the_engine_again(tmp_path, monkeypatch):
    rng = random.Random(3)
    store = EdgeStore(tmp_path / "store")
    try:
        c = store.ensure_collection("turns", 1, DIM)
        first = _point(rng, 1, tenant="t1", agent="a1")
        store.upsert(c, [first])
        assert [h.id for h in store.search(c, dense=first.dense, filter=Filter("t1"), limit=5)] == [first.id]
        shard = store._shards[c]
        assert shard.dense is not None and len(shard.dense) == 1

        from memstream.projections.stores import dense_scope

        def broken(self, points):
            raise RuntimeError("the copy failed after the engine wrote")

        monkeypatch.setattr(dense_scope.DenseScopes, "put", broken)
        second = _point(rng, 2, tenant="t1", agent="a1")
        with pytest.raises(Exception, match="the copy failed"):
            store.upsert(c, [second])
        assert shard.dense is None
        monkeypatch.undo()
        found = {h.id for h in store.search(c, dense=second.dense, filter=Filter("t1"), limit=5)}
        assert found == {first.id, second.id}  # the engine applied it: the copy built again says so
    finally:
        store.close()


def test_building_the_copy_takes_the_write_lock_outside_the_gate_as_a_compaction_does(tmp_path):
    """A compaction holds the write lock and then waits for every call in the gate to end: a
    search that entered the gate and then waited for the write lock to build the copy would
    wait for it forever. The write lock is asked for by a search outside the gate."""
    rng = random.Random(5)
    store = EdgeStore(tmp_path / "store")
    try:
        c = store.ensure_collection("turns", 1, DIM)
        point = _point(rng, 1, tenant="t1", agent="a1")
        store.upsert(c, [point])
        shard = store._shards[c]
        assert shard.dense is None  # not built yet: the next dense search builds it
        calls_in_gate: list[int] = []

        class Recorded:
            def __init__(self, lock):
                self.lock = lock

            def __enter__(self):
                calls_in_gate.append(shard.gate._active)
                return self.lock.__enter__()

            def __exit__(self, *exc):
                return self.lock.__exit__(*exc)

        shard.write_lock = Recorded(shard.write_lock)
        assert [h.id for h in store.search(c, dense=point.dense, filter=Filter("t1"), limit=5)] == [point.id]
        assert shard.dense is not None and calls_in_gate == [0]
    finally:
        store.close()


@pytest.mark.parametrize("dim", [16, 384])
def test_a_batch_through_the_blas_product_answers_the_scores_einsum_gives_each_query_alone(dim):
    """Near-ties at the cut (rows a rounding apart, exact duplicates) are where a BLAS
    product's other summation order could change the top: the candidates within the slack
    are scored again by einsum, so the batch's answers are bit for bit the lone ones (ties
    in the order of their ids, whichever path found them)."""
    rng = np.random.default_rng(dim)
    scopes = DenseScopes(dim)
    base = rng.standard_normal((300, dim)).astype(np.float32)
    rows = np.concatenate([base, base[:100], base[:100] + rng.standard_normal((100, dim)).astype(np.float32) * 1e-6])
    scopes.put(
        (f"p{i}", row, {"tenant": "t", "agent": "a", "kind": ("turn", "memory")[i % 2], "occurred_at_ts": float(i)})
        for i, row in enumerate(rows)
    )
    queries = rng.standard_normal((8, dim)).astype(np.float32)
    queries[1] = base[0]  # the duplicated rows at the top
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for f in (Filter("t"), Filter("t", agent="a", kind="memory", since_ts=50.0), Filter("t", exclude_ids=("p0", "p300"))):
        for limit in (1, 12, 50, 1000):
            batch = scopes.search(f, queries, limit)
            for j, many in enumerate(batch):
                alone = scopes.search(f, queries[j : j + 1], limit)[0]
                assert many == alone  # the same ids and floats, equal scores in the order of their ids


def test_a_dense_copy_runs_numpy_s_blas_at_one_thread_in_its_process():
    """OpenBLAS's default thread per CPU spins on a batch's small product: the process that
    holds a copy runs numpy's BLAS at one thread (set once, whichever BLAS numpy loaded)."""
    from threadpoolctl import threadpool_info

    DenseScopes(8)
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)
