"""The locomo bench's read paths: the same questions asked the way each caller asks them.

- ``prefetch``: the synchronous prefetch, op ``recall`` (every kind, the hot tier), k 10;
- ``search``: the agent's ``memstream_search`` and the CLI's ``memstream search``, op
  ``search`` (kind ``all``, as the tool's default), k 10;
- ``search+rerank``: the same with ``rerank`` (the cross-encoder over the best
  ``rerank_candidates``);
- ``prefetch-ranking``: ``prefetch`` with the late interaction off (``memstream.query.late``):
  the ranking's own order, what ``prefetch`` answered before it (the run turns it off around
  this path, ``without_late``);
- ``search+rerank-ce40``: ``search+rerank`` with the late interaction off: the cross-encoder
  over all the best 40, without the late interaction's first cut to 20 (what the tool's
  search answered before it), paired against ``search+rerank``;
- ``search+rerank-hand``: ``search+rerank`` with the learned order off: the late cut's best 20
  ordered by the hand sum of fused score and logit (``LATE_CE_WEIGHT``, what the tool's search
  answered before ``LEARNED_WEIGHTS``), paired against ``search+rerank``.

Each path is scored (``recall_metrics``), timed around the request (warm, one client) and
paired per question against ``prefetch``. ``rerank_grid`` tunes the rerank on one set of
candidates: the best 50 of ``search`` scored once by the cross-encoder, then every candidate
count and weight combined with ``memstream.query.rerank.combine`` (the server's own rule).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import msgspec

from memstream.bench.locomo.scoring import count_tokens, paired, question_key, recall_metrics
from memstream.bench.stats import percentile
from memstream.query import Request

Rows = list[tuple[dict[str, Any], list[str]]]
# the request a path sends for a question (the tenant, agent and k filled in by the caller)
PATHS: dict[str, dict[str, Any]] = {
    "prefetch": {"op": "recall"},
    "search": {"op": "search", "kind": "all"},
    "search+rerank": {"op": "search", "kind": "all", "rerank": True},
    "prefetch-ranking": {"op": "recall"},
    "search+rerank-ce40": {"op": "search", "kind": "all", "rerank": True},
    "search+rerank-hand": {"op": "search", "kind": "all", "rerank": True},
}
# the paths asked with the late interaction off, each with the path it is the baseline of
WITHOUT_LATE = {"prefetch-ranking": "prefetch", "search+rerank-ce40": "search+rerank"}
# the paths asked with the rerank's learned order off (the hand sum), each with the path it is the baseline of
WITHOUT_LEARNED = {"search+rerank-hand": "search+rerank"}
GRID_CANDIDATES = (20, 30, 40, 50)
GRID_WEIGHTS = (0.3, 0.5, 0.6, 0.7, 0.85, 1.0)
GRID_NEIGHBOUR_WEIGHTS = (0.5, 0.7)
GRID_NEIGHBOURS_OF = (3, 5, 10)  # the grid's neighbour turns: of the best m candidates

Asker = Callable[[Request], tuple[list[dict[str, Any]], float]]  # request -> (items, ms)


def request_for(path: str, q: dict[str, Any], k: int, candidates: int | None = None) -> Request:
    """The path's typed request for a question (checked by the protocol's own types)."""
    request = {**PATHS[path], "tenant": "bench", "agent": q["sample_id"], "scope": "current", "query": q["question"], "k": k}
    if request.get("rerank") and candidates is not None:
        request["rerank_candidates"] = candidates
    typed: Request = msgspec.convert(request, Request)
    return typed


def run_path(
    path: str, questions: list[dict[str, Any]], ask: Asker, dia_of: Callable[[str], str], k: int, candidates: int | None = None
) -> tuple[Rows, dict[str, Any]]:
    """The path's rows (question, dia ids retrieved) and its figures."""
    for q in questions[:10]:  # warm the path (and load the cross-encoder)
        ask(request_for(path, q, k, candidates))
    rows: Rows = []
    latencies, tokens5, tokens10 = [], [], []
    for q in questions:
        items, took = ask(request_for(path, q, k, candidates))
        rows.append((q, [dia_of(str(item.get("id"))) for item in items]))
        latencies.append(took)
        texts = [str(item.get("text", "")) for item in items]
        tokens5.append(count_tokens(texts[:5]))
        tokens10.append(count_tokens(texts[:10]))
    lat = sorted(latencies)
    return rows, {
        "metrics": recall_metrics(rows),
        "latency_ms": {"p50": round(statistics.median(lat), 1), "p95": round(percentile(lat, 0.95), 1), "n": len(lat)},
        "injected_tokens": {"at_5_mean": round(statistics.mean(tokens5), 1), "at_10_mean": round(statistics.mean(tokens10), 1)},
    }


def run_paths(
    questions: list[dict[str, Any]],
    ask: Asker,
    dia_of: Callable[[str], str],
    k: int,
    candidates: int | None = None,
    paths: tuple[str, ...] = tuple(PATHS),
    late: Callable[[bool], None] | None = None,
    learned: Callable[[bool], None] | None = None,
) -> tuple[dict[str, Rows], dict[str, Any]]:
    """Every path's rows and figures, each paired against ``prefetch`` (when it runs);
    ``late(on)`` turns the server's late interaction on or off around each path, and
    ``learned(on)`` the rerank's learned order."""
    rows: dict[str, Rows] = {}
    out: dict[str, Any] = {}
    for path in paths:
        if late is not None:
            late(path not in WITHOUT_LATE)
        if learned is not None:
            learned(path not in WITHOUT_LEARNED)
        rows[path], out[path] = run_path(path, questions, ask, dia_of, k, candidates)
    if late is not None:
        late(True)
    if learned is not None:
        learned(True)
    if "prefetch" in rows:
        for path in paths:
            if path != "prefetch":
                out[path]["paired_with_prefetch"] = paired(rows["prefetch"], rows[path], k)
    for path, of in {**WITHOUT_LATE, **WITHOUT_LEARNED}.items():
        if path in rows and of in rows and of != "prefetch":
            out[of][f"paired_with_{path}"] = paired(rows[path], rows[of], k)
    return rows, out


def grid_point(rows: Rows, against: Rows, k: int, **setting: Any) -> dict[str, Any]:
    """A grid point: its setting, recall (cats 1-4, multi-hop) and its sign test against ``against``."""
    metrics = recall_metrics(rows)
    return {
        **setting,
        "cats_1_4": metrics["cats_1_4"],
        "multi_hop": metrics["per_category"]["1 multi-hop"],
        "paired": paired(against, rows, k)["cats_1_4"],
    }


def rerank_grid(
    questions: list[dict[str, Any]],
    ask: Asker,
    dia_of: Callable[[str], str],
    against: Rows,
    k: int = 10,
    neighbours: Callable[[dict[str, Any], str], list[tuple[str, str]]] | None = None,
) -> dict[str, Any]:
    """Recall of every (candidate count, weight) of the rerank on the same candidates (the
    best 50 of ``search``, scored once; ``against``: the rows each is paired with).

    ``neighbours`` (question, dia id -> the (dia id, text) of the turns beside it in its
    session): the turns beside the best ``max(GRID_NEIGHBOURS_OF)`` candidates that are not
    among the 50 are scored too, and each (candidates, neighbours of the best m) point
    reranks the candidates and those neighbours together, a neighbour entering at the
    candidates' lowest fused score (``neighbour_points``)."""
    from memstream.projections import shared_cross_encoder
    from memstream.query import FUSIONS, PASSAGE_CHARS, combine

    encoder = shared_cross_encoder()
    scored = []
    started = time.perf_counter()
    for q in questions:
        items, _ = ask(request_for("search", q, max(GRID_CANDIDATES)))
        found = encoder.score(q["question"], [str(item.get("text", ""))[:PASSAGE_CHARS] for item in items])
        scored.append((q, items, [float(x) for x in found]))
    out: dict[str, Any] = {"scoring_s": round(time.perf_counter() - started, 1), "points": []}
    extra: dict[str, list[list[Any]]] = {}
    if neighbours is not None:
        started = time.perf_counter()
        for q, items, _ in scored:
            seen = {dia_of(str(i.get("id"))) for i in items}
            near: dict[str, str] = {}
            for item in items[: max(GRID_NEIGHBOURS_OF)]:
                for dia, text in neighbours(q, dia_of(str(item.get("id")))):
                    if dia not in seen:
                        near.setdefault(dia, text)
            logits: Any = encoder.score(q["question"], [t[:PASSAGE_CHARS] for t in near.values()]) if near else []
            extra[question_key(q)] = [[dia, float(x)] for dia, x in zip(near, logits)]
        out["neighbour_scoring_s"] = round(time.perf_counter() - started, 1)
    for fusion in FUSIONS:
        for n in GRID_CANDIDATES:
            for weight in GRID_WEIGHTS:
                rows: Rows = []
                for q, items, logits in scored:
                    head, tail = items[:n], items[n:]
                    if len(head) >= 2:
                        final = combine([float(i.get("score") or 0.0) for i in head], logits[:n], weight, fusion)
                        head = [head[i] for i in sorted(range(len(head)), key=lambda i: -final[i])]
                    rows.append((q, [dia_of(str(i.get("id"))) for i in (head + tail)[:k]]))
                out["points"].append(grid_point(rows, against, k, fusion=fusion, candidates=n, weight=weight))
    if neighbours is not None:
        out["neighbour_points"] = neighbour_points(scored, extra, neighbours, dia_of, against, k)
    # what was scored, per question (the dia id, fused score and logit of each candidate, best
    # first): other rules can be tried on it without scoring again
    out["scored"] = {
        question_key(q): [[dia_of(str(i.get("id"))), float(i.get("score") or 0.0), logit] for i, logit in zip(items, logits)]
        for q, items, logits in scored
    }
    out["scored_neighbours"] = extra
    return out


def neighbour_points(
    scored: list[tuple[dict[str, Any], list[dict[str, Any]], list[float]]],
    extra: dict[str, list[list[Any]]],
    neighbours: Callable[[dict[str, Any], str], list[tuple[str, str]]],
    dia_of: Callable[[str], str],
    against: Rows,
    k: int,
) -> list[dict[str, Any]]:
    """The grid's points with neighbour turns: for each candidate count n and m of
    ``GRID_NEIGHBOURS_OF``, the best n and the turns beside the best m (those among the 50
    with their own fused score, the others at the n's lowest) reranked together (min-max)."""
    from memstream.query import combine

    points = []
    for n in GRID_CANDIDATES[:3]:
        for m in GRID_NEIGHBOURS_OF:
            for weight in GRID_NEIGHBOUR_WEIGHTS:
                rows: Rows = []
                for q, items, logits in scored:
                    dias = [dia_of(str(i.get("id"))) for i in items]
                    fused = [float(i.get("score") or 0.0) for i in items]
                    of = {d: (fused[j], logits[j]) for j, d in enumerate(dias)}
                    outside = {d: x for d, x in extra.get(question_key(q), [])}
                    head = dias[:n]
                    low = min(fused[:n]) if fused[:n] else 0.0
                    for d in dias[:m]:
                        for near, _ in neighbours(q, d):
                            if near not in head and (near in of or near in outside):
                                head.append(near)
                                if near not in of:
                                    of[near] = (low, outside[near])
                    if len(head) >= 2:
                        final = combine([of[d][0] for d in head], [of[d][1] for d in head], weight)
                        head = [head[i] for i in sorted(range(len(head)), key=lambda i: -final[i])]
                    rows.append((q, (head + [d for d in dias if d not in head])[:k]))
                points.append(grid_point(rows, against, k, candidates=n, neighbours_of=m, weight=weight))
    return points
