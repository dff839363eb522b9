"""Values and subjects cut out of a clause: a value up to the end of its clause, a subject
without articles or possessives, the items of a listed value."""

from __future__ import annotations

import re

from memstream.text.facts.patterns import (
    DETERMINERS,
    LEADING_ADVERB,
    LIST_SPLIT,
    PRONOUN_VALUE,
    TRAILING_PUNCT,
    VALUE_STOP,
)

__all__ = ["fold_value", "cut_value", "norm_subject", "list_items"]


def fold_value(value: str) -> str:
    return value.strip(TRAILING_PUNCT).strip()


def cut_value(text: str) -> str:
    """The value that starts ``text``: up to the end of its clause."""
    m = VALUE_STOP.search(text)
    return fold_value(text[: m.start()] if m else text)


def norm_subject(text: str) -> str:
    s = text.strip(TRAILING_PUNCT).strip()
    while True:
        t = DETERMINERS.sub("", s)
        if t == s:
            break
        s = t
    s = re.sub(r"'s\b", "", s)
    return " ".join(s.lower().split())


def list_items(value: str) -> list[str]:
    """The items of a listed value ("Python, Go and Zig"); a comma that does not separate
    short items ends the value instead ("the rush, the feeling's indescribable")."""
    if "," in value and any(len(seg.split()) > 4 for seg in value.split(",")):
        value = value.split(",", 1)[0]
    out = []
    for item in LIST_SPLIT.split(value):
        item = LEADING_ADVERB.sub("", fold_value(item))
        if item and not PRONOUN_VALUE.match(item):
            out.append(item)
    return out
