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

After the cut, the ``LATE_KEEP`` the cross-encoder scored are ordered by a learned linear
score (``learned_cut``) rather than the hand-weighted sum: ``LEARNED_WEIGHTS`` over the
``LEARNED_FEATURES`` of each candidate (``learned_features``: its fused, late and
cross-encoder scores min-max normalised, the logit itself and through a sigmoid, its place
in each order, how many of the cross-encoder's best five share its session, its length).
The weights are a pairwise logistic model (every gold turn against every other candidate
of its question) fit on LoCoMo's dev split by ``memstream bench rerank-fit`` from the
candidates the dev grid stored; left out one conversation at a time, it beat the hand sum
question by question (any@10 89.1 against 88.2, +11 -2, p 0.02; all@10 76.8 against 76.4),
for the same pairs; on test 89.7 / 75.5 against 88.7 / 75.1 (BENCHMARKS.md, "A learned order
for the rerank"). The hand sum (``rerank`` at ``LATE_CE_WEIGHT``) stays the order with
``ReadOps.learned_rerank`` off, what the bench pairs it with.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from memstream.projections import CrossEncoder
from memstream.query.protocol import RERANK_CANDIDATES

__all__ = [
    "CE_WEIGHT",
    "FUSIONS",
    "LATE_CE_WEIGHT",
    "LATE_KEEP",
    "LATE_WEIGHT",
    "LEARNED_FEATURES",
    "LEARNED_WEIGHTS",
    "combine",
    "cut_order",
    "learned_cut",
    "learned_features",
    "rerank",
]

CE_WEIGHT = 0.6  # the cross-encoder's share of the final score
LATE_KEEP = 20  # of the candidates ordered by the late interaction, those the cross-encoder scores
LATE_CE_WEIGHT = 0.5  # the cross-encoder's share after the late interaction's cut
# a passage is cut to this many characters before it is scored: more than the pair's tokens
# hold (the cross-encoder truncates them), and within what it accepts
PASSAGE_CHARS = 4096
LATE_WEIGHT = 0.6  # the late-interaction score's share in its order (the prefetch's, ``memstream.query.late``, and the cut's)

# the learned order of the late cut's best LATE_KEEP: one weight a feature (``learned_features``),
# fit on LoCoMo dev by `memstream bench rerank-fit` (a pairwise logistic model, L2 0.003)
LEARNED_FEATURES = (
    "fused",  # the fused score, min-max over the cut's candidates
    "late",  # the late-interaction score (maxsim), min-max over them
    "late_order",  # the cut's own score (fused and maxsim at LATE_WEIGHT), min-max over them
    "ce",  # the cross-encoder's logit, min-max over the scored
    "ce_logit",  # the logit itself, / 10
    "fused_place",  # 1 / (1 + place in the ranking's order)
    "late_place",  # 1 / (1 + place in the cut's order)
    "ce_place",  # 1 / (1 + place in the cross-encoder's order)
    "ce_probability",  # the logit through a sigmoid
    "same_session",  # the share of the cross-encoder's best SESSION_OF (others) in the candidate's session
    "length",  # log(1 + characters) / 6
)
LEARNED_WEIGHTS = (1.6, 0.37, 0.93, 0.77, 0.96, 0.33, 0.47, 0.59, 0.39, 0.77, 1.06)
SESSION_OF = 5


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
    fused: Sequence[float] | np.ndarray, logits: Sequence[float] | np.ndarray, weight: float = CE_WEIGHT, fusion: str = "minmax"
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
    return (_by_final(head, final) + tail)[:k]


def _by_final(items: list[dict[str, Any]], final: np.ndarray) -> list[dict[str, Any]]:
    """``items`` ordered by their ``final`` scores, best first (ties in their order), each
    item's ``score`` set to its final score, rounded."""
    out = []
    for i in np.argsort(-final, kind="stable"):
        item = items[int(i)]
        item["score"] = round(float(final[int(i)]), 6)
        out.append(item)
    return out


def cut_order(fused: Sequence[float] | np.ndarray, late: Sequence[float] | np.ndarray, weight: float = LATE_WEIGHT) -> np.ndarray:
    """The late interaction's order (the prefetch's, and the rerank's cut): the candidates'
    indices by ``combine`` of their fused and late-interaction scores at ``weight``, best
    first (ties in the ranking's order)."""
    return np.argsort(-combine(fused, late, weight), kind="stable")


def learned_features(
    fused: Sequence[float] | np.ndarray,
    late: Sequence[float] | np.ndarray,
    logits: Sequence[float] | np.ndarray,
    sessions: Sequence[object],
    lengths: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """The cut's order of the candidates (indices, best first, all of them) and the
    ``LEARNED_FEATURES`` (one row each) of its first ``len(logits)``, whose cross-encoder
    logits ``logits`` are (in that order). ``fused`` and ``late`` are every candidate's, in
    the ranking's order; ``sessions`` and ``lengths`` (characters) the scored ones'."""
    f, lat = np.asarray(fused, dtype=np.float64), np.asarray(late, dtype=np.float64)
    ce = np.asarray(logits, dtype=np.float64)
    n = ce.size
    if f.shape != lat.shape or n > f.size or len(sessions) != n or len(lengths) != n:
        raise ValueError(f"{f.size} fused, {lat.size} late, {n} logits, {len(sessions)} sessions, {len(lengths)} lengths")
    cut = combine(f, lat, LATE_WEIGHT)
    order = np.argsort(-cut, kind="stable")  # cut_order, with the cut's scores kept
    top = order[:n]
    if n == 0:
        return order, np.zeros((0, len(LEARNED_FEATURES)))
    ce_place = np.empty(n)
    ce_order = np.argsort(-ce, kind="stable")
    ce_place[ce_order] = np.arange(n)
    best = [int(j) for j in ce_order[:SESSION_OF]]
    # a candidate of no session (a memory written outside one) shares none
    same = np.array([sum(1 for j in best if j != i and s and sessions[j] == s) for i, s in enumerate(sessions)])
    rows = np.column_stack(
        [
            _minmax(f)[top],
            _minmax(lat)[top],
            _minmax(cut)[top],
            _minmax(ce),
            ce / 10.0,
            1.0 / (1.0 + top),
            1.0 / (1.0 + np.arange(n)),
            1.0 / (1.0 + ce_place),
            1.0 / (1.0 + np.exp(-ce)),
            same / SESSION_OF,
            np.log1p(np.asarray(lengths, dtype=np.float64)) / 6.0,
        ]
    )
    return order, rows


def learned_cut(
    query: str,
    results: list[dict[str, Any]],
    late: Sequence[float] | np.ndarray,
    k: int,
    encoder: Callable[[], CrossEncoder],
    keep: int = LATE_KEEP,
    weights: Sequence[float] = LEARNED_WEIGHTS,
) -> list[dict[str, Any]]:
    """The top ``k`` of ``results`` (the ranking's candidates, best first, each with its
    late-interaction score in ``late``): the cut's best ``keep`` scored by the cross-encoder
    and ordered by ``weights`` over their ``learned_features``, then the others in the cut's
    order. Each scored item's ``score`` is its learned score, rounded. ``RerankerError``
    (from ``encoder`` or its ``score``) when the cross-encoder cannot."""
    fused = [float(item.get("score") or 0.0) for item in results]
    if len(results) != len(late):
        raise ValueError(f"{len(results)} candidates for {len(late)} late scores")
    order = cut_order(fused, late)
    head = [results[int(i)] for i in order[:keep]]
    logits = encoder().score(query, [str(item.get("text", ""))[:PASSAGE_CHARS] for item in head])
    _, rows = learned_features(
        fused, late, logits, [item.get("session") for item in head], [len(str(item.get("text", ""))) for item in head]
    )
    final = rows @ np.asarray(weights, dtype=np.float64)
    return (_by_final(head, final) + [results[int(i)] for i in order[keep:]])[:k]
