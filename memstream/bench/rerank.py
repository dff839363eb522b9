"""``memstream bench rerank``: what the cross-encoder costs a reranked search, by batch size,
onnxruntime threads and a pair's token cap.

The candidates: for each of ``questions`` LoCoMo questions of the split (drawn with a fixed
seed), the best ``pairs`` turns of its conversation by BM25 (the keyword side of the
ranking; the turn text as the bench indexes it). Each (question, candidates) is scored by
the process's cross-encoder (``CrossEncoder``, warm) once per batch size, the batch sizes
alternating question by question and their order turning every round, so each is measured
beside the others on the same load; the p50 and p95 of one ``score`` call, in ms, and the
tokens the batches padded against the pairs' own (padding is work the model does for
nothing). Also the tokens of a pair (the question's and the passage's together). The
batch size of the tree before (16) is the baseline.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from memstream.bench.command import BenchError, show
from memstream.bench.stats import machine, percentile
from memstream.core import argtypes
from memstream.projections import CrossEncoder

__all__ = ["add_arguments", "format_rerank", "rerank_cost", "run"]


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1 or max(values) > 100:
        raise argparse.ArgumentTypeError(f"comma-separated counts from 1 to 100, e.g. 16,4 (got {argtypes.shown(text)})")
    return values


def _counts_of_tokens(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 8 or max(values) > CrossEncoder.MAX_LENGTH:
        raise argparse.ArgumentTypeError(
            f"comma-separated token caps from 8 to {CrossEncoder.MAX_LENGTH}, e.g. 256,128 (got {argtypes.shown(text)})"
        )
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="the LoCoMo directory (locomo10_turns.jsonl, locomo10_qrels.jsonl)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev", help="whose questions (default: dev)")
    parser.add_argument("--pairs", type=_counts, default=(20, 30), help="candidates scored per search (default: 20,30)")
    parser.add_argument("--batch-sizes", type=_counts, default=(16, 4), help="pairs per model call (default: 16,4)")
    parser.add_argument("--questions", type=argtypes.int_between(1, 2000), default=40, help="questions (default: 40)")
    parser.add_argument("--rounds", type=argtypes.int_between(1, 20), default=3, help="passes over them (default: 3)")
    parser.add_argument(
        "--threads", type=_counts, default=None, help="batches run side by side, comma-separated (default: the CPUs)"
    )
    parser.add_argument(
        "--max-lengths",
        type=_counts_of_tokens,
        default=(CrossEncoder.DEFAULT_MAX_LENGTH,),
        help=f"a pair's token caps, comma-separated (default: {CrossEncoder.DEFAULT_MAX_LENGTH}, the cross-encoder's)",
    )


def _candidates(data: Path, split: str, questions: int, pairs: int) -> list[tuple[str, list[str]]]:
    from memstream.bench.locomo.data import load, unit_text
    from memstream.bench.locomo.scoring import BM25

    turns, qs = load(data, split)
    by_conv: dict[str, list[dict[str, Any]]] = {}
    for t in turns:
        by_conv.setdefault(t["sample_id"], []).append(t)
    index = {c: BM25([(t["dia_id"], unit_text(t)) for t in ts]) for c, ts in by_conv.items()}
    text = {(t["sample_id"], t["dia_id"]): unit_text(t) for t in turns}
    out = []
    for q in random.Random(7).sample(qs, min(questions, len(qs))):
        ids = index[q["sample_id"]].top(q["question"], pairs)
        ids += [t["dia_id"] for t in by_conv[q["sample_id"]] if t["dia_id"] not in ids][: pairs - len(ids)]
        out.append((q["question"], [text[(q["sample_id"], i)] for i in ids]))
    return out


def _padding(encoder: Any, question: str, passages: list[str], batch: int) -> tuple[int, int]:
    """(tokens of the pairs, tokens the batches of ``batch`` pairs sorted by length hold)."""
    lengths = sorted(len(e.ids) for e in encoder._tokenizer.encode_batch_fast([(question, p) for p in passages]))
    padded = sum(max(lengths[i : i + batch]) * len(lengths[i : i + batch]) for i in range(0, len(lengths), batch))
    return sum(lengths), padded


Setting = tuple[int, int, int]  # (batch size, threads, max_length)


def rerank_cost(
    data: str | Path,
    split: str = "dev",
    pairs: tuple[int, ...] = (20, 30),
    batch_sizes: tuple[int, ...] = (16, 4),
    questions: int = 40,
    rounds: int = 3,
    threads: tuple[int, ...] | int | None = None,
    max_lengths: tuple[int, ...] = (CrossEncoder.DEFAULT_MAX_LENGTH,),
) -> dict[str, Any]:
    from memstream.bench.locomo.data import BenchDataError

    try:
        sets = _candidates(Path(data), split, questions, max(pairs))
    except BenchDataError as exc:
        raise BenchError(str(exc)) from exc
    result: dict[str, Any] = {"benchmark": "rerank", "machine": machine(), "split": split, "questions": len(sets)}
    thread_counts = (threads,) if isinstance(threads, int) else threads or (CrossEncoder.default_threads(),)
    settings: list[Setting] = [(b, t, m) for b in batch_sizes for t in thread_counts for m in max_lengths]
    encoders = {s: CrossEncoder(threads=s[1], batch_size=s[0], max_length=s[2]) for s in settings}
    first = CrossEncoder(threads=1, max_length=CrossEncoder.MAX_LENGTH)  # the pairs' own tokens, uncut
    lengths = [len(e.ids) for q, ps in sets for e in first._tokenizer.encode_batch_fast([(q, p) for p in ps[: max(pairs)]])]
    result["pair_tokens"] = {
        "p50": float(np.median(lengths)),
        "p95": percentile(lengths, 0.95),
        "max": max(lengths),
        "cut_share": {str(m): round(sum(n > m for n in lengths) / len(lengths), 4) for m in max_lengths},
    }
    result["threads"] = thread_counts[0] if len(thread_counts) == 1 else list(thread_counts)
    for q, ps in sets[:3]:  # warm every session
        for enc in encoders.values():
            enc.score(q, ps[: max(pairs)])
    times: dict[tuple[int, Setting], list[float]] = {(n, s): [] for n in pairs for s in settings}
    for r in range(rounds):
        for i, (q, ps) in enumerate(sets):
            turn = settings[(i + r) % len(settings) :] + settings[: (i + r) % len(settings)]
            for n in pairs:
                for s in turn:
                    t0 = time.perf_counter()
                    encoders[s].score(q, ps[:n])
                    times[(n, s)].append((time.perf_counter() - t0) * 1000)
    result["runs"] = []
    for (n, (b, t, m)), ts in times.items():
        tok = [_padding(encoders[(b, t, m)], q, ps[:n], b) for q, ps in sets]
        result["runs"].append(
            {
                "pairs": n,
                "batch_size": b,
                "threads": t,
                "max_length": m,
                "p50_ms": round(statistics.median(ts), 1),
                "p95_ms": round(percentile(ts, 0.95), 1),
                "calls": len(ts),
                "padded_over_real_tokens": round(sum(p for _, p in tok) / sum(t for t, _ in tok), 2),
            }
        )
    return result


def format_rerank(result: dict[str, Any]) -> str:
    t = result["pair_tokens"]
    cut = ", ".join(f"{m}: {100 * share:.1f}%" for m, share in t.get("cut_share", {}).items())
    lines = [
        f"cross-encoder cost: {result['questions']} {result['split']} questions, BM25's best as candidates, "
        f"threads {result['threads']}, load average {result['machine'].get('loadavg_at_start')}",
        f"tokens of a pair: p50 {t['p50']:.0f}, p95 {t['p95']:.0f}, max {t['max']}; pairs a cap cuts: {cut}",
        f"{'pairs':>5} {'batch':>5} {'threads':>7} {'max len':>7} {'p50 ms':>8} {'p95 ms':>8} {'padded/real':>12}",
    ]
    for r in result["runs"]:
        lines.append(
            f"{r['pairs']:>5} {r['batch_size']:>5} {r['threads']:>7} {r['max_length']:>7} "
            f"{r['p50_ms']:>8} {r['p95_ms']:>8} {r['padded_over_real_tokens']:>12}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    result = rerank_cost(
        args.data, args.split, args.pairs, args.batch_sizes, args.questions, args.rounds, args.threads, args.max_lengths
    )
    return show(args, result, format_rerank(result))
