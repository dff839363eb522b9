"""The prefetch's ranking weights tried on one index (``--prefetch-grid``, dev only).

The prefetch never reranks, so a change to its recall is a change to the ranking's own
weights (``memstream.query.ranking``: the dense side's share, the author lift, the
neighbour lifts, the recency lift, the candidate count). Each point sets one or two of them on the
module the in-process query server reads, asks every question on the prefetch path again,
and is paired question by question with the defaults' rows of the same run; the defaults
are put back after each point (and if a point fails).
"""

from __future__ import annotations

from typing import Any

from memstream.bench.locomo.paths import Asker, Rows, grid_point, run_path

# one weight moved at a time from the defaults (``ranking``'s module constants), then the
# neighbour lifts together and the author lift's neighbourhood (the second round on dev)
PREFETCH_POINTS: tuple[dict[str, float], ...] = (
    {"DENSE_WEIGHT": 0.3},
    {"DENSE_WEIGHT": 0.5},
    {"AUTHOR_WEIGHT": 0.2},
    {"AUTHOR_WEIGHT": 0.6},
    {"NEIGHBOUR_WEIGHT": 0.35},
    {"NEIGHBOUR_WEIGHT": 0.65},
    {"SECOND_NEIGHBOUR_WEIGHT": 0.2},
    {"SECOND_NEIGHBOUR_WEIGHT": 0.5},
    {"RECENCY_WEIGHT": 0.0},
    {"RECENCY_WEIGHT": 0.3},
    {"RECALL_CANDIDATES": 30},
    {"NEIGHBOUR_WEIGHT": 0.25},
    {"NEIGHBOUR_WEIGHT": 0.4},
    {"NEIGHBOUR_WEIGHT": 0.35, "SECOND_NEIGHBOUR_WEIGHT": 0.25},
    {"NEIGHBOUR_WEIGHT": 0.4, "SECOND_NEIGHBOUR_WEIGHT": 0.25},
    {"AUTHOR_WEIGHT": 0.3},
    {"AUTHOR_WEIGHT": 0.5},
    {"RECALL_CANDIDATES": 20},
)


def _score_max(ranking: Any) -> float:
    """``ranking.SCORE_MAX`` from the weights as they are set now (the same expression)."""
    lifts = 1.0 + ranking.NEIGHBOUR_WEIGHT + ranking.SECOND_NEIGHBOUR_WEIGHT
    return float((1.0 + ranking.AUTHOR_WEIGHT) * lifts + ranking.RECENCY_WEIGHT)


def prefetch_grid(questions: list[dict[str, Any]], ask: Asker, dia_of: Any, against: Rows, k: int = 10) -> list[dict[str, Any]]:
    """Every point of ``PREFETCH_POINTS`` on the prefetch path, paired with ``against`` (the
    defaults' prefetch rows of the same run), with the path's p50 / p95."""
    from memstream.query import ranking

    names = {name for point in PREFETCH_POINTS for name in point} | {"SCORE_MAX"}
    defaults = {name: getattr(ranking, name) for name in names}
    if abs(_score_max(ranking) - defaults["SCORE_MAX"]) > 1e-9:
        raise RuntimeError("ranking.SCORE_MAX is no longer the expression prefetch_grid recomputes")
    out = []
    for point in PREFETCH_POINTS:
        try:
            for name, value in point.items():
                setattr(ranking, name, type(defaults[name])(value))
            ranking.SCORE_MAX = _score_max(ranking)
            rows, figures = run_path("prefetch", questions, ask, dia_of, k)
        finally:
            for name, value in defaults.items():
                setattr(ranking, name, value)
        out.append({**grid_point(rows, against, k, **point), "latency_ms": figures["latency_ms"]})
    return out
