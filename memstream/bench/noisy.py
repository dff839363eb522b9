"""``memstream bench noisy``: one tenant's recall while another floods its own query channel
with requests nested too deeply to decode.

One run, on this machine:

* A real Valkey (``ValkeyProcess``, temp dir) and the real pipeline of the embedded service
  (qdrant-edge in a temp ``MEMSTREAM_HOME``) holding ``memories`` memories of the tenant
  ``quiet``; the tenant ``noisy`` is registered (``TenantRegistry``), so the query server
  serves its channel; this process is the service (its ``QueryServer``, default threads).
* A spawned caller process (its own interpreter, as an agent is) asks ``recall`` as
  ``quiet`` back to back, ``asks`` times a condition: ``quiet`` (nothing else queued) and
  ``flood`` (just after ``flood`` envelopes, each under the 64 KiB bound and nested
  ``depth`` lists deep, were pushed on ``noisy``'s channel in one pipeline). The two
  conditions alternate over ``rounds`` rounds, so a noisy neighbour on the machine weighs
  on both.

Reported: per condition, the round trip's p50/p95/max (medians over rounds), errors, and
the ratio of the flood's p50 and p95 to the quiet one's; the requests the server refused
and the times a serving thread backed off (``QueryServer.backoffs``: a request must never
cause one).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.stats import latency_summary, machine
from memstream.bench.workload import append_memories, question
from memstream.core import Settings, argtypes
from memstream.producers import EventLog, redis_client
from memstream.service import ValkeyProcess

__all__ = ["noisy_bench", "format_noisy", "nested_envelope", "add_arguments", "run"]


def nested_envelope(depth: int) -> bytes:
    """A request envelope nested ``depth`` lists deep in a field it does not have."""
    import uuid

    head = f'{{"id":"{uuid.uuid4().hex}","deadline":{time.time() + 60},"req":{{"op":"recall","query":"q"}},"x":'
    return head.encode() + b"[" * depth + b"]" * depth + b"}"


def _caller(
    url: str, prefix: str, rounds: int, asks: int, flood: int, depth: int, seed: int, out: Any
) -> None:  # pragma: no cover - runs in a spawned process
    """For each round: ``asks`` recalls quiet, then ``flood`` nested envelopes on the noisy
    tenant's channel and ``asks`` recalls at once; puts (condition, round trips ms, errors)."""
    from memstream.query import QueryTimeout, RecallRequest, ask, tenant_channel

    rng = random.Random(seed)
    client = redis_client(url, timeout=30)
    junk = [nested_envelope(depth) for _ in range(flood)]

    def measure() -> tuple[list[float], int]:
        trips, errors = [], 0
        for _ in range(asks):
            request = RecallRequest(tenant="quiet", agent="bench-agent", k=12, query=question(rng))
            t = time.perf_counter()
            try:
                answer = ask(client, prefix, request, timeout=10)
            except QueryTimeout:
                errors += 1
                continue
            if "error" in answer:
                errors += 1
                continue
            trips.append((time.perf_counter() - t) * 1000)
        return trips, errors

    for _ in range(rounds):
        out.put(("quiet", *measure()))
        pipe = client.pipeline(transaction=False)
        for raw in junk:
            pipe.rpush(tenant_channel(prefix, "noisy"), raw)
        pipe.execute()
        out.put(("flood", *measure()))


def noisy_bench(
    memories: int = 2000, rounds: int = 5, asks: int = 200, flood: int = 1000, depth: int = 30_000, seed: int = 7
) -> dict[str, Any]:
    from memstream.producers import TenantRegistry
    from memstream.query import QueryServer
    from memstream.workers import Pipeline, PipelineConfig

    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-noisy-"))
    server = ValkeyProcess(root / "valkey").start()
    out: dict[str, Any] = {
        "benchmark": "noisy",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "memories": memories,
        "rounds": rounds,
        "asks": asks,
        "flood_requests": flood,
        "depth": depth,
        "envelope_bytes": len(nested_envelope(depth)),
    }
    try:
        settings = Settings.load(home=str(root / "home"), redis_url=server.url, autostart=False, embedder="hash")
        client = redis_client(server.url, timeout=30)
        log = EventLog(client, settings.stream_prefix, settings.shards)
        pipeline = Pipeline(settings, log, PipelineConfig(embedder="hash", consumer="bench"))
        TenantRegistry(client, settings.stream_prefix).add("noisy")
        append_memories(log, "quiet", "bench-agent", memories, rng, 0)
        pipeline.drain()
        queries = QueryServer(client, settings.stream_prefix, pipeline.queries.handlers, threads=settings.query_server_threads)
        queries.start()
        results: Any = mp.get_context("spawn").Queue()
        caller = mp.get_context("spawn").Process(
            target=_caller, args=(server.url, settings.stream_prefix, rounds, asks, flood, depth, seed, results), daemon=True
        )
        caller.start()
        per: dict[str, list[tuple[list[float], int]]] = {"quiet": [], "flood": []}
        for _ in range(2 * rounds):
            condition, trips, errors = results.get(timeout=600)
            per[condition].append((trips, errors))
        caller.join(30)
        deadline = time.monotonic() + 120
        while queries.counts.get("refused", 0) < rounds * flood and time.monotonic() < deadline:
            time.sleep(0.1)
        out["refused"] = queries.counts.get("refused", 0)
        out["backoffs"] = queries.backoffs
        queries.stop()
        pipeline.stop()
        for condition, runs in per.items():
            summaries = [latency_summary(trips) for trips, _ in runs]
            out[condition] = {
                key: round(statistics.median(s[key] for s in summaries if key in s), 3) for key in ("p50", "p95", "max")
            }
            out[condition]["errors"] = sum(e for _, e in runs)
        out["ratio_p50"] = round(out["flood"]["p50"] / out["quiet"]["p50"], 2)
        out["ratio_p95"] = round(out["flood"]["p95"] / out["quiet"]["p95"], 2)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def format_noisy(r: dict[str, Any]) -> str:
    lines = [
        f"noisy tenant: {r['flood_requests']} nested envelopes ({r['envelope_bytes']} bytes each) a round on its own channel; "
        f"the quiet tenant's recall, {r['asks']} asks a condition, {r['rounds']} rounds (medians over rounds)",
        f"load average at start: {r['machine']['loadavg_at_start']}",
    ]
    for condition in ("quiet", "flood"):
        c = r[condition]
        lines.append(
            f"  {condition:5}  p50 {c['p50']:.2f} ms  p95 {c['p95']:.2f} ms  max {c['max']:.2f} ms  errors {c['errors']}"
        )
    lines.append(f"  flood/quiet: p50 x{r['ratio_p50']}, p95 x{r['ratio_p95']}")
    lines.append(
        f"  refused {r['refused']} of {r['rounds'] * r['flood_requests']}; serving threads backed off {r['backoffs']} times"
    )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench noisy``'s arguments."""
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=5, help="rounds, quiet and flood alternating (default 5)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = noisy_bench(rounds=args.runs)
    return show(args, result, format_noisy(result))
