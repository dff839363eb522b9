"""Search latency of a ``VectorStore``: filtered dense, sparse and hybrid queries.

``search_latency(store, n)`` loads ``n`` synthetic points into a fresh collection
(``{name}_v1``), runs queries scoped to one tenant and one agent (about ``selectivity``
of the points), and returns a dict of load rate, optimize time, p50/p95/p99 latency per
query mode and recall@10 of the filtered dense search against an exact numpy scan.
The collection is dropped afterwards unless ``keep=True``.

Distributions: ``"random"`` (uniform on the sphere: the worst case for HNSW) and
``"clustered"`` (points around topic centres, queries near existing points: closer to
real sentence embeddings).

Command line: ``memstream bench store --n 10000 100000 --distribution
random clustered --index plain hnsw`` prints one JSON object per run. Timing belongs
here, not in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import numpy as np

from memstream.bench.stats import percentile
from memstream.projections import Filter, Point, VectorStore, point_id, sparse_vector

__all__ = ["add_arguments", "make_points", "run", "search_latency"]


def make_points(
    n: int,
    *,
    dim: int = 384,
    distribution: str = "random",
    tenants: int = 2,
    agents_per_tenant: int = 5,
    seed: int = 0,
) -> tuple[np.ndarray, list[dict[str, Any]], list[str]]:
    """Unit vectors, payloads and texts of ``n`` synthetic points (deterministic)."""
    rng = np.random.default_rng(seed)
    if distribution == "random":
        vectors = rng.standard_normal((n, dim), dtype=np.float32)
    elif distribution == "clustered":
        centres = rng.standard_normal((max(16, n // 500), dim), dtype=np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        vectors = centres[rng.integers(0, len(centres), n)]
        vectors = vectors + rng.standard_normal((n, dim), dtype=np.float32) * 0.05
    else:
        raise ValueError(f"distribution must be 'random' or 'clustered', got {distribution!r}")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocab_ids = rng.zipf(1.2, size=(n, 12)) % 20_000
    payloads, texts = [], []
    for i in range(n):
        tenant = i % tenants
        agent = (i // tenants) % agents_per_tenant
        payloads.append(
            {
                "tenant": f"t{tenant}",
                "agent": f"a{agent}",
                "kind": "turn",
                "session_id": f"s{i % 97}",
                "event_id": point_id("bench", i),
                "occurred_at_ts": 1.7e9 + i,
            }
        )
        texts.append(" ".join(f"w{w}" for w in vocab_ids[i]))
    return vectors, payloads, texts


def _percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000.0
    return {
        "p50_ms": round(float(np.median(ms)), 3),
        "p95_ms": round(float(percentile(ms.tolist(), 0.95)), 3),
        "p99_ms": round(float(percentile(ms.tolist(), 0.99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
    }


def search_latency(
    store: VectorStore,
    n: int,
    *,
    dim: int = 384,
    distribution: str = "random",
    queries: int = 200,
    limit: int = 10,
    batch: int = 512,
    optimize: bool = False,
    name: str = "bench",
    keep: bool = False,
    exact_too: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Load ``n`` points and measure filtered search latency per mode (see module doc).

    ``exact_too``: measure again with the store's ``exact`` flag flipped (the HNSW vs
    exact-scoring trade-off on the same data), under ``result["flipped_exact"]``.
    """
    vectors, payloads, texts = make_points(n, dim=dim, distribution=distribution, seed=seed)
    for version in store.versions(name):  # a run that crashed left its collection
        store.drop_collection(name, version)
    collection = store.ensure_collection(name, 1, dim)
    ids = [point_id("bench", i) for i in range(n)]
    started = time.perf_counter()
    for start in range(0, n, batch):
        end = min(n, start + batch)
        store.upsert(
            collection,
            [Point(id=ids[i], dense=vectors[i], sparse=sparse_vector(texts[i]), payload=payloads[i]) for i in range(start, end)],
        )
    load_s = time.perf_counter() - started
    optimize_s = None
    if optimize and hasattr(store, "optimize"):
        started = time.perf_counter()
        store.optimize(collection)
        optimize_s = round(time.perf_counter() - started, 2)

    result: dict[str, Any] = {
        "backend": type(store).__name__,
        "n": n,
        "dim": dim,
        "distribution": distribution,
        "limit": limit,
        "queries": queries,
        "load_points_per_s": round(n / load_s),
        "optimize_s": optimize_s,
        "index": getattr(store, "index", None),
    }
    queries_ = _queries(vectors, payloads, texts, distribution, queries, seed)
    result.update(_measure(store, collection, vectors, ids, queries_, limit))
    if exact_too and hasattr(store, "exact"):
        previous, store.exact = store.exact, not store.exact
        try:
            result["flipped_exact"] = _measure(store, collection, vectors, ids, queries_, limit)
        finally:
            store.exact = previous
    if not keep:
        store.drop_collection(name, 1)
    return result


Queries = tuple[Filter, np.ndarray, list[tuple[np.ndarray, tuple[list[int], list[float]]]]]


def _queries(
    vectors: np.ndarray, payloads: list[dict[str, Any]], texts: list[str], distribution: str, queries: int, seed: int
) -> Queries:
    """(filter, indices in scope, [(dense, sparse)]) for one tenant+agent scope."""
    rng = np.random.default_rng(seed + 1)
    tenant, agent = "t0", "a0"
    scope = np.flatnonzero([p["tenant"] == tenant and p["agent"] == agent for p in payloads])
    out = []
    dim = int(vectors.shape[1])
    for _ in range(queries):
        # near an existing point of the scope (random data: a fresh random vector)
        src = int(rng.choice(scope))
        if distribution == "random":
            q = rng.standard_normal(dim).astype(np.float32)
        else:
            q = vectors[src] + rng.standard_normal(dim).astype(np.float32) * 0.03
        q /= np.linalg.norm(q)
        words = texts[src].split()
        out.append((q, sparse_vector(" ".join(rng.choice(words, size=3, replace=False)))))
    return Filter(tenant, agent=agent), scope, out


def _measure(
    store: VectorStore, collection: str, vectors: np.ndarray, ids: list[str], queries_: Queries, limit: int
) -> dict[str, Any]:
    """Latency per mode. Every query runs once in every mode first (warm caches: the
    vectors are memory-mapped), then the modes are interleaved query by query so that
    other load on the machine hits them alike."""
    flt, scope, qs = queries_
    modes = {
        "dense": lambda q, sv: {"dense": q},
        "sparse": lambda q, sv: {"sparse": sv},
        "hybrid": lambda q, sv: {"dense": q, "sparse": sv},
    }
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    recall_hits = 0
    for q, sv in qs:  # warm-up
        for args in modes.values():
            store.search(collection, filter=flt, limit=limit, **args(q, sv))
    for q, sv in qs:
        for mode, args in modes.items():
            t, c = time.perf_counter(), time.process_time()
            hits = store.search(collection, filter=flt, limit=limit, **args(q, sv))
            wall[mode].append(time.perf_counter() - t)
            cpu[mode].append(time.process_time() - c)
            if mode == "dense":
                truth = scope[np.argsort(-(vectors[scope] @ q))[:limit]]
                recall_hits += len({ids[j] for j in truth} & {h.id for h in hits})
    result: dict[str, Any] = {
        "selectivity": round(len(scope) / len(ids), 3),
        "exact": getattr(store, "exact", None),
    }
    for mode in modes:
        result[mode] = _percentiles(wall[mode])
        # CPU time of the whole process (engine threads included): less sensitive than
        # wall time to other jobs on a shared machine
        result[mode]["cpu_mean_ms"] = round(1000 * sum(cpu[mode]) / len(cpu[mode]), 3)
    result["loadavg_1m"] = round(os.getloadavg()[0], 2)
    result["dense_recall_at_k"] = round(recall_hits / (limit * len(qs)), 4)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench store``'s arguments (``python -m memstream.bench.store`` takes the same)."""
    parser.add_argument("--n", type=int, nargs="+", default=[10_000], help="points per run (default 10000)")
    parser.add_argument(
        "--distribution", nargs="+", default=["random", "clustered"], choices=["random", "clustered"], help="(default both)"
    )
    parser.add_argument("--index", nargs="+", default=["plain"], choices=["plain", "hnsw"], help="(default plain)")
    parser.add_argument("--exact-too", action="store_true", help="also measure exact=True")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode (default 200)")
    parser.add_argument("--path", default=None, help="parent of the temporary store directory")


def run(args: argparse.Namespace) -> int:
    """Print one JSON object per run (index, size, distribution)."""
    from memstream.projections import EdgeStore

    for index in args.index:
        with tempfile.TemporaryDirectory(dir=args.path) as path:
            store = EdgeStore(path, index=index, auto_optimize=None)
            try:
                for n in args.n:
                    for distribution in args.distribution:
                        res = search_latency(
                            store, n, distribution=distribution, queries=args.queries, optimize=True, exact_too=args.exact_too
                        )
                        print(json.dumps(res), flush=True)
            finally:
                store.close()
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m memstream.bench.store", description=__doc__.splitlines()[0])
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))
