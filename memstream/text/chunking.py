"""Long text into pieces that fit an embedding model's window: ``chunk(text, ...)``.

Guarantee: every chunk ``c`` satisfies ``count_tokens(c) <= max_tokens`` (with the
counter given, or the default estimate, ``memstream.text.tokens.estimate_tokens``),
chunks follow the text's order, and every non-space character of the text is in at
least one chunk. Text that already fits comes
back as one chunk; blank text gives none. Cuts prefer, in this order, a paragraph break,
a line break or the end of a sentence, a space, and only then a character (Chinese and
Japanese, written without spaces, are cut between characters; a run of letters with no
space longer than the budget, such as a base64 blob, is sliced). Each chunk after the
first repeats up to ``overlap_tokens`` of the end of the one before, whole words.
Pure and deterministic; raises ``ValueError`` for a budget below 1 or an overlap not
below the budget.

MiniLM (all-MiniLM-L6-v2) reads 256 word pieces including ``[CLS]`` and ``[SEP]``;
the default budget of 200 leaves room for the estimate's error. Pass the real counter
(``lambda s: len(tokenizer.encode(s).ids)``) to use the whole window exactly: a fixed
per-call overhead such as the two special tokens is measured once (``count_tokens("")``)
and counted once per chunk, not once per word.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import accumulate
from typing import Callable

from memstream.text.scripts import HAN_KANA
from memstream.text.tokens import estimate_tokens

__all__ = ["chunk"]

# Atoms: one Han/kana character, or a run of anything else that is not a space; each
# with the spaces after it. Chunks are cut only between atoms.
_ATOM = re.compile(f"(?:[{HAN_KANA}]|[^\\s{HAN_KANA}]+)\\s*")
_SENTENCE_END = re.compile(r"(?:[.!?…]|[。！？])[\"'”’)\]]*$")
_CLAUSE_END = re.compile(r"[,;:，、；：]$")

# Boundary strengths after an atom: higher is a better place to cut.
_CHAR, _SPACE, _CLAUSE, _SENTENCE, _PARAGRAPH = 0, 1, 2, 3, 4


@lru_cache(maxsize=1 << 16)
def _cached_estimate(atom: str) -> int:
    """``estimate_tokens`` of one atom; words recur, so most atoms are cache hits."""
    return estimate_tokens(atom)


@lru_cache(maxsize=1 << 16)
def _strength(atom: str) -> int:
    """How good a cut right after ``atom`` is (the atom carries its trailing spaces)."""
    word = atom.rstrip()
    gap = atom[len(word) :]
    if "\n" in gap:
        return _PARAGRAPH if gap.count("\n") >= 2 else _SENTENCE
    if _SENTENCE_END.search(word):
        return _SENTENCE
    if _CLAUSE_END.search(word):
        return _CLAUSE if gap or not word.isascii() else _CHAR
    return _SPACE if gap else _CHAR


def _slices(atom: str, budget: int, cost: Callable[[str], int]) -> list[str]:
    """An atom that alone exceeds ``budget``, cut into consecutive slices that fit, each
    as long as a galloping then binary search finds (one character always fits)."""
    out: list[str] = []
    start = 0
    n = len(atom)
    while start < n:
        fits, step = start + 1, max(1, budget)
        over = n + 1
        while fits < n:  # gallop: double the length until it no longer fits
            probe = min(n, start + step)
            if cost(atom[start:probe]) <= budget:
                fits = probe
                step *= 2
            else:
                over = probe
                break
        lo, hi = fits, min(over - 1, n)
        while lo < hi:  # longest prefix in [fits, over) that fits
            mid = (lo + hi + 1) // 2
            if cost(atom[start:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        out.append(atom[start:lo])
        start = lo
    return out


def chunk(
    text: str,
    max_tokens: int = 200,
    overlap_tokens: int = 20,
    count_tokens: Callable[[str], int] | None = None,
) -> list[str]:
    """``text`` cut into chunks of at most ``max_tokens`` (by ``count_tokens``, default
    ``estimate_tokens``), preferring paragraph, then sentence, then word boundaries, each
    chunk repeating up to ``overlap_tokens`` of its predecessor's end. Deterministic."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(f"overlap_tokens must be at least 0 and below max_tokens ({max_tokens}), got {overlap_tokens}")
    count = count_tokens or estimate_tokens
    text = text.strip()
    if not text:
        return []
    # A long text is measured atom by atom below (the default estimate is additive);
    # measuring it whole first would be a second full pass.
    if (count_tokens is not None or len(text) <= 8 * max_tokens) and count(text) <= max_tokens:
        return [text]

    overhead = max(0, count("")) if count_tokens is not None else 0
    budget = max_tokens - overhead
    if budget < 1:
        raise ValueError(f"max_tokens ({max_tokens}) leaves no room after the counter's overhead ({overhead})")

    def cost(s: str) -> int:
        return max(0, count(s) - overhead)

    # Atoms with their cost and the strength of the boundary after them. An atom larger
    # than what is left after an overlap is sliced, so a chunk can always make progress.
    slice_budget = max(1, budget - overlap_tokens)
    atom_cost = _cached_estimate if count_tokens is None else cost
    atoms: list[str] = _ATOM.findall(text)
    costs: list[int] = list(map(atom_cost, atoms))
    if count_tokens is None and sum(costs) <= max_tokens:
        return [text]
    # The default estimate of a chunk is at most the sum of its atoms' (each rounds up)
    # unless an atom was sliced (a slice "ab" + "12" costs less than the run "ab12").
    verify = count_tokens is not None
    if max(costs) > slice_budget:
        atoms, costs, strengths = _slice_large(atoms, costs, slice_budget, cost)
        verify = True
    else:
        strengths = list(map(_strength, atoms))
    prefix = list(accumulate(costs, initial=0))

    chunks: list[str] = []
    n = len(atoms)
    start, prev_end = 0, 0
    while True:
        end = _cut(start, prefix, strengths, budget, min_end=prev_end + 1)
        piece = "".join(atoms[start:end]).strip()
        # Not additive (a real tokenizer, or sliced atoms): shrink until it fits, giving
        # up the overlap before giving up progress.
        while verify and count(piece) > max_tokens:
            if end - 1 > max(start, prev_end):
                end -= 1
            elif start < prev_end:
                start = prev_end
            else:
                break  # one atom that fits alone by construction; nothing smaller to cut
            piece = "".join(atoms[start:end]).strip()
        if piece:
            chunks.append(piece)
        if end >= n:
            return chunks
        prev_end = end
        start = _overlap_start(start, end, costs, strengths, overlap_tokens)


def _slice_large(
    atoms: list[str], costs: list[int], limit: int, cost: Callable[[str], int]
) -> tuple[list[str], list[int], list[int]]:
    """Atoms, costs and strengths with every atom over ``limit`` cut into slices."""
    out_atoms: list[str] = []
    out_costs: list[int] = []
    strengths: list[int] = []
    for atom, c in zip(atoms, costs):
        if c <= limit:
            out_atoms.append(atom)
            out_costs.append(c)
            strengths.append(_strength(atom))
            continue
        word = atom.rstrip()
        pieces = _slices(word, limit, cost)
        pieces[-1] += atom[len(word) :]
        for i, piece in enumerate(pieces):
            out_atoms.append(piece)
            out_costs.append(cost(piece))
            strengths.append(_strength(piece) if i == len(pieces) - 1 else _CHAR)
    return out_atoms, out_costs, strengths


def _cut(start: int, prefix: list[int], strengths: list[int], budget: int, min_end: int) -> int:
    """End (exclusive) of the chunk that starts at atom ``start`` and ends at ``min_end``
    or later: the strongest boundary among those leaving the chunk at least half full,
    the latest among equals; the whole rest when it fits. ``prefix[i]`` is the cost of
    atoms ``[0, i)``."""
    n = len(prefix) - 1
    base = prefix[start]
    end = bisect_right(prefix, base + budget) - 1  # greedy: as many atoms as fit
    if end >= n:
        return n
    end = max(end, min_end, start + 1)
    first = max(min_end, bisect_left(prefix, base + budget / 2), start + 1)
    best, best_strength = end, -1
    for i in range(first, end + 1):  # cut after atom i - 1
        strength = strengths[i - 1]
        if strength >= best_strength:
            best, best_strength = i, strength
    return best


def _overlap_start(start: int, end: int, costs: list[int], strengths: list[int], overlap_tokens: int) -> int:
    """First atom of the next chunk: within ``overlap_tokens`` of ``end``, after ``start``
    (every chunk advances), at the earliest sentence start if one is in reach, else as
    far back as whole words allow."""
    k = end
    total = 0
    earliest, sentence_start = end, end
    while k - 1 > start and total + costs[k - 1] <= overlap_tokens:
        k -= 1
        total += costs[k]
        earliest = k
        if strengths[k - 1] >= _SENTENCE:
            sentence_start = k
    return sentence_start if sentence_start < end else earliest
