"""Whether a question asks how things were before a change ("where did I live before", "what
was my old number"): then the facts a newer statement superseded or retracted are wanted
too, labelled as earlier; otherwise only current facts are. Light (one small pattern), so
the query side asks it on every search.

Conservative the other way round from the extractor: a question about a past event ("What
was discussed in the workshop?", "How old is Max?") is not about an earlier value, and
showing superseded facts there would spend the prompt on values the user replaced."""

from __future__ import annotations

import re

__all__ = ["asks_about_past"]

_PAST = re.compile(
    r"(?<![\w'-])(?:used\s+to|previous(?:ly)?|formerly|former|earlier|originally|no\s+longer|any\s?more|"
    r"history|changed|past|prior|(?<!how\s)old(?:er)?|ex-\w+|"
    # "before" alone or before a name ("before Helix"), not before a date or an event
    r"(?<!week\s)(?<!day\s)(?<!weekend\s)before(?!\s+(?:\w+\s+){0,2}\d|\s+\w+ing\b|\s+(?:the|a|an|he|she|they|his|her)\b)|"
    r"(?:was|were)\s+(?:my|our|your|I|we)|(?:did|have|had)\s+(?:I|we|you)\s+(?:ever\s+)?"
    r"(?:live|lived|work|worked|use|used|been|stay|stayed))(?![\w'])",
    re.IGNORECASE,
)


def asks_about_past(question: str) -> bool:
    """True when ``question`` asks about an earlier value (before, used to, old, previous,
    "was my", "did I live/work/use"); never raises on a str."""
    return bool(question) and _PAST.search(question) is not None
