"""A fact as a person reads it: ``fact_sentence("project", "version:ios", "16")`` is
"the project targets ios 16", not "project version:ios: 16". Light (no patterns compile),
so the query side and the CLI word facts the same way."""

from __future__ import annotations

__all__ = ["fact_sentence"]

# key -> the sentence, {s} the subject, {v} the value
_VERBS = {
    "likes": "{s} likes {v}",
    "dislikes": "{s} dislikes {v}",
    "uses": "{s} uses {v}",
    "constraint": "{s} must keep to this: {v}",
    "decision": "{s} decided: {v}",
    "note": "{s} noted: {v}",
    "question": "{s} asked: {v}",
    "done": "{s} finished: {v}",
    "tentative": "{s} might: {v}",
}
# key prefix -> the sentence, {t} the rest of the key
_PREFIXED = {
    "version:": "{s} targets {t} {v}",
    "favorite:": "{s}'s favorite {t} is {v}",
    "decision:": "{s} decided on {t}: {v}",
    "mention:": "{s} mentions {t} {v}",
}
_SUBJECTS = {"user": "the user", "project": "the project"}


def fact_sentence(subject: str, key: str, value: str) -> str:
    """One sentence for a (subject, key, value) fact of any key; total: an unknown key reads
    "the subject's key is value"."""
    s = _SUBJECTS.get(subject, subject)
    if key in _VERBS:
        return _VERBS[key].format(s=s, v=value)
    for prefix, form in _PREFIXED.items():
        if key.startswith(prefix):
            return form.format(s=s, t=key[len(prefix) :].replace("_", " "), v=value)
    return f"{s}'s {key.replace('_', ' ').replace(':', ' ')} is {value}"
