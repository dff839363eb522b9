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
  English words are stemmed by Snowball's English (Porter2) stemmer, through PyStemmer
  ("deploying", "deployment" -> "deploy") and English stop words are dropped; words of
  other alphabetic scripts are kept whole;
- runs of Hangul, Han and kana (Korean, Chinese and Japanese, usually written without
  spaces) become overlapping character bigrams plus single characters, so "서울역"
  is found inside "내일서울역에서만나요" and "東京タワー" inside "週末に東京タワーへ".

Changing anything here changes stored vectors: bump ``VERSION``. Every point records the
``VERSION`` that made its sparse vector (payload ``sparse_version``, written by
``memstream.projections.vector``), so points made by an older one can be found and
re-indexed; until then only the words whose tokens changed miss them by keyword.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import zlib
from collections import Counter
from functools import lru_cache
from typing import Sequence

import Stemmer

from memstream.text import CJK

__all__ = ["VERSION", "tokenize", "token_index", "sparse_vector", "stem"]

# 1: Porter (1980) with Porter2's step 1c and sparse's own CJK table; 2: Snowball English
# (Porter2) through PyStemmer, and CJK as memstream.text.scripts has it (〡-〩, 〱-〵, 〻 and
# 〼 became CJK)
VERSION = 2

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


def sparse_vector(text: str, *, k1: float | None = K1, b: float = B, avg_len: float = AVG_LEN) -> tuple[list[int], list[float]]:
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


# Snowball's English stemmer in C (PyStemmer): ~0.3 us a word against ~8 us for the
# pure-Python Porter it replaces. A Stemmer object is not thread-safe: one per thread.
# Its own cache is off: ``_word_form`` caches the whole token.
_stemmers = threading.local()


def stem(word: str) -> str:
    """Snowball English (Porter2) stem of a lower-case word ("deploying", "deployment" -> "deploy")."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = Stemmer.Stemmer("english", 0)
    stemmed: str = stemmer.stemWord(word)
    return stemmed
