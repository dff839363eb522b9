"""The callers of ``memstream bench reads`` (``memstream.bench.reads``): processes that send
``recall`` back to back, with fresh questions (a new sentence each, so that no embedding
cache answers) or the 60 cached ones of ``bench prefetch``."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from memstream.bench.workload import fresh_question, question
from memstream.producers import redis_client

__all__ = ["ask_question", "caller"]


def ask_question(rng: random.Random, cached: bool) -> str:
    return question(rng) if cached else fresh_question(rng)


# -- the callers (spawned processes) ------------------------------------------------------
def caller(
    url: str, prefix: str, threads: int, seconds: float, seed: int, cached: bool, out: Any
) -> None:  # pragma: no cover - runs in a spawned process
    """``threads`` callers sending recall back to back until ``seconds`` pass; puts
    (round trips ms, errors, the CPU seconds its callers spent) on ``out``."""
    import resource

    from memstream.query import QueryTimeout, RecallRequest, ask

    client = redis_client(url, timeout=30)
    trips: list[float] = []
    errors = 0
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def call(i: int) -> None:
        nonlocal errors
        local = random.Random(seed * 1000 + i)
        mine: list[float] = []
        failed = 0
        while time.monotonic() < end:
            request = RecallRequest(tenant="bench", agent="bench-agent", session=f"s{i}", k=12, query=ask_question(local, cached))
            t = time.perf_counter()
            try:
                answer = ask(client, prefix, request, timeout=10)
            except QueryTimeout:
                failed += 1
                continue
            mine.append((time.perf_counter() - t) * 1000)
            if "error" in answer:
                failed += 1
        with lock:
            trips.extend(mine)
            errors += failed

    def cpu() -> float:  # this process's CPU seconds (its import and start-up left out)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    started = cpu()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((trips, errors, cpu() - started))
