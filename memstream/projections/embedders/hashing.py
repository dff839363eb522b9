"""``HashEmbedder``: deterministic vectors by signed feature hashing, for tests.

Features of a text (NFKC, case-folded): its words, its adjacent word pairs and the
character trigrams of each word (with ``<`` ``>`` word boundaries), weighted 1, 0.5 and
0.25. Each feature adds ``±weight`` at ``blake2b(feature) mod dim`` with the sign from
another bit of the same hash; the sum is L2-normalised. So texts sharing words are
closer than texts that don't, inflections still overlap through their trigrams, and the
vectors are identical in every process and on every machine (no salted ``hash``).

No model, no dependency beyond numpy: it is no semantic model and exists so that tests
of the projections, the query side and the chunker run fast and offline.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache
from typing import Sequence

import numpy as np

from memstream.projections.embedders.base import as_text_list, l2_normalize

__all__ = ["HashEmbedder"]

VERSION = 1  # bump when the features or weights change: the name (and cache keys) change
_WORD = re.compile(r"[^\W_]+")
_WEIGHTS = {"w": 1.0, "b": 0.5, "c": 0.25}


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if h >> 63 else -1.0)


@lru_cache(maxsize=1 << 16)
def _word_features(word: str, dim: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Slots and signed weights of a word's own features: the word and its trigrams."""
    features = [("w:" + word, _WEIGHTS["w"])]
    padded = "<" + word + ">"
    features += [("c:" + padded[j : j + 3], _WEIGHTS["c"]) for j in range(len(padded) - 2)]
    slots = [_slot(f, dim) for f, _ in features]
    return tuple(i for i, _ in slots), tuple(sign * w for (_, sign), (_, w) in zip(slots, features))


class HashEmbedder:
    """Signed feature hashing of words, word pairs and character trigrams into ``dim``.

    Deterministic across processes; texts longer than ``max_tokens`` words are truncated
    (as a model would), so tests of chunking see the same limit behaviour.
    """

    def __init__(self, *, dim: int = 384, max_tokens: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"dim must be at least 8, got {dim}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.dim = int(dim)
        self.max_tokens = int(max_tokens)
        self.name = f"hash-v{VERSION}-{self.dim}"
        self.worth_caching = False  # hashing a text is cheaper than looking it up

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim}, max_tokens={self.max_tokens})"

    @staticmethod
    def _words(text: str) -> list[str]:
        return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())

    def count_tokens(self, text: str) -> int:
        """Words in ``text`` (the unit this embedder truncates by)."""
        return len(self._words(text))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 vectors, shape ``(len(texts), dim)``, in input order. Pure."""
        items = as_text_list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            words = self._words(text)[: self.max_tokens]
            if not words:
                idx, sign = _slot("e:", self.dim)  # empty text: one fixed unit vector
                out[row, idx] = sign
                continue
            slots: list[int] = []
            values: list[float] = []
            for i, w in enumerate(words):
                word_slots, word_values = _word_features(w, self.dim)
                slots.extend(word_slots)
                values.extend(word_values)
                if i:
                    idx, sign = _slot("b:" + words[i - 1] + " " + w, self.dim)
                    slots.append(idx)
                    values.append(sign * _WEIGHTS["b"])
            # weights are multiples of 1/4: the float32 sums are exact in any order
            out[row] = np.bincount(slots, weights=values, minlength=self.dim)
        return l2_normalize(out)
