"""The code points of the scripts written without spaces (Chinese, Japanese) and of Hangul:
the one table memstream has of them.

Shared by ``boilerplate`` (CJK text is dense: one character carries about as much as
three Latin letters), ``chunking`` and ``tokens`` (such text is split by character, and
Hangul costs about three word pieces a syllable in MiniLM's uncased vocabulary, which
decomposes syllables into jamo) and the sparse keyword vectors of the projections
(``memstream.projections.sparse``: runs of these characters become character bigrams).
"""

from __future__ import annotations

import re

__all__ = ["HAN_KANA_RANGES", "HANGUL_RANGES", "HAN_KANA", "HANGUL", "CJK", "CJK_RE", "HAN_KANA_RE", "HANGUL_RE"]

# Han ideographs, kana, CJK symbols and punctuation, full-width forms: one token each.
HAN_KANA_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation (、。「」 々 〆 〇 〻 …)
    (0x3040, 0x30FF),  # Hiragana, Katakana (with the prolonged sound mark ー)
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # half-width and full-width forms (！，？ ｶﾀｶﾅ)
    (0x20000, 0x323AF),  # CJK extensions B-H
)
# Hangul syllables and jamo.
HANGUL_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
)


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    """The ranges as the inside of a regular-expression character class."""
    return "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)


HAN_KANA = _class(HAN_KANA_RANGES)
HANGUL = _class(HANGUL_RANGES)
CJK = HAN_KANA + HANGUL

CJK_RE = re.compile(f"[{CJK}]")
HAN_KANA_RE = re.compile(f"[{HAN_KANA}]")
HANGUL_RE = re.compile(f"[{HANGUL}]")
