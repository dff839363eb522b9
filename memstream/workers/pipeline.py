"""The projection pipeline as a unit: store, embedder, the projections of
``memstream.projections.registry`` (turns, memories, facts, sessions) and their consumers,
run as threads (``memstream up`` in embedded mode, ``memstream worker``).

The embedded store (qdrant-edge under ``$MEMSTREAM_HOME/data/qdrant``) can be opened by
one process only, so in embedded mode the service process owns it; with
``MEMSTREAM_QDRANT_URL`` any number of worker processes share the work through the
consumer groups.

A supervisor thread watches the consumer threads: one that died anyway (``Consumer.run``
survives every ``Exception``; this is for anything else) is restarted after a jittered
backoff and counted in its consumer's ``stats.restarts`` and health record.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
import structlog

from memstream.core import Settings, backoff_delay
from memstream.producers import EventLog
from memstream.projections import (
    CachedEmbedder,
    FactsTable,
    build_projections,
    configured_embedder,
    group_name,
    open_store,
    registered,
)
from memstream.query import QueryServer, ReadOps, Searcher
from memstream.workers.consumer import Consumer

__all__ = ["Pipeline", "PipelineConfig"]

log = structlog.get_logger("memstream.pipeline")


@dataclass(frozen=True)
class PipelineConfig:
    embedder: str = ""  # "" -> settings.embedder
    qdrant_url: str = ""  # "" -> the embedded store under $MEMSTREAM_HOME/data/qdrant
    consumer: str = ""  # stable consumer name; "" -> host name + settings.worker_index
    batch: int = 128
    max_deliveries: int = 5
    claim_idle_ms: int = 60_000

    @classmethod
    def of(cls, settings: Settings, **overrides: Any) -> PipelineConfig:
        values: dict[str, Any] = {"embedder": settings.embedder, "qdrant_url": settings.qdrant_url}
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})
        return cls(**values)


class Pipeline:
    def __init__(self, settings: Settings, eventlog: EventLog, config: PipelineConfig | None = None):
        self.settings = settings
        self.log = eventlog
        self.config = config or PipelineConfig(embedder=settings.embedder, qdrant_url=settings.qdrant_url)
        self.store = open_store(url=self.config.qdrant_url or None,
                                path=str(settings.data_dir / "qdrant"))
        inner = configured_embedder(settings, self.config.embedder or None)
        # the cache saves model calls; feature hashing is cheaper than a cache lookup
        self.embedder = (CachedEmbedder(inner, settings.data_dir / "embeddings.sqlite3")
                         if getattr(inner, "worth_caching", True) else inner)
        client, prefix = eventlog.client, eventlog.prefix
        self.facts = FactsTable(client, prefix)
        self.projections = build_projections(self.store, self.embedder, client, prefix)  # projections/registry.py
        name = self.config.consumer or f"{socket.gethostname()}-{settings.worker_index}"
        self.consumers = [
            Consumer(eventlog, p, name, batch=self.config.batch, max_deliveries=self.config.max_deliveries,
                     claim_idle_ms=self.config.claim_idle_ms, max_text_bytes=settings.max_text_bytes)
            for p in self.projections
        ]
        self.searcher = Searcher(self.store, self.embedder, self.facts)
        self.reads = ReadOps(self.store, self.searcher, self.facts, self.projection("sessions").index)
        self.queries = QueryServer(client, prefix, {**self.reads.handlers(), "count": self._count})
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._started: dict[str, float] = {}  # group -> when its thread last started
        self._supervisor: threading.Thread | None = None

    SUPERVISE_EVERY = 0.25  # seconds between the supervisor's looks at the threads
    QUICK_DEATH_S = 30.0  # a thread that dies sooner after its start backs its restart off further

    def projection(self, name: str) -> Any:
        """The running projection called ``name`` (``KeyError`` for none)."""
        for p in self.projections:
            if p.name == name:
                return p
        raise KeyError(name)

    def _count(self, request: dict[str, Any]) -> dict[str, Any]:
        """Points in each vector projection's store (``memstream stats``: items)."""
        return {"items": {group_name(p): self.store.count(p.collection)
                          for p in self.projections if registered(p.name).vectors}}

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

    def start(self) -> Pipeline:
        for c in self.consumers:
            try:
                c.ensure_groups()
            except redis.RedisError as exc:  # e.g. a full or read-only server: its loop retries
                log.warning("pipeline.groups_not_ready", group=c.group, error=f"{type(exc).__name__}: {exc}",
                            action="the consumer creates them once the server takes writes")
            self._threads.append(self._spawn(c))
        self.queries.start()
        self._supervisor = threading.Thread(target=self._supervise, name="memstream-supervisor", daemon=True)
        self._supervisor.start()
        log.info("pipeline.started", groups=[c.group for c in self.consumers], consumer=self.consumers[0].name)
        return self

    def _spawn(self, consumer: Consumer) -> threading.Thread:
        t = threading.Thread(target=self._run, args=(consumer,), name=f"memstream-{consumer.group}", daemon=True)
        self._started[consumer.group] = time.monotonic()
        t.start()
        return t

    def _run(self, consumer: Consumer) -> None:
        try:
            consumer.run(self._stop)
        except BaseException as exc:  # noqa: BLE001  the supervisor restarts the thread
            if self._stop.is_set():
                return
            error = f"{type(exc).__name__}: {exc}"
            consumer.stats.last_error = error
            consumer.health.error(error, state="dead")
            consumer.health.beat(consumer.stats, force=True)
            log.error("pipeline.consumer_died", group=consumer.group, error=error[:500],
                      action="the supervisor restarts it", exc_info=True)

    def _supervise(self) -> None:
        """Restart consumer threads that died (not on shutdown), with backoff."""
        quick = [0] * len(self.consumers)  # deaths in a row soon after a start
        due: list[float | None] = [None] * len(self.consumers)  # when a dead one restarts
        while not self._stop.wait(self.SUPERVISE_EVERY):
            for i, consumer in enumerate(self.consumers):
                thread = self._threads[i]
                if thread.is_alive():
                    continue
                now = time.monotonic()
                restart_at = due[i]
                if restart_at is None:
                    lived = now - self._started.get(consumer.group, now)
                    quick[i] = quick[i] + 1 if lived < self.QUICK_DEATH_S else 1
                    restart_at = due[i] = now + backoff_delay(quick[i], 0.2, 30.0)
                if now < restart_at or self._stop.is_set():
                    continue
                due[i] = None
                consumer.stats.restarts += 1
                consumer._pending_done = False  # re-read what it holds
                consumer._groups_ready = False
                consumer.health.beat(consumer.stats, force=True)
                log.error("pipeline.consumer_restarted", group=consumer.group, restarts=consumer.stats.restarts)
                self._threads[i] = self._spawn(consumer)

    def health(self) -> dict[str, dict[str, Any]]:
        """Per group: whether its thread is alive, and its consumer's counters."""
        out = {}
        threads: list[threading.Thread | None] = list(self._threads) or [None] * len(self.consumers)
        for c, t in zip(self.consumers, threads):
            s = c.stats
            out[c.group] = {"alive": bool(t and t.is_alive()), "state": c.health.state,
                            "applied": s.applied, "dead_lettered": s.dead_lettered, "errors": s.errors,
                            "transient_failures": s.transient_failures, "restarts": s.restarts,
                            "last_error": s.last_error}
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """Let every consumer finish its batch, then close the store."""
        self._stop.set()
        self.queries.stop()
        if self._supervisor is not None:
            self._supervisor.join(timeout)
            self._supervisor = None
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        self.store.close()
