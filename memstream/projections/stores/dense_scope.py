"""The dense vectors of one embedded collection as contiguous matrices, one per scope
(tenant, agent), for exact filtered dense searches in numpy (``EdgeStore``).

qdrant-edge 0.9 scores a filtered dense search exactly, point by point, behind its payload
index: at 10k points of one agent that was 2.9-3.4 ms of a 4.2 ms recall, where a matrix
product over the same agent's vectors costs a fraction of it, and a batch of searches in the
same scope is answered in one pass over the matrix. The engine stays the home of
every point; this is a read copy of its dense vectors, kept in step by every write of the
store under the collection's write lock, built from the engine on the first dense search
(and again after a failed write, a compaction or a swap), so a search answers what the
engine holds: a deleted or forgotten point is never returned.

Each scope's block holds its points' unit vectors (the engine's cosine normalises them
too), their ids, times (``occurred_at_ts``, NaN when absent) and session and kind (as small
integer codes), without gaps: a removed row is replaced by the last one. A search picks the
blocks its filter names (one agent, several, or every agent of the tenant), masks rows by
session, kind, time range and excluded ids, and takes the top ``limit`` by cosine.

A block of ``index_from`` rows or more is also given an approximate index (HNSW:
``dense_index.py``), built in the background and swapped in when ready; until then, and
whenever it is missing, the exact pass answers. With one, a search asks the graph for
``OVERSAMPLE`` times ``limit`` candidates, masks them as the exact pass masks rows, adds the
rows written since the build (the tail, scanned exactly), and scores every candidate by
``einsum`` as the exact pass does; a query whose graph candidates the filter leaves fewer
than ``limit`` of is answered by the exact pass (never short). A removed row is masked out of
the graph's answers; the index is built again past a bound of tail or removed rows.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from memstream.projections.stores.dense_index import CHUNK, EXPANSION_SEARCH, OVERSAMPLE, Built, Indexer, indexer, new_index
from memstream.projections.stores.port import Filter

__all__ = ["BLAS_FROM", "DenseScopes", "one_blas_thread"]

_START = 64  # rows a new block has room for (doubled as it grows)

# From this many queries in one search of a scope, one BLAS matrix product finds their
# candidates (CPU per query, one BLAS thread, 10k / 50k rows of 384 dims, candidates and
# rescoring included: einsum 0.76 / 3.9 ms at any batch size; the product 1.3 / 7.1 alone,
# 0.72 / 3.4 in fours, 0.49 / 2.1 in eights)
BLAS_FROM = 4

# A block's index is built again when the rows written since its build (scanned exactly at
# every search) or the rows removed from it pass a REBUILD-th of it (and _TAIL_FLOOR rows)
REBUILD = 8
_TAIL_FLOOR = 1024


_pinned = threading.Lock()
_pinned_done = False


def one_blas_thread() -> None:
    """Limit the BLAS numpy uses in this process to one thread, once (threadpoolctl: the
    library numpy loaded, whichever it is). OpenBLAS's idle threads spin: its default (one
    a CPU) cost 9.0 ms of CPU for a batch of 8 queries over 10k rows where one thread costs
    2.7, and N query processes on a host would each start as many threads as it has CPUs."""
    global _pinned_done
    with _pinned:
        if _pinned_done:
            return
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        _pinned_done = True


class _Block:
    __slots__ = (
        "vectors",
        "ts",
        "session",
        "kind",
        "sids",
        "row_of",
        "next_sid",
        "ids",
        "rows",
        "n",
        "index",
        "in_index",
        "building",
    )

    def __init__(self, dim: int) -> None:
        self.vectors = np.empty((_START, dim), dtype=np.float32)
        self.ts = np.empty(_START, dtype=np.float64)
        self.session = np.empty(_START, dtype=np.int32)
        self.kind = np.empty(_START, dtype=np.int32)
        # each row's vector by a serial number of its own (a changed vector gets a new one),
        # and the row of each serial (-1: gone): what an index's keys name
        self.sids = np.empty(_START, dtype=np.int64)
        self.row_of = np.full(_START, -1, dtype=np.int64)
        self.next_sid = 0
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.n = 0
        self.index: Built | None = None  # swapped in by a build (dense_index.py)
        self.in_index = 0  # rows whose serial the index holds
        self.building = False

    def put(self, pid: str, vector: np.ndarray, ts: float, session: int, kind: int) -> None:
        row = self.rows.get(pid)
        if row is None:
            row = self.n
            if row == len(self.vectors):
                self._grow()
            self.rows[pid] = row
            self.ids.append(pid)
            self.n += 1
            self._new_sid(row)
        elif not np.array_equal(self.vectors[row], vector):
            self._drop_sid(int(self.sids[row]))
            self._new_sid(row)  # an index holds the old vector: this row is the tail's now
        self.vectors[row] = vector
        self.ts[row] = ts
        self.session[row] = session
        self.kind[row] = kind

    def _new_sid(self, row: int) -> None:
        sid = self.next_sid
        if sid == len(self.row_of):
            grown = np.full(2 * sid, -1, dtype=np.int64)
            grown[:sid] = self.row_of
            self.row_of = grown
        self.row_of[sid] = row
        self.sids[row] = sid
        self.next_sid = sid + 1

    def _drop_sid(self, sid: int) -> None:
        self.row_of[sid] = -1
        if self.index is not None and sid < self.index.cut:
            self.in_index -= 1

    def remove(self, pid: str) -> None:
        row = self.rows.pop(pid)
        self._drop_sid(int(self.sids[row]))
        last = self.n - 1
        if row != last:  # the last row fills the gap
            moved = self.ids[last]
            self.vectors[row] = self.vectors[last]
            self.ts[row] = self.ts[last]
            self.session[row] = self.session[last]
            self.kind[row] = self.kind[last]
            self.sids[row] = self.sids[last]
            self.row_of[self.sids[row]] = row
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()
        self.n = last

    def _grow(self) -> None:
        size = 2 * len(self.vectors)
        for name in ("vectors", "ts", "session", "kind", "sids"):
            old = getattr(self, name)
            new = np.empty((size, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def stale(self) -> bool:
        """Whether the index is missing or its tail or its dead rows passed ``REBUILD``."""
        index = self.index
        if index is None:
            return True
        bound = max(_TAIL_FLOOR, index.size // REBUILD)
        return self.n - self.in_index > bound or index.size - self.in_index > bound

    def mask(self, f: Filter, codes: _Codes) -> np.ndarray | None:
        """The rows ``f`` keeps beyond its tenant and agent (None: every row)."""
        n = self.n
        keep: np.ndarray | None = None

        def narrow(rows: np.ndarray) -> None:
            nonlocal keep
            keep = rows if keep is None else keep & rows

        if f.session_id is not None:
            narrow(np.isin(self.session[:n], codes.known(f.session_id)))
        if f.kind is not None:
            narrow(np.isin(self.kind[:n], codes.known(f.kind)))
        if f.since_ts is not None:
            narrow(self.ts[:n] >= f.since_ts)
        if f.until_ts is not None:
            narrow(self.ts[:n] < f.until_ts)
        if f.exclude_ids:
            rows = [r for r in (self.rows.get(pid) for pid in f.exclude_ids) if r is not None]
            if rows:
                out = np.ones(n, dtype=bool) if keep is None else keep.copy()
                out[rows] = False
                keep = out
        return keep


def _best_first(scored: tuple[float, str]) -> tuple[float, str]:
    return -scored[0], scored[1]


class _Codes:
    """Small integer codes of the session ids and kinds (-1: absent or not a str)."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def of(self, value: Any) -> int:
        if not isinstance(value, str):
            return -1
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._codes)
        return code

    def known(self, values: str | Sequence[str]) -> list[int]:
        asked = (values,) if isinstance(values, str) else values
        return [self._codes[v] for v in asked if v in self._codes]


Key = tuple[str, str | None]


class DenseScopes:
    """The dense side of one collection, by scope (see the module docstring). Thread-safe:
    one lock; the store calls the writes under the collection's write lock.

    ``index_from``: a block of this many rows or more gets an approximate index, built by
    ``indexer`` in the background (None or 0: every search exact)."""

    def __init__(self, dim: int, *, index_from: int | None = None, indexer: Indexer | None = None) -> None:
        self.dim = dim
        # how far a float32 dot product of two unit vectors of ``dim`` may be from another
        # summation order of it, twice over (Higham's gamma_dim for each, 2**-24 a rounding)
        self._slack = 8 * dim * 2.0**-24  # 4 would do: twice that, for the rows' and queries' own norms
        one_blas_thread()
        self._blocks: dict[Key, _Block] = {}
        self._by_tenant: dict[str, set[Key]] = {}
        self._where: dict[str, Key] = {}  # point id -> its block
        self._codes = _Codes()
        self._lock = threading.Lock()
        self._index_from = index_from or None
        self._indexer = indexer
        self._closed = False
        self.approximate = 0  # searches of a block answered through its index
        self.fell_back = 0  # of those, answered exactly after all (too few candidates passed the filter)

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        """The copy was dropped: builds in flight stop, and its indexes go with it."""
        with self._lock:
            self._closed = True
            for block in self._blocks.values():
                block.index = None

    def index_from(self, rows: int | None) -> None:
        """Index the blocks of ``rows`` rows or more from now on (None or 0: none; the
        indexes built are dropped)."""
        with self._lock:
            self._index_from = rows or None
            if self._index_from is None:
                for block in self._blocks.values():
                    block.index = None
            self._index_stale(list(self._blocks))

    def indexed(self) -> int:
        """Rows an index holds, over every block."""
        with self._lock:
            return sum(b.in_index for b in self._blocks.values() if b.index is not None)

    # -- writes ----------------------------------------------------------------------------
    def put(self, points: Iterable[tuple[str, Any, Mapping[str, Any]]]) -> None:
        """Set each ``(id, dense or None, payload)`` as the engine now holds it: a point
        without a dense vector (or without a tenant) is not searched by meaning, so it leaves."""
        with self._lock:
            touched: set[Key] = set()
            for pid, dense, payload in points:
                tenant = payload.get("tenant")
                if dense is None or not isinstance(tenant, str):
                    self._remove(pid)
                    continue
                agent = payload.get("agent")
                key: Key = (tenant, agent if isinstance(agent, str) else None)
                if self._where.get(pid, key) != key:
                    self._remove(pid)  # its scope changed
                vector = np.asarray(dense, dtype=np.float32)
                norm = float(np.linalg.norm(vector))
                if norm > 0:
                    vector = vector / norm
                ts = payload.get("occurred_at_ts")
                at = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else math.nan
                block = self._blocks.get(key)
                if block is None:
                    block = self._blocks[key] = _Block(self.dim)
                    self._by_tenant.setdefault(key[0], set()).add(key)
                block.put(pid, vector, at, self._codes.of(payload.get("session_id")), self._codes.of(payload.get("kind")))
                self._where[pid] = key
                touched.add(key)
            self._index_stale(touched)

    def remove(self, ids: Iterable[str]) -> None:
        with self._lock:
            touched = {key for key in (self._remove(pid) for pid in ids) if key is not None}
            self._index_stale(touched)

    def remove_where(self, f: Filter) -> None:
        """Remove every point in ``f``'s scope (the engine's ``delete_where``)."""
        with self._lock:
            keys = self._keys(f)
            for key in keys:
                block = self._blocks[key]
                keep = block.mask(f, self._codes)
                doomed = list(block.ids) if keep is None else [block.ids[r] for r in np.flatnonzero(keep)]
                for pid in doomed:
                    self._remove(pid)
            self._index_stale(set(keys))

    def _remove(self, pid: str) -> Key | None:
        key = self._where.pop(pid, None)
        if key is None:
            return None
        block = self._blocks[key]
        block.remove(pid)
        if block.n == 0:
            del self._blocks[key]
            self._by_tenant[key[0]].discard(key)
            if not self._by_tenant[key[0]]:
                del self._by_tenant[key[0]]
        return key

    # -- the approximate index -------------------------------------------------------------
    def _index_stale(self, keys: Iterable[Key]) -> None:
        """Ask a build for each of ``keys``' blocks that is large enough and whose index is
        missing or stale (one build a block at a time); under the lock."""
        start = self._index_from
        if start is None or self._closed:
            return
        for key in keys:
            block = self._blocks.get(key)
            if block is None or block.building or block.n < start:
                continue
            if block.index is not None and not block.stale():
                continue
            block.building = True
            (self._indexer or indexer()).submit(functools.partial(self._build, key, block))

    def _gone(self, key: Key, block: _Block) -> bool:
        """Whether the copy was dropped or ``block`` is no longer ``key``'s (under the lock)."""
        return self._closed or self._blocks.get(key) is not block

    def _build(self, key: Key, block: _Block) -> Iterator[None]:
        """Build ``block``'s index (a step a chunk: its rows copied under the lock, added to
        the graph outside it) and swap it in, unless the copy was dropped or the block
        emptied meanwhile."""
        swapped = False
        try:
            with self._lock:
                if self._gone(key, block):
                    return
                cut = block.next_sid
                sids = block.sids[: block.n].copy()
            graph = new_index(self.dim)
            for start in range(0, len(sids), CHUNK):
                yield
                chunk = sids[start : start + CHUNK]
                with self._lock:
                    if self._gone(key, block):
                        return
                    rows = block.row_of[chunk]
                    alive = rows >= 0
                    vectors = block.vectors[rows[alive]]  # a copy: the block may move its rows
                if alive.any():
                    graph.add(chunk[alive].astype(np.uint64), vectors, threads=1)
            yield
            with self._lock:
                if self._gone(key, block):
                    return
                block.index = Built(graph, cut)
                block.in_index = int(np.count_nonzero(block.sids[: block.n] < cut))
                block.building = False
                swapped = True
                self._index_stale([key])  # writes during the build may have made it stale already
        finally:
            if not swapped:
                with self._lock:
                    block.building = False

    # -- reads -----------------------------------------------------------------------------
    def _keys(self, f: Filter) -> list[Key]:
        if f.agent is None:
            return sorted(self._by_tenant.get(f.tenant, ()), key=lambda k: k[1] or "")
        agents = (f.agent,) if isinstance(f.agent, str) else f.agent
        return [(f.tenant, a) for a in dict.fromkeys(agents) if (f.tenant, a) in self._blocks]

    def search(self, f: Filter, queries: np.ndarray, limit: int) -> list[list[tuple[str, float]]]:
        """The top ``limit`` ``(id, cosine)`` in ``f``'s scope, best first, for each row of
        ``queries`` (unit vectors, ``(m, dim)``): the scope's matrix read once for them all.

        A block with an index: its graph's candidates and the rows written since its build,
        scored by ``einsum`` (``_approximate``). Otherwise exact: fewer than ``BLAS_FROM``
        queries, the cosines by numpy's ``einsum``; more, one BLAS product of the matrix and
        the queries finds the candidates (every row within ``_slack`` of the ``limit``-th
        best, which holds the true top ``limit``), and each candidate is scored again by
        ``einsum``: the scores, and so the answers, are the ones ``einsum`` gives alone (its
        cosine of a pair does not depend on the others)."""
        m = len(queries)
        found: list[list[tuple[float, str]]] = [[] for _ in range(m)]
        with self._lock:
            for key in self._keys(f):
                block = self._blocks[key]
                n = block.n
                keep = block.mask(f, self._codes)
                if keep is not None and not keep.any():
                    continue
                take = min(limit, n if keep is None else int(keep.sum()))
                if block.index is not None:
                    exact = self._approximate(block, keep, queries, take, found, len(f.exclude_ids))
                    if not exact:
                        continue
                    self._exact(block, keep, queries[exact], take, [found[j] for j in exact])
                    continue
                self._exact(block, keep, queries, take, found)
        out = []
        for each in found:
            each.sort(key=_best_first)  # equal scores in the order of their ids: the same in a batch as alone
            out.append([(pid, score) for score, pid in each[:limit]])
        return out

    def _exact(
        self, block: _Block, keep: np.ndarray | None, queries: np.ndarray, take: int, found: list[list[tuple[float, str]]]
    ) -> None:
        """Each query's top ``take`` of ``block`` (and every row tied with the ``take``-th)
        added to ``found`` with its ``einsum`` cosine, by a pass over the whole block."""
        if len(queries) >= BLAS_FROM:
            self._candidates(block, keep, queries, take, found)
            return
        n = block.n
        # (m, n) cosines by numpy's own loops, not BLAS: one thread of OpenBLAS's
        # matrix-vector product costs more than einsum (0.98 against 0.62 ms at 10k
        # points of 384 dims), and its threads spin unless pinned to one
        scores = np.einsum("ij,kj->ki", block.vectors[:n], queries)
        if keep is not None:
            scores[:, ~keep] = -np.inf
        for j, row in enumerate(scores):
            _add_top(found[j], row, np.arange(n), take, block.ids)

    def _approximate(
        self,
        block: _Block,
        keep: np.ndarray | None,
        queries: np.ndarray,
        take: int,
        found: list[list[tuple[float, str]]],
        excluded: int,
    ) -> list[int]:
        """Each query's candidates through ``block``'s index (``OVERSAMPLE`` times ``take``
        of its rows, at least ``EXPANSION_SEARCH``, plus the ``excluded`` by id; those the
        filter keeps) and the tail's top ``take`` (rows written since
        the build, scanned), added to ``found`` with their ``einsum`` cosines. Returns the
        queries whose index gave fewer than ``take`` rows the filter keeps (a narrow filter):
        those are answered exactly, never short."""
        index = block.index
        assert index is not None and index.size > 0
        self.approximate += 1
        n = block.n
        vectors, ids = block.vectors, block.ids
        tail = np.flatnonzero(block.sids[:n] >= index.cut)
        if keep is not None and len(tail):
            tail = tail[keep[tail]]
        held = (n if keep is None else int(np.count_nonzero(keep))) - len(tail)  # rows kept the index holds
        # at least as many as the graph's own search list holds (a small limit gets its
        # candidates' worth of the walk), and one more for each row excluded by id
        keys, counts = index.search(queries, min(index.size, max(OVERSAMPLE * take, EXPANSION_SEARCH) + excluded))
        if len(tail):
            tail_scores = np.einsum("ij,kj->ki", vectors[tail], queries)
        exact: list[int] = []
        for j, q in enumerate(queries):
            rows = block.row_of[keys[j, : counts[j]]]
            rows = rows[rows >= 0]  # removed, or written again since the build
            if keep is not None:
                rows = rows[keep[rows]]
            if len(rows) < min(take, held):
                exact.append(j)
                continue
            _add_top(found[j], np.einsum("ij,j->i", vectors[rows], q), rows, take, ids)
            if len(tail):
                _add_top(found[j], tail_scores[j], tail, take, ids)
        if exact:
            self.fell_back += 1
        return exact

    def _candidates(
        self, block: _Block, keep: np.ndarray | None, queries: np.ndarray, take: int, found: list[list[tuple[float, str]]]
    ) -> None:
        """Each query's top ``take`` of ``block`` (and any row tied with them within the
        slack) added to ``found`` with its ``einsum`` cosine, through one BLAS product."""
        n = block.n
        vectors = block.vectors[:n]
        approx = np.ascontiguousarray((vectors @ queries.T).T)  # (m, n): one sgemm, one thread
        if keep is not None:
            approx[:, ~keep] = -np.inf
        ids = block.ids
        for j, row in enumerate(approx):
            if take < n:
                kth = float(np.partition(row, n - take)[n - take])  # the take-th best, as BLAS rounds it
                rows = np.flatnonzero(row >= kth - self._slack)
            else:
                rows = np.arange(n) if keep is None else np.flatnonzero(keep)
            exact = np.einsum("ij,j->i", vectors[rows], queries[j])
            found[j].extend((score, ids[r]) for r, score in zip(rows.tolist(), exact.tolist()))


def _add_top(found: list[tuple[float, str]], scores: np.ndarray, rows: np.ndarray, take: int, ids: list[str]) -> None:
    """The top ``take`` of ``scores`` (the cosines of ``rows``; -inf: masked), and every row
    tied with the ``take``-th (the same rows whatever the path), added to ``found``."""
    n = len(scores)
    top = np.flatnonzero(scores >= np.partition(scores, n - take)[n - take]) if take < n else np.arange(n)
    found.extend((score, ids[r]) for r, score in zip(rows[top].tolist(), scores[top].tolist()) if score != -np.inf)
