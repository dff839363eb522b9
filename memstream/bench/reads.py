"""``memstream bench reads``: what one recall costs the query process, stage by stage, how
many recalls a second one query process answers, and the floor of the same work.

One run, on this machine:

* A real Valkey (``ValkeyProcess``, temp dir). ``memories`` memories of one agent
  (generated sentences, as ``memstream bench prefetch`` writes them), plus noise of another
  agent and another tenant, are appended to the log of each tree measured (its own key
  prefix: the same events, the same seed). With a model embedder, a tree after the first
  starts from a copy of the first tree's embedding cache file (the same texts' vectors and
  token vectors), so the model embeds the memories once a run; the questions are fresh.
* Each tree's query process is a child process of its own (``python`` with that tree's
  ``memstream`` first on the path, running this file): the real pipeline of the embedded
  service (qdrant-edge in a temp ``MEMSTREAM_HOME``) projects the log, then serves with
  its ``QueryServer``. ``--against PATH`` adds another checkout (e.g. the tree before a
  change) measured the same way in the same run; the trees alternate in every round.
* **Query processes:** with ``query_processes`` N above 1, this tree also runs N - 1 read
  replicas (``PipelineConfig.replica``: a child each, its own store and groups, fed from the
  log) and in every round measures again with all N on the same request lists: recalls/s,
  CPU per recall, the ratio to the round's one process, each process's peak RSS (while it
  answers: the projection before the rounds is not in it).
* **Throughput:** ``clients`` callers in ``processes`` other processes (spawned) send
  ``recall`` requests back to back (``ask``, the call the provider makes) for ``seconds``
  seconds. Reported: recalls answered per second, round trip p50/p95, errors, and the query
  process's CPU per recall (``/proc``-free: the child's own ``getrusage``).
* **Stages:** the same child answers ``stage_questions`` recalls by calling its recall
  handler directly (no transport), one question at a time, with the embedder, the store's
  searches and the facts lookup timed by wrappers: CPU per recall in the embedding, the
  searches (dense and keyword apart, or together when the tree sends them in one call,
  ``VectorStore.search_many``), the facts lookup, the late interaction where it is on (the
  question's model call, the passages' stored token vectors, the rest of it; and how many
  passages a recall had to encode because the dense stage had not stored them), and the
  rest of the handler (the per-hit Python work: ids, payloads, ranking). ``transport`` is the CPU per recall of the
  throughput run minus the lone handler's: the Redis round trips, envelopes, JSON, threads
  (below 0 when the server's batches save more than the transport costs). A tree whose
  read side answers a batch (``ReadOps.recall_many``) also answers as many other recalls
  in batches of ``STAGE_BATCH``. Every mode (and the floor) asks its own questions, so that
  no embedding cache answers one.
* **Served:** during the throughput run, the serving threads' own CPU (``time.thread_time``)
  in ``handle_batch`` and in the take (BLMPOP), the rest of the query process's CPU, the
  callers' CPU, each per recall, and the sizes of the batches taken (``reads_served``).
* **Floor:** in the same child, the least code doing the same work: the question embedded
  by the same model (alone, and ``STAGE_BATCH`` at once), an exact dense top-``CANDIDATES``
  in numpy over the agent's vectors, a keyword top-``CANDIDATES`` from an inverted index in
  numpy, and one Redis round trip.

Each query process runs with one BLAS thread (``OPENBLAS_NUM_THREADS=1``, both trees alike:
OpenBLAS's spinning threads otherwise count as CPU of whatever uses numpy). Questions are fresh
by default: every request is a new sentence (a subject, a verb, an object, a time and a ticket
number drawn at random), as a prefetch is a new user message every turn, so no embedding cache
answers them; ``cached`` asks only the 60 questions ``bench prefetch`` asks, which the embedding
cache answers after the first round (labelled ``questions: cached``). Figures are medians over
``rounds`` rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import sqlite3
import statistics
import tempfile
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import checkout, late_rerank_option, show
from memstream.bench.reads_callers import ask_question, caller
from memstream.bench.reads_child import STAGES
from memstream.bench.reads_report import format_reads
from memstream.bench.reads_served import served_figures, served_summary
from memstream.bench.reads_tree import QueryProcess
from memstream.bench.stats import latency_summary, machine
from memstream.bench.workload import append_memories
from memstream.core import Settings, argtypes, stop_processes
from memstream.producers import EventLog, redis_client
from memstream.service import ValkeyProcess

__all__ = ["add_arguments", "run", "reads_bench", "format_reads"]


# -- the run ------------------------------------------------------------------------------
def reads_bench(
    memories: int = 10_000,
    threads: int = 2,
    clients: int = 16,
    processes: int = 2,
    seconds: float = 8.0,
    rounds: int = 3,
    embedder: str = "hash",
    cached: bool = False,
    against: str = "",
    stage_questions: int = 200,
    seed: int = 7,
    query_processes: int = 1,
    late_rerank: str = "",
) -> dict[str, Any]:
    """The figures of one run (JSON-ready): per tree, medians over ``rounds``. ``late_rerank``:
    every query process's late interaction (``MEMSTREAM_LATE_RERANK``; "": the environment's)."""
    settings = Settings.load(autostart=False, **({"late_rerank": late_rerank} if late_rerank else {}))
    this = Path(__file__).resolve().parents[2]
    trees = [("this", this)] + ([("against", checkout(against, "memstream/query/server.py"))] if against else [])
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-reads-"))
    server = ValkeyProcess(root / "valkey").start()
    out: dict[str, Any] = {
        "benchmark": "reads",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": embedder,
        "questions": "cached" if cached else "fresh",
        "memories": memories,
        "threads": threads,
        "clients": clients,
        "processes": processes,
        "seconds": seconds,
        "rounds": rounds,
        "query_processes": query_processes,
        "late_rerank": settings.late_rerank,
        "late_interaction": settings.late_reranks(embedder),
        "trees": {},
    }
    handles: list[QueryProcess] = []
    replicas: list[QueryProcess] = []  # this tree's read replicas (query_processes - 1)
    spread: list[dict[str, Any]] = []  # per round: this tree's N processes against its one
    client = redis_client(server.url, timeout=30)
    try:
        for label, path in trees:
            prefix = f"bench-{label}"
            log = EventLog(client, prefix, Settings.load(redis_url=server.url, autostart=False).shards)
            rng = random.Random(seed)
            append_memories(log, "bench", "bench-agent", memories, rng, 0)
            append_memories(log, "bench", "other-agent", max(1, memories // 10), rng, 0)
            append_memories(log, "other-tenant", "bench-agent", max(1, memories // 10), rng, 0)
            if handles:  # the same texts: the model's vectors of the first tree's file, not computed again
                out["embeddings_from_first_tree"] = _seed_embeddings(root / "home-this", root / f"home-{label}")
            handles.append(
                QueryProcess(label, path, server.url, prefix, root / f"home-{label}", embedder, 0, settings.late_rerank)
            )
            out["trees"][label] = {"path": str(path), "rounds": []}
            out["trees"][label].update(handles[-1].ask({"cmd": "load"}))  # projected_s, and indexed_s where built
        home = root / "home-this"  # the replicas' stores beside this tree's (data/qdrant-replica-N)
        replicas += [
            QueryProcess(f"this-r{i}", this, server.url, "bench-this", home, embedder, i, settings.late_rerank)
            for i in range(1, query_processes)
        ]
        for h in replicas:  # a replica's projection time is not reported
            h.ask({"cmd": "load"})
        split = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
        qrng = random.Random(seed + 1)
        for r in range(rounds):
            order = handles if r % 2 == 0 else handles[::-1]
            for h in order:
                questions = [ask_question(qrng, cached) for _ in range(3 * stage_questions)]
                stages = h.ask({"cmd": "stages", "questions": questions[: 2 * stage_questions]})
                floor = h.ask({"cmd": "floor", "questions": questions[2 * stage_questions :]})
                trips, errors, cpu_s, served = _throughput(
                    [h], threads, split, server.url, h.prefix, seconds, seed + 100 * r, cached
                )
                cpu_ms = 1000 * cpu_s / max(1, len(trips))
                if h.label == "this" and replicas:
                    many = _throughput([h, *replicas], threads, split, server.url, h.prefix, seconds, seed + 100 * r, cached)
                    spread.append(
                        {
                            "one": len(trips) / seconds,
                            "many": len(many[0]) / seconds,
                            "many_cpu_ms": 1000 * many[2] / max(1, len(many[0])),
                            "errors": many[1],
                        }
                    )
                out["trees"][h.label]["rounds"].append(
                    {
                        "recalls_per_s": len(trips) / seconds,
                        "round_trip_ms": latency_summary(trips),
                        "errors": errors,
                        "cpu_ms_per_recall": cpu_ms,
                        "transport_ms": cpu_ms - stages["lone"]["handler"],
                        "served": served,
                        "stages": stages,
                        "floor": floor,
                    }
                )
        for h in handles:
            out["trees"][h.label]["rss_mb"] = round(h.close().get("rss_mb", 0.0), 1)
        if replicas:
            out["replicas"] = _spread(spread, out["trees"]["this"]["rss_mb"], [h.close().get("rss_mb", 0.0) for h in replicas])
    finally:
        stop_processes([h.proc for h in handles + replicas], 10)
        for h in handles + replicas:
            h.close_stdout()
        client.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    for tree in out["trees"].values():
        tree["summary"] = _summary(tree.pop("rounds"))
    if "against" in out["trees"]:
        a, b = out["trees"]["this"]["summary"], out["trees"]["against"]["summary"]
        out["ratio"] = {
            "recalls_per_s": _ratio(a["recalls_per_s"], b["recalls_per_s"]),
            "cpu_ms_per_recall": _ratio(a["cpu_ms_per_recall"], b["cpu_ms_per_recall"]),
        }
    return out


def _seed_embeddings(first: Path, home: Path) -> bool:
    """Copy the embedding cache's file of the first tree's home (``data/embeddings.sqlite3``:
    the model's vectors and the late interaction's token vectors of every text it projected)
    into ``home`` before its tree starts, so that tree's dense stage reads the same texts'
    vectors instead of running the model again (the run's slowest part with a model
    embedder); the questions stay fresh (the read side never reads the file). False when
    the first tree has no such file (the hash embedder)."""
    source = first / "data" / "embeddings.sqlite3"
    if not source.is_file():
        return False
    (home / "data").mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(home / "data" / "embeddings.sqlite3")) as dst:
        src.backup(dst)  # a consistent copy while the first tree's process holds the file open
    return True


def _throughput(
    serving: list[QueryProcess], threads: int, split: list[int], url: str, prefix: str, seconds: float, seed: int, cached: bool
) -> tuple[list[float], int, float, dict[str, Any]]:
    """``sum(split)`` callers asking for ``seconds``: round trips, errors, the servers' CPU
    seconds, and what the servers' threads and the callers spent (``served_figures``)."""
    ctx = mp.get_context("spawn")
    for h in serving:
        h.ask({"cmd": "serve", "threads": threads})
    results: Any = ctx.Queue()
    callers = [
        ctx.Process(target=caller, args=(url, prefix, n, seconds, seed + i, cached, results), daemon=True)
        for i, n in enumerate(split)
        if n
    ]
    for c in callers:
        c.start()
    trips: list[float] = []
    errors = 0
    callers_cpu = 0.0
    for _ in callers:
        a, e, cpu = results.get(timeout=seconds + 120)
        trips += a
        errors += e
        callers_cpu += cpu
    for c in callers:
        c.join(10)
    stopped = [h.ask({"cmd": "stop"}) for h in serving]
    return trips, errors, sum(s["cpu_s"] for s in stopped), served_figures(stopped, callers_cpu, len(trips))


def _spread(rows: list[dict[str, Any]], rss_mb: float, replicas_rss_mb: list[float]) -> dict[str, Any]:
    """This tree's N query processes against its one, medians over the rounds."""
    return {
        "recalls_per_s": _median([r["many"] for r in rows]),
        "per_round_recalls_per_s": [round(r["many"], 1) for r in rows],
        "cpu_ms_per_recall": _median([r["many_cpu_ms"] for r in rows]),
        "errors": sum(r["errors"] for r in rows),
        "ratio_to_one": _median([r["many"] / r["one"] if r["one"] else None for r in rows]),
        "rss_mb": [round(rss_mb, 1)] + [round(v, 1) for v in replicas_rss_mb],
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 3) if kept else None


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "recalls_per_s": _median([r["recalls_per_s"] for r in rows]),
        "per_round_recalls_per_s": [round(r["recalls_per_s"], 1) for r in rows],
        "round_trip_p50_ms": _median([r["round_trip_ms"]["p50"] for r in rows]),
        "round_trip_p95_ms": _median([r["round_trip_ms"]["p95"] for r in rows]),
        "errors": sum(r["errors"] for r in rows),
        "cpu_ms_per_recall": _median([r["cpu_ms_per_recall"] for r in rows]),
        "transport_ms": _median([r["transport_ms"] for r in rows]),
        "floor_lone_ms": _median([r["floor"]["lone_ms"] for r in rows]),
        "floor_batch_ms": _median([r["floor"]["batch_ms"] for r in rows]),
        **served_summary([r["served"] for r in rows], _median),
        "stages": {},
    }
    for mode in ("lone", "batch"):
        have = [r["stages"][mode] for r in rows if mode in r["stages"]]
        if have:
            out["stages"][mode] = {s: _median([h[s] for h in have]) for s in STAGES}
    return out


# -- the command ------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memstream bench reads``."""
    parser.add_argument(
        "--memories",
        "--events",
        dest="memories",
        type=argtypes.int_between(1, 10_000_000),
        default=10_000,
        help="memories of the asking agent (default 10000)",
    )
    parser.add_argument("--embedder", default="hash", help="the pipeline's embedder (default hash; e.g. bge-small)")
    parser.add_argument(
        "--cached", action="store_true", help="ask the 60 questions of bench prefetch over and over (the cache answers)"
    )
    parser.add_argument("--against", default="", metavar="PATH", help="another checkout measured in the same run")
    parser.add_argument("--threads", type=argtypes.int_between(1, 64), default=2, help="query server threads (default 2)")
    parser.add_argument(
        "--clients", type=argtypes.int_between(1, 4096), default=16, help="callers sending recall back to back (default 16)"
    )
    parser.add_argument(
        "--processes", type=argtypes.int_between(1, 64), default=2, help="processes the callers are spread over (default 2)"
    )
    parser.add_argument(
        "--query-processes",
        type=argtypes.int_between(1, 16),
        default=1,
        help="this tree's query processes measured besides its one: N - 1 read replicas answer too (default 1: none)",
    )
    parser.add_argument("--seconds", type=argtypes.seconds, default=8.0, help="seconds of calls per tree and round (default 8)")
    parser.add_argument(
        "--rounds",
        "--runs",
        dest="rounds",
        type=argtypes.int_between(1, 1000),
        default=3,
        help="rounds, the trees alternating; one round measures each tree once (default 3)",
    )
    late_rerank_option(parser, "", "query process", "the environment's setting")
    parser.add_argument(
        "--stage-questions",
        type=argtypes.int_between(1, 100_000),
        default=200,
        help="recalls timed by stage per round (default 200)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the bench with the parsed options; print its table (or JSON)."""
    result = reads_bench(
        memories=args.memories,
        threads=args.threads,
        clients=args.clients,
        processes=args.processes,
        seconds=args.seconds,
        rounds=args.rounds,
        embedder=args.embedder,
        cached=args.cached,
        against=args.against,
        stage_questions=args.stage_questions,
        query_processes=args.query_processes,
        late_rerank=args.late_rerank,
    )
    return show(args, result, format_reads(result))
