"""workers: consumer-group workers that filter, redact, extract facts, embed and
project the log (``Pipeline``), and answer queries where the stores live."""

from .boilerplate import BoilerplateConfig, BoilerplateFilter
from .chunking import chunk
from .consumer import Consumer, DeadLetters, PermanentError, Positions, TransientError, is_applied
from .facts import FactCandidate, extract_facts, is_single_valued
from .redact import redact

__all__ = [
    "BoilerplateConfig", "BoilerplateFilter", "chunk", "Consumer", "DeadLetters",
    "PermanentError", "Positions", "TransientError", "is_applied", "FactCandidate",
    "extract_facts", "is_single_valued", "redact",
]
