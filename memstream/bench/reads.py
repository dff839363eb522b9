"""``memstream bench reads``: how many recall queries a second one query server answers,
and what each costs, by the server's thread count (``MEMSTREAM_QUERY_THREADS``).

One run, on this machine:

* A real Valkey (``ValkeyProcess``, temp dir) and the real pipeline of the embedded service
  (qdrant-edge in a temp ``MEMSTREAM_HOME``), holding ``memories`` memories of one agent
  (generated sentences, as ``memstream bench prefetch`` writes them) plus noise of another
  agent and another tenant; this process is the service.
* For each thread count: the pipeline's ``QueryServer`` restarts with that many threads,
  and ``clients`` callers in ``processes`` other processes (spawned: each has its own
  interpreter, as agents do) send ``recall`` requests back to back (``ask``, the same call
  the provider makes) for ``seconds`` seconds. Reported: answered per second, the round
  trip p50/p95/p99, the handler's own time p50 (``took_ms`` in the answer) and the time the
  request waited in the list (``queued_ms``: no server thread was free), the round trip
  minus the handler, errors, and this
  process's CPU seconds per query.

Thread counts run in rounds (``rounds`` alternating passes over every count) so that
a noisy neighbour weighs on all of them; the figures are medians over rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import resource
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.prefetch import _append, _question
from memstream.bench.stats import latency_summary, machine
from memstream.core import Settings, argtypes
from memstream.producers import EventLog, redis_client
from memstream.service import ValkeyProcess

__all__ = ["reads_bench", "format_reads", "add_arguments", "run"]


def _caller(
    url: str, prefix: str, threads: int, seconds: float, seed: int, out: Any
) -> None:  # pragma: no cover - runs in a spawned process
    """``threads`` callers sending recall back to back until ``seconds`` pass; puts
    (round trips ms, handler ms, errors) on ``out``."""
    import threading

    from memstream.query import QueryTimeout, ask

    rng = random.Random(seed)
    client = redis_client(url, timeout=30)
    trips: list[float] = []
    took: list[float] = []
    queued: list[float] = []
    errors = 0
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run(i: int) -> None:
        nonlocal errors
        local = random.Random(seed * 1000 + i)
        mine_trips, mine_took, mine_queued, mine_errors = [], [], [], 0
        while time.monotonic() < end:
            request = {
                "op": "recall",
                "tenant": "bench",
                "agent": "bench-agent",
                "session": f"s{i}",
                "k": 12,
                "query": _question(local),
            }
            t = time.perf_counter()
            try:
                answer = ask(client, prefix, request, timeout=10)
            except QueryTimeout:
                mine_errors += 1
                continue
            mine_trips.append((time.perf_counter() - t) * 1000)
            if "error" in answer:
                mine_errors += 1
            else:
                mine_took.append(float(answer.get("took_ms", 0)))
                mine_queued.append(float(answer.get("queued_ms", 0)))
        with lock:
            trips.extend(mine_trips)
            took.extend(mine_took)
            queued.extend(mine_queued)
            errors += mine_errors

    rng.random()
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((trips, took, queued, errors))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def reads_bench(
    memories: int = 10_000,
    threads: tuple[int, ...] = (1, 2, 4, 8),
    clients: int = 16,
    processes: int = 2,
    seconds: float = 8.0,
    rounds: int = 3,
    embedder: str = "hash",
    seed: int = 7,
) -> dict[str, Any]:
    from memstream.query import QueryServer
    from memstream.workers import Pipeline, PipelineConfig

    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-reads-"))
    server = ValkeyProcess(root / "valkey").start()
    ctx = mp.get_context("spawn")
    out: dict[str, Any] = {
        "benchmark": "reads",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": embedder,
        "memories": memories,
        "clients": clients,
        "processes": processes,
        "seconds": seconds,
        "rounds": rounds,
        "default_threads": None,
        "levels": [],
    }
    per: dict[int, list[dict[str, Any]]] = {t: [] for t in threads}
    try:
        settings = Settings.load(
            home=str(root / "home"), redis_url=server.url, autostart=False, embedder=embedder, tenant="bench"
        )
        out["default_threads"] = settings.query_server_threads
        client = redis_client(server.url, timeout=30)
        log = EventLog(client, settings.stream_prefix, settings.shards)
        pipeline = Pipeline(settings, log, PipelineConfig(embedder=embedder, consumer="bench"))
        _append(log, "bench", "bench-agent", memories, rng, 0)
        _append(log, "bench", "other-agent", max(1, memories // 10), rng, 0)
        _append(log, "other-tenant", "bench-agent", max(1, memories // 10), rng, 0)
        pipeline.drain()
        handlers = pipeline.queries.handlers
        split = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
        for r in range(rounds):
            for t in threads:
                queries = QueryServer(client, settings.stream_prefix, handlers, threads=t).start()
                results: Any = ctx.Queue()
                callers = [
                    ctx.Process(
                        target=_caller,
                        args=(server.url, settings.stream_prefix, n, seconds, seed + 100 * r + i, results),
                        daemon=True,
                    )
                    for i, n in enumerate(split)
                    if n
                ]
                cpu = _cpu()
                started = time.perf_counter()
                for c in callers:
                    c.start()
                trips: list[float] = []
                took: list[float] = []
                queued: list[float] = []
                errors = 0
                for _ in callers:
                    a, b, q, e = results.get(timeout=seconds + 120)
                    trips += a
                    took += b
                    queued += q
                    errors += e
                for c in callers:
                    c.join(10)
                wall = time.perf_counter() - started
                cpu = _cpu() - cpu
                queries.stop()
                per[t].append(
                    {
                        "answered_per_s": len(trips) / seconds,
                        "round_trip_ms": latency_summary(trips),
                        "handler_p50_ms": statistics.median(took) if took else None,
                        "queued_p50_ms": statistics.median(queued) if queued else None,
                        "beyond_handler_p50_ms": (statistics.median(trips) - statistics.median(took)) if took else None,
                        "errors": errors,
                        "wall_s": wall,
                        "service_cpu_ms_per_query": 1000 * cpu / max(1, len(trips)),
                    }
                )
        pipeline.stop()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    for t in threads:
        rows = per[t]
        if not rows:
            continue

        def med(key: str, sub: str | None = None, rows: list[dict[str, Any]] = rows) -> float | None:
            values = [(row[key][sub] if sub else row[key]) for row in rows]
            values = [v for v in values if v is not None]
            return round(statistics.median(values), 3) if values else None

        out["levels"].append(
            {
                "threads": t,
                "answered_per_s": med("answered_per_s"),
                "round_trip_p50_ms": med("round_trip_ms", "p50"),
                "round_trip_p95_ms": med("round_trip_ms", "p95"),
                "round_trip_p99_ms": med("round_trip_ms", "p99"),
                "handler_p50_ms": med("handler_p50_ms"),
                "queued_p50_ms": med("queued_p50_ms"),
                "beyond_handler_p50_ms": med("beyond_handler_p50_ms"),
                "service_cpu_ms_per_query": med("service_cpu_ms_per_query"),
                "errors": sum(row["errors"] for row in rows),
                "per_round_answered_per_s": [round(row["answered_per_s"], 1) for row in rows],
            }
        )
    base = next((lvl["answered_per_s"] for lvl in out["levels"] if lvl["threads"] == threads[0]), None)
    for lvl in out["levels"]:
        lvl["ratio_to_first"] = round(lvl["answered_per_s"] / base, 3) if base else None
    return out


def format_reads(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"memstream bench reads  ({r['date']}, embedder {r['embedder']}, {r['memories']:,} memories, "
        f"{r['clients']} callers in {r['processes']} processes, {r['seconds']} s x {r['rounds']} rounds; "
        f"{m.get('cpus')} CPUs, load at start {m.get('loadavg_at_start')})",
        f"default MEMSTREAM_QUERY_THREADS on this machine: {r['default_threads']}",
        "threads  answered/s  ratio  rt p50  rt p95  rt p99  handler p50  in list p50  cpu ms/q  errors",
    ]
    for lvl in r["levels"]:
        lines.append(
            f"{lvl['threads']:>7}  {lvl['answered_per_s']:>10.1f}  {lvl['ratio_to_first']:>5.2f}  "
            f"{lvl['round_trip_p50_ms']:>6.1f}  {lvl['round_trip_p95_ms']:>6.1f}  "
            f"{lvl['round_trip_p99_ms']:>6.1f}  {lvl['handler_p50_ms'] or 0:>11.2f}  "
            f"{lvl['queued_p50_ms'] or 0:>11.2f}  {lvl['service_cpu_ms_per_query']:>8.2f}  "
            f"{lvl['errors']:>6}"
        )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench reads``'s arguments."""
    parser.add_argument(
        "--events",
        type=argtypes.int_between(1, 10_000_000),
        default=10_000,
        help="memories the query server holds (default 10000)",
    )
    parser.add_argument(
        "--threads",
        type=argtypes.ascending_counts,
        default=(1, 2, 4, 8),
        help="query server thread counts to measure, ascending (default 1,2,4,8)",
    )
    parser.add_argument(
        "--clients",
        type=argtypes.int_between(1, 4096),
        default=16,
        help="callers sending recall back to back, spread over two processes (default 16)",
    )
    parser.add_argument("--runs", type=argtypes.int_between(1, 1000), default=3, help="rounds over the thread counts (default 3)")
    parser.add_argument("--embedder", default="hash", help="embedder of the benchmark's pipeline (default hash)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = reads_bench(
        memories=args.events, threads=args.threads, clients=args.clients, rounds=args.runs, embedder=args.embedder or "hash"
    )
    return show(args, result, format_reads(result))
