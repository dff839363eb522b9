"""Text to a sparse vector for keyword retrieval next to the dense embedding.

Guarantee: ``sparse_vector(text)`` is a pure function of ``text`` and its parameters,
identical in every process and on every machine (token indices are CRC-32 of the
UTF-8 token, not Python's salted ``hash``). Documents and queries use the same
function, so a query token always meets the same index in a document.

The collection's sparse vector uses Qdrant's IDF modifier, so the values here are term
frequencies only (BM25-saturated and length-normalised by default; ``k1=None`` gives raw
counts); the engine multiplies in the IDF at query time.

Tokens:

- text is NFKC-normalised (full-width letters and half-width katakana folded) and
  case-folded;
- words are Unicode letter/digit runs (``_``, punctuation and spaces separate them);
  English words are Porter-stemmed ("deploying", "deployment" -> "deploy") and English
  stop words are dropped; words of other alphabetic scripts are kept whole;
- runs of Hangul, Han and kana (Korean, Chinese and Japanese, usually written without
  spaces) become overlapping character bigrams plus single characters, so "서울역"
  is found inside "내일서울역에서만나요" and "東京タワー" inside "週末に東京タワーへ".

Changing anything here changes stored vectors: bump ``VERSION`` and rebuild the
projections that use it (a new projection version, built beside the old one).
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from functools import lru_cache
from typing import Sequence

from memstream.text import CJK

__all__ = ["VERSION", "tokenize", "token_index", "sparse_vector", "stem"]

VERSION = 2  # 2: CJK is the table of memstream.text.scripts (〡-〩, 〱-〵, 〻 and 〼 became CJK)

# Defaults of the BM25 term-frequency part. avg_len is in tokens as produced here (a CJK
# character counts about twice: unigram + bigram); chat turns and memories are short.
K1 = 1.2
B = 0.75
AVG_LEN = 64.0
MAX_TOKEN_LEN = 64  # longer "words" are blobs (base64, hashes): not useful as keywords

_WORD = re.compile(r"[^\W_]+")

# A word's runs of Korean, Chinese and Japanese (scripts written without spaces between
# words; their code points: ``memstream.text.scripts``) and of anything else.
_SCRIPT_RUN = re.compile(f"([{CJK}]+)|[^{CJK}]+")


# English stop words: function words that carry no topic (a compact Lucene/NLTK-like list,
# including the fragments left by splitting contractions: "don't" -> "don", "t").
_STOP = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here
    hers herself him himself his how i if in into is isn it its itself just ll m ma me
    mightn more most mustn my myself needn no nor not now o of off on once only or other
    our ours ourselves out over own re s same shan she should shouldn so some such t than
    that the their theirs them themselves then there these they this those through to too
    under until up very ve was wasn we were weren what when where which while who whom why
    will with won wouldn y you your yours yourself yourselves
    """.split()
)


def tokenize(text: str) -> list[str]:
    """The index tokens of ``text``, in order, with repeats (deterministic)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group()
        if word.isascii():  # the common case: one non-CJK word
            token = _word_form(word)
            if token is not None:
                tokens.append(token)
            continue
        # split a run like "iphone15を買った" where the script class changes
        for run in _SCRIPT_RUN.finditer(word):
            if run.group(1):
                _cjk_tokens(run.group(1), tokens)
            else:
                _word_token(run.group(), tokens)
    return tokens


def _cjk_tokens(run: str, out: list[str]) -> None:
    out.extend(run)  # unigrams: single-character words (집, 水, 猫) stay findable
    out.extend(run[i : i + 2] for i in range(len(run) - 1))


def _word_token(word: str, out: list[str]) -> None:
    token = _word_form(word)
    if token is not None:
        out.append(token)


@lru_cache(maxsize=1 << 17)
def _word_form(word: str) -> str | None:
    """The index token of one non-CJK word (stemmed), or None for a stop word or a blob.
    Cached: chat text repeats its words, and stemming is the costly part of indexing."""
    if word in _STOP or len(word) > MAX_TOKEN_LEN:
        return None
    if word.isascii() and word.isalpha():
        return stem(word)
    return word


@lru_cache(maxsize=1 << 17)
def token_index(token: str) -> int:
    """The sparse dimension of a token: CRC-32 of its UTF-8 bytes (a uint32)."""
    return zlib.crc32(token.encode("utf-8"))


def sparse_vector(
    text: str, *, k1: float | None = K1, b: float = B, avg_len: float = AVG_LEN
) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of ``text``, indices ascending; empty text gives ``([], [])``.

    Values are BM25 term-frequency weights ``tf*(k1+1) / (tf + k1*(1-b+b*len/avg_len))``,
    or raw counts with ``k1=None``. For a query every term gets the same factor, so the
    length part never changes a query's ranking. Tokens whose CRC-32 collide share one
    dimension (their counts add up).
    """
    return weights(tokenize(text), k1=k1, b=b, avg_len=avg_len)


def weights(
    tokens: Sequence[str], *, k1: float | None = K1, b: float = B, avg_len: float = AVG_LEN
) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of already tokenized text (see ``sparse_vector``)."""
    counts = Counter(token_index(t) for t in tokens)
    indices = sorted(counts)
    if k1 is None:
        return indices, [float(counts[i]) for i in indices]
    norm = k1 * (1.0 - b + b * len(tokens) / avg_len)
    return indices, [counts[i] * (k1 + 1.0) / (counts[i] + norm) for i in indices]


# --- Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", 1980, with the
# --- two departures of his reference C implementation, "bli"->"ble" and "logi"->"log",
# --- and the step-1c rule of his later English (Porter2) stemmer).


def _cons(w: str, i: int) -> bool:
    ch = w[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _m(stem_: str) -> int:
    """The measure m of [C](VC)^m[V]."""
    n, i, length = 0, 0, len(stem_)
    while i < length and _cons(stem_, i):
        i += 1
    while i < length:
        while i < length and not _cons(stem_, i):
            i += 1
        if i >= length:
            break
        while i < length and _cons(stem_, i):
            i += 1
        n += 1
    return n


def _has_vowel(stem_: str) -> bool:
    return any(not _cons(stem_, i) for i in range(len(stem_)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    """*o: ends consonant-vowel-consonant, the last not w, x or y."""
    n = len(w)
    return (
        n >= 3
        and _cons(w, n - 1)
        and not _cons(w, n - 2)
        and _cons(w, n - 3)
        and w[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
    ("izer", "ize"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
    ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
    ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
    ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"), ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
    ("ful", ""), ("ness", ""),
)
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
    "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
)


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    # the longest matching suffix decides; if its condition fails nothing else is tried
    best = max((r for r in rules if w.endswith(r[0])), key=lambda r: len(r[0]), default=None)
    if best is None:
        return w
    base = w[: len(w) - len(best[0])]
    return base + best[1] if _m(base) > min_m - 1 else w


def stem(word: str) -> str:
    """Porter stem of a lower-case ASCII word ("deploying", "deployment" -> "deploy")."""
    w = word
    if len(w) <= 2:
        return w
    # step 1a
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("ss"):
        pass
    elif w.endswith("s"):
        w = w[:-1]
    # step 1b
    if w.endswith("eed"):
        if _m(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_cons(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _m(w) == 1 and _cvc(w):
                    w += "e"
                break
    # step 1c, with Porter2's condition (y after a consonant) so that "deploy",
    # "deploying" and "deployment" share a stem ("happy" -> "happi" as before)
    if w.endswith("y") and _cons(w, len(w) - 2) and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    # steps 2 and 3 (m > 0)
    w = _replace(w, _STEP2, 1)
    w = _replace(w, _STEP3, 1)
    # step 4 (m > 1); "ion" only after s or t
    suffix = max((s for s in _STEP4 if w.endswith(s)), key=len, default=None)
    if suffix is not None:
        base = w[: -len(suffix)]
        if _m(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
            w = base
    # step 5a
    if w.endswith("e"):
        base = w[:-1]
        m = _m(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    # step 5b
    if _m(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w
