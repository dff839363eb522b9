"""What the user likes and dislikes (one fact per listed item) and their favourites."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import (
    DISLIKE_VERBS,
    FAVORITE,
    I_LEAD,
    PREFERENCE,
    PRONOUN_VALUE,
    gate_fold,
)
from memstream.text.facts.phrases import cut_value, list_items, norm_subject
from memstream.text.facts.rules import Add

__all__ = ["preferences"]

_MAX_ITEM_WORDS = 6


def preferences(clauses: list[str], sentence: str, add: Add) -> None:
    for clause in clauses:
        folded = gate_fold(clause)
        m = FAVORITE.search(clause, folded)
        if m:
            thing = norm_subject(m.group("thing"))
            value = cut_value(m.group("v"))
            if thing and value and not PRONOUN_VALUE.match(value):
                add("preference", "user", f"favorite:{thing}", value, sentence, CONFIDENCE["favorite"])
            continue
        m = PREFERENCE.search(clause, folded)
        if not m or not m.group("i") or not I_LEAD.search(clause[: m.start("i")]):
            continue  # no "I", or "the things I love ..." (a relative clause)
        verb = " ".join(m.group("verb").split()).lower()
        raw = m.group("v")
        if re.match(r"(?i)to\s+", raw):
            raw = re.split(r"\s*,", raw[3:], maxsplit=1)[0]
        value = cut_value(raw)
        if not value or PRONOUN_VALUE.match(value):
            continue
        if verb == "prefer":
            value = re.split(r"(?i)\s+(?:over|to|rather\s+than|instead\s+of)\s+", value, maxsplit=1)[0]
        dislike = ("fan of" in verb and "not" in verb) or ("fan of" not in verb and bool(DISLIKE_VERBS.match(verb)))
        kind, key = ("dislike", "dislikes") if dislike else ("preference", "likes")
        for item in list_items(value):
            if len(item.split()) <= _MAX_ITEM_WORDS:
                add(kind, "user", key, item, sentence, CONFIDENCE["preference"])
