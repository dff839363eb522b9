"""The ingest bench's freshness runs: append -> keyword- and vector-searchable while a
producer appends at a steady rate."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.bench.ingest.drain import apart_groups, pipeline_under_test, turns_of
from memstream.bench.stats import percentile
from memstream.bench.workload import sample_texts, substantive_turn, turn_events
from memstream.producers import EventLog, redis_client

if TYPE_CHECKING:
    pass


def freshness_run(
    root: Path,
    url: str,
    prefix: str,
    embedder: str,
    pairs: list[tuple[str, str]],
    rate: float,
    seconds: float,
    every: int = 10,
    settle: float = 30.0,
    apart: bool = False,
) -> dict[str, Any]:
    """Append ``rate`` turns/s for ``seconds`` to a started pipeline; every ``every``-th
    substantive turn is polled in the turns collection by its point id: keyword-searchable
    once the point is there (its keyword vector is written with it), vector-searchable once
    it has its dense vector (the same moment when the embedder embeds inline). Also: how
    long the turns' dense backlog took to empty after the last append, and its peak."""
    from memstream.text import BoilerplateFilter

    n = int(rate * seconds)
    events = turn_events(sample_texts(pairs, n, f"fresh-{prefix}"))
    bp = BoilerplateFilter()
    sampled = {i for i in range(n) if i % every == 0}
    sampled = {i for i in sampled if substantive_turn(events[i], bp)}
    from memstream.service import Sidecar

    pipeline, eventlog, recorder = pipeline_under_test(root, url, prefix, embedder, apart)
    sidecar = Sidecar(pipeline.settings, url, apart_groups()[1], log_level="WARNING").start() if apart else None
    producer_log = EventLog(redis_client(url), prefix, eventlog.shards)
    appended_at: dict[int, float] = {}
    keyword_at: dict[int, float] = {}
    vector_at: dict[int, float] = {}
    lock = threading.Lock()
    done = threading.Event()
    try:
        pipeline.start()
        if sidecar is not None and not sidecar.wait_ready(60.0):
            raise RuntimeError("the projections' child process did not start")
        groups = sum(map(len, apart_groups()))

        def consumers() -> list[Any]:
            return [*pipeline.consumers, *(sidecar.consumers if sidecar is not None else ())]

        turns = turns_of(pipeline)
        collection, backlog = turns.collection, turns.backlog
        client = eventlog.client
        time.sleep(0.5)  # let the consumers reach their blocking reads

        def produce() -> None:
            t0 = time.perf_counter()
            for i, ev in enumerate(events):
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                at = time.perf_counter()
                producer_log.append([ev])
                if i in sampled:
                    with lock:
                        appended_at[i] = at
            done.set()

        producer = threading.Thread(target=produce, name="bench-producer", daemon=True)
        started = time.perf_counter()
        producer.start()
        deadline = None
        produced_at = 0.0
        backlog_peak, backlog_empty_at, last_look, last_dense = 0, None, 0.0, 0.0
        while True:
            with lock:
                first = [i for i in appended_at if i not in keyword_at]
                second = [i for i in keyword_at if i not in vector_at]
            if first:
                ids = [turns.point_of(events[i].scope.tenant, events[i].id) for i in first]
                found = {p.id for p in pipeline.store.retrieve(collection, ids)}
                now = time.perf_counter()
                for i, pid in zip(first, ids):
                    if pid in found:
                        keyword_at[i] = now
            now = time.perf_counter()
            if second and now - last_dense >= 0.01:  # vectors are costly to read: every 10 ms
                last_dense = now
                ids = [turns.point_of(events[i].scope.tenant, events[i].id) for i in second]
                dense = {p.id for p in pipeline.store.retrieve(collection, ids, with_vectors=True) if p.dense is not None}
                now = time.perf_counter()
                for i, pid in zip(second, ids):
                    if pid in dense:
                        vector_at[i] = now
            now = time.perf_counter()
            if now - last_look >= 0.05:
                last_look = now
                waiting = int(client.xlen(backlog))
                backlog_peak = max(backlog_peak, waiting)
            if done.is_set():
                if deadline is None:
                    deadline = time.perf_counter() + settle
                    produced_at = time.perf_counter()
                now_running = consumers()
                everything = len(now_running) >= groups and all(c.stats.applied >= n for c in now_running)
                if everything and backlog_empty_at is None and not int(client.xlen(backlog)):
                    backlog_empty_at = time.perf_counter()
                if (len(vector_at) >= len(sampled) and backlog_empty_at is not None) or time.perf_counter() > deadline:
                    break
            time.sleep(0.002)
        produced_s = produced_at - started
        keyword = [keyword_at[i] - appended_at[i] for i in keyword_at]
        vector = [vector_at[i] - appended_at[i] for i in vector_at]
        lag_at_end = {c.group: c.stats.applied for c in consumers()}
        return {
            "embedder": embedder,
            "apart": apart,
            "rate_per_s": rate,
            "events": n,
            "inline": turns.inline,
            "produced_seconds": round(produced_s, 2),
            "achieved_rate_per_s": round(n / produced_s, 1),
            "sampled": len(sampled),
            "visible": len(vector_at),
            "keyword_visible": len(keyword_at),
            "keyword_p50_s": round(percentile(keyword, 0.50), 4),
            "keyword_p95_s": round(percentile(keyword, 0.95), 4),
            "keyword_max_s": round(max(keyword), 4) if keyword else float("nan"),
            "p50_s": round(percentile(vector, 0.50), 4),
            "p95_s": round(percentile(vector, 0.95), 4),
            "max_s": round(max(vector), 4) if vector else float("nan"),
            "backlog_peak": backlog_peak,
            "backlog_drain_s": round(backlog_empty_at - produced_at, 2) if backlog_empty_at is not None else None,
            "applied_at_end": lag_at_end,
            "embed_calls": len(recorder.calls),
            "mean_embed_batch": round(sum(len(c) for c in recorder.calls) / max(1, len(recorder.calls)), 1),
        }
    finally:
        done.set()
        if sidecar is not None:
            sidecar.stop()
        pipeline.stop()
        producer_log.client.close()
        eventlog.client.close()
