"""The counters of a consumer group's loop: what every loop counts (``LoopStats``), and what
the projection's consumer (``ConsumerStats``) and the dense stage (``EmbedStats``) count
besides. The health record (``memstream.workers.health``) and the metrics read them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerStats", "EmbedStats", "LoopStats"]


@dataclass
class LoopStats:
    applied: int = 0
    dead_lettered: int = 0
    batches: int = 0
    reclaimed: int = 0
    transient_failures: int = 0
    errors: int = 0  # steps that failed otherwise (logged, backed off, retried)
    restarts: int = 0  # threads restarted by the pipeline's supervisor
    last_error: str = ""


@dataclass
class ConsumerStats(LoopStats):
    skipped_unknown: int = 0
    retried: int = 0
    clipped: int = 0  # events with a text field clipped here
    redelivered: int = 0  # entries handled again after an earlier delivery (own pending, reclaimed)


@dataclass
class EmbedStats(LoopStats):
    # applied: entries done with (vectors set, or not wanted any more; dead letters not included)
    # dead_lettered: malformed entries, and entries that failed alone max_deliveries times
    embedded: int = 0  # vectors set
