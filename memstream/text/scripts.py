"""Character classes of the scripts written without spaces (Chinese, Japanese) and of Hangul.

Private: shared by ``boilerplate`` (CJK text is dense: one character carries about as much
as three Latin letters) and ``chunking`` (such text is split by character, and Hangul
costs about three word pieces a syllable in MiniLM's uncased vocabulary, which decomposes
syllables into jamo).
"""

from __future__ import annotations

import re

__all__ = ["HAN_KANA", "HANGUL", "CJK", "CJK_RE", "HAN_KANA_RE", "HANGUL_RE"]

# Han ideographs, kana, CJK symbols and punctuation, full-width forms: one token each.
HAN_KANA = (
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation (、。「」 …)
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # half-width and full-width forms (！，？ ｶﾀｶﾅ)
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
# Hangul syllables and jamo.
HANGUL = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff"
CJK = HAN_KANA + HANGUL

CJK_RE = re.compile(f"[{CJK}]")
HAN_KANA_RE = re.compile(f"[{HAN_KANA}]")
HANGUL_RE = re.compile(f"[{HANGUL}]")
