"""Text into the units the fact rules read: sentences (per line, at sentence-ending
punctuation), the leading filler and conditionals that a sentence is read without, and
clauses (a sentence split where a conjunction starts a new statement by the same
speaker)."""

from __future__ import annotations

import re
from typing import Iterator

__all__ = ["APOSTROPHES", "CONDITIONAL", "LEADING_FILLER", "split_sentences", "split_clauses"]

APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'", "\u00b4": "'"})
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?…。！？])\s+")
CONDITIONAL = re.compile(r"^(?:if|unless|suppose|supposing|imagine|what if|wenn|si)\b", re.I)
LEADING_FILLER = re.compile(
    r"^(?:(?:so|and|but|also|oh|ok|okay|well|btw|hi|hey|hello|yes|yeah|honestly|actually|"
    r"anyway)[,!]?\s+)+",
    re.I,
)
_VERB_START = (
    r"(?:(?:also|really|absolutely|still)\s+)?(?:love|like|hate|prefer|dislike|enjoy|adore|"
    r"can't\s+stand|cannot\s+stand|don't\s+(?:really\s+)?like|detest|loathe|live|work|moved|use)\b"
)


def split_sentences(text: str) -> Iterator[str]:
    for line in text.splitlines():
        for s in _SENTENCE_SPLIT.split(line):
            s = s.strip()
            if s:
                yield s


_CLAUSE_SPLIT = re.compile(
    r"\s*(?:[;,]\s*)?\b(?:but|and|although|though|while|whereas|et|y|und|e)\s+"
    r"(?=(?:I|j'|je|ich|vivo|me\s+llamo)\b|" + _VERB_START + r")"
)
_STARTS_WITH_VERB = re.compile(_VERB_START)
_HAS_I_SUBJECT = re.compile(r"(?:^|[\s,;:])I(?:\s|')")


def split_clauses(sentence: str) -> list[str]:
    """Clauses of a sentence, split at conjunctions that start a new statement by the
    same speaker: "I love Rust but hate Java" -> "I love Rust", "I hate Java". A clause
    without a subject inherits "I" only from a clause that had it."""
    out: list[str] = []
    for part in _CLAUSE_SPLIT.split(sentence):
        part = part.strip()
        if not part:
            continue
        if out and _STARTS_WITH_VERB.match(part):
            if not _HAS_I_SUBJECT.search(out[-1]):
                continue  # "... exercise and enjoy nature": not a statement about the user
            part = "I " + part
        out.append(part)
    return out or [sentence]
