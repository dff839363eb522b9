"""Decisions ("we decided", "let's go with", "Decision: …"), with the topic they name."""

from __future__ import annotations

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import DECISION, DECISION_STOP, PRONOUN_VALUE, TOPIC
from memstream.text.facts.phrases import fold_value, norm_subject
from memstream.text.facts.rules import Add

__all__ = ["decisions"]


def decisions(body: str, sentence: str, add: Add, user: bool) -> None:
    for rx, conf_name in DECISION:
        m = rx.search(body)
        if not m:
            continue
        who = m.group("who").lower()
        if who == "i" and not user:
            continue
        value = _cut_decision(m.group("v"))
        if not value or PRONOUN_VALUE.match(value):
            continue
        topic = TOPIC.search(value)
        key = f"decision:{norm_subject(topic.group('t'))}" if topic else "decision"
        conf = CONFIDENCE[conf_name] * (1.0 if user else CONFIDENCE["assistant_factor"])
        add("decision", "user" if who == "i" else "project", key, value, sentence, conf)
        return


def _cut_decision(raw: str) -> str:
    m = DECISION_STOP.search(raw)
    return fold_value(raw[: m.start()] if m else raw)
