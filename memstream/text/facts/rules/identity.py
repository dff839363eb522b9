"""Who the user is: name, location, origin, employer, role, nationality and the attributes
of "my <attribute> is" (email, phone, timezone, pronouns, username, website, birthday)."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import (
    DETERMINERS,
    EMPLOYER,
    LOCATION,
    MY_ATTR,
    NAME_EXPLICIT,
    NAME_IM,
    NAME_WORD,
    ORIGIN,
    PRONOUN_VALUE,
    ROLE,
    ROLE_END,
    ROLE_STOP,
    TRAILING_PUNCT,
    gate_fold,
)
from memstream.text.facts.phrases import cut_value, list_items
from memstream.text.facts.rules import Add
from memstream.text.facts.vocabulary import ATTR_KEY, DEMONYMS, NAME_STOP, RELIGIONS

__all__ = ["identity", "place_or_org"]


def _capitalized_run(text: str, max_words: int = 4, connectors: bool = True) -> str:
    """The leading run of capitalised words ("San Francisco", "Bank of America")."""
    words = text.split()
    out: list[str] = []
    for w in words:
        bare = w.strip(TRAILING_PUNCT + "(")
        if not bare:
            break
        if bare[0].isupper() or bare[0].isdigit() and out:
            out.append(bare)
        elif connectors and out and bare.lower() in ("of", "de", "du", "del", "da", "&", "and", "am", "upon"):
            out.append(bare)
        else:
            break
        if w != bare and w.rstrip()[-1:] in ".,;:!?)":
            break
        if len(out) >= max_words:
            break
    while out and not out[-1][0].isupper():
        out.pop()
    return " ".join(out)


def place_or_org(text: str, lowercase_ok: bool) -> str:
    """A place or organisation at the start of ``text``: capitalised words (and a
    ", Country" after them), or, in an all-lower-case message, up to three words."""
    text = DETERMINERS.sub("", text.lstrip()) if re.match(r"(?i)the\s+[A-Z]", text.lstrip()) else text.lstrip()
    run = _capitalized_run(text)
    if run:
        after = text[text.find(run) + len(run) :]
        m = re.match(r",\s*([A-Z][\w\-]+(?:\s+[A-Z][\w\-]+)?)\b(?!\s+(?:and|but)\b)", after)
        if m and not re.match(r",\s*(?:I|We|You|He|She|It|They|But|And|So)\b", after):
            run = f"{run}, {m.group(1)}"
        return run
    if lowercase_ok:
        value = cut_value(text)
        words = value.split()
        if 0 < len(words) <= 3 and not PRONOUN_VALUE.match(value) and not re.match(r"(?i)(?:a|an|the)\b", value):
            return value
    return ""


def _name_value(raw: str, explicit: bool) -> str:
    words = raw.split()
    if not words:
        return ""
    first = words[0].strip(TRAILING_PUNCT)
    if not first or not re.match(NAME_WORD + "$", first):
        return ""
    if first.lower() in NAME_STOP or first.lower() in DEMONYMS or first.lower() in RELIGIONS:
        return ""
    if not first[0].isupper():
        if not explicit:
            return ""
        # "my name is alice": accept one lower-case word, reported as typed.
        return first
    return _capitalized_run(raw, max_words=3, connectors=False)


def identity(clauses: list[str], sentence: str, add: Add) -> None:
    lowercase_ok = sentence == sentence.lower()
    for clause in clauses:
        folded = gate_fold(clause)
        for rx, lowercase_name in NAME_EXPLICIT:
            m = rx.search(clause, folded)
            if m and _speaker_owns(clause, m.start()):
                v = _name_value(m.group("v"), explicit=lowercase_name)
                if v:
                    add("identity", "user", "name", v, sentence, CONFIDENCE["name_explicit"])
        m = NAME_IM.search(clause, folded)
        if m:
            raw = m.group("v")
            first = raw.split()[0].strip(TRAILING_PUNCT).lower() if raw.split() else ""
            if first in DEMONYMS:
                add("identity", "user", "nationality", first.capitalize(), sentence, CONFIDENCE["nationality"])
            else:
                v = _name_value(raw, explicit=False)
                if v:
                    add("identity", "user", "name", v, sentence, CONFIDENCE["name_im"])
        for rx in ROLE:
            m = rx.search(clause, folded)
            if m:
                raw = m.group("v")
                role = ROLE_END.split(raw, maxsplit=1)[0].strip()
                if role and not ROLE_STOP.match(role) and len(role.split()) <= 4 and not PRONOUN_VALUE.match(role):
                    add("identity", "user", "role", role, sentence, CONFIDENCE["role"])
                    rest = raw[len(role) :]
                    e = re.match(r"\s+(?:at|for)\s+(?P<v>.+)", rest)
                    if e:
                        org = place_or_org(e.group("v"), lowercase_ok)
                        if org:
                            add("identity", "user", "employer", org, sentence, CONFIDENCE["identity"])
                fan = re.match(r"(?i)(?:big\s+|huge\s+)?fan\s+of\s+(?P<v>.+)", raw)
                if fan and not PRONOUN_VALUE.match(fan.group("v")):
                    for item in list_items(cut_value(fan.group("v"))):
                        add("preference", "user", "likes", item, sentence, CONFIDENCE["preference"])
        for rx in EMPLOYER:
            m = rx.search(clause, folded)
            if m:
                org = place_or_org(m.group("v"), lowercase_ok)
                if org:
                    add("identity", "user", "employer", org, sentence, CONFIDENCE["identity"])
                    after = m.group("v")[m.group("v").find(org) + len(org) :]
                    r = re.match(r"\s+as\s+(?:a|an)\s+(?P<v>.+)", after)
                    role = ROLE_END.split(r.group("v"), maxsplit=1)[0].strip() if r else ""
                    if role and not ROLE_STOP.match(role) and len(role.split()) <= 4:
                        add("identity", "user", "role", role, sentence, CONFIDENCE["role"])
        for rx in LOCATION:
            m = rx.search(clause, folded)
            if m:
                place = place_or_org(m.group("v"), lowercase_ok)
                if place:
                    add("identity", "user", "location", place, sentence, CONFIDENCE["identity"])
        m = ORIGIN.search(clause, folded)
        if m:
            place = place_or_org(m.group("v"), lowercase_ok)
            if place:
                add("identity", "user", "origin", place, sentence, CONFIDENCE["identity"])
        for m in MY_ATTR.finditer(clause, folded):
            attr = re.sub(r"\s+", "", m.group("attr").lower()).replace("address", "").replace("number", "")
            attr = re.sub(r"(?:handle|username)$", "", attr) if attr.startswith("github") else attr
            key = ATTR_KEY.get(attr, attr)
            add("identity", "user", key, m.group("v"), sentence, CONFIDENCE["identity"])


def _speaker_owns(clause: str, at: int) -> bool:
    """ "my name is X" is the user's own name, not "my friend's name is X"."""
    before = clause[:at].rstrip().lower()
    return not re.search(r"(?:'s|s')$", before)
