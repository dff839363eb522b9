"""``memstream worker``: projection workers against a shared Redis and Qdrant."""

from __future__ import annotations

import os
from typing import Any

from memstream.core import PRIVATE_UMASK, Settings, private_dir
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError

__all__ = ["check_worker", "start_worker"]


def check_worker(settings: Settings, embedded_store: bool) -> None:
    """``CommandError`` unless a worker may run here: an external Redis, and a shared
    Qdrant server or (``embedded_store``) this host's embedded store for a single worker."""
    if not settings.redis_url:
        raise CommandError("in embedded mode `memstream up` runs the workers (the embedded store "
                           "admits one process); set MEMSTREAM_REDIS_URL and MEMSTREAM_QDRANT_URL "
                           "to run workers on several hosts")
    if not settings.qdrant_url and not embedded_store:
        raise CommandError("set MEMSTREAM_QDRANT_URL: workers on several hosts must share one Qdrant "
                           "server (each embedded store would hold only the events its worker took); "
                           "--embedded-store runs a single worker on this host's embedded store")


def start_worker(settings: Settings, name: str | None = None) -> Any:
    """The started ``memstream.workers.Pipeline`` (consumer ``name``, default the host's),
    its files owner-only; ``CommandError`` when the log or the store cannot be opened
    (another process holds the embedded store). The caller stops it."""
    from memstream.projections import StoreError, StoreUnavailable
    from memstream.workers import Pipeline, PipelineConfig

    os.umask(PRIVATE_UMASK)  # the embedded store and the embedding cache: owner-only
    private_dir(settings.home)
    try:
        return Pipeline(settings, connect(settings), PipelineConfig.of(settings, consumer=name or "")).start()
    except (StoreError, StoreUnavailable) as exc:  # StoreLocked: another process holds it
        raise CommandError(f"cannot open the projections' store: {exc}") from None
