"""workers: consumer-group workers that filter, redact, extract facts, embed and
project the log (``Pipeline``), and answer queries where the stores live."""

from memstream.workers.deadletters import DeadLetters
from memstream.workers.health import projection_health
from memstream.workers.pipeline import Pipeline, PipelineConfig
from memstream.workers.positions import Positions, is_applied

__all__ = [
    "DeadLetters",
    "is_applied",
    "Pipeline",
    "PipelineConfig",
    "Positions",
    "projection_health",
]
