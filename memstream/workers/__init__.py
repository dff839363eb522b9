"""workers: the machinery that feeds the projections from the log: the consumer-group loop,
the dense stage of the vector projections (``embedding``), the admission of every entry,
positions, dead letters, health, the tenant gate, replay progress, the priority of live
versions over replays, the ``Pipeline`` that runs every projection version's consumer and
the query server as threads; and erasing events everywhere (``erasure``: the path
``memstream forget`` and ``retention``, the periodic job, share)."""

from memstream.workers.consumer import Consumer
from memstream.workers.deadletters import DeadLetters
from memstream.workers.embedding import EmbedConsumer, embed_readers, embed_waiting
from memstream.workers.erasure import Doomed, ErasureError, Plan, count_removed, plan, rewrite_append_only_file
from memstream.workers.health import Waiting, consuming, projection_health, read_health, waiting
from memstream.workers.pipeline import Pipeline, PipelineConfig, ReplicaRefused
from memstream.workers.positions import Positions, is_applied
from memstream.workers.replay import GroupProgress, build_progress, caught_up, group_progress
from memstream.workers.retention import KINDS, Retention, RetentionJob

__all__ = [
    "KINDS",
    "Retention",
    "RetentionJob",
    "count_removed",
    "Doomed",
    "ErasureError",
    "Plan",
    "plan",
    "rewrite_append_only_file",
    "build_progress",
    "caught_up",
    "consuming",
    "Consumer",
    "DeadLetters",
    "EmbedConsumer",
    "embed_readers",
    "embed_waiting",
    "group_progress",
    "GroupProgress",
    "is_applied",
    "Pipeline",
    "PipelineConfig",
    "ReplicaRefused",
    "Positions",
    "projection_health",
    "read_health",
    "waiting",
    "Waiting",
]
