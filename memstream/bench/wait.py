"""``memstream bench wait``: what ``WAIT 1`` costs the shipper per batch, on a primary with
one replica (``memstream.bench.testbed.ReplicatedValkey``, real processes): rounds of ``batches``
batches of ``batch`` records (``append_batch``, as the shipper sends them), WAIT off and WAIT
on alternating which goes first; per round the appends/s and the batch latencies; reported as
medians over the rounds, their ratio on/off, and the median of each round's ratio (the two
modes of a round ran back to back: the machine's load changes less between them than across
rounds).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memstream.bench.command import BenchError, show
from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import percentile
from memstream.bench.testbed import ReplicatedValkey
from memstream.core import argtypes, new_event_id
from memstream.producers import EventLog, MemoryRemembered, Record, Scope, utcnow

__all__ = ["add_arguments", "format_wait", "run", "wait_bench"]

PREFIX = "memstream"


def wait_bench(rounds: int = 9, batches: int = 300, batch: int = 32, timeout_ms: int = 1000) -> dict[str, Any]:
    """The measurement of the module doc; a JSON-ready dict."""
    machine = machine_info()
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-wait-"))
    topology = ReplicatedValkey(root, replicas=1, sentinels=0).start()
    client = topology.primary.client(timeout=10)
    eventlog = EventLog(client, PREFIX)
    scope = Scope(tenant="t1", agent="bench", session_id="s1")
    per: dict[str, dict[str, list[float]]] = {
        m: {"appends_per_s": [], "batch_p50_ms": [], "batch_p99_ms": []} for m in ("off", "on")
    }
    try:
        for r in range(rounds):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                replicas = 1 if mode == "on" else 0
                records = [
                    Record.of(
                        MemoryRemembered(
                            id=new_event_id(),
                            occurred_at=utcnow(),
                            scope=scope,
                            content=f"round {r} {mode} note {i}: a memory of some length",
                        ),
                        seq=i,
                    )
                    for i in range(batches * batch)
                ]
                latencies = []
                started = time.perf_counter()
                for b in range(batches):
                    t = time.perf_counter()
                    eventlog.append_batch(
                        records[b * batch : (b + 1) * batch],
                        segment=f"r{r}-{mode}",
                        replicas=replicas,
                        replica_timeout_ms=timeout_ms,
                    )
                    latencies.append((time.perf_counter() - t) * 1000)
                elapsed = time.perf_counter() - started
                per[mode]["appends_per_s"].append(len(records) / elapsed)
                per[mode]["batch_p50_ms"].append(statistics.median(latencies))
                per[mode]["batch_p99_ms"].append(percentile(latencies, 0.99))
            client.delete(*eventlog.stream_keys)  # keep the server's memory flat across rounds
        medians = {m: {k: round(statistics.median(v), 3) for k, v in figures.items()} for m, figures in per.items()}
        return {
            "machine": machine,
            "rounds": rounds,
            "batches": batches,
            "batch": batch,
            "replicas": 1,
            "medians": medians,
            "ratio_on_off": {k: round(medians["on"][k] / medians["off"][k], 3) for k in medians["on"]},
            # each round's on/off ratio (the two ran back to back, under the same load), median
            "paired_ratio_on_off": {
                k: round(statistics.median(b / a for a, b in zip(per["off"][k], per["on"][k])), 3) for k in per["on"]
            },
            "paired_extra_batch_p50_ms": round(
                statistics.median(b - a for a, b in zip(per["off"]["batch_p50_ms"], per["on"]["batch_p50_ms"])), 3
            ),
            "rounds_each": {m: {k: [round(x, 3) for x in v] for k, v in figures.items()} for m, figures in per.items()},
        }
    finally:
        client.close()
        topology.stop()
        shutil.rmtree(root, ignore_errors=True)


def format_wait(r: dict[str, Any]) -> str:
    m, ratio = r["medians"], r["ratio_on_off"]
    lines = [
        f"WAIT cost: {r['rounds']} rounds x {r['batches']} batches of {r['batch']} events, primary + 1 replica, "
        "off/on interleaved; medians over rounds"
    ]
    for mode in ("off", "on"):
        lines.append(
            f"  WAIT {mode:<3}: {m[mode]['appends_per_s']:>10.0f} appends/s, batch p50 "
            f"{m[mode]['batch_p50_ms']:.3f} ms, p99 {m[mode]['batch_p99_ms']:.3f} ms"
        )
    paired = r["paired_ratio_on_off"]
    lines.append(
        f"  on/off of the medians: appends/s x{ratio['appends_per_s']}, batch p50 x{ratio['batch_p50_ms']}, "
        f"p99 x{ratio['batch_p99_ms']}"
    )
    lines.append(
        f"  on/off per round, median: appends/s x{paired['appends_per_s']}, batch p50 "
        f"x{paired['batch_p50_ms']} (+{r['paired_extra_batch_p50_ms']} ms a batch), p99 x{paired['batch_p99_ms']}"
    )
    lines.append(f"  machine: {r['machine']['cpus']} CPUs, load at start {r['machine']['loadavg_at_start']}")
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench wait``'s arguments."""
    parser.add_argument(
        "--runs",
        type=argtypes.int_between(1, 1000),
        default=9,
        help="rounds, WAIT off and on alternating which goes first (default 9)",
    )
    parser.add_argument(
        "--events",
        type=argtypes.int_between(1, 10_000_000),
        default=300,
        help="batches of 32 events per mode and round (default 300)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    try:
        result = wait_bench(rounds=args.runs, batches=args.events)
    except RuntimeError as exc:  # the replica did not come up
        raise BenchError(str(exc)) from exc
    return show(args, result, format_wait(result))
