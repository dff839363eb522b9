"""``memstream bench metrics``: what serving Prometheus metrics costs the write path, and
what a scrape costs.

* ``ingest``: the pipeline drains ``events`` TurnRecorded events (the ingest benchmark's
  texts, a real Valkey in a temp dir, the hash embedder by default: the fastest pipeline,
  where the metrics' share shows most) with metrics on and off, in pairs whose order
  alternates (on first, then off first, ...). With metrics on, this process serves
  ``/metrics`` (``memstream.service.start_metrics``: the observer records every batch,
  freshness per entry, every embedding call) and a thread scrapes it every
  ``scrape_every`` seconds while the pipeline drains. ``ratio`` = median over the pairs of
  on events/s / off events/s (target >= 0.98); ``cpu_ratio`` the same by CPU seconds.
* ``scrape``: on the last log (every projection applied, each with its histograms filled),
  ``scrapes`` scrapes over HTTP: seconds (p50, p95, max), bytes of the exposition (plain
  and gzip, as Prometheus asks for it) and the Redis commands one scrape sends; the share
  of a CPU that scraping takes at 1, 15 and 60 s intervals.
* ``observer_us_per_entry``: the cost of recording one applied entry, measured alone (a
  128-entry batch reported over and over), and its share of the pipeline's time per event
  when every version's consumer records it: a figure the noise of a shared machine does
  not blur, unlike the ratio of two drains.
* ``fleet``: then ``agents`` agent processes' reports are written into the same Valkey by
  the real reporting code (``producers.Reporter``, each with its own name and a tally of
  hook durations and prefetch outcomes like a day of turns), and the scrape is measured
  again the same way: what summing a fleet at scrape time costs (target p95 <= 50 ms for
  1,000 agents), with the bytes of a report and the time to write one.

``metrics_bench`` returns a JSON-ready dict; ``format_metrics`` renders it.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import random
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import percentile
from memstream.bench.workload import load_pairs, pipeline_settings, sample_texts, turn_events
from memstream.core import Settings, argtypes, keys, observe
from memstream.producers import HOOKS, EventLog, Figures, Reporter, Tally, redis_client
from memstream.service import Metrics, ValkeyProcess, start_metrics

__all__ = ["metrics_bench", "format_metrics", "TARGETS", "add_arguments", "run"]

TARGETS = {"ratio": 0.98, "fleet_scrape_p95_ms": 50.0}


def _fetch(url: str, compressed: bool = False) -> bytes:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if compressed else {})
    with urllib.request.urlopen(request, timeout=30) as reply:
        body: bytes = reply.read()
    return body


def _scraping(metrics: Metrics, every: float, stop: threading.Event, counts: list[int]) -> threading.Thread:
    def run() -> None:
        assert metrics.url is not None
        while not stop.wait(every):
            _fetch(metrics.url)
            counts[0] += 1

    thread = threading.Thread(target=run, name="memstream-bench-scraper", daemon=True)
    thread.start()
    return thread


def _drain(
    root: Path, url: str, prefix: str, embedder: str, pairs: list[tuple[str, str]], on: bool, scrape_every: float
) -> dict[str, Any]:
    from memstream.workers import Pipeline, PipelineConfig

    addr = "127.0.0.1:0" if on else ""
    settings = msgspec.structs.replace(pipeline_settings(root, url, prefix, embedder), metrics_addr=addr)
    eventlog = EventLog(redis_client(url), prefix, settings.shards)
    events = turn_events(pairs)
    for start in range(0, len(events), 500):
        eventlog.append(events[start : start + 500])
    pipeline = Pipeline(settings, eventlog, PipelineConfig(embedder=embedder))
    metrics = (
        start_metrics(
            settings, EventLog(redis_client(url), prefix, settings.shards), consumers=lambda: pipeline.consumers, role="worker"
        )
        if on
        else None
    )
    assert (metrics is not None) == on and (observe.current() is not None) == on
    stop, scrapes = threading.Event(), [0]
    try:
        for c in pipeline.consumers:
            c.ensure_groups()
        scraper = _scraping(metrics, scrape_every, stop, scrapes) if metrics is not None else None
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        pipeline.drain()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        stop.set()
        if scraper is not None:
            scraper.join(30)
        return {
            "metrics": on,
            "events": len(events),
            "seconds": round(seconds, 4),
            "cpu_seconds": round(cpu, 4),
            "events_per_s": round(len(events) / seconds, 1),
            "scrapes_during": scrapes[0],
            "pipeline_under_test": pipeline,
            "_metrics": metrics,
            "_eventlog": eventlog,
        }
    except BaseException:
        stop.set()
        if metrics is not None:
            metrics.stop()
        pipeline.stop()
        raise


def _close(run: dict[str, Any]) -> None:
    if run.get("_metrics") is not None:
        run["_metrics"].stop()
    run["pipeline_under_test"].stop()
    run["_eventlog"].client.close()
    for key in ("pipeline_under_test", "_metrics", "_eventlog"):
        run.pop(key, None)


def _scrape_costs(metrics: Metrics, eventlog: EventLog, scrapes: int) -> dict[str, Any]:
    assert metrics.url is not None
    _fetch(metrics.url)  # the first scrape counts the dead letters and warms the connections
    client = eventlog.client
    before = int(client.info("stats")["total_commands_processed"])
    _fetch(metrics.url)
    commands = int(client.info("stats")["total_commands_processed"]) - before - 1  # less the first INFO
    seconds, cpu = [], []
    for _ in range(scrapes):
        started, cpu_started = time.perf_counter(), time.process_time()
        body = _fetch(metrics.url)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)  # the scrape's and the fetch's, this process
    packed = _fetch(metrics.url, compressed=True)
    return {
        "scrapes": scrapes,
        "p50_ms": round(percentile(seconds, 0.5) * 1000, 2),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
        "cpu_p50_ms": round(percentile(cpu, 0.5) * 1000, 2),
        "bytes": len(body),
        "gzip_bytes": len(packed if packed[:2] == b"\x1f\x8b" else gzip.compress(packed)),
        "samples": sum(1 for line in body.decode().splitlines() if line and not line.startswith("#")),
        "redis_commands": commands,
        "groups": len({c.group for c in metrics.collector.consumers()}),
    }


# a hook's typical bucket (BUCKETS_NS: 0 is up to 10 µs, 3 up to 100 µs, 8 up to 5 ms) and calls a turn
_HOOK_SHAPE = {
    "on_turn_start": (1, 1.0),
    "prefetch": (8, 1.0),
    "sync_turn": (2, 1.0),
    "queue_prefetch": (1, 1.0),
    "on_memory_write": (1, 0.2),
    "handle_tool_call": (9, 0.1),
    "on_session_end": (1, 0.05),
    "on_session_switch": (1, 0.02),
    "system_prompt_block": (0, 0.05),
    "initialize": (5, 0.01),
    "shutdown": (1, 0.01),
    "on_delegation": (1, 0.01),
}
_SPREAD = ((0, 0.6), (1, 0.2), (-1, 0.1), (2, 0.08), (4, 0.02))  # around the typical bucket


def _agent_tally(rng: random.Random) -> Tally:
    """The tally of an agent process after ``turns`` turns (about a working day's)."""
    tally = Tally()
    turns = rng.randint(20, 3000)
    for hook in HOOKS:
        center, per_turn = _HOOK_SHAPE.get(hook, (1, 0.01))
        calls = max(1, int(turns * per_turn))
        row = tally.hooks[hook]
        for shift, share in _SPREAD:
            i = min(max(center + shift, 0), len(row) - 2)
            row[i] += int(calls * share)
            row[-1] += int(calls * share) * (5_000 << i)  # about the bucket's middle, ns
    fresh = int(turns * rng.uniform(0.5, 0.95))
    tally.prefetch.update(fresh=fresh, cached=(turns - fresh) // 2, empty=turns - fresh - (turns - fresh) // 2)
    return tally


def _fleet_costs(metrics: Metrics, eventlog: EventLog, agents: int, scrapes: int) -> dict[str, Any]:
    """``agents`` reports written by the real reporting code, then the scrape costs again."""
    rng = random.Random(7)
    settings = Settings(report_every_s=5.0, tenant="bench")
    sent_s: list[float] = []
    for i in range(agents):
        backlog = rng.choice([0] * 8 + [rng.randint(1, 50), rng.randint(100, 100_000)])
        figures = Figures(
            backlog=backlog,
            backlog_bytes=backlog * 1200,
            refused=rng.choice([0] * 19 + [rng.randint(1, 500)]),
            invalid=0,
            agents=[f"agent:main:telegram:dm:{i * 7 + k}" for k in range(rng.randint(1, 3))],
            served=True,
        )
        reporter = Reporter(settings, _agent_tally(rng), lambda figures=figures: figures)  # type: ignore[misc]  # a default binds the loop value
        started = time.perf_counter()
        if not reporter.send(eventlog.client, eventlog.prefix):
            raise RuntimeError(f"a report could not be written: {reporter.last_error}")
        sent_s.append(time.perf_counter() - started)
    sizes = [len(v) for v in eventlog.client.hvals(keys.agent_reports(eventlog.prefix))]
    costs = _scrape_costs(metrics, eventlog, scrapes)
    costs.update(
        agents=agents,
        report_bytes_p50=int(percentile(sizes, 0.5)),
        report_bytes_max=max(sizes),
        report_write_ms_p50=round(percentile(sent_s, 0.5) * 1000, 3),
    )
    return costs


def _observer_cost(metrics: Metrics, group: str, entry_ids: list[str], repeats: int = 200) -> float:
    """Microseconds ``metrics`` spends recording one applied entry (a batch of ``entry_ids``
    reported ``repeats`` times, as a consumer reports it)."""
    stages = {"admit": 0.001, "apply": 0.01, "commit": 0.001}
    started = time.perf_counter()
    for _ in range(repeats):
        metrics.batch(group, stages, entry_ids, time.time())
    return (time.perf_counter() - started) / (repeats * len(entry_ids)) * 1e6


def metrics_bench(
    events: int = 3000,
    runs: int = 5,
    data: str | None = None,
    embedder: str = "hash",
    scrape_every: float = 1.0,
    scrapes: int = 50,
    agents: int = 1000,
) -> dict[str, Any]:
    """Run the benchmark (see the module doc); JSON-ready results."""
    pairs, source = load_pairs(data)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-metrics-"))
    server = ValkeyProcess(root / "valkey").start()
    result: dict[str, Any] = {
        "benchmark": "metrics",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "data": source,
        "events": events,
        "runs": runs,
        "embedder": embedder,
        "scrape_every_s": scrape_every,
        "targets": TARGETS,
    }
    former = observe.install(None)
    try:
        pairs_done: list[dict[str, Any]] = []
        k = 0
        for r in range(runs):
            order = (True, False) if r % 2 == 0 else (False, True)
            pair: dict[bool, dict[str, Any]] = {}
            for on in order:
                k += 1
                run = _drain(
                    root / f"run-{k}", server.url, f"b{k}", embedder, sample_texts(pairs, events, f"m{k}"), on, scrape_every
                )
                try:
                    if on and r == runs - 1:  # the scrape costs, on the last log with metrics
                        result["scrape"] = _scrape_costs(run["_metrics"], run["_eventlog"], scrapes)
                        ids = [
                            entry_id for entry_id, _ in run["_eventlog"].client.xrange(run["_eventlog"].stream_keys[0], count=128)
                        ]
                        result["observer_us_per_entry"] = round(
                            _observer_cost(run["_metrics"], "bench.v1", [i.decode() for i in ids]), 3
                        )
                        result["fleet"] = _fleet_costs(run["_metrics"], run["_eventlog"], agents, scrapes)
                finally:
                    _close(run)
                pair[on] = run
            pairs_done.append(
                {
                    "order": "on first" if order[0] else "off first",
                    "on_events_per_s": pair[True]["events_per_s"],
                    "off_events_per_s": pair[False]["events_per_s"],
                    "ratio": round(pair[True]["events_per_s"] / pair[False]["events_per_s"], 4),
                    "cpu_ratio": round(pair[False]["cpu_seconds"] / pair[True]["cpu_seconds"], 4),
                    "scrapes_during": pair[True]["scrapes_during"],
                }
            )
        result["pairs"] = pairs_done
        result["on_events_per_s"] = statistics.median(p["on_events_per_s"] for p in pairs_done)
        result["off_events_per_s"] = statistics.median(p["off_events_per_s"] for p in pairs_done)
        result["ratio"] = statistics.median(p["ratio"] for p in pairs_done)
        result["cpu_ratio"] = statistics.median(p["cpu_ratio"] for p in pairs_done)
        # what recording costs against what the pipeline spends on an event (every version records it)
        per_event_us = 1e6 / result["off_events_per_s"]
        groups = result["scrape"]["groups"]
        result["observer_share"] = round(groups * result["observer_us_per_entry"] / per_event_us, 5)
        result["scrape_share_at"] = {f"{every}s": round(result["scrape"]["p50_ms"] / 1000 / every, 5) for every in (1, 15, 60)}
    finally:
        observe.install(former)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["met"] = {
        "ratio": result["ratio"] >= TARGETS["ratio"],
        "fleet_scrape_p95_ms": result["fleet"]["p95_ms"] <= TARGETS["fleet_scrape_p95_ms"],
    }
    return result


def format_metrics(result: dict[str, Any]) -> str:
    m, s = result["machine"], result["scrape"]
    lines = [
        f"memstream bench metrics — {result['date']}",
        f"machine: {m.get('cpus')} CPUs {m.get('cpu_model', '')}, Python {m.get('python')}; load average "
        f"{m.get('loadavg_at_start')} at start",
        f"data: {result['data']}; {result['events']} events a drain, {result['embedder']} embedder, "
        f"{result['runs']} pairs (order alternating), a scrape every {result['scrape_every_s']} s while on",
        "",
        f"ingest with metrics on: {result['on_events_per_s']} events/s; off: {result['off_events_per_s']} events/s (medians)",
        f"ratio on/off: {result['ratio']} (pairs {[p['ratio'] for p in result['pairs']]}; target ≥ "
        f"{TARGETS['ratio']}: {'met' if result['met']['ratio'] else 'MISSED'}); by CPU seconds {result['cpu_ratio']}",
        "",
        f"recording one applied entry: {result['observer_us_per_entry']} µs; for every version's consumer, "
        f"{result['observer_share'] * 100:.2f}% of the pipeline's time per event "
        f"({1e6 / result['off_events_per_s']:.0f} µs)",
        "",
        f"/metrics with {s['groups']} projection versions: p50 {s['p50_ms']} ms, p95 {s['p95_ms']} ms, "
        f"max {s['max_ms']} ms over {s['scrapes']} scrapes; {s['bytes']} bytes ({s['gzip_bytes']} gzip), "
        f"{s['samples']} samples; {s['redis_commands']} Redis commands a scrape; a scrape's share of one CPU at "
        + ", ".join(f"{k} intervals {v * 100:.2f}%" for k, v in result["scrape_share_at"].items()),
    ]
    fl = result["fleet"]
    lines += [
        "",
        f"/metrics with {fl['agents']} agents reporting: p50 {fl['p50_ms']} ms, p95 {fl['p95_ms']} ms, max "
        f"{fl['max_ms']} ms, CPU p50 {fl['cpu_p50_ms']} ms (without agents {s['cpu_p50_ms']} ms) over "
        f"{fl['scrapes']} scrapes (target p95 <= {TARGETS['fleet_scrape_p95_ms']:.0f} ms: "
        f"{'met' if result['met']['fleet_scrape_p95_ms'] else 'MISSED'}); {fl['bytes']} bytes ({fl['gzip_bytes']} "
        f"gzip), {fl['samples']} samples; {fl['redis_commands']} Redis commands a scrape",
        f"a report: {fl['report_bytes_p50']} bytes (max {fl['report_bytes_max']}), written in "
        f"{fl['report_write_ms_p50']} ms (p50, one pipelined HSET and EXPIRE)",
    ]
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench metrics``'s arguments."""
    parser.add_argument(
        "--events",
        type=argtypes.int_between(1, 10_000_000),
        default=3000,
        help="events per drain, with metrics on and off (default 3000)",
    )
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=5, help="pairs of drains, metrics on and off (default 5)"
    )
    parser.add_argument("--data", default="", help="LoCoMo turns JSONL (default: generated text if absent)")
    parser.add_argument("--embedder", default="hash", help="embedder of the benchmark's pipeline (default hash)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = metrics_bench(events=args.events, runs=args.runs, data=args.data or None, embedder=args.embedder or "hash")
    return show(args, result, format_metrics(result))
