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
"""

from __future__ import annotations

import math
import threading
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from memstream.projections.stores.port import Filter

__all__ = ["BLAS_FROM", "DenseScopes", "one_blas_thread"]

_START = 64  # rows a new block has room for (doubled as it grows)

# From this many queries in one search of a scope, one BLAS matrix product finds their
# candidates (CPU per query, one BLAS thread, 10k / 50k rows of 384 dims, candidates and
# rescoring included: einsum 0.76 / 3.9 ms at any batch size; the product 1.3 / 7.1 alone,
# 0.72 / 3.4 in fours, 0.49 / 2.1 in eights)
BLAS_FROM = 4


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
    __slots__ = ("vectors", "ts", "session", "kind", "ids", "rows", "n")

    def __init__(self, dim: int) -> None:
        self.vectors = np.empty((_START, dim), dtype=np.float32)
        self.ts = np.empty(_START, dtype=np.float64)
        self.session = np.empty(_START, dtype=np.int32)
        self.kind = np.empty(_START, dtype=np.int32)
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.n = 0

    def put(self, pid: str, vector: np.ndarray, ts: float, session: int, kind: int) -> None:
        row = self.rows.get(pid)
        if row is None:
            row = self.n
            if row == len(self.vectors):
                self._grow()
            self.rows[pid] = row
            self.ids.append(pid)
            self.n += 1
        self.vectors[row] = vector
        self.ts[row] = ts
        self.session[row] = session
        self.kind[row] = kind

    def remove(self, pid: str) -> None:
        row = self.rows.pop(pid)
        last = self.n - 1
        if row != last:  # the last row fills the gap
            moved = self.ids[last]
            self.vectors[row] = self.vectors[last]
            self.ts[row] = self.ts[last]
            self.session[row] = self.session[last]
            self.kind[row] = self.kind[last]
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()
        self.n = last

    def _grow(self) -> None:
        size = 2 * len(self.vectors)
        for name in ("vectors", "ts", "session", "kind"):
            old = getattr(self, name)
            new = np.empty((size, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

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
    one lock; the store calls the writes under the collection's write lock."""

    def __init__(self, dim: int) -> None:
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

    def __len__(self) -> int:
        return len(self._where)

    # -- writes ----------------------------------------------------------------------------
    def put(self, points: Iterable[tuple[str, Any, Mapping[str, Any]]]) -> None:
        """Set each ``(id, dense or None, payload)`` as the engine now holds it: a point
        without a dense vector (or without a tenant) is not searched by meaning, so it leaves."""
        with self._lock:
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

    def remove(self, ids: Iterable[str]) -> None:
        with self._lock:
            for pid in ids:
                self._remove(pid)

    def remove_where(self, f: Filter) -> None:
        """Remove every point in ``f``'s scope (the engine's ``delete_where``)."""
        with self._lock:
            for key in self._keys(f):
                block = self._blocks[key]
                keep = block.mask(f, self._codes)
                doomed = list(block.ids) if keep is None else [block.ids[r] for r in np.flatnonzero(keep)]
                for pid in doomed:
                    self._remove(pid)

    def _remove(self, pid: str) -> None:
        key = self._where.pop(pid, None)
        if key is None:
            return
        block = self._blocks[key]
        block.remove(pid)
        if block.n == 0:
            del self._blocks[key]
            self._by_tenant[key[0]].discard(key)
            if not self._by_tenant[key[0]]:
                del self._by_tenant[key[0]]

    # -- reads -----------------------------------------------------------------------------
    def _keys(self, f: Filter) -> list[Key]:
        if f.agent is None:
            return sorted(self._by_tenant.get(f.tenant, ()), key=lambda k: k[1] or "")
        agents = (f.agent,) if isinstance(f.agent, str) else f.agent
        return [(f.tenant, a) for a in dict.fromkeys(agents) if (f.tenant, a) in self._blocks]

    def search(self, f: Filter, queries: np.ndarray, limit: int) -> list[list[tuple[str, float]]]:
        """The top ``limit`` ``(id, cosine)`` in ``f``'s scope, best first, for each row of
        ``queries`` (unit vectors, ``(m, dim)``): the scope's matrix read once for them all.

        Fewer than ``BLAS_FROM`` queries: the cosines by numpy's ``einsum``. More: one BLAS
        product of the matrix and the queries finds the candidates (every row within
        ``_slack`` of the ``limit``-th best, which holds the true top ``limit``), and each
        candidate is scored again by ``einsum``: the scores, and so the answers, are the
        ones ``einsum`` gives alone (its cosine of a pair does not depend on the others)."""
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
                if m >= BLAS_FROM:
                    self._candidates(block, keep, queries, take, found)
                    continue
                # (m, n) cosines by numpy's own loops, not BLAS: one thread of OpenBLAS's
                # matrix-vector product costs more than einsum (0.98 against 0.62 ms at 10k
                # points of 384 dims), and its threads spin unless pinned to one
                scores = np.einsum("ij,kj->ki", block.vectors[:n], queries)
                if keep is not None:
                    scores[:, ~keep] = -np.inf
                ids = block.ids
                for j in range(m):
                    row = scores[j]
                    # the top take, and every row tied with the take-th (the same rows whatever the path)
                    top = np.flatnonzero(row >= np.partition(row, n - take)[n - take]) if take < n else np.arange(n)
                    found[j].extend((score, ids[r]) for r, score in zip(top.tolist(), row[top].tolist()) if score != -np.inf)
        out = []
        for each in found:
            each.sort(key=_best_first)  # equal scores in the order of their ids: the same in a batch as alone
            out.append([(pid, score) for score, pid in each[:limit]])
        return out

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
