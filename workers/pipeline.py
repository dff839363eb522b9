"""The projection pipeline as a unit: store, embedder, the four projections (turns, memories, facts, sessions) and their
consumers, run as threads (``memstream up`` in embedded mode, ``memstream worker``).

The embedded store (qdrant-edge under ``$MEMSTREAM_HOME/data/qdrant``) can be opened by
one process only, so in embedded mode the service process owns it; with
``MEMSTREAM_QDRANT_URL`` any number of worker processes share the work through the
consumer groups.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass

import structlog

from producers import EventLog, Settings
from projections.embedders import get_embedder
from projections.embedding_cache import CachedEmbedder
from projections.facts_table import FactsTable
from projections.query import Searcher
from projections.store import open_store

from .consumer import Consumer
from .projectors import FactsProjection, MemoriesProjection, TurnsProjection
from .queries import QueryServer
from .reads import ReadOps
from .sessions import SessionsProjection

__all__ = ["Pipeline", "PipelineConfig"]

log = structlog.get_logger("memstream.pipeline")


@dataclass(frozen=True)
class PipelineConfig:
    embedder: str = ""  # "" -> onnx-minilm
    qdrant_url: str = ""  # "" -> the embedded store under $MEMSTREAM_HOME/data/qdrant
    consumer: str = ""  # stable consumer name; "" -> host name + MEMSTREAM_WORKER_INDEX
    batch: int = 128
    max_deliveries: int = 5
    claim_idle_ms: int = 60_000

    @classmethod
    def of(cls, settings: Settings, **overrides) -> "PipelineConfig":
        values = {"embedder": settings.embedder, "qdrant_url": settings.qdrant_url}
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})
        return cls(**values)


class Pipeline:
    def __init__(self, settings: Settings, eventlog: EventLog, config: PipelineConfig | None = None):
        self.settings = settings
        self.log = eventlog
        self.config = config or PipelineConfig(embedder=settings.embedder, qdrant_url=settings.qdrant_url)
        self.store = open_store(url=self.config.qdrant_url or None,
                                path=str(settings.data_dir / "qdrant"))
        inner = get_embedder(self.config.embedder or None)
        # the cache saves model calls; feature hashing is cheaper than a cache lookup
        self.embedder = (CachedEmbedder(inner, settings.data_dir / "embeddings.sqlite3")
                         if getattr(inner, "worth_caching", True) else inner)
        client, prefix = eventlog.client, eventlog.prefix
        self.facts = FactsTable(client, prefix)
        self.projections = [
            TurnsProjection(self.store, self.embedder, client, prefix),
            MemoriesProjection(self.store, self.embedder, client, prefix),
            FactsProjection(client, prefix),
            SessionsProjection(client, prefix),
        ]
        name = self.config.consumer or f"{socket.gethostname()}-{os.environ.get('MEMSTREAM_WORKER_INDEX', '0')}"
        self.consumers = [
            Consumer(eventlog, p, name, batch=self.config.batch, max_deliveries=self.config.max_deliveries,
                     claim_idle_ms=self.config.claim_idle_ms)
            for p in self.projections
        ]
        self.searcher = Searcher(self.store, self.embedder, self.facts)
        self.reads = ReadOps(self.store, self.searcher, self.facts, self.projections[3].index)
        self.queries = QueryServer(client, prefix, {**self.reads.handlers(), "count": self._count})
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def _count(self, request: dict) -> dict:
        """Points in each vector projection's store (``memstream stats``: items)."""
        return {"items": {f"{p.name}.v{p.version}": self.store.count(p.collection)
                          for p in self.projections if hasattr(p, "collection")}}

    def drain(self) -> int:
        """Burst mode: apply everything in the log now (tests, replays, benchmarks).

        The projections drain concurrently, one thread each, as ``start()`` runs them:
        one's store, socket or model time overlaps the others' Python work."""
        counts = [0] * len(self.consumers)
        errors: list[BaseException] = []

        def run(i: int, consumer: Consumer) -> None:
            try:
                counts[i] = consumer.drain()
            except BaseException as exc:  # re-raised in the caller below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i, c), name=f"memstream-drain-{c.group}")
                   for i, c in enumerate(self.consumers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return sum(counts)

    def start(self) -> "Pipeline":
        for c in self.consumers:
            c.ensure_groups()
            t = threading.Thread(target=c.run, args=(self._stop,), name=f"memstream-{c.group}", daemon=True)
            t.start()
            self._threads.append(t)
        self.queries.start()
        log.info("pipeline.started", groups=[c.group for c in self.consumers], consumer=self.consumers[0].name)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Let every consumer finish its batch, then close the store."""
        self._stop.set()
        self.queries.stop()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        self.store.close()
