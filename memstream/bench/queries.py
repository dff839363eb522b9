"""``memstream bench queries``: the query transport's round trip, memstream's request
lists against rq jobs carrying the same request, in one run.

A real Valkey (``ValkeyProcess``, temp dir); one server thread per transport in this
process, answering with the same trivial handler (so the figure is the transport's own
cost, not a search's):

* ``lists``: ``memstream.query.client.ask`` -> ``QueryServer`` (a typed envelope RPUSHed on
  ``P:queries``, BLPOP by the server, the answer RPUSHed on ``P:reply:{id}``, BLPOP by
  the caller): what memstream runs.
* ``rq``: the same request as an rq job (JSON serializer) enqueued on a queue, run by
  an rq ``SimpleWorker`` thread, its result awaited on rq's result stream with a
  blocking XREAD: what memstream ran before.

``rounds`` alternating rounds of ``queries`` round trips each; reports p50/p95 per
transport (median over rounds) and the ratio rq / lists.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from memstream.bench.command import needs, show
from memstream.bench.stats import percentile
from memstream.core import argtypes
from memstream.service import ValkeyProcess

__all__ = ["queries_bench", "format_queries", "add_arguments", "run"]

_PREFIX = "benchq"


def echo(request: dict[str, Any]) -> dict[str, Any]:
    """The rq job function of the rq transport (memstream's own, not a name from Redis)."""
    return {"items": {}, "op": request.get("op")}


def _lists(client: redis.Redis, n: int) -> list[float]:
    from memstream.query import CountRequest, ask

    out = []
    for _ in range(n):
        t = time.perf_counter()
        answer = ask(client, _PREFIX, CountRequest(), timeout=5.0)
        out.append((time.perf_counter() - t) * 1000)
        assert "error" not in answer, answer
    return out


def _rq(client: redis.Redis, n: int) -> list[float]:
    from rq import Queue
    from rq.results import Result
    from rq.serializers import JSONSerializer

    queue = Queue(f"{_PREFIX}-rq", connection=client, serializer=JSONSerializer)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        job = queue.enqueue(echo, {"op": "count", "asked_at": time.time()}, ttl=5, result_ttl=60)
        got = client.xread({Result.get_key(job.id): "0-0"}, block=5000)
        assert isinstance(got, list)  # RESP2: [[stream, entries]]
        result_id, payload = got[0][1][-1]
        result = Result.restore(job.id, result_id.decode(), payload, connection=client, serializer=JSONSerializer)
        assert result.type == Result.Type.SUCCESSFUL, result.exc_string
        out.append((time.perf_counter() - t) * 1000)
    return out


def queries_bench(queries: int = 500, rounds: int = 4) -> dict[str, Any]:
    from rq import Queue, SimpleWorker
    from rq.serializers import JSONSerializer
    from rq.timeouts import TimerDeathPenalty

    from memstream.query import CountAnswer, Handlers, QueryServer

    root = Path(tempfile.mkdtemp(prefix="memstream-bench-queries-"))
    server = ValkeyProcess(root / "valkey").start()
    try:
        client = redis.Redis.from_url(server.url)
        lists_server = QueryServer(client, _PREFIX, Handlers(count=lambda request: CountAnswer(items={})), threads=1).start()

        class Worker(SimpleWorker):
            death_penalty_class = TimerDeathPenalty  # rq's default one uses SIGALRM: main thread only

            def _install_signal_handlers(self) -> None:
                # rq has no public switch for this: work() installs SIGINT/SIGTERM handlers,
                # which only the main thread may do, and this worker runs on another thread
                pass

        warm = 50
        conn = redis.Redis.from_url(server.url)
        worker = Worker(
            [Queue(f"{_PREFIX}-rq", connection=conn, serializer=JSONSerializer)], connection=conn, serializer=JSONSerializer
        )
        # rq's own way out of its loop: it returns after the last job this run enqueues
        rq_thread = threading.Thread(
            target=worker.work,
            name="memstream-bench-rq",
            daemon=True,
            kwargs={"max_jobs": warm + rounds * queries, "logging_level": "WARNING"},
        )
        rq_thread.start()
        _lists(client, warm), _rq(client, warm)  # warm both
        per: dict[str, list[dict[str, Any]]] = {"lists": [], "rq": []}
        for r in range(rounds):
            order = ("lists", "rq") if r % 2 == 0 else ("rq", "lists")
            for name in order:
                ms = _lists(client, queries) if name == "lists" else _rq(client, queries)
                per[name].append({"p50": statistics.median(ms), "p95": percentile(ms, 0.95)})
        lists_server.stop()
        # it returns once it has finished the last job (its clean-up after it may take seconds
        # on a busy machine): a worker still there after a minute is reported by the caller
        rq_thread.join(60.0)
        out: dict[str, Any] = {
            name: {k: round(statistics.median(r[k] for r in runs), 3) for k in ("p50", "p95")} for name, runs in per.items()
        }
        out["ratio_rq_over_lists_p50"] = round(out["rq"]["p50"] / out["lists"]["p50"], 2)
        out["ratio_rq_over_lists_p95"] = round(out["rq"]["p95"] / out["lists"]["p95"], 2)
        out["queries"], out["rounds"] = queries, rounds
        return out
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def format_queries(result: dict[str, Any]) -> str:
    lines = [
        f"query round trip, {result['queries']} queries x {result['rounds']} rounds (median of rounds):",
        f"  lists (memstream): p50 {result['lists']['p50']:.3f} ms, p95 {result['lists']['p95']:.3f} ms",
        f"  rq jobs:           p50 {result['rq']['p50']:.3f} ms, p95 {result['rq']['p95']:.3f} ms",
        f"  rq / lists: p50 x{result['ratio_rq_over_lists_p50']}, p95 x{result['ratio_rq_over_lists_p95']}",
    ]
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench queries``'s arguments."""
    parser.add_argument(
        "--queries", type=argtypes.int_between(1, 1_000_000), default=200, help="round trips per round (default 200)"
    )
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=4, help="rounds, the transports alternating (default 4)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    needs("rq", "queries", "the baseline: the same request as an rq job")
    result = queries_bench(queries=args.queries, rounds=args.runs)
    return show(args, result, format_queries(result))
