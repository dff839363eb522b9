"""text: pure text stages, no I/O: cleaning and clipping, secret redaction, the boilerplate
filter, chunking, token estimates, script tables, rule-based fact extraction and the
recognition of a forget request said in conversation. The producers (before an
event leaves the host) and the projections both use them.

The stages compile their patterns when first used by name (``memstream.text.redaction``
...): the agent's process imports ``clean_text`` and ``FACT_KINDS`` without paying for
the others."""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.text.clean import clean_text
from memstream.text.facts.kinds import FACT_KINDS
from memstream.text.facts.sentences import fact_sentence

if TYPE_CHECKING:
    from memstream.text.boilerplate import BoilerplateFilter
    from memstream.text.chunking import chunk
    from memstream.text.facts import FactCandidate, asks_about_past, extract_facts, is_single_valued
    from memstream.text.forget import ForgetRequest, forget_request
    from memstream.text.redaction import redact
    from memstream.text.scripts import CJK
    from memstream.text.tokens import CHARS_PER_TOKEN, estimate_tokens, prompt_tokens

__all__ = [
    "asks_about_past",
    "BoilerplateFilter",
    "CHARS_PER_TOKEN",
    "chunk",
    "CJK",
    "clean_text",
    "estimate_tokens",
    "extract_facts",
    "FACT_KINDS",
    "FactCandidate",
    "fact_sentence",
    "forget_request",
    "ForgetRequest",
    "is_single_valued",
    "prompt_tokens",
    "redact",
]

_LAZY = {
    "asks_about_past": "memstream.text.facts",
    "BoilerplateFilter": "memstream.text.boilerplate",
    "CHARS_PER_TOKEN": "memstream.text.tokens",
    "chunk": "memstream.text.chunking",
    "CJK": "memstream.text.scripts",
    "estimate_tokens": "memstream.text.tokens",
    "extract_facts": "memstream.text.facts",
    "FactCandidate": "memstream.text.facts",
    "forget_request": "memstream.text.forget",
    "ForgetRequest": "memstream.text.forget",
    "is_single_valued": "memstream.text.facts",
    "prompt_tokens": "memstream.text.tokens",
    "redact": "memstream.text.redaction",
}

__getattr__ = lazy_exports(__name__, _LAZY)
