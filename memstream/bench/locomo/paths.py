"""The locomo bench's read paths: the same questions asked the way each caller asks them.

- ``prefetch``: the synchronous prefetch, op ``recall`` (every kind, the hot tier), k 10;
- ``search``: the agent's ``memstream_search`` and the CLI's ``memstream search``, op
  ``search`` (kind ``all``, as the tool's default), k 10;
- ``search+rerank``: the same with ``rerank`` (the cross-encoder over the best
  ``rerank_candidates``).

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
}
GRID_CANDIDATES = (20, 30, 40, 50)
GRID_WEIGHTS = (0.3, 0.5, 0.7, 0.85, 1.0)

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
) -> tuple[dict[str, Rows], dict[str, Any]]:
    """Every path's rows and figures, each paired against ``prefetch`` (when it runs)."""
    rows: dict[str, Rows] = {}
    out: dict[str, Any] = {}
    for path in paths:
        rows[path], out[path] = run_path(path, questions, ask, dia_of, k, candidates)
    if "prefetch" in rows:
        for path in paths:
            if path != "prefetch":
                out[path]["paired_with_prefetch"] = paired(rows["prefetch"], rows[path], k)
    return rows, out


def rerank_grid(
    questions: list[dict[str, Any]], ask: Asker, dia_of: Callable[[str], str], against: Rows, k: int = 10
) -> dict[str, Any]:
    """Recall of every (candidate count, weight) of the rerank on the same candidates (the
    best 50 of ``search``, scored once; ``against``: the rows each is paired with)."""
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
                metrics = recall_metrics(rows)
                out["points"].append(
                    {
                        "fusion": fusion,
                        "candidates": n,
                        "weight": weight,
                        "cats_1_4": metrics["cats_1_4"],
                        "multi_hop": metrics["per_category"]["1 multi-hop"],
                        "paired": paired(against, rows, k)["cats_1_4"],
                    }
                )
    # what was scored, per question (the dia id, fused score and logit of each candidate, best
    # first): other rules can be tried on it without scoring again
    out["scored"] = {
        question_key(q): [[dia_of(str(i.get("id"))), float(i.get("score") or 0.0), logit] for i, logit in zip(items, logits)]
        for q, items, logits in scored
    }
    return out
