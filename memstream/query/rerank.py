"""The cross-encoder rerank of a search's top candidates (a request's ``rerank`` option).

The ranking (``memstream.query.ranking``) finds the candidates; where the caller can wait
(the agent's ``memstream_search``, the CLI's ``memstream search``; not the warm-up after a
turn, whose recall stands in for the next prefetch and shares its one thread) the best
``candidates`` of them are scored by a cross-encoder
(``memstream.projections.CrossEncoder``) against the question, and ordered by

    (1 - CE_WEIGHT) * fused + CE_WEIGHT * cross-encoder

each min-max normalised over the candidates (the fused score is the ranking's shown
score; ``FUSIONS`` also has the logit through a sigmoid and reciprocal-rank fusion, which
the bench's dev grid tries). Never on the synchronous prefetch: 40 pairs cost several
hundred milliseconds on two cores, where prefetch has 50 (the cross-encoder's batches of 4
take half the time of the 16 they were: BENCHMARKS.md, "The rerank's cost"). The candidate
count and the weight were measured on LoCoMo's dev split (BENCHMARKS.md, "Cross-encoder
rerank on the tool-search path" and "The rerank's cost"): the best 40 at weight 0.6 beat
the best 30 at 0.7 question by question (all@10 +14 -4, sign test p 0.031, no category
worse; on test the two are even, +4 -4); the cross-encoder alone loses to the fused
ranking; 20 candidates lose multi-hop questions (all@10 +2 -10 against 30, p 0.039); the
turns beside the best candidates, scored as extra candidates, changed nothing (within 0.3
points). The cost is the pair count: a reranked search near idle, p95 505 ms with 40, 326 ms
with 30.

Where the late interaction is on (``memstream.query.late``), the best 40 are first ordered by
it (the prefetch's ``combine`` of fused and maxsim, ``LATE_WEIGHT``), and only its best
``LATE_KEEP`` (20) go to the cross-encoder, at ``LATE_CE_WEIGHT`` (0.5); the other 20 follow
in the late order. Half the pairs, for the same recall on LoCoMo dev (BENCHMARKS.md, "The
late interaction as the rerank's first cut"). ``ReadOps`` makes the cut; a late model that
fails leaves the cross-encoder over all 40.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from memstream.projections import CrossEncoder
from memstream.query.protocol import RERANK_CANDIDATES

__all__ = ["CE_WEIGHT", "FUSIONS", "LATE_CE_WEIGHT", "LATE_KEEP", "combine", "rerank"]

CE_WEIGHT = 0.6  # the cross-encoder's share of the final score
LATE_KEEP = 20  # of the candidates ordered by the late interaction, those the cross-encoder scores
LATE_CE_WEIGHT = 0.5  # the cross-encoder's share after the late interaction's cut
# a passage is cut to this many characters before it is scored: more than the pair's tokens
# hold (the cross-encoder truncates them), and within what it accepts
PASSAGE_CHARS = 4096


def _minmax(values: np.ndarray) -> np.ndarray:
    lo, hi = float(values.min()), float(values.max())
    return (values - lo) / (hi - lo) if hi > lo else np.ones_like(values)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Reciprocal-rank scores (``1 / (RRF_K + rank)``, rank 1 the highest value; ties by position)."""
    order = np.argsort(-values, kind="stable")
    out = np.empty_like(values)
    out[order] = 1.0 / (RRF_K + np.arange(1, values.size + 1))
    return out


RRF_K = 60  # reciprocal-rank fusion's constant (the usual one)
# how the fused score and the cross-encoder logit are put on one scale before they are weighed
FUSIONS: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "minmax": lambda f, c: (_minmax(f), _minmax(c)),  # each min-max normalised over the candidates
    "sigmoid": lambda f, c: (_minmax(f), 1.0 / (1.0 + np.exp(-c))),  # the logit as a probability
    "rank": lambda f, c: (_ranks(f), _ranks(c)),  # reciprocal ranks (weighted RRF)
}


def combine(
    fused: Sequence[float], logits: Sequence[float] | np.ndarray, weight: float = CE_WEIGHT, fusion: str = "minmax"
) -> np.ndarray:
    """The final score of each candidate: the weighted sum of its fused score and its
    cross-encoder logit, each put on one scale by ``fusion`` (``FUSIONS``; by default each
    min-max normalised over the candidates, in [0, 1])."""
    f = np.asarray(fused, dtype=np.float64)
    c = np.asarray(logits, dtype=np.float64)
    if f.shape != c.shape:
        raise ValueError(f"{f.shape[0]} fused scores for {c.shape[0]} cross-encoder scores")
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {sorted(FUSIONS)}, got {fusion!r}")
    if f.size == 0:
        return f
    a, b = FUSIONS[fusion](f, c)
    return (1.0 - weight) * a + weight * b


def rerank(
    query: str,
    results: list[dict[str, Any]],
    k: int,
    encoder: Callable[[], CrossEncoder],
    candidates: int = RERANK_CANDIDATES,
    weight: float = CE_WEIGHT,
) -> list[dict[str, Any]]:
    """The top ``k`` of ``results`` (the ranking's, best first) after the best
    ``candidates`` of them are reordered by ``combine``; each reranked item's ``score`` is
    its final score, rounded. The ones past ``candidates`` keep their order after them.
    ``RerankerError`` (from ``encoder`` or its ``score``) when the cross-encoder cannot."""
    head, tail = results[:candidates], results[candidates:]
    if len(head) < 2:
        return results[:k]
    logits = encoder().score(query, [str(item.get("text", ""))[:PASSAGE_CHARS] for item in head])
    final = combine([float(item.get("score") or 0.0) for item in head], logits, weight)
    order = np.argsort(-final, kind="stable")
    out = []
    for i in order:
        item = head[int(i)]
        item["score"] = round(float(final[int(i)]), 6)
        out.append(item)
    return (out + tail)[:k]
