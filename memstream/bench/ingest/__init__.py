"""``memstream bench ingest``: how fast the projection workers turn events into memory.

One run measures, on this machine and in this process (the bench process IS the worker):

* ``onnx``: ``events`` TurnRecorded events (realistic texts: LoCoMo dialogue turns paired
  as user/assistant when available, else generated agent-style turns) appended to a real
  Valkey (``ValkeyProcess``, temp dir), then ``Pipeline.drain()`` (turns, memories and
  facts projections, onnx-minilm embedder, a fresh home and so a fresh embedding cache
  per run) timed -> events/s. The texts the turns projection hands to the embedder are
  recorded per call, and so are the texts the dense stage hands to the late-interaction
  model for their token vectors (on with a local model, ``MEMSTREAM_LATE_RERANK``); the raw
  models then run the very same calls (same texts, same batches: the embedder, then the
  late-interaction model's passages) -> texts/s. ``ratio`` = raw seconds / pipeline seconds
  (= pipeline texts/s / raw texts/s; 1.0 means the pipeline costs nothing beyond the models).
  Per-consumer drain seconds and the seconds spent inside ``embed`` show where the rest goes.
* ``hash``: the same with the hash embedder: the pipeline's own ceiling, events/s.
* ``hash_apart``: the same, the projections without vectors (facts, sessions) drained in a
  child process (``service.sidecar``, as ``memstream up`` runs them by default) while this
  process drains the others; both started and warm before the clock starts, which stops
  when both are done. Alternated with ``hash`` run by run (which goes first alternates
  too); ``apart_ratio`` is the median of the per-pair ratios (apart events/s / one process).
* ``freshness``: ``Pipeline.start()`` (consumer threads, blocking reads) while a producer
  thread appends ``rate`` turns/s for ``seconds``; every 10th substantive turn is polled in
  the turns collection (by its point id): append -> keyword-searchable (the point is there;
  polled every 2 ms) and append -> vector-searchable (it has its dense vector; every 10 ms,
  reading vectors costs more), p50/p95, and how long the
  dense backlog took to empty after the last append. Run with the hash embedder (dense
  inline: both at once) and with onnx-minilm at ``onnx_rate``, ``rate`` and
  ``onnx_high_rate`` turns/s (dense deferred).
* Memory: peak RSS per phase (VmHWM, reset between phases via /proc/self/clear_refs when
  the kernel allows) and the process's ``ru_maxrss`` high-water at the end.

Repeated measurements (``runs``) report medians. ``ingest`` returns a JSON-ready dict;
``format_ingest`` renders it.

The package: ``memory`` (peak RSS per phase), ``drain`` (the pipeline's drains and the raw
embedder on the same calls), ``freshness`` (append -> searchable), ``measure`` (the phases
in order), ``report`` (the table); the texts and events in ``memstream.bench.workload``.
"""

from __future__ import annotations

import argparse

from memstream.bench.command import show
from memstream.bench.ingest.measure import TARGETS, ingest
from memstream.bench.ingest.report import format_ingest
from memstream.core import argtypes

__all__ = ["TARGETS", "add_arguments", "format_ingest", "ingest", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench ingest``'s arguments (``python -m memstream.bench.ingest`` takes the same)."""
    parser.add_argument(
        "--events", type=argtypes.int_between(1, 10_000_000), default=1000, help="events per pipeline drain (default 1000)"
    )
    parser.add_argument("--data", default="", help="LoCoMo turns JSONL (default: generated text if absent)")
    parser.add_argument(
        "--runs",
        type=argtypes.int_between(1, 1000),
        default=4,
        help="runs per measurement, pipeline and raw alternating which goes first (default 4); "
        "with --embedder hash the freshness pairs run --runs/2 times",
    )
    parser.add_argument(
        "--embedder",
        default="",
        help="hash: the hash phases only; onnx-minilm or bge-small: the model of the ONNX phases (default onnx-minilm)",
    )
    parser.add_argument("--seconds", type=argtypes.seconds, default=15.0, help="seconds of each hash freshness run (default 15)")
    parser.add_argument(
        "--onnx-seconds", type=argtypes.seconds, default=10.0, help="seconds of each ONNX freshness run (default 10)"
    )
    parser.add_argument("--profile", action="store_true", help="also profile one drain (the top functions)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = ingest(
        events=args.events,
        as_json=getattr(args, "json", False),
        data=args.data or None,
        runs=args.runs,
        seconds=args.seconds,
        onnx_seconds=args.onnx_seconds,
        profile=args.profile,
        onnx=args.embedder != "hash",
        freshness_runs=max(1, args.runs // 2) if args.embedder == "hash" else 1,
        model=args.embedder if args.embedder in ("onnx-minilm", "bge-small") else "onnx-minilm",
    )
    return show(args, result, format_ingest(result))
