"""``memstream worker``: projection workers against a shared Redis and Qdrant."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from memstream.core import PRIVATE_UMASK, Settings, private_dir
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError

__all__ = ["check_worker", "start_worker", "Worker", "worker_projections"]


def worker_projections(settings: Settings, projections: str | None = None) -> tuple[str, ...]:
    """The names of the projections a worker runs: ``projections`` (``--projections``), else
    ``MEMSTREAM_WORKER_PROJECTIONS``; () for every registered one. ``CommandError`` naming the
    known ones for a name that is none."""
    from memstream.projections import PluginError, all_registered, select

    spec = settings.worker_projections if projections is None else projections
    try:
        return tuple(r.name for r in select(all_registered(settings.projections), spec)) if spec.strip() else ()
    except PluginError as exc:
        raise CommandError(str(exc)) from None


def check_worker(settings: Settings, embedded_store: bool, projections: tuple[str, ...] = ()) -> None:
    """``CommandError`` unless a worker may run here: an external Redis, and a shared
    Qdrant server or (``embedded_store``) this host's embedded store for a single worker,
    unless it runs ``projections`` that need no store (facts, sessions)."""
    from memstream.projections import all_registered, select

    if not settings.redis_url:
        raise CommandError(
            "in embedded mode `memstream up` runs the workers (the embedded store "
            "admits one process); set MEMSTREAM_REDIS_URL and MEMSTREAM_QDRANT_URL "
            "to run workers on several hosts"
        )
    needs_store = any(r.vectors for r in select(all_registered(settings.projections), projections))
    if needs_store and not settings.qdrant_url and not embedded_store:
        raise CommandError(
            "set MEMSTREAM_QDRANT_URL: workers on several hosts must share one Qdrant "
            "server (each embedded store would hold only the events its worker took); "
            "--embedded-store runs a single worker on this host's embedded store; "
            "--projections facts,sessions needs no store"
        )


@dataclass
class Worker:
    """A running worker: its pipeline and its metrics (None: not served)."""

    pipeline: Any
    metrics: Any = None
    retention: Any = None

    def stop(self) -> None:
        """Stop serving metrics, then let every consumer finish its batch."""
        if self.retention is not None:
            self.retention.stop()
        if self.metrics is not None:
            self.metrics.stop()
        self.pipeline.stop()


def start_worker(settings: Settings, name: str | None = None, projections: tuple[str, ...] = ()) -> Worker:
    """The started worker: a ``memstream.workers.Pipeline`` (consumer ``name``, default
    the host's) of ``projections`` (names; () for all), its files owner-only, and its metrics on ``MEMSTREAM_METRICS_ADDR`` (none
    when it is empty or taken: a warning says so). ``CommandError`` when the log or the
    store cannot be opened (another process holds the embedded store). The caller stops it."""
    from memstream.projections import StoreError, StoreUnavailable
    from memstream.service import start_metrics
    from memstream.workers import Pipeline, PipelineConfig, RetentionJob

    os.umask(PRIVATE_UMASK)  # the embedded store and the embedding cache: owner-only
    private_dir(settings.home)
    try:
        pipeline = Pipeline(
            settings, connect(settings), PipelineConfig.of(settings, consumer=name or "", projections=projections)
        ).start()
    except (StoreError, StoreUnavailable) as exc:  # StoreLocked: another process holds it
        raise CommandError(f"cannot open the projections' store: {exc}") from None
    try:
        metrics = start_metrics(settings, connect(settings), consumers=lambda: pipeline.consumers, role="worker")
    except BaseException:
        pipeline.stop()
        raise
    # the retention job (one at a time across the fleet: a lock in Redis)
    retention = RetentionJob(settings, lambda: connect(settings)).start()
    return Worker(pipeline, metrics, retention)
