"""Late interaction on the prefetch path: the ranking's best turns and memories of a recall
reordered by their token vectors' match with the question (``memstream.projections.LatePassages``).

A cross-encoder costs about 12 ms a candidate on two cores, so the synchronous prefetch
cannot afford one (``memstream.query.rerank`` serves the tool search). A late-interaction
model reads each passage once, when it is written (the dense stage stores its token
vectors), so a recall pays one model call for the question (at most 32 tokens) and a few
small matrix products: about 6-7 ms of CPU. The best ``LATE_CANDIDATES`` turns and memories of the ranking
are ordered by

    (1 - LATE_WEIGHT) * fused + LATE_WEIGHT * maxsim

each min-max normalised over the candidates (``rerank.combine``); facts keep their place
first. Chosen on LoCoMo's dev split (BENCHMARKS.md, "Late interaction on the prefetch path"):
over the search path's candidates, 20 at weight 0.6 scored as well as 30 or 40 and better
than other weights; served, the prefetch's any@10 went from 85.7 to 88.0 and all@10 from
73.0 to 74.9 question by question (sign tests p 0.0004 and 0.003); on test 86.7 to 88.1.
A model that cannot load or score leaves the ranking's order (counted).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from memstream.projections import LatePassages, LateScorer
from memstream.query.rerank import LATE_WEIGHT, cut_order

__all__ = ["LATE_CANDIDATES", "LATE_WEIGHT", "late_first", "late_order", "late_scores"]

LATE_CANDIDATES = 20  # turns and memories of a recall's ranking reordered


def late_scores(questions: Sequence[str], heads: Sequence[list[dict[str, Any]]], passages: LatePassages) -> list[np.ndarray]:
    """The late-interaction score (maxsim) of each item of ``heads[i]`` with ``questions[i]``:
    one model call for the questions and one for the passages not stored; ``LateError``
    when the model cannot."""
    texts = [str(item.get("text", "")) for head in heads for item in head]
    if not texts:
        return [np.zeros(0) for _ in heads]
    queries = passages.scorer().queries(list(questions))
    vectors = iter(passages.vectors(texts))
    return [LateScorer.maxsim(query, [next(vectors) for _ in head]) for query, head in zip(queries, heads)]


def late_first(
    question: str,
    items: list[dict[str, Any]],
    passages: LatePassages,
    weight: float = LATE_WEIGHT,
    scores: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """``items`` (every kind, best first) reordered by ``combine`` of their fused score and
    their late-interaction score with ``question`` (``scores`` when already computed; the tool
    search's cut before the cross-encoder: ``memstream.query.rerank``); ``LateError`` when the
    model cannot."""
    if len(items) < 2:
        return list(items)
    if scores is None:
        (scores,) = late_scores([question], [items], passages)
    return [items[int(i)] for i in cut_order([float(item.get("score") or 0.0) for item in items], scores, weight)]


def late_order(
    questions: Sequence[str],
    ranked: Sequence[list[dict[str, Any]]],
    ks: Sequence[int],
    passages: LatePassages,
    candidates: int = LATE_CANDIDATES,
    weight: float = LATE_WEIGHT,
) -> list[list[dict[str, Any]]]:
    """Each recall's items (``ranked[i]``, the ranking's, best first, at least ``ks[i]``)
    as answered: the facts among its first ``ks[i]``, then its best ``candidates`` other
    items reordered by ``combine``, then the rest, cut to ``ks[i]``. One model call for the
    questions and one for the passages not stored; ``LateError`` when the model cannot."""
    heads = [[item for item in items if item.get("kind") != "fact"][:candidates] for items in ranked]
    wanted = [i for i, head in enumerate(heads) if len(head) > 1]
    scored = dict(zip(wanted, late_scores([questions[i] for i in wanted], [heads[i] for i in wanted], passages)))
    out = []
    for i, (items, k, head) in enumerate(zip(ranked, ks, heads)):
        if i not in scored:
            out.append(_cut(items, k, None))
            continue
        out.append(_cut(items, k, late_first(questions[i], head, passages, weight, scores=scored[i])))
    return out


def _cut(items: Sequence[dict[str, Any]], k: int, head: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    facts = [item for item in items[:k] if item.get("kind") == "fact"]
    others = [item for item in items if item.get("kind") != "fact"]
    if head is not None:
        seen = {id(item) for item in head}
        others = head + [item for item in others if id(item) not in seen]
    return (facts + others)[:k]
