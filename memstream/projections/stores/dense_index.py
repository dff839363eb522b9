"""An approximate index (HNSW, usearch) over a large scope's rows of ``DenseScopes``, built in
the background and swapped in when ready: the exact matrix stays the source of truth.

An exact pass over a scope's matrix costs its size: 3.7 ms a question at 50k rows of 384
dims on this machine, where usearch's HNSW over int8 copies of the same unit vectors finds
four times ``limit`` candidates in about 0.5 ms, and the exact cosine of each (``einsum``
over the float32 rows) orders them. Measured by ``memstream bench hnsw`` (BENCHMARKS.md,
"Reads that scale").

The build never holds the scopes' lock for its duration: it copies the rows it indexes a
chunk at a time under the lock and adds them to the graph outside it (usearch releases the
GIL as it adds), on the process's one ``Indexer`` thread, ten nice levels below the
process. Rows are keyed by a serial number their block gives each vector (``_Block.sids``):
a vector that changes gets a new one, so an index never answers a row's old vector; rows
written after the build (serials past its ``cut``) form the tail, scanned exactly.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np
import structlog

from memstream.core import threads

__all__ = ["CHUNK", "EXPANSION_SEARCH", "Built", "Indexer", "OVERSAMPLE", "new_index", "indexer"]

log = structlog.get_logger(__name__)

# candidates asked of the graph per result kept (recall against the exact scan, hash
# embedder, fresh questions: at 50k rows 4x gave recall@50 0.9996 and @12 1.0, 2x 0.996)
OVERSAMPLE = 4
# rows copied under the lock, then added outside it, per step of a build
CHUNK = 4096
# the graph (usearch): int8 copies of the unit vectors (a quarter of float32's memory and
# a third of its build time, the same recall once rescored), 16 links a node
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 64


def new_index(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="ip",  # the rows and queries are unit vectors: the inner product is the cosine
        dtype="i8",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


class Built:
    """A finished index: the graph, and the first serial it does not hold."""

    __slots__ = ("graph", "cut", "size")

    def __init__(self, graph: Any, cut: int) -> None:
        self.graph = graph
        self.cut = cut
        self.size = len(graph)

    def search(self, queries: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The serials of each query's ``count`` nearest (``(m, count)``) and how many of
        each row are real (``(m,)``): one call for the batch, one thread (as BLAS)."""
        found = self.graph.search(queries, count, threads=1)
        keys = np.asarray(found.keys, dtype=np.int64)
        if keys.ndim == 1:  # a batch of one comes back as one query's matches
            return keys[None, :], np.array([len(keys)])
        return keys, np.asarray(found.counts, dtype=np.int64)


Step = Callable[[], Iterator[None]]


class Indexer:
    """The process's builder of indexes: one thread, one build at a time, started on the
    first job, ``NICE`` levels below the process. A job is a generator function, advanced a
    step (a chunk) at a time; a job that raises is logged and dropped (its scope stays exact)."""

    NICE = 10

    def __init__(self) -> None:
        self._jobs: deque[Step] = deque()
        self._cond = threading.Condition()
        self._running = False
        self._thread: threading.Thread | None = None
        self.failed = 0

    def submit(self, job: Step) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threads.spawn(self._run, name="memstream-dense-index")
                self._thread.start()
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until no build is queued or running (at most ``timeout`` s); whether so."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._running, timeout)

    def step(self) -> None:
        """Called between a build's steps (a point a subclass may hold a build at)."""

    def _run(self) -> None:
        threads.lower_priority(self.NICE)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._jobs))
                job = self._jobs.popleft()
                self._running = True
            try:
                for _ in job():
                    self.step()
            except Exception as exc:  # the scope keeps its exact search
                self.failed += 1
                log.warning("dense index build failed", error=str(exc))
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()


_default: Indexer | None = None
_default_lock = threading.Lock()


def indexer() -> Indexer:
    """The process's ``Indexer`` (made on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Indexer()
        return _default
