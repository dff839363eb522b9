"""Notes: "Remember that …", "Note: …", "FYI …"."""

from __future__ import annotations

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import NOTE
from memstream.text.facts.rules import Add

__all__ = ["notes"]


def notes(body: str, sentence: str, add: Add) -> None:
    m = NOTE.match(body)
    if m:
        add("note", "user", "note", m.group("v"), sentence, CONFIDENCE["note"])
