"""Updates: a newer value said as a change rather than as a declaration ("we're fully moved
to Lisbon now", "started at the new company on Monday", "I switched from Python to Go",
"the new number ends in 0202"), and a value said to hold no longer ("I don't live in
Berlin anymore", "I left Google", "I no longer use Vim", "I don't like Java anymore").

A newer value is proposed with ``add`` (the facts table supersedes the old one of a
single-valued key); a value that no longer holds with ``retract`` (the table ends the
current fact of that value, for multi-valued keys too). ``retract`` with an empty value
ends whatever a single-valued key holds ("I got a new phone number", "I quit my job").
Only the user's own text is read."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import (
    ATTR_NEW,
    ATTR_NEW_UNSAID,
    EMPLOYER_GONE,
    EMPLOYER_NEW,
    ENDS_IN,
    GO_BY,
    INSTEAD_OF,
    JOB_GONE,
    LEFT,
    LIKE_GONE,
    LOCATION_GONE,
    MOVED,
    MY_NEW,
    NEW_PLACE,
    PHONE_VALUE,
    PRONOUN_VALUE,
    ROLE_END,
    ROLE_GONE,
    ROLE_NEW,
    ROLE_STOP,
    SWITCHED,
    SWITCHED_TO,
    TOOL_GONE,
    UPDATE_GATE,
    gate_fold,
)
from memstream.text.facts.phrases import cut_value, list_items
from memstream.text.facts.rules import Add
from memstream.text.facts.rules.identity import place_or_org
from memstream.text.facts.rules.tools import add_tools
from memstream.text.facts.vocabulary import ATTR_KEY, KNOWN_TECH

__all__ = ["updates", "may_be_update"]

_MAX_ITEM_WORDS = 6
# what follows the thing given up: "I stopped using Emacs after the RSI", "… anymore"
_GONE_TAIL = re.compile(r"(?i)\s+(?:anymore|any\s+more|after|since|when|because|last|this|years?|months?|weeks?|ago)\b.*$")


_RULES = (
    MOVED,
    LOCATION_GONE,
    EMPLOYER_NEW,
    EMPLOYER_GONE,
    JOB_GONE,
    LEFT,
    SWITCHED,
    SWITCHED_TO,
    TOOL_GONE,
    LIKE_GONE,
    ROLE_NEW,
    ROLE_GONE,
    ATTR_NEW,
    ATTR_NEW_UNSAID,
    ENDS_IN,
    MY_NEW,
    GO_BY,
    INSTEAD_OF,
)


def may_be_update(body: str) -> bool:
    """Whether an update rule may match ``body``: one scan for their words together
    (``UPDATE_GATE``); False means none of them can."""
    return UPDATE_GATE.search(gate_fold(body)) is not None


def updates(body: str, sentence: str, add: Add, retract: Add) -> None:
    """Propose the updates and retractions ``body`` (a sentence of the user's, without its
    leading filler) states."""
    lowercase_ok = sentence == sentence.lower()
    folded = gate_fold(body)
    new, gone = CONFIDENCE["update"], CONFIDENCE["retraction"]
    _location(body, folded, sentence, add, retract, lowercase_ok)
    _employer(body, folded, sentence, add, retract, lowercase_ok)
    _tools(body, folded, sentence, add, retract)
    for gone_like in LIKE_GONE.finditer(body, folded):
        verb = gone_like.group("verb") or gone_like.group("verb2") or gone_like.group("verb3") or "like"
        raw = gone_like.group("v") or gone_like.group("v2") or gone_like.group("v3") or gone_like.group("v4") or ""
        if verb == "mind":
            continue
        value = cut_value(re.sub(r"(?i)^to\s+", "", raw))
        if not value or PRONOUN_VALUE.match(value):
            continue
        key, kind = ("dislikes", "dislike") if verb == "hate" else ("likes", "preference")
        for item in list_items(value):
            if len(item.split()) <= _MAX_ITEM_WORDS:
                retract(kind, "user", key, item, sentence, gone)
    m = ROLE_NEW.search(body, folded)
    if m:
        role = ROLE_END.split(m.group("v"), maxsplit=1)[0].strip()
        if role and not ROLE_STOP.match(role) and len(role.split()) <= 4 and not PRONOUN_VALUE.match(role):
            add("identity", "user", "role", role, sentence, new)
    m = ROLE_GONE.search(body, folded)
    if m:
        role = ROLE_END.split(m.group("v") or m.group("w"), maxsplit=1)[0].strip()
        if role and not ROLE_STOP.match(role) and len(role.split()) <= 4 and not PRONOUN_VALUE.match(role):
            retract("identity", "user", "role", role, sentence, gone)
    _attributes(body, folded, sentence, add, retract)
    m = MY_NEW.search(body, folded)
    if m:
        if m.group("job"):
            org = place_or_org(m.group("v"), lowercase_ok=False)
            if org:
                add("identity", "user", "employer", org, sentence, new)
        elif m.group("role"):
            role = ROLE_END.split(m.group("v"), maxsplit=1)[0].strip()
            if role and not ROLE_STOP.match(role) and len(role.split()) <= 4 and not PRONOUN_VALUE.match(role):
                add("identity", "user", "role", role, sentence, new)
        else:
            place = place_or_org(m.group("v"), lowercase_ok)
            if place:
                add("identity", "user", "location", place, sentence, new)
    m = GO_BY.search(body, folded)
    if m:
        name = place_or_org(m.group("v"), lowercase_ok=False)
        if name and len(name.split()) <= 3:
            add("identity", "user", "name", name, sentence, new)


def _location(body: str, folded: str, sentence: str, add: Add, retract: Add, lowercase_ok: bool) -> None:
    m = MOVED.search(body, folded)
    if m:
        old = (m.group("old") or "").strip()
        place = place_or_org(m.group("v"), lowercase_ok)
        if place and not _is_tech(place) and not _is_tech(old):
            add("identity", "user", "location", place, sentence, CONFIDENCE["update"])
    m = LOCATION_GONE.search(body, folded)
    if m:
        place = place_or_org(m.group("v") or m.group("w"), lowercase_ok)
        if place:
            retract("identity", "user", "location", place, sentence, CONFIDENCE["retraction"])


def _employer(body: str, folded: str, sentence: str, add: Add, retract: Add, lowercase_ok: bool) -> None:
    m = EMPLOYER_NEW.search(body, folded)
    if m:
        raw = m.group("v").lstrip()
        if NEW_PLACE.match(raw):
            retract("identity", "user", "employer", "", sentence, CONFIDENCE["retraction"])
        else:
            org = place_or_org(raw, lowercase_ok=False)  # "started with a walk": only a name
            if org:
                add("identity", "user", "employer", org, sentence, CONFIDENCE["update"])
    m = EMPLOYER_GONE.search(body, folded)
    if m:
        org = place_or_org(m.group("v") or m.group("w") or m.group("x"), lowercase_ok)
        if org:
            retract("identity", "user", "employer", org, sentence, CONFIDENCE["retraction"])
    elif JOB_GONE.search(body, folded):
        retract("identity", "user", "employer", "", sentence, CONFIDENCE["retraction"])
    m = LEFT.search(body, folded)
    if m:
        name = place_or_org(m.group("v"), lowercase_ok=False)
        if name and not _is_tech(name):
            # an employer or a place: the table ends only a current fact of that value
            retract("identity", "user", "employer", name, sentence, CONFIDENCE["retraction"])
            retract("identity", "user", "location", name, sentence, CONFIDENCE["retraction"])


def _tools(body: str, folded: str, sentence: str, add: Add, retract: Add) -> None:
    m = SWITCHED.search(body, folded)
    if m:
        who = "user" if m.group("who") == "I" else "project"
        old, value = (m.group("old"), m.group("v")) if m.group("old") else (m.group("old2"), m.group("v2"))
        moved = m.group(0).lower().find("moved") >= 0 and m.group("old") is not None
        if not moved or _is_tech(old) or _is_tech(cut_value(value)):
            add_tools(who, old, sentence, retract)
            add_tools(who, value, sentence, add)
        return
    m = SWITCHED_TO.search(body, folded)
    if m:
        who = "user" if m.group("who") == "I" else "project"
        add_tools(who, m.group("v"), sentence, add)
        if m.group("old"):
            add_tools(who, m.group("old"), sentence, retract)
    m = INSTEAD_OF.search(body, folded)
    if m:
        who = "user" if m.group("who") == "I" else "project"
        add_tools(who, m.group("new"), sentence, add)
        add_tools(who, _GONE_TAIL.sub("", m.group("v")), sentence, retract)
    m = TOOL_GONE.search(body, folded)
    if m:
        who = "user" if m.group("who") == "I" else "project"
        value = _GONE_TAIL.sub("", m.group("v"))
        if "moved" not in m.group(0).lower() or _is_tech(cut_value(value)):  # "we moved away from Leeds": a place
            add_tools(who, value, sentence, retract)


def _attributes(body: str, folded: str, sentence: str, add: Add, retract: Add) -> None:
    m = ATTR_NEW.search(body, folded)
    if m:
        attr = m.group("attr") or m.group("attr2") or m.group("attr3")
        key = _attr_key(attr)
        raw = m.group("v").strip()
        if key == "phone":
            p = PHONE_VALUE.match(raw)
            value = p.group().strip() if p else ""
        else:
            value = raw.split()[0] if raw.split() else ""
            if key == "address":
                key = "email" if "@" in value else ""
        if key and value and not PRONOUN_VALUE.match(value):
            add("identity", "user", key, value, sentence, CONFIDENCE["update"])
        return
    m = ENDS_IN.search(body, folded)
    if m:
        add("identity", "user", "phone", "ending in " + " ".join(m.group("v").split()), sentence, CONFIDENCE["update"])
        return
    m = ATTR_NEW_UNSAID.search(body, folded)
    if m:
        key = _attr_key(m.group("attr"))
        if key and key != "address":
            retract("identity", "user", key, "", sentence, CONFIDENCE["retraction"])


def _attr_key(attr: str) -> str:
    a = re.sub(r"\s+", "", attr.lower()).replace("address", "") or "address"
    a = re.sub(r"(?:handle|username)$", "", a) if a.startswith("github") else a
    if a in ("number", "phonenumber", "mobile", "mobilenumber", "cell", "cellnumber"):
        return "phone"
    return ATTR_KEY.get(a, a)


def _is_tech(text: str | None) -> bool:
    return bool(text) and str(text).strip().lower() in KNOWN_TECH
