"""Rule-based structured facts from a turn's text: ``extract_facts(text, speaker=...)``.

No model: regular expressions over sentences and clauses, English first, with the common
German, French, Spanish, Portuguese and Italian forms of "my name is" and "I live in".
Guarantee: pure and deterministic, never raises on any ``str``; a question (a sentence
ending in ``?``) or a conditional ("If I moved to …") yields nothing; facts come in the
order of the text, without duplicates.

A ``FactCandidate`` names what it is about as ``(subject, key)``. For a single-valued
key (``is_single_valued``) a newer value for the same pair supersedes the older one
(``name``, ``location``, ``employer``, ``decision:<topic>``, ``host`` of a named thing …);
multi-valued keys accumulate (``likes``, ``dislikes``, ``uses``, ``constraint`` …). The
facts table applies that rule; this module only proposes.

Kinds, keys and subjects:

- ``identity`` (subject ``user``): ``name``, ``location``, ``origin``, ``employer``,
  ``role``, ``nationality``, ``email``, ``phone``, ``timezone``, ``pronouns``,
  ``username``, ``website``, ``birthday``; only from the user's own text
  (``speaker="user"``), as are preferences, dislikes, tools, constraints and notes.
- ``preference`` / ``dislike`` (``user``): ``likes`` / ``dislikes``, one fact per listed
  item ("I love Rust but hate Java" gives two); ``favorite:<thing>``.
- ``tool``: ``uses``; subject ``user`` for "I use / I'm using", ``project`` for "we use",
  "our stack is", "deployed on".
- ``decision``: ``decision:<topic>`` when the decision names what it is for ("… for the
  queue" gives ``decision:queue``), else ``decision``; subject ``project`` ("we decided",
  "let's go with", "Decision: …"), ``user`` for "I decided".
- ``constraint``: ``constraint``; imperatives ("Never …", "Always …", "Don't ever …",
  "You must not …") have subject ``project``; "The API must …" has subject ``api``.
- ``value``: ``host`` (with its port), ``port``, ``url``, ``path``, ``version:<thing>``;
  the subject is the thing the sentence says it belongs to ("the staging DB is at
  db.internal:5432" gives subject ``staging db``, key ``host``). A value the sentence does
  not attribute gets subject ``project`` and key ``mention:<host|port|url|path>``.
- ``note``: "Remember that …", "Note: …", "FYI …" (``user``, key ``note``).
- Terse notation, one fact per line, ``<mark>[<target>]: <text>``: ``C`` constraint
  (subject target, key ``constraint``), ``D`` decision (``project``,
  ``decision:<target>``), ``V`` value (target, ``value``), ``?`` question (target,
  ``question``), ``✓`` done (target, ``done``), ``~`` tentative (target, ``tentative``).

The assistant's text (any other ``speaker``) yields only decisions (at lower confidence),
values and terse notation. Subjects and topics are lower-cased, without leading
articles or possessives. ``confidence`` is a fixed prior per rule (``CONFIDENCE`` in
``memstream.text.facts.confidence``).

This module decides which rule family reads which sentence and keeps each fact once. The
families are in ``memstream.text.facts.rules`` (one module each), their regular
expressions in ``patterns``, their word lists in ``vocabulary``, the split into sentences
and clauses in ``segmentation``, and the cutting of values and subjects in ``phrases``.
"""

from __future__ import annotations

import re

import msgspec

from memstream.text.facts.patterns import TERSE
from memstream.text.facts.phrases import fold_value
from memstream.text.facts.rules.constraints import constraints
from memstream.text.facts.rules.decisions import decisions
from memstream.text.facts.rules.identity import identity
from memstream.text.facts.rules.notes import notes
from memstream.text.facts.rules.preferences import preferences
from memstream.text.facts.rules.terse import terse
from memstream.text.facts.rules.tools import tools
from memstream.text.facts.rules.updates import may_be_update, updates
from memstream.text.facts.rules.values import values
from memstream.text.facts.segmentation import (
    APOSTROPHES,
    CONDITIONAL,
    LEADING_FILLER,
    split_clauses,
    split_sentences,
)

__all__ = ["FactCandidate", "extract_facts", "is_single_valued"]


class FactCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One proposed fact: ``kind`` is one of ``FACT_KINDS`` (``memstream.text.facts.kinds``);
    ``text`` is the sentence (or terse line) it came from. ``retracts``: the sentence says
    the value no longer holds ("I don't live in Berlin anymore", "I left Google"); the
    facts table ends a current fact of the same (subject, key) with that value, or with
    any value when ``value`` is empty (single-valued keys only: "I got a new number")."""

    kind: str
    subject: str
    key: str
    value: str
    text: str
    confidence: float
    retracts: bool = False


_SINGLE_KEYS = frozenset(
    {
        "name",
        "location",
        "origin",
        "employer",
        "role",
        "nationality",
        "email",
        "phone",
        "timezone",
        "pronouns",
        "username",
        "website",
        "birthday",
        "host",
        "port",
        "url",
        "path",
        "value",
        "tentative",
    }
)
_SINGLE_PREFIXES = ("decision:", "version:", "favorite:")


def is_single_valued(key: str) -> bool:
    """True if a newer value for the same (subject, key) replaces the older one; False
    for keys whose values accumulate (likes, dislikes, uses, constraint, bare decision,
    note, question, done, mention:*)."""
    return key in _SINGLE_KEYS or key.startswith(_SINGLE_PREFIXES)


class _Out:
    """The facts proposed for one text, in order: the same (kind, subject, key, value)
    proposed again is kept once, at the higher confidence."""

    def __init__(self) -> None:
        self.facts: list[FactCandidate] = []
        self._seen: dict[tuple[str, str, str, str, bool], int] = {}

    def add(self, kind: str, subject: str, key: str, value: str, text: str, confidence: float) -> None:
        self._add(kind, subject, key, value, text, confidence, False)

    def retract(self, kind: str, subject: str, key: str, value: str, text: str, confidence: float) -> None:
        """Propose that ``value`` of (subject, key) no longer holds; an empty ``value``, any
        value of a single-valued key."""
        self._add(kind, subject, key, value, text, confidence, True)

    def _add(self, kind: str, subject: str, key: str, value: str, text: str, confidence: float, retracts: bool) -> None:
        value = fold_value(value)
        if not subject or not key or not (value or (retracts and is_single_valued(key))):
            return
        ident = (kind, subject, key, value.casefold(), retracts)
        fact = FactCandidate(
            kind=kind, subject=subject, key=key, value=value, text=text, confidence=round(confidence, 3), retracts=retracts
        )
        at = self._seen.get(ident)
        if at is None:
            self._seen[ident] = len(self.facts)
            self.facts.append(fact)
        elif self.facts[at].confidence < fact.confidence:
            self.facts[at] = fact


# Cheap gates: a rule group runs only on sentences that contain one of its words.
_MAY_BE_PERSONAL = re.compile(
    r"(?<![\w'])(?:(?:I|i|[Mm]y|[Ww]e|[Oo]ur|[Cc]all|deployed|hosted|[Ii]ch|[Jj]e|[Mm]e|[Mm]i|[Mm]ein|[Mm]on|"
    r"[Mm]eu|[Vv]ivo|[Mm]oro|[Ii]l|love|like|hate|enjoy|prefer)(?!\w)|[Jj]')"
)
_DECISION_WORDS = ("decid", "decision", "agreed", "chose", "opted", "settled", "let", "go with", "going with")
_MAY_BE_VALUE = re.compile(r"[0-9/\\]|://|localhost|\.[A-Za-z]")


def extract_facts(text: str, *, speaker: str = "user") -> list[FactCandidate]:
    """Facts stated in ``text``, in order, without duplicates. Only ``speaker="user"``
    yields identity, preferences, tools, constraints and notes; anyone's text yields
    decisions, values and terse notation. Pure, deterministic, never raises on a str."""
    if not text or not isinstance(text, str):
        return []
    out = _Out()
    user = speaker == "user"
    if not text.isascii():  # the apostrophes it maps are not ASCII: an ASCII text has none
        text = text.translate(APOSTROPHES)
    prose: list[str] = []
    changes: list[tuple[str, str]] = []  # (body, sentence) that may state an update
    for line in text.splitlines():
        m = TERSE.match(line)
        if m is None:
            prose.append(line)
            continue
        terse(m, line.strip(), out.add)
    for sentence in split_sentences("\n".join(prose)):
        if sentence.endswith("?") or sentence.endswith("？"):
            continue
        body = LEADING_FILLER.sub("", sentence)
        if CONDITIONAL.match(body):
            continue
        if user:
            if _MAY_BE_PERSONAL.search(body):
                clauses = split_clauses(body)
                identity(clauses, sentence, out.add)
                preferences(clauses, sentence, out.add)
                tools(clauses, sentence, out.add)
            constraints(body, sentence, out.add)
            notes(body, sentence, out.add)
            if may_be_update(body):
                changes.append((body, sentence))
        lowered = body.lower()
        for word in _DECISION_WORDS:  # a loop, not any(): this runs for every sentence
            if word in lowered:
                decisions(body, sentence, out.add, user)
                break
        if _MAY_BE_VALUE.search(sentence):
            values(sentence, out.add)
    # after the declarations: the n-th fact of a text keeps the index (and so the id) it had
    # before update rules existed, so a forget that names a fact by id still names it
    for body, sentence in changes:
        updates(body, sentence, out.add, out.retract)
    return out.facts
