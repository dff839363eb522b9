"""Rule-based structured facts from a turn's text: ``extract_facts(text, speaker=...)``.

No model in the hot path: vocabulary, patterns and rule families decide, each fact with
its kind (``FACT_KINDS``), subject, key, value and confidence.

``FACT_KINDS`` is here at once; the extractor (its patterns compile on import) loads on
first use of its names, so the agent's process describes the ``memstream_facts`` tool
without it."""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.text.facts.kinds import FACT_KINDS
from memstream.text.facts.sentences import fact_sentence

if TYPE_CHECKING:
    from memstream.text.facts.extract import FactCandidate, extract_facts, is_single_valued
    from memstream.text.facts.past import asks_about_past

__all__ = ["FACT_KINDS", "FactCandidate", "asks_about_past", "extract_facts", "fact_sentence", "is_single_valued"]

_LAZY = {name: "memstream.text.facts.extract" for name in ("FactCandidate", "extract_facts", "is_single_valued")}
_LAZY["asks_about_past"] = "memstream.text.facts.past"

__getattr__ = lazy_exports(__name__, _LAZY)
