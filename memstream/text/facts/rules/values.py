"""Hosts, ports, URLs, paths and versions, with the thing the sentence says they belong to."""

from __future__ import annotations

import re

from memstream.text.facts.confidence import CONFIDENCE
from memstream.text.facts.patterns import (
    DIGIT,
    HOST,
    NAMED_PORT,
    NUMBER,
    OWNER_VERB,
    PATH,
    PORT,
    THING_WORD,
    UNIT_AFTER,
    URL,
    VERSION_THING,
    VERSION_V,
)
from memstream.text.facts.phrases import norm_subject
from memstream.text.facts.rules import Add
from memstream.text.facts.vocabulary import (
    KNOWN_TECH,
    THING_GENERIC_TAIL,
    THING_STOP,
    VERSION_STOP,
)

__all__ = ["values"]

_OWNER_WINDOW = 120  # characters before a value searched for what it belongs to


def _owner(sentence: str, start: int) -> str:
    """What the sentence says the value at ``start`` belongs to: "the staging DB is at …"
    -> "staging db"; "the Grafana URL is …" -> "grafana"; "" when it does not say."""
    prefix = sentence[max(0, start - _OWNER_WINDOW) : start]
    m = OWNER_VERB.search(prefix)
    if not m:
        return ""
    kept: list[str] = []
    for w in reversed(prefix[: m.start()].split()[-4:]):
        if w.lower() in THING_STOP or not THING_WORD.fullmatch(w):
            break
        kept.insert(0, w)
    if len(kept) > 1 and kept[-1].lower() in THING_GENERIC_TAIL:
        kept = kept[:-1]
    subject = norm_subject(" ".join(kept))
    if not subject or subject in THING_STOP:
        return ""
    return subject


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the given (sorted, disjoint) spans replaced by spaces: values already
    taken (a URL) are not found again by later patterns (its host, its path)."""
    if not spans:
        return text
    parts, pos = [], 0
    for a, b in spans:
        parts.append(text[pos:a])
        parts.append(" " * (b - a))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def values(sentence: str, add: Add) -> None:
    masked = sentence
    found: list[tuple[int, str, str]] = []  # (start, type, value)

    spans = []
    lowered = sentence.lower()
    has_digit = DIGIT.search(sentence) is not None
    for m in URL.finditer(masked) if "://" in sentence else ():
        url = m.group().rstrip(".,;:!?)]}'\"")
        found.append((m.start(), "url", url))
        spans.append((m.start(), m.start() + len(url)))
    masked, spans = _blank(masked, spans), []
    for m in HOST.finditer(masked) if "." in masked or "localhost" in lowered else ():
        if m.group("h").lower() == "localhost" and not m.group("port"):
            continue
        found.append((m.start(), "host", m.group()))
        spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    for m in PATH.finditer(masked) if "/" in masked or "\\" in masked else ():
        path = m.group("p").rstrip(".,;:!?)")
        found.append((m.start("p"), "path", path))
        spans.append((m.start("p"), m.start("p") + len(path)))
    masked, spans = _blank(masked, spans), []
    named_ports: list[tuple[int, str, str]] = []
    has_port = "port" in lowered
    for m in NAMED_PORT.finditer(masked) if has_port else ():
        thing = norm_subject(m.group("thing"))
        if thing and thing.split()[-1] not in THING_STOP:
            named_ports.append((m.start(), thing, m.group("p")))
            spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    for m in PORT.finditer(masked) if has_port else ():
        found.append((m.start(), "port", m.group("p")))
        spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    versions: list[tuple[int, str, str]] = []
    if not has_digit:
        masked = ""  # no digits: no versions
    for m in VERSION_V.finditer(masked):
        thing = _version_thing(masked[max(0, m.start() - 60) : m.start()])
        versions.append((m.start(), thing, m.group("ver")))
        spans.append(m.span())
    masked = _blank(masked, spans)
    lead = len(masked) - len(masked.lstrip())
    for m in NUMBER.finditer(masked):  # "<Thing> [version] <number>"
        ver = m.group("ver")
        words = masked[max(0, m.start() - 40) : m.start()].split()
        if words and words[-1].lower() == "version":
            words.pop()
        if not words or not VERSION_THING.fullmatch(words[-1]) or UNIT_AFTER.match(masked, m.end()):
            continue
        thing = words[-1]
        low = thing.lower()
        if low in VERSION_STOP:
            continue
        start = masked.rfind(thing, 0, m.start())
        if low not in KNOWN_TECH and ("." not in ver or not thing[0].isupper() or start == lead):
            continue  # "Took 3.5 hours", "at 2.5": a number, not a version
        versions.append((start, low, ver))
    for _start, thing, port in named_ports:
        add("value", thing, "port", port, sentence, CONFIDENCE["value_named"])
    for start, kind, value in sorted(found):
        subject = _owner(sentence, start)
        if subject:
            add("value", subject, kind, value, sentence, CONFIDENCE["value_named"])
        else:
            add("value", "project", f"mention:{kind}", value, sentence, CONFIDENCE["value_mention"])
    for _start, thing, ver in sorted(versions):
        key = f"version:{thing}" if thing else "mention:version"
        add("value", "project", key, ver, sentence, CONFIDENCE["version"] if thing else CONFIDENCE["value_mention"])


def _version_thing(prefix: str) -> str:
    """What a "v2.3.1" belongs to: the nearest word before it, skipping to/from/at/is."""
    words: list[str] = re.findall(r"[A-Za-z][\w+#.\-]*", prefix)
    for w in reversed(words[-3:]):
        low = w.lower()
        if low in ("to", "from", "at", "is", "version", "on", "of", "was", "now"):
            continue
        if low in VERSION_STOP or low in THING_STOP:
            return ""
        return low
    return ""
