"""What the user ("I use") or the project ("we use", "our stack is", "deployed on") uses."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import (
    DETERMINERS,
    PRONOUN_VALUE,
    TOOL_PROJECT,
    TOOL_TRIM,
    TOOL_USER,
    gate_fold,
)
from memstream.text.facts.phrases import cut_value, list_items
from memstream.text.facts.rules import Add
from memstream.text.facts.vocabulary import KNOWN_TECH

__all__ = ["add_tools", "tools"]


def tools(clauses: list[str], sentence: str, add: Add) -> None:
    for clause in clauses:
        folded = gate_fold(clause)
        m = TOOL_USER.search(clause, folded)
        if m:
            add_tools("user", m.group("v"), sentence, add)
        for rx in TOOL_PROJECT:
            m = rx.search(clause, folded)
            if m:
                add_tools("project", m.group("v"), sentence, add)
                break


def add_tools(subject: str, raw: str, sentence: str, add: Add) -> None:
    value = cut_value(raw)
    for item in list_items(value):
        item = TOOL_TRIM.sub("", item).strip()
        item = DETERMINERS.sub("", item) if re.match(r"(?i)the\s+[A-Z]", item) else item
        if not item or PRONOUN_VALUE.match(item) or len(item.split()) > 3:
            continue
        if not any(ch.isupper() or ch.isdigit() for ch in item) and item.lower() not in KNOWN_TECH:
            continue  # "we use tabs": keep only names of things, not common nouns
        add("tool", subject, "uses", item, sentence, CONFIDENCE["tool"])
