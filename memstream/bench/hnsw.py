"""``memstream bench hnsw``: a large scope's dense search through its approximate index
(``DenseScopes`` with ``index_from``: HNSW over int8, every candidate rescored) against the
exact pass over its matrix, in this process.

For each scope size: the rows (the read benches' memories, or LoCoMo turns and then those
memories with ``--data``) and fresh questions (or LoCoMo's questions) embedded once; the
index built by the process's ``Indexer`` (wall and CPU seconds, and per 10k rows; the
resident memory before and after); then rounds of the same questions searched exactly and
through the index, the order turning every round, lone (one question a search) and in
batches of 8 (as the query server's batches), CPU ms per question (medians over rounds);
recall@12 and @50 of the index's answers against the exact pass's ids; and whether a graph
search leaves the interpreter to other threads (how fast a Python thread counts while one
search of many questions runs, against alone, beside the same while numpy's einsum runs).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from memstream.bench.command import BenchError, show
from memstream.bench.stats import machine, rss_mb
from memstream.bench.workload import fresh_question, memory_text
from memstream.core import argtypes
from memstream.projections import DenseScopes, Filter, Indexer, get_embedder

__all__ = ["add_arguments", "format_hnsw", "hnsw_bench", "run"]

SCOPE = Filter("bench", agent="bench-agent")
BATCH = 8
LIMITS = (12, 50)  # a recall's k, and the candidates the ranking takes per side


def _cpu() -> float:
    return time.process_time()


def _corpus(rows: int, data: str | None, seed: int) -> tuple[list[str], list[str], str]:
    """``rows`` texts and the question pool: LoCoMo's turns first (then the memories) and
    its questions with ``data``; otherwise the memories and fresh questions."""
    rng = random.Random(seed)
    texts: list[str] = []
    questions: list[str] = []
    source = "memories (bench.workload), fresh questions"
    if data:
        root = Path(data)
        turns = root / "locomo10_turns.jsonl"
        qrels = root / "locomo10_qrels.jsonl"
        if not turns.is_file() or not qrels.is_file():
            raise BenchError(f"--data {data}: locomo10_turns.jsonl and locomo10_qrels.jsonl expected there")
        texts = [json.loads(line)["text"] for line in turns.read_text(encoding="utf-8").splitlines() if line.strip()]
        questions = [json.loads(line)["question"] for line in qrels.read_text(encoding="utf-8").splitlines() if line.strip()]
        source = f"LoCoMo turns ({len(texts)}) then memories, LoCoMo questions"
    texts = texts[:rows] + [memory_text(rng, i) for i in range(max(0, rows - len(texts)))]
    if not questions:
        questions = [fresh_question(rng) for _ in range(4000)]
    return texts, questions, source


def _unit(vectors: Any) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    unit: np.ndarray = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return unit


def _searched(scopes: DenseScopes, queries: np.ndarray, limit: int, batch: int) -> tuple[float, list[list[str]]]:
    """CPU ms per question of ``queries`` searched ``batch`` at a time, and the ids found."""
    found: list[list[str]] = []
    started = _cpu()
    for i in range(0, len(queries), batch):
        found += [[pid for pid, _ in each] for each in scopes.search(SCOPE, queries[i : i + batch], limit)]
    return 1000 * (_cpu() - started) / len(queries), found


def _recall(got: list[list[str]], want: list[list[str]], k: int) -> float:
    return round(statistics.fmean(len(set(g[:k]) & set(w[:k])) / k for g, w in zip(got, want)), 4)


def _spin(seconds: float, stop: threading.Event | None = None) -> float:
    """Pure Python counting for ``seconds`` (or until ``stop``): counts a second."""
    n, t = 0, time.perf_counter()
    deadline = t + seconds
    while (stop is None or not stop.is_set()) and time.perf_counter() < deadline:
        n += 1
    return n / (time.perf_counter() - t)


def _counting(call: Any) -> float:
    """How fast a Python thread counts while ``call`` runs in this one."""
    done = threading.Event()
    rate: list[float] = []
    counter = threading.Thread(target=lambda: rate.append(_spin(120.0, done)))
    counter.start()
    try:
        call()
    finally:
        done.set()
        counter.join()
    return rate[0]


def _gil_free(scopes: DenseScopes, queries: np.ndarray) -> tuple[float, float] | None:
    """How fast a Python thread counts while another runs one graph search of many
    questions, over how fast it counts alone: near 1 when the search leaves the interpreter
    (the GIL released), about 0.5 or less when it holds it (the interpreter switches
    between the two every 5 ms); and the same while numpy's einsum (which releases it)
    scores as many rows, for comparison on the same load."""
    block = next(iter(scopes._blocks.values()))  # the bench's one scope
    index = block.index
    if index is None:
        return None
    many = np.concatenate([queries] * max(1, 2000 // len(queries)))
    alone = _spin(0.5)
    graph = _counting(lambda: index.search(many, 4 * LIMITS[1]))
    rows = block.vectors[: block.n]
    numpy = _counting(lambda: [np.einsum("ij,j->i", rows, q) for q in many[:300]])
    return round(graph / alone, 2), round(numpy / alone, 2)


def _one_size(rows: int, embedder: Any, data: str | None, questions: int, rounds: int, seed: int) -> dict[str, Any]:
    texts, pool, source = _corpus(rows, data, seed)
    vectors = _unit(embedder.embed(texts))
    queries = _unit(embedder.embed(random.Random(seed + 1).sample(pool, min(questions, len(pool)))))
    points = [(f"{i:032x}", v, {"tenant": "bench", "agent": "bench-agent"}) for i, v in enumerate(vectors)]
    exact = DenseScopes(vectors.shape[1])
    exact.put(points)
    builder = Indexer()
    indexed = DenseScopes(vectors.shape[1], indexer=builder)
    indexed.put(points)
    rss = rss_mb()
    wall, cpu = time.perf_counter(), _cpu()
    indexed.index_from(rows)
    if not builder.idle(3600) or indexed.indexed() != rows:
        raise BenchError(f"the index of {rows} rows was not built")
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    out: dict[str, Any] = {
        "rows": rows,
        "source": source,
        "questions": len(queries),
        "build_s": round(wall, 2),
        "build_cpu_s": round(cpu, 2),
        "build_cpu_s_per_10k": round(cpu * 10_000 / rows, 2),
        "index_rss_mb": round(rss_mb() - rss, 1),
    }
    times: dict[str, list[float]] = {}
    answers: dict[tuple[str, int], list[list[str]]] = {}
    for r in range(rounds):
        order = (("exact", exact), ("hnsw", indexed)) if r % 2 == 0 else (("hnsw", indexed), ("exact", exact))
        for name, scopes in order:
            for mode, batch in (("lone", 1), ("batch8", BATCH)):
                ms, found = _searched(scopes, queries, LIMITS[1], batch)
                times.setdefault(f"{name}_{mode}_ms", []).append(ms)
                answers[(name, batch)] = found
    out.update({key: round(statistics.median(values), 3) for key, values in times.items()})
    for mode in ("lone", "batch8"):
        out[f"ratio_{mode}"] = round(out[f"hnsw_{mode}_ms"] / out[f"exact_{mode}_ms"], 3)
    for k in LIMITS:
        out[f"recall_at_{k}"] = _recall(answers[("hnsw", 1)], answers[("exact", 1)], k)
        out[f"recall_at_{k}_batch8"] = _recall(answers[("hnsw", BATCH)], answers[("exact", BATCH)], k)
    out["fell_back"] = indexed.fell_back
    out["gil_free"], out["gil_free_einsum"] = _gil_free(indexed, queries) or (None, None)
    return out


def hnsw_bench(
    rows: tuple[int, ...], embedder: str = "hash", data: str | None = None, questions: int = 200, rounds: int = 3, seed: int = 7
) -> dict[str, Any]:
    model = get_embedder(embedder)
    return {
        "benchmark": "hnsw",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "embedder": embedder,
        "rounds": rounds,
        "sizes": [_one_size(n, model, data, questions, rounds, seed) for n in rows],
    }


def format_hnsw(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"memstream bench hnsw  ({r['date']}, embedder {r['embedder']}, {r['rounds']} rounds; "
        f"{m.get('cpus')} CPUs, load at start {m.get('loadavg_at_start')})",
        "rows    build s (cpu, per 10k)  index MB  exact lone  hnsw lone  ratio  exact b8  hnsw b8  ratio"
        "  recall@12  @50  fell back  GIL free",
    ]
    for s in r["sizes"]:
        lines.append(
            f"{s['rows']:<6}  {s['build_s']:>7.2f} ({s['build_cpu_s']:.2f}, {s['build_cpu_s_per_10k']:.2f})  "
            f"{s['index_rss_mb']:>8.1f}  {s['exact_lone_ms']:>10.3f}  {s['hnsw_lone_ms']:>9.3f}  {s['ratio_lone']:>5.2f}  "
            f"{s['exact_batch8_ms']:>8.3f}  {s['hnsw_batch8_ms']:>7.3f}  {s['ratio_batch8']:>5.2f}  "
            f"{s['recall_at_12']:>9.4f}  {s['recall_at_50']:.4f}  {s['fell_back']:>9}  "
            f"{s['gil_free']} (einsum: {s['gil_free_einsum']})"
        )
        lines.append(f"        ({s['source']}, {s['questions']} questions; CPU ms per question, limit {LIMITS[1]})")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows", type=argtypes.ascending_counts, default=(10_000, 50_000), help="scope sizes (default: 10000,50000)"
    )
    parser.add_argument("--embedder", default="hash", help="the embedder of rows and questions (default: hash)")
    parser.add_argument("--data", default=None, help="a LoCoMo directory: its turns as the first rows, its questions")
    parser.add_argument("--questions", type=argtypes.int_between(8, 5000), default=200, help="questions (default: 200)")
    parser.add_argument("--rounds", type=argtypes.int_between(1, 20), default=3, help="rounds (default: 3)")


def run(args: argparse.Namespace) -> int:
    result = hnsw_bench(args.rows, args.embedder, args.data, args.questions, args.rounds)
    return show(args, result, format_hnsw(result))
