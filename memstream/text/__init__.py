"""text: pure text stages, no I/O: cleaning and clipping, secret redaction, the boilerplate
filter, chunking, script tables and rule-based fact extraction. The producers (before an
event leaves the host) and the projections both use them.

The stages compile their patterns when first used by name (``memstream.text.redaction``
...): the agent's process imports ``clean_text`` and ``FACT_KINDS`` without paying for
the others."""

from typing import TYPE_CHECKING

from memstream.text.clean import clean_text
from memstream.text.facts.kinds import FACT_KINDS

if TYPE_CHECKING:
    from memstream.text.boilerplate import BoilerplateFilter
    from memstream.text.chunking import chunk
    from memstream.text.facts import extract_facts, is_single_valued
    from memstream.text.redaction import redact

__all__ = [
    "BoilerplateFilter",
    "chunk",
    "clean_text",
    "extract_facts",
    "FACT_KINDS",
    "is_single_valued",
    "redact",
]

_LAZY = {
    "BoilerplateFilter": "memstream.text.boilerplate",
    "chunk": "memstream.text.chunking",
    "extract_facts": "memstream.text.facts",
    "is_single_valued": "memstream.text.facts",
    "redact": "memstream.text.redaction",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
