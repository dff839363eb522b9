"""``memstream bench rerank-fit``: the learned order of the rerank (``LEARNED_WEIGHTS`` in
``memstream.query.rerank``) fit again from stored candidates, with its cross-validated recall.

The candidates are those ``memstream bench locomo --rerank-grid --json`` stores for each
question (``rerank_grid.scored``: the best 50 of ``search``, each as dia id, fused score and
cross-encoder logit). Each candidate's late-interaction score is computed here as the product
computes it (``LateScorer``, its vectors stored as int8), then each question is ordered as the
server orders it: the late cut of the best ``candidates`` (``LATE_WEIGHT``), its best ``keep``
scored by the cross-encoder, ordered either by the hand sum (``combine`` of fused and logit at
``LATE_CE_WEIGHT``, the rule before) or by a weight vector over ``learned_features`` (the
server's own function). The weights are a pairwise logistic model: every gold turn of a
question against every other scored candidate of it, each question weighing the same, an L2
penalty ``--l2`` times the questions; Newton's method in numpy.

Generalisation is estimated by leaving one conversation out: the weights fit on the others
order the left-out one's questions; the table pairs the learned order with the hand sum
question by question (``paired``: two-sided sign tests on any@10 and all@10), at every
``--keep`` and ``--l2``. The weights fit on every question are printed for each point, to be
set as ``LEARNED_WEIGHTS``. Tune only on dev.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from memstream.bench.command import BenchError, show
from memstream.bench.locomo.data import load, unit_text
from memstream.bench.locomo.scoring import paired, question_key, recall_metrics
from memstream.core import argtypes
from memstream.query import (
    LATE_CE_WEIGHT,
    LATE_KEEP,
    LEARNED_FEATURES,
    LEARNED_WEIGHTS,
    combine,
    cut_order,
    learned_features,
)

__all__ = ["add_arguments", "fit_pairwise", "learned_rows", "run"]

Question = tuple[dict[str, Any], list[list[Any]], np.ndarray]  # question, its stored candidates, their late scores


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"comma-separated numbers >= 0, e.g. 0.001,0.003 (got {text[:40]!r})")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="the LoCoMo directory (locomo10_turns.jsonl, locomo10_qrels.jsonl)")
    parser.add_argument("--grid", required=True, help="a `bench locomo --rerank-grid --json` result (its stored candidates)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev", help="the grid's split (default: dev)")
    parser.add_argument("--candidates", type=int, default=40, help="the late cut's candidates (default: 40)")
    parser.add_argument(
        "--keep",
        type=argtypes.ascending_counts,
        default=(LATE_KEEP,),
        help=f"the cut's best scored, e.g. 20,25 (default: {LATE_KEEP})",
    )
    parser.add_argument("--l2", type=_floats, default=(0.001, 0.003, 0.01), help="L2 penalties (default: 0.001,0.003,0.01)")


def _session(dia: str) -> str:
    m = re.match(r"D(\d+):", dia)
    return m.group(1) if m else dia


def late_of_grid(data: Path, split: str, scored: dict[str, list[list[Any]]]) -> list[Question]:
    """The grid's questions of categories 1-4 with their candidates and each candidate's late score."""
    from memstream.projections import LateScorer

    turns, loaded = load(data, split)
    text = {(t["sample_id"], t["dia_id"]): unit_text(t) for t in turns}
    questions = [q for q in loaded if q["category"] != 5 and question_key(q) in scored]
    if not questions:
        raise BenchError("the grid holds no candidates of this split's questions (--grid, --split)")
    need = sorted({(q["sample_id"], c[0]) for q in questions for c in scored[question_key(q)]} & text.keys())
    scorer = LateScorer()
    vectors: dict[tuple[str, str], np.ndarray] = {}
    for start in range(0, len(need), 256):
        keys = need[start : start + 256]
        for key, v in zip(keys, scorer.passages([text[k] for k in keys])):
            vectors[key] = LateScorer.as_stored(v)  # as the dense stage stores them
    out: list[Question] = []
    for start in range(0, len(questions), 64):
        part = questions[start : start + 64]
        for q, qv in zip(part, scorer.queries([q["question"] for q in part])):
            cands = scored[question_key(q)]
            vs = [vectors.get((q["sample_id"], c[0]), np.zeros((0, qv.shape[1]), np.float32)) for c in cands]
            out.append((q, cands, LateScorer.maxsim(qv, vs).astype(np.float64)))
    for question in out:
        for c in question[1]:
            c.append(len(text.get((question[0]["sample_id"], c[0]), "")))  # the candidate's characters
    return out


def learned_rows(question: Question, candidates: int, keep: int) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """The cut's scored dia ids, their ``learned_features``, whether each is gold, and the
    dia ids the cut leaves after them (its order)."""
    q, cands, late = question
    head = cands[:candidates]
    fused = [c[1] for c in head]
    order = cut_order(fused, late[: len(head)])
    top = [head[int(i)] for i in order[:keep]]
    _, rows = learned_features(fused, late[: len(head)], [c[2] for c in top], [_session(c[0]) for c in top], [c[3] for c in top])
    gold = set(q["gold_dia_ids"])
    rest = [head[int(i)][0] for i in order[keep:]] + [c[0] for c in cands[candidates:]]
    return [c[0] for c in top], rows, np.array([c[0] in gold for c in top], dtype=np.float64), rest


def hand_order(question: Question, candidates: int, keep: int) -> list[str]:
    """The server's order before: the cut's best ``keep`` by fused and logit at ``LATE_CE_WEIGHT``."""
    q, cands, late = question
    head = cands[:candidates]
    order = cut_order([c[1] for c in head], late[: len(head)])
    top = [head[int(i)] for i in order[:keep]]
    final = combine([c[1] for c in top], [c[2] for c in top], LATE_CE_WEIGHT)
    return [top[int(i)][0] for i in np.argsort(-final, kind="stable")] + [head[int(i)][0] for i in order[keep:]]


def fit_pairwise(rows: list[tuple[np.ndarray, np.ndarray]], l2: float, iterations: int = 100) -> np.ndarray:
    """Weights of a pairwise logistic model over ``rows`` (each question's features and gold
    flags): every gold row against every other row of its question, a question's pairs
    weighing one question together; L2 penalty ``l2`` times the questions."""
    diffs, weights = [], []
    for x, y in rows:
        gold, other = x[y == 1], x[y == 0]
        if len(gold) and len(other):
            d = (gold[:, None, :] - other[None, :, :]).reshape(-1, x.shape[1])
            diffs.append(d)
            weights.append(np.full(len(d), 1.0 / len(d)))
    if not diffs:
        raise BenchError("no question with both a gold and another candidate among the scored: nothing to fit")
    z, s = np.vstack(diffs), np.concatenate(weights)
    penalty = l2 * len(diffs)
    w = np.zeros(z.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = -z.T @ (s * (1.0 - p)) + penalty * w
        hess = (z * (s * p * (1.0 - p))[:, None]).T @ z + penalty * np.eye(z.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def _ordered(ids: list[str], x: np.ndarray, rest: list[str], w: np.ndarray) -> list[str]:
    return [ids[int(i)] for i in np.argsort(-(x @ w), kind="stable")] + rest


def _point(questions: list[Question], candidates: int, keep: int, l2: float) -> dict[str, Any]:
    built = [learned_rows(question, candidates, keep) for question in questions]
    convs = sorted({q["sample_id"] for q, _, _ in questions})
    learned: list[list[str]] = [[] for _ in questions]
    for conv in convs:  # leave one conversation out
        w = fit_pairwise([(x, y) for (q, _, _), (_, x, y, _) in zip(questions, built) if q["sample_id"] != conv], l2)
        for i, ((q, _, _), (ids, x, _, rest)) in enumerate(zip(questions, built)):
            if q["sample_id"] == conv:
                learned[i] = _ordered(ids, x, rest, w)
    hand = [(question[0], hand_order(question, candidates, LATE_KEEP)) for question in questions]
    rows = [(q, order) for (q, _, _), order in zip(questions, learned)]
    full = fit_pairwise([(x, y) for _, x, y, _ in built], l2)
    return {
        "keep": keep,
        "l2": l2,
        "cv": _figures(rows),
        "paired_with_hand": paired(hand, rows)["cats_1_4"],
        "weights": [round(float(v), 2) for v in full],
    }


def _figures(rows: list[tuple[dict[str, Any], list[str]]]) -> dict[str, float]:
    m = recall_metrics(rows)
    return {
        "any@10": m["cats_1_4"]["any@10"],
        "all@10": m["cats_1_4"]["all@10"],
        "multi_hop_all@10": m["per_category"]["1 multi-hop"].get("all@10", 0.0),
    }


def fit_table(questions: list[Question], candidates: int, keeps: tuple[int, ...], l2s: tuple[float, ...]) -> dict[str, Any]:
    """The hand sum's and the kept weights' recall, and every (keep, l2)'s cross-validated point."""
    hand = [(question[0], hand_order(question, candidates, LATE_KEEP)) for question in questions]
    kept = [(question[0], _ordered(*_kept(question, candidates))) for question in questions]
    return {
        "questions": len(questions),
        "features": list(LEARNED_FEATURES),
        "hand": _figures(hand),
        "kept_weights": {
            "weights": list(LEARNED_WEIGHTS),
            "figures": _figures(kept),
            "paired_with_hand": paired(hand, kept)["cats_1_4"],
        },
        "points": [_point(questions, candidates, keep, l2) for keep in keeps for l2 in l2s],
    }


def _kept(question: Question, candidates: int) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    ids, x, _, rest = learned_rows(question, candidates, LATE_KEEP)
    return ids, x, rest, np.asarray(LEARNED_WEIGHTS, dtype=np.float64)


def _sign(p: dict[str, Any], metric: str) -> str:
    d = p[metric]
    return f"+{d['wins']} -{d['losses']} (p {d['p']:.3g})"


def format_fit(result: dict[str, Any]) -> str:
    h = result["hand"]
    lines = [
        f"rerank-fit: {result['questions']} questions (cats 1-4), features {', '.join(result['features'])}",
        f"{'order':34} {'any@10':>7} {'all@10':>7} {'mh all':>7}  any@10 vs hand       all@10 vs hand",
        f"{'hand sum (before)':34} {h['any@10']:7.1f} {h['all@10']:7.1f} {h['multi_hop_all@10']:7.1f}",
    ]
    k = result["kept_weights"]
    f, pw = k["figures"], k["paired_with_hand"]
    lines.append(
        f"{'LEARNED_WEIGHTS (in sample)':34} {f['any@10']:7.1f} {f['all@10']:7.1f} {f['multi_hop_all@10']:7.1f}  "
        f"{_sign(pw, 'any@10'):20} {_sign(pw, 'all@10')}"
    )
    for p in result["points"]:
        c, pw = p["cv"], p["paired_with_hand"]
        lines.append(
            f"{'learned, keep %d, l2 %g (CV)' % (p['keep'], p['l2']):34} {c['any@10']:7.1f} {c['all@10']:7.1f} "
            f"{c['multi_hop_all@10']:7.1f}  {_sign(pw, 'any@10'):20} {_sign(pw, 'all@10')}"
        )
        lines.append(f"    weights fit on all: {tuple(p['weights'])}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        grid = json.loads(Path(args.grid).read_text())
        scored = grid["rerank_grid"]["scored"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"--grid {args.grid}: not a `bench locomo --rerank-grid --json` result ({type(exc).__name__})") from exc
    if not 2 <= args.candidates <= 50:
        raise BenchError(f"--candidates from 2 to 50, got {args.candidates}")
    if min(args.keep) < 2 or max(args.keep) > args.candidates:
        raise BenchError(f"--keep from 2 to --candidates ({args.candidates})")
    questions = late_of_grid(Path(args.data), args.split, scored)
    result = fit_table(questions, args.candidates, args.keep, args.l2)
    return show(args, result, format_fit(result))
