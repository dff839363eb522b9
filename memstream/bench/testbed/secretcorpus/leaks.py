"""Whether a redacted text still holds a secret or a piece of it (``leaked``), after
``normalise`` removed zero-width characters and mapped look-alikes to ASCII."""

from __future__ import annotations

import unicodedata

_ZW = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
# Cyrillic and Greek letters that look like Latin ones.
_LOOKALIKE = str.maketrans(
    "аеорсухіјѕԁмтнвкАЕОРСУХІЈЅМТНВКΑΒΕΖΗΙΚΜΝΟΡΤΥΧοαικνρτυχ",
    "aeopcyxijsdmtHBkAEOPCYXIJSMTHBKABEZHIKMNOPTYXoaiknptux",
)


def normalise(text: str) -> str:
    """``text`` without zero-width characters, in NFKC, look-alikes mapped to ASCII."""
    return unicodedata.normalize("NFKC", text.translate(_ZW)).translate(_LOOKALIKE)


def leaked(out: str, secret: str, source: str = "", window: int = 10) -> bool:
    """Whether ``out`` still holds ``secret``, or any ``window`` characters of it in a row
    (after ``normalise``; line breaks and indentation inside the secret split it into
    pieces, each checked). A piece that ``source`` (the text before redaction) holds
    outside the secret too is not a leak (``github_pat_…`` under a field named
    ``github_pat``)."""
    text = normalise(out)
    secret = normalise(secret)
    around = normalise(source).replace(secret, "\0")
    for piece in secret.split("\n"):
        piece = piece.strip()
        if not piece:
            continue
        if len(piece) <= window:
            if len(piece) >= 4 and piece in text and piece not in around:
                return True
            continue
        if any(w in text and w not in around for w in (piece[i : i + window] for i in range(len(piece) - window + 1))):
            return True
    return False
