"""workers: consumer-group workers that filter, redact, extract facts, embed and
project the log (``Pipeline``), and answer queries where the stores live."""

from workers.boilerplate import BoilerplateConfig, BoilerplateFilter
from workers.chunking import chunk
from workers.consumer import Consumer, DeadLetters, PermanentError, Positions, TransientError, is_applied
from workers.facts import FactCandidate, extract_facts, is_single_valued
from workers.redact import redact

__all__ = [
    "BoilerplateConfig", "BoilerplateFilter", "chunk", "Consumer", "DeadLetters",
    "PermanentError", "Positions", "TransientError", "is_applied", "FactCandidate",
    "extract_facts", "is_single_valued", "redact",
]
