"""``VectorStore`` on qdrant-edge: Qdrant's Rust engine in-process (the embedded default).

Layout under ``path``::

    .lock             flock held while a process has the store open (single process)
    turns_v1/         one EdgeShard per collection version (WAL, segments, indexes)
    turns_v2/
    turns.active      {"version": 2}: the version readers of "turns" see

Edge has no collections and no aliases: a collection is a shard directory, created in
a temporary directory and renamed into place (a crash never leaves half a collection),
and the active version is a pointer file replaced atomically (write, fsync, rename).

Index policy (``index=``):

- ``"plain"`` (default): no HNSW graph. A filtered search reads the tenant/agent
  payload index and scores only the matching points, exactly (recall 1.0); at 100k
  points and a 10 % scope that is a few milliseconds (``store_bench``). ``optimize()``
  rewrites full appendable segments as immutable ones (about 2.5x cheaper to scan),
  vacuums deleted points and merges segments up to ``MAX_SEGMENT_KB``, so one call
  costs about a second per 10k new points and never rewrites the whole collection.
- ``"hnsw"``: ``optimize()`` also builds HNSW graphs (global and per payload value).
  That took 6-11 minutes at 100k points here, and on uniformly random vectors the
  filtered recall@10 was 0.19 (0.9985 on clustered ones). Only for large collections
  searched with wide filters; ``exact=True`` scores filtered candidates exactly instead
  of walking the graph.

qdrant-edge 0.9 holds the GIL while ``optimize()`` runs: every thread of the process
waits (measured: 7 s for an HNSW build at 10k points, up to about 3 s for a plain-mode
call at 100k on a loaded machine). ``auto_optimize=N`` runs it inline in the writing
call once N points were written or deleted since the last run (``None``: never by
itself; call ``optimize`` at quiet times instead).

Dense searches: a search by meaning only (no keywords) is answered from a read copy of the
collection's dense vectors, one contiguous matrix per scope (tenant, agent:
``DenseScopes``), exactly: the engine's exact filtered scan of 10k points cost 2.9-3.4 ms a
search where a pass over a matrix costs a fraction, and the searches of a batch in one scope
share one product. Every write applies to the copy what it did to the engine, under the
collection's write lock (a failed write drops the copy, built again from the engine by the
next dense search, as after a compaction or an open). A session of every agent (the engine's
payload index finds its few points) and fused searches stay the engine's.

Payloads of search hits: a search asks the engine for ids and scores only and takes
the payloads from a per-collection cache of the points searches found lately
(``PAYLOAD_CACHE``), reading the others in one ``retrieve``. Reading a payload costs the
engine about 2 us a point whatever fields are asked for, and a query server's recall reads
a hundred or more (two searches of 50 per collection), the same ones again and again; at
10k points that was half the cost of a search. Every write that can change or remove a
payload forgets the points it touched (``_Payloads``), so a search never answers a payload
older than the last write to its point.

Thread-safety: one writer at a time per collection (a lock), readers in parallel with
it (the engine is internally synchronised); closing or dropping a collection waits for
the calls in flight and makes later ones fail cleanly.

Durability: a returned write is in the shard's write-ahead log and visible to every
reader. It survives a crash of the process; a power loss can lose what was written
since the last ``flush()`` (``close()`` flushes).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import uuid
from collections import OrderedDict
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence, TextIO

import numpy as np
import qdrant_edge as qe

from memstream.core import release_file_pages
from memstream.projections.stores.backend import (
    RRF_K,
    check_point,
    check_search,
    dense_list,
    prefetch_limit,
    set_dense_looking,
    sparse_lists,
    uuid_ids,
)
from memstream.projections.stores.dense_scope import DenseScopes
from memstream.projections.stores.port import (
    DENSE,
    DENSE_KEY,
    INDEXED_FIELDS,
    SPARSE,
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    Fusion,
    Hit,
    Point,
    PointGone,
    Search,
    SparseVector,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    physical_name,
    split_physical,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: rely on the engine's WAL lock
    fcntl = None  # type: ignore[assignment]  # no module here: None says so

__all__ = ["EdgeStore"]

IndexMode = Literal["plain", "hnsw"]

# Size (KB of dense vectors) past which the optimizer rebuilds an appendable segment as
# an immutable one: about 13k points of 384 dims, about 1 s of optimize() each.
INDEXING_KB = 20_000
# Merges stop at MAX_SEGMENT_KB (about 33k points of 384 dims) so that one optimize()
# never rewrites the whole collection: its cost, and the stall, stay bounded.
SEGMENTS = 8
MAX_SEGMENT_KB = 50_000
# Payloads of search hits kept per collection (``_Payloads``; about 1.5 KB each). A recall
# of fresh questions finds points all over its scope: at 10k memories of an agent (12k
# points with the others') 8,192 left about 13 payloads a recall to read from the engine
# (one retrieve a batch, 0.15 ms of CPU a recall); 16,384 keep them (BENCHMARKS.md, "The
# served path at 10k"), for at most about 12 MB more a collection.
PAYLOAD_CACHE = 16384


class _Gate:
    """Calls in flight on one shard; ``close`` waits for them and refuses new ones;
    ``exclusive`` waits for them and holds new ones back while it runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False
        self._paused = False

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._paused = True
            self._cond.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._paused or self._closed)
            if self._closed:
                raise CollectionNotFound(f"{name} was closed or dropped")
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if self._active == 0:
                    self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0)


class _Payloads:
    """The payloads of the points searches found lately, by point id (least recently
    found dropped past ``size``), for one shard.

    Every write that may change or remove a payload (upsert, delete, set_payload,
    delete_where) forgets what it touched once the engine has applied it, and moves
    ``generation`` on: a search keeps the payloads it read only if no such write came
    between its read and its keeping them, so a payload kept is never older than the last
    write to that point."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.generation = 0
        self._items: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        found: dict[str, Mapping[str, Any]] = {}
        with self._lock:
            items = self._items
            for pid in ids:
                payload = items.get(pid)
                if payload is not None:
                    items.move_to_end(pid)
                    found[pid] = payload
        return found

    def keep(self, payloads: Mapping[str, Mapping[str, Any]], generation: int) -> None:
        if self.size <= 0:
            return
        with self._lock:
            if generation != self.generation:
                return  # a write came in between: what was read may be stale
            self._items.update(payloads)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, ids: Sequence[str] | None) -> None:
        """Forget ``ids`` (None: everything), after the engine applied a write to them."""
        with self._lock:
            self.generation += 1
            if ids is None:
                self._items.clear()
            else:
                for pid in ids:
                    self._items.pop(pid, None)


class _Shard:
    def __init__(self, name: str, shard: qe.EdgeShard, dim: int, payload_cache: int) -> None:
        self.name = name
        self.shard = shard
        self.dim = dim
        self.gate = _Gate()
        self.write_lock = threading.Lock()
        self.writes_since_optimize = 0
        self.payloads = _Payloads(payload_cache)
        # the dense vectors by scope, for dense-only searches (None: not built yet, or
        # dropped by a failed write or a swap; built from the engine by the next search)
        self.dense: DenseScopes | None = None

    def drop_dense(self) -> None:
        """Drop the dense copy (and its indexes, and any build of one in flight)."""
        dense, self.dense = self.dense, None
        if dense is not None:
            dense.close()


class EdgeStore:
    """A ``VectorStore`` on qdrant-edge shards under ``path`` (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        index: IndexMode = "plain",
        exact: bool = False,
        auto_optimize: int | None = 10_000,
        max_search_threads: int | None = None,
        payload_cache: int = PAYLOAD_CACHE,
        dense_index_from: int | None = None,
    ) -> None:
        if index not in ("plain", "hnsw"):
            raise ValueError(f"index must be 'plain' or 'hnsw', got {index!r}")
        self._base = Path(path)
        self._base.mkdir(parents=True, exist_ok=True)
        self.index = index
        self.exact = exact
        self._auto_optimize = auto_optimize
        self._max_search_threads = max_search_threads
        self._payload_cache = payload_cache
        self._dense_index_from = dense_index_from
        self._lock = threading.RLock()  # the shard registry and the pointer files
        self._shards: dict[str, _Shard] = {}
        self._active: dict[str, int | None] = {}
        self._closed = False
        self._lock_file = self._acquire_process_lock()
        for stale in self._base.glob(".tmp-*"):  # left by a crash: half-made or half-dropped
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
        for fresh in self._base.glob("*.compact"):  # a compaction a crash stopped before its swap
            if (self._base / fresh.name[: -len(".compact")]).exists():
                shutil.rmtree(fresh, ignore_errors=True)  # not swapped: the old one is whole
            else:
                self._swap_in(fresh.name[: -len(".compact")])

    # --- collections and versions -------------------------------------------------

    def ensure_collection(self, name: str, version: int, dim: int) -> str:
        collection = physical_name(name, version)
        if dim < 1:
            raise ValueError("dim must be >= 1")
        with self._lock:
            self._check_open()
            directory = self._base / collection
            if directory.exists():
                existing = _stored_dim(directory)
                if existing != dim:
                    raise DimensionMismatch(
                        f"{collection} exists with dense dim {existing}, not {dim}: build a new version of {name!r} instead"
                    )
                shard = self._open(collection)
                self._ensure_indexes(shard.shard)
                return collection
            tmp = self._base / f".tmp-{collection}-{uuid.uuid4().hex[:8]}"
            with _translated(collection):
                created = qe.EdgeShard.create(str(tmp), self._config(dim))
                try:
                    self._ensure_indexes(created)
                finally:
                    created.close()
            os.rename(tmp, directory)
            _fsync_dir(self._base)
            self._open(collection)
        return collection

    def drop_collection(self, name: str, version: int) -> None:
        collection = physical_name(name, version)
        with self._lock:
            self._check_open()
            if self.active_version(name) == version:
                raise StoreError(f"{collection} is the active version of {name!r}: switch first")
            shard = self._shards.pop(collection, None)
            if shard is not None:
                shard.gate.close()
                shard.drop_dense()
                with _translated(collection):
                    shard.shard.close()
            directory = self._base / collection
            if directory.exists():
                # rename first so a crash mid-delete never leaves a half collection in place
                doomed = self._base / f".tmp-drop-{collection}-{uuid.uuid4().hex[:8]}"
                os.rename(directory, doomed)
                _fsync_dir(self._base)
                shutil.rmtree(doomed, ignore_errors=True)

    def versions(self, name: str) -> list[int]:
        physical_name(name, 1)  # validates the name
        found = [split_physical(p.name) for p in self._base.iterdir() if p.is_dir()]
        return sorted(parsed[1] for parsed in found if parsed and parsed[0] == name)

    def active_version(self, name: str) -> int | None:
        physical_name(name, 1)
        with self._lock:
            if name not in self._active:
                self._active[name] = self._read_pointer(name)
            return self._active[name]

    def set_active_version(self, name: str, version: int) -> None:
        collection = physical_name(name, version)
        with self._lock:
            self._check_open()
            if not (self._base / collection).is_dir():
                raise CollectionNotFound(f"{collection} does not exist: ensure_collection first")
            pointer = self._base / f"{name}.active"
            tmp = pointer.with_name(f".tmp-{name}.active")
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"version": version}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, pointer)
            _fsync_dir(self._base)
            self._active[name] = version

    def collection_for_read(self, name: str) -> str:
        version = self.active_version(name)
        if version is None:
            raise CollectionNotFound(f"no active version of {name!r}: set_active_version first")
        return physical_name(name, version)

    def optimize(self, collection: str) -> bool:
        """Run the engine's optimizers now (vacuum, merge; HNSW in ``"hnsw"`` mode).

        Blocks the writers of this collection, and in qdrant-edge 0.9 every thread of
        the process (the GIL is held), for the duration. True if anything changed.
        """
        shard = self._shard(collection)
        with shard.write_lock, shard.gate.use(shard.name), _translated(shard.name):
            shard.writes_since_optimize = 0
            return shard.shard.optimize()

    def compact(self, collection: str) -> int:
        """Rewrite a collection into a fresh shard holding only its live points, so that no
        deleted point's payload is left in the engine's write-ahead log or segments (a
        delete only marks a point; ``optimize`` keeps the log): ``memstream forget``'s last
        step on disk. Writers of the collection wait meanwhile, readers only while the
        engine is swapped (a close, two renames and a load). Returns the points kept.
        Crash-safe: the new shard is whole under ``NAME.compact`` before the old one moves
        away, and a store opened after a crash between the two renames finishes the swap."""
        shard = self._shard(collection)
        name = shard.name
        with shard.write_lock:
            records: list[Any] = []
            offset = None
            with shard.gate.use(name), _translated(name):
                while True:
                    page, offset = shard.shard.scroll(
                        qe.ScrollRequest(offset=offset, limit=1024, with_payload=True, with_vector=True)
                    )
                    records += page
                    if offset is None:
                        break
            fresh = self._base / f"{name}.compact"
            if fresh.exists():
                shutil.rmtree(fresh)
            tmp = self._base / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
            with _translated(name):
                created = qe.EdgeShard.create(str(tmp), self._config(shard.dim))
                try:
                    self._ensure_indexes(created)
                    for start in range(0, len(records), 1024):
                        created.update(
                            qe.UpdateOperation.upsert_points(
                                [qe.Point(r.id, r.vector, r.payload or {}) for r in records[start : start + 1024]]
                            )
                        )
                    created.flush()
                finally:
                    created.close()
            os.rename(tmp, fresh)
            _fsync_dir(self._base)
            with shard.gate.exclusive(), _translated(name):
                shard.shard.close()
                self._swap_in(name)
                shard.shard = qe.EdgeShard.load(str(self._base / name), self._config(shard.dim))
                release_file_pages(self._base / name)
                shard.writes_since_optimize = 0
                shard.payloads.forget(None)  # the engine was swapped: nothing read before it is kept
                shard.drop_dense()
        return len(records)

    def _swap_in(self, name: str) -> None:
        """Put ``NAME.compact`` in the place of ``NAME`` (the old one deleted)."""
        fresh, directory = self._base / f"{name}.compact", self._base / name
        if directory.exists():
            doomed = self._base / f".tmp-drop-{name}-{uuid.uuid4().hex[:8]}"
            os.rename(directory, doomed)
            os.rename(fresh, directory)
            _fsync_dir(self._base)
            shutil.rmtree(doomed, ignore_errors=True)
        else:
            os.rename(fresh, directory)
            _fsync_dir(self._base)

    def flush(self) -> None:
        """Write every collection's pending changes to disk (power-loss durability)."""
        with self._lock:
            shards = list(self._shards.values())
        for shard in shards:
            with shard.gate.use(shard.name), _translated(shard.name):
                shard.shard.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shards, self._shards = list(self._shards.values()), {}
            for shard in shards:
                shard.gate.close()
                shard.drop_dense()
                with contextlib.suppress(Exception):
                    shard.shard.close()
            if self._lock_file is not None:
                self._lock_file.close()  # releases the flock
                self._lock_file = None

    # --- writes -------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if not points:
            return
        shard = self._shard(collection)
        edge_points = []
        written: list[tuple[str, list[float] | None, dict[str, Any]]] = []  # as the engine holds them
        for p in points:
            check_point(p, shard.dim)
            vector: dict[str, Any] = {}
            if p.dense is not None:
                vector[DENSE] = dense_list(p.dense)
            if p.sparse is not None:
                indices, values = sparse_lists(p.sparse)
                vector[SPARSE] = qe.SparseVector(indices, values)
            pid, payload = str(uuid.UUID(p.id)), dict(p.payload)
            edge_points.append(qe.Point(pid, vector, payload))
            written.append((pid, vector.get(DENSE), payload))
        try:
            self._write(shard, qe.UpdateOperation.upsert_points(edge_points), len(edge_points), lambda d: d.put(written))
        finally:
            shard.payloads.forget([pid for pid, _, _ in written])

    def set_dense(self, collection: str, vectors: Sequence[tuple[str, Sequence[float] | Any, str]]) -> int:
        if not vectors:
            return 0
        shard = self._shard(collection)

        def write(matched: list[tuple[str, list[float], str]]) -> None:
            updates = [qe.PointVectors(str(uuid.UUID(pid)), {DENSE: values}) for pid, values, _ in matched]
            # the key is checked again by the engine as it writes: a point re-indexed since
            # the look keeps its new key and no vector
            condition = qe.Filter(must=[qe.FieldCondition(DENSE_KEY, match=qe.MatchAny([k for _, _, k in matched]))])
            try:
                self._write(
                    shard,
                    qe.UpdateOperation.update_vectors(updates, condition),
                    len(updates),
                    lambda dense: _read_back(shard, dense, [str(uuid.UUID(pid)) for pid, _, _ in matched]),
                )
            except StoreError as exc:
                if "No point with id" in str(exc):
                    raise PointGone(str(exc)) from exc
                raise

        return set_dense_looking(lambda ids: self.retrieve(collection, ids), vectors, write, dim=shard.dim)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        shard = self._shard(collection)
        canonical = _ids(ids)
        gone = [str(i) for i in canonical]
        try:
            self._write(shard, qe.UpdateOperation.delete_points(canonical), len(ids), lambda dense: dense.remove(gone))
        finally:
            shard.payloads.forget([str(i) for i in canonical])

    def delete_where(self, collection: str, filter: Filter) -> None:
        shard = self._shard(collection)
        # counted as one write: the optimizer cost of a large delete shows up next time
        try:
            self._write(
                shard, qe.UpdateOperation.delete_points_by_filter(_filter(filter)), 1, lambda dense: dense.remove_where(filter)
            )
        finally:
            shard.payloads.forget(None)

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        if not ids:
            return
        if "tenant" in payload and (not isinstance(payload["tenant"], str) or not payload["tenant"]):
            raise ValueError("payload['tenant'] must stay a non-empty str")
        shard = self._shard(collection)
        canonical = uuid_ids(ids)
        selector = qe.Filter(must=[qe.HasIdCondition(set(canonical))])
        try:
            self._write(
                shard,
                qe.UpdateOperation.set_payload_by_filter(selector, dict(payload)),
                len(ids),
                lambda dense: _read_back(shard, dense, canonical),
            )
        finally:
            shard.payloads.forget(canonical)

    # --- reads --------------------------------------------------------------------

    def search(
        self,
        collection: str,
        *,
        dense: Sequence[float] | Any | None = None,
        sparse: SparseVector | None = None,
        filter: Filter,
        limit: int = 10,
        fusion: Fusion = "rrf",
    ) -> list[Hit]:
        return self.search_many(collection, [Search(filter=filter, dense=dense, sparse=sparse, limit=limit, fusion=fusion)])[0]

    def search_many(self, collection: str, searches: Sequence[Search]) -> list[list[Hit]]:
        for q in searches:
            check_search(q.dense, q.sparse, q.limit, q.fusion)
        if not searches:
            return []
        shard = self._shard(collection)
        scored: list[list[tuple[str, float]]] = [[] for _ in searches]
        by_scope: dict[tuple[Filter, int], list[int]] = {}  # dense-only searches, by filter and limit
        engine: list[tuple[int, qe.QueryRequest]] = []
        for i, q in enumerate(searches):
            if _by_scope(q.dense, q.sparse, q.filter):
                by_scope.setdefault((q.filter, q.limit), []).append(i)
            else:
                request = self._request(q)
                if request is not None:
                    engine.append((i, request))
        # before the gate: building the copy takes the write lock, which is taken before the gate
        # (as every write and a compaction take them)
        scopes = self._dense_scopes(shard) if by_scope else None
        generation = shard.payloads.generation
        with shard.gate.use(shard.name), _translated(shard.name):
            if scopes is not None:
                for (f, limit), at in by_scope.items():
                    # the searches of one scope in one pass over its matrix
                    for i, found in zip(at, scopes.search(f, _unit([searches[i].dense for i in at]), limit)):
                        scored[i] = found
            if engine and shard.shard.info().points_count > 0:
                # one planned batch: the engine shares the filtering of searches in the same scope
                results = shard.shard.query_batch(qe.QueryBatchRequest([r for _, r in engine]))
                for (i, _), result in zip(engine, results):
                    scored[i] = [(str(p.id), p.score) for p in result]
            payloads = self._payloads(shard, list(dict.fromkeys(pid for each in scored for pid, _ in each)), generation)
        return [_hits(each, payloads) for each in scored]

    def _dense_scopes(self, shard: _Shard) -> DenseScopes:
        """The shard's dense vectors by scope, built from the engine if not yet (under the
        write lock, then the gate, in the order of every write and of a compaction: no write
        comes in between the read and its keeping). Called outside the gate: a compaction
        holding the write lock waits for the calls in the gate to end."""
        scopes = shard.dense
        if scopes is not None:
            return scopes
        with shard.write_lock, shard.gate.use(shard.name), _translated(shard.name):
            if shard.dense is None:
                built = DenseScopes(shard.dim)
                offset = None
                while True:
                    page, offset = shard.shard.scroll(
                        qe.ScrollRequest(offset=offset, limit=1024, with_payload=True, with_vector=True)
                    )
                    built.put((str(r.id), _dense_of(r), r.payload or {}) for r in page)
                    if offset is None:
                        break
                built.index_from(self._dense_index_from)  # once every block is whole: one build each
                shard.dense = built
            return shard.dense

    def _request(self, q: Search) -> qe.QueryRequest | None:
        """The engine's request for ``q`` (None: it can match nothing)."""
        qfilter = _filter(q.filter)
        params = qe.SearchParams(exact=True) if self.exact else None
        dense_q = qe.Query.Nearest(dense_list(q.dense), using=DENSE) if q.dense is not None else None
        sparse_q = None
        if q.sparse is not None:
            indices, values = sparse_lists(q.sparse)
            if indices:
                sparse_q = qe.Query.Nearest(qe.SparseVector(indices, values), using=SPARSE)
        if dense_q is None and sparse_q is None:
            return None
        if dense_q is not None and sparse_q is not None:
            n = prefetch_limit(q.limit)
            return qe.QueryRequest(
                limit=q.limit,
                query=qe.Fusion.Rrf(k=RRF_K) if q.fusion == "rrf" else qe.Fusion.Dbsf(),  # type: ignore[arg-type]  # the stub omits that Fusion.Rrf and .Dbsf subclass Fusion
                prefetches=[
                    qe.Prefetch(limit=n, query=dense_q, filter=qfilter, params=params),
                    qe.Prefetch(limit=n, query=sparse_q, filter=qfilter),
                ],
                filter=qfilter,
                with_payload=False,
            )
        return qe.QueryRequest(
            limit=q.limit,
            query=dense_q or sparse_q,
            filter=qfilter,
            with_payload=False,
            params=params if dense_q is not None else None,
        )

    @staticmethod
    def _payloads(shard: _Shard, ids: list[str], generation: int) -> dict[str, Mapping[str, Any]]:
        """The payloads of ``ids``, each behind a read-only view made once (see Hit): those
        a search found lately from the cache, the others read from the engine (about 2 us a
        point, most of a search's cost) and kept."""
        found = shard.payloads.get(ids)
        missing = [pid for pid in ids if pid not in found]
        if missing:
            read = {str(r.id): MappingProxyType(r.payload or {}) for r in shard.shard.retrieve(list(missing), True, False)}
            shard.payloads.keep(read, generation)
            found.update(read)
        return found

    def scroll(
        self, collection: str, filter: Filter, *, limit: int = 100, offset: str | None = None
    ) -> tuple[list[Point], str | None]:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        shard = self._shard(collection)
        request = qe.ScrollRequest(
            offset=uuid_ids([offset])[0] if offset is not None else None,
            limit=limit,
            filter=_filter(filter),
            with_payload=True,
            with_vector=False,
        )
        with shard.gate.use(shard.name), _translated(shard.name):
            records, next_offset = shard.shard.scroll(request)
        points = [Point(id=str(r.id), payload=r.payload or {}) for r in records]
        return points, (str(next_offset) if next_offset is not None else None)

    def count(self, collection: str, filter: Filter | None = None) -> int:
        shard = self._shard(collection)
        request = qe.CountRequest(exact=True, filter=_filter(filter) if filter else None)
        with shard.gate.use(shard.name), _translated(shard.name):
            return shard.shard.count(request)

    def retrieve(self, collection: str, ids: Sequence[str], *, with_vectors: bool = False) -> list[Point]:
        if not ids:
            return []
        shard = self._shard(collection)
        with shard.gate.use(shard.name), _translated(shard.name):
            records = shard.shard.retrieve(_ids(ids), True, with_vectors)
        out = []
        for r in records:
            dense = sparse = None
            if with_vectors and isinstance(r.vector, dict):
                dense = r.vector.get(DENSE)
                sv = r.vector.get(SPARSE)
                if isinstance(sv, qe.SparseVector):
                    sparse = (list(sv.indices), list(sv.values))
            out.append(Point(id=str(r.id), dense=dense, sparse=sparse, payload=r.payload or {}))
        return out

    # --- internals ----------------------------------------------------------------

    def _config(self, dim: int) -> qe.EdgeConfig:
        kwargs: dict[str, Any] = {
            "vectors": {DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            "sparse_vectors": {SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        }
        if self.index == "plain":
            # No graph (m=0, payload_m=0) and a full-scan threshold no filter reaches: a
            # filtered search scores the points the payload index selects, exactly. The
            # optimizer still turns each appendable segment past INDEXING_KB into an
            # immutable one, which scores about 2.5x cheaper (store_bench).
            kwargs["optimizers"] = qe.EdgeOptimizersConfig(
                indexing_threshold=INDEXING_KB,
                default_segment_number=SEGMENTS,
                max_segment_size=MAX_SEGMENT_KB,
            )
            kwargs["hnsw_config"] = qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=1_000_000_000, payload_m=0)
        else:
            kwargs["optimizers"] = qe.EdgeOptimizersConfig(indexing_threshold=INDEXING_KB)
            kwargs["hnsw_config"] = qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000, payload_m=16)
        if self._max_search_threads is not None:
            kwargs["max_search_threads"] = self._max_search_threads
        return qe.EdgeConfig(**kwargs)

    @staticmethod
    def _ensure_indexes(shard: qe.EdgeShard) -> None:
        present = set(shard.info().payload_schema)
        for field, kind in INDEXED_FIELDS.items():
            if field in present:
                continue
            if field == "tenant":
                schema: Any = qe.KeywordIndexParams(is_tenant=True)
            elif kind == "keyword":
                schema = qe.PayloadSchemaType.Keyword
            else:
                schema = qe.PayloadSchemaType.Float
            shard.update(qe.UpdateOperation.create_field_index(field, schema))

    def _shard(self, collection: str) -> _Shard:
        """The open shard of a physical or logical (active version) collection name."""
        shard = self._shards.get(collection)
        if shard is not None:
            return shard
        with self._lock:
            self._check_open()
            if split_physical(collection) is None:
                collection = self.collection_for_read(collection)
            shard = self._shards.get(collection)
            if shard is None:
                if not (self._base / collection).is_dir():
                    raise CollectionNotFound(f"{collection} does not exist: ensure_collection first")
                shard = self._open(collection)
            return shard

    def _open(self, collection: str) -> _Shard:
        shard = self._shards.get(collection)
        if shard is None:
            directory = self._base / collection
            dim = _stored_dim(directory)
            with _translated(collection):
                # the index policy of this store applies to collections made by another
                edge = qe.EdgeShard.load(str(directory), self._config(dim))
            release_file_pages(directory)  # what the load read through (every index's pages): 56 MB for two collections
            shard = _Shard(collection, edge, dim, self._payload_cache)
            self._shards[collection] = shard
        return shard

    def _write(self, shard: _Shard, operation: Any, n: int, then: Callable[[DenseScopes], None]) -> None:
        """Apply ``operation``, then ``then`` to the dense copy (if built), under the write
        lock: the copy changes as the engine did, and a write that fails drops it."""
        # the write lock first, then the gate (as ``compact``: it swaps the engine under both)
        with shard.write_lock, shard.gate.use(shard.name), _translated(shard.name):
            try:
                shard.shard.update(operation)
                if shard.dense is not None:
                    then(shard.dense)
            except BaseException:
                shard.drop_dense()  # what the engine applied is unknown: built again from it
                raise
            shard.writes_since_optimize += n
            if self._auto_optimize is not None and shard.writes_since_optimize >= self._auto_optimize:
                shard.writes_since_optimize = 0
                shard.shard.optimize()

    def _read_pointer(self, name: str) -> int | None:
        pointer = self._base / f"{name}.active"
        try:
            version = json.loads(pointer.read_text(encoding="utf-8"))["version"]
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{pointer} is corrupt ({exc}): rewrite it with set_active_version") from exc
        return int(version)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _acquire_process_lock(self) -> TextIO | None:
        if fcntl is None:
            return None
        fh = open(self._base / ".lock", "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise StoreLocked(
                f"{self._base} is open in another process; the embedded store is single-process: "
                "query through that process or use a Qdrant server (MEMSTREAM_QDRANT_URL)"
            ) from None
        return fh


@contextlib.contextmanager
def _translated(collection: str) -> Iterator[None]:
    """qdrant-edge raises bare ``Exception``s with a message: map them once, here."""
    try:
        yield
    except (StoreError, StoreUnavailable, ValueError):
        raise
    except Exception as exc:
        message = str(exc)
        if "WouldBlock" in message:
            raise StoreLocked(f"{collection} is open in another process: {message}") from exc
        if "not initialized" in message:
            raise CollectionNotFound(f"{collection} was closed: {message}") from exc
        if "No space left" in message or "Too many open files" in message:
            raise StoreUnavailable(f"{collection}: {message}") from exc
        raise StoreError(f"{collection}: {message}") from exc


def _ids(ids: Sequence[str]) -> list[qe.PointId]:
    """``uuid_ids(ids)`` as the list type qdrant-edge's calls take."""
    return list(uuid_ids(ids))


def _stored_dim(directory: Path) -> int:
    try:
        config = json.loads((directory / "edge_config.json").read_text(encoding="utf-8"))
        return int(config["vectors"][DENSE]["size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{directory} is not a memstream collection: {exc}") from exc


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _match(field: str, value: str | tuple[str, ...]) -> qe.FieldCondition:
    if isinstance(value, str):
        return qe.FieldCondition(field, match=qe.MatchValue(value))
    return qe.FieldCondition(field, match=qe.MatchAny(list(value)))


def _filter(f: Filter) -> qe.Filter:
    must: list[Any] = [_match(field, value) for field, value in f.matches()]
    if f.since_ts is not None or f.until_ts is not None:
        must.append(qe.FieldCondition("occurred_at_ts", range=qe.RangeFloat(gte=f.since_ts, lt=f.until_ts)))
    must_not: list[Any] = []
    if f.exclude_ids:
        must_not.append(qe.HasIdCondition(set(uuid_ids(f.exclude_ids))))
    return qe.Filter(must=must, must_not=must_not or None)


def _by_scope(dense: Any, sparse: SparseVector | None, f: Filter) -> bool:
    """Whether a search is answered from the dense copy by scope: dense only, and not a
    session of every agent (the engine's payload index finds a session's few points among
    a whole tenant's)."""
    return dense is not None and sparse is None and not (f.agent is None and f.session_id is not None)


def _unit(dense: Sequence[Any]) -> np.ndarray:
    """Query vectors as unit rows of float32 (ValueError if one is not finite)."""
    vectors = np.asarray([d if isinstance(d, np.ndarray) else dense_list(d) for d in dense], dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ValueError("dense vector must be non-empty and finite")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _dense_of(record: Any) -> Any:
    vector = record.vector
    return vector.get(DENSE) if isinstance(vector, dict) else None


def _read_back(shard: _Shard, dense: DenseScopes, ids: list[str]) -> None:
    """The dense copy of ``ids`` set as the engine holds them now (after a conditional or
    payload write, whose effect on each point only the engine knows)."""
    held = {str(r.id): r for r in shard.shard.retrieve(list(ids), True, True)}
    dense.put((pid, _dense_of(held[pid]), held[pid].payload or {}) if pid in held else (pid, None, {}) for pid in ids)


def _hits(scored: list[tuple[str, float]], payloads: dict[str, Mapping[str, Any]]) -> list[Hit]:
    """The hits of ``scored`` whose payload was read (a point deleted between the search and
    the read of its payload is left out); each payload the cache's own read-only view (see
    Hit): no copy and no new view per hit."""
    return [Hit(pid, score, payloads[pid]) for pid, score in scored if pid in payloads]
