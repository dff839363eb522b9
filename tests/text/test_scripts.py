"""The script table (memstream.text.scripts): the only table of CJK and Hangul code points."""

from __future__ import annotations

import re
from pathlib import Path

import memstream
from memstream.text.scripts import CJK_RE, HAN_KANA_RE, HANGUL_RE

# The first code points of CJK unified ideographs and of Hangul syllables, as code would spell them.
_TABLE_ENTRY = re.compile(r"0x0*(?:4E00|AC00)\b|\\u(?:4e00|ac00)|[\u4e00\uac00]-", re.IGNORECASE)


def test_no_module_but_text_scripts_holds_a_table_of_cjk_code_points():
    root = Path(memstream.__file__).parent
    holders = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if _TABLE_ENTRY.search(p.read_text(encoding="utf-8")))
    assert holders == ["text/scripts.py"]


def test_the_table_tells_han_kana_and_hangul_apart_at_their_edges():
    assert all(HAN_KANA_RE.match(c) and not HANGUL_RE.match(c) for c in "一鿿〇々。ーｶ\U00020000\U000323af")
    assert all(HANGUL_RE.match(c) and not HAN_KANA_RE.match(c) for c in "가힣\u1100ㄱ")
    assert not any(CJK_RE.match(c) for c in "a\u10ff\u2e7f\U0001ffff\U000323b0")
