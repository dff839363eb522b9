"""The terse notation, one fact per line: ``<mark>[<target>]: <text>`` (``C`` constraint,
``D`` decision, ``V`` value, ``?`` question, ``✓`` done, ``~`` tentative)."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.phrases import norm_subject
from memstream.text.facts.rules import Add
from memstream.text.facts.vocabulary import TERSE_KIND

__all__ = ["terse"]


def terse(m: re.Match[str], line: str, add: Add) -> None:
    kind = TERSE_KIND[m.group("mark")]
    target = norm_subject(m.group("target"))
    body = m.group("body")
    conf = CONFIDENCE["terse"]
    if kind == "decision":
        add(kind, "project", f"decision:{target}" if target else "decision", body, line, conf)
    else:
        add(kind, target or "project", kind, body, line, conf)  # the key is named as the kind
