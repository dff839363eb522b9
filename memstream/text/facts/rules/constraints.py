"""Rules: imperatives ("Never …", "Always …", "You must not …") and "The API must …"."""

from __future__ import annotations

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import CONSTRAINT_IMPERATIVE, CONSTRAINT_NAMED
from memstream.text.facts.phrases import norm_subject
from memstream.text.facts.rules import Add
from memstream.text.facts.vocabulary import CONSTRAINT_BAD_SUBJECT

__all__ = ["constraints"]


def constraints(body: str, sentence: str, add: Add) -> None:
    m = CONSTRAINT_IMPERATIVE.match(body)
    if m:
        add("constraint", "project", "constraint", m.group("v"), sentence, CONFIDENCE["constraint"])
        return
    m = CONSTRAINT_NAMED.match(body)
    if m:
        subj = norm_subject(m.group("subj"))
        if subj and not set(subj.split()) & CONSTRAINT_BAD_SUBJECT:
            add("constraint", subj, "constraint", body, sentence, CONFIDENCE["constraint"])
