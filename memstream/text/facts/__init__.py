"""Rule-based structured facts from a turn's text: ``extract_facts(text, speaker=...)``.

No model in the hot path: vocabulary, patterns and rule families decide, each fact with
its kind (``FACT_KINDS``), subject, key, value and confidence."""

from memstream.text.facts.extract import FactCandidate, extract_facts, is_single_valued
from memstream.text.facts.kinds import FACT_KINDS

__all__ = ["FACT_KINDS", "FactCandidate", "extract_facts", "is_single_valued"]
