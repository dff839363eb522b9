"""``memstream bench replay``: what rebuilding projections from the log costs, and what the
live version feels meanwhile. On a real Valkey (``ValkeyProcess``, temp dir), in this
process (the bench process is the worker):

* ``throughput``: ``throughput_events`` turns appended, live ingest timed (``Pipeline.drain()`` of
  the active versions), then a replay of all four projections from the same log timed
  (a new building version each, drained; the replay runs in a fresh home, so an embedder
  with a cache starts it cold, as a new model would) -> events/s and the ratio replay /
  live (hash: the median of three rounds, each on a log of its own). With the hash
  embedder and with onnx-minilm (``onnx_events``, one round).
* ``freshness``: ``Pipeline.start()`` with ``events`` turns already applied; a producer
  appends ``rate`` turns/s (every 10th substantive turn polled in the active turns
  collection until it is there: append -> searchable), first alone for ``seconds``, then
  from the start of a replay of the whole log (all four projections) until every build is
  active: p50/p95 of each, the ratio, and how long the replay took.
* ``activation``: during that replay and its activation, a client asks ``qps`` searches a
  second through the query path (``ask``); answers that are errors or empty are counted
  (the log holds matching turns, so an empty answer means a half-built version was read).

Results are medians of single runs on a shared machine: compare ratios from one run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import percentile
from memstream.bench.workload import load_pairs, pipeline_settings, sample_texts, substantive_turn, turn_events
from memstream.core import argtypes
from memstream.producers import EventLog, redis_client
from memstream.service import ValkeyProcess

__all__ = ["replay_bench", "format_replay", "TARGETS", "add_arguments", "run"]

TARGETS = {"throughput_ratio": 0.9, "freshness_ratio": 2.0, "freshness_p95_s": 1.0}
REPLAY_MAX_S = 1800.0  # a replay not done by then is reported as not done (replay_s None)
NAMES = ["turns", "memories", "facts", "sessions"]


def pipeline_under_test(home: Path, url: str, prefix: str, embedder: str) -> Any:
    from memstream.workers import Pipeline, PipelineConfig

    settings = pipeline_settings(home, url, prefix, embedder)
    return Pipeline(settings, EventLog(redis_client(url), prefix, settings.shards), PipelineConfig(embedder=embedder))


def _build_all(pipeline: Any) -> None:
    from memstream.projections import Catalog, registered

    catalog = Catalog(pipeline.events.client, pipeline.events.prefix)
    for name in NAMES:
        catalog.add_build(name, options=registered(name).new_options)  # as `memstream replay` records them


def _throughput(root: Path, url: str, prefix: str, embedder: str, pairs: list[tuple[str, str]], n: int) -> dict[str, Any]:
    events = turn_events(sample_texts(pairs, n, f"tp-{prefix}"))
    live = pipeline_under_test(root / "live", url, prefix, embedder)
    try:
        live.events.append(events)
        started = time.perf_counter()
        live.drain()
        live_s = time.perf_counter() - started
    finally:
        live.stop()
    _build_all(live)
    rebuild = pipeline_under_test(root / "replay", url, prefix, embedder)  # a fresh home: a cold embedding cache
    try:
        started = time.perf_counter()
        rebuild.drain()
        replay_s = time.perf_counter() - started
        from memstream.projections import Catalog

        catalog = Catalog(rebuild.events.client, prefix)
        active = {name: getattr(catalog.active(name), "version", None) for name in NAMES}
    finally:
        rebuild.stop()
    return {
        "embedder": embedder,
        "events": n,
        "live_s": round(live_s, 2),
        "replay_s": round(replay_s, 2),
        "live_events_per_s": round(n / live_s, 1),
        "replay_events_per_s": round(n / replay_s, 1),
        "ratio": round(live_s / replay_s, 3),
        "active_after": active,
    }


def _freshness(
    root: Path, url: str, prefix: str, pairs: list[tuple[str, str]], n: int, rate: float, seconds: float, qps: float
) -> dict[str, Any]:
    from memstream.projections import Catalog, item_point_id
    from memstream.query import SearchRequest, ask
    from memstream.text import BoilerplateFilter

    pipeline = pipeline_under_test(root / "fresh", url, prefix, "hash")
    history = turn_events(sample_texts(pairs, n, f"hist-{prefix}"))
    pipeline.events.append(history)
    pipeline.drain()
    catalog = Catalog(pipeline.events.client, prefix)
    bp = BoilerplateFilter()
    phases: dict[str, Any] = {}
    questions = [e.user_text.split(".")[0][:80] for e in history[:200] if len(e.user_text) > 20] or ["memory"]
    try:
        pipeline.start()
        time.sleep(0.5)
        for phase in ("alone", "during_replay"):
            # alone: ``seconds`` of traffic; during the replay: traffic until every build is active
            budget = seconds if phase == "alone" else REPLAY_MAX_S
            events = turn_events(sample_texts(pairs, int(rate * budget), f"{phase}-{prefix}"))
            sampled = {i for i in range(len(events)) if i % 10 == 0 and substantive_turn(events[i], bp)}

            def pid(j: int, events: list[Any] = events) -> str:
                """The turn point of event ``j`` (every version here records tenant ids)."""
                return item_point_id(events[j].scope.tenant, events[j].id, 0, scoped=True)

            appended_count = 0
            appended: dict[int, float] = {}
            visible: dict[int, float] = {}
            asked = {"asked": 0, "errors": 0, "empty": 0}
            stop = threading.Event()
            if phase == "during_replay":
                _build_all(pipeline)

                def query(stop: threading.Event = stop, asked: dict[str, int] = asked) -> None:
                    i = 0
                    while not stop.is_set():
                        t = time.perf_counter()
                        try:
                            answer = ask(
                                pipeline.events.client,
                                prefix,
                                SearchRequest(
                                    tenant="bench",
                                    agent="bench",
                                    scope="all",
                                    query=questions[i % len(questions)],
                                    kind="turns",
                                    k=5,
                                ),
                                timeout=5.0,
                            )
                            asked["asked"] += 1
                            if "error" in answer:
                                asked["errors"] += 1
                            elif not answer.get("results"):
                                asked["empty"] += 1
                        except Exception:  # noqa: BLE001  a failed query is what this counts
                            asked["errors"] += 1
                        i += 1
                        time.sleep(max(0.0, 1 / qps - (time.perf_counter() - t)))

                asker = threading.Thread(target=query, daemon=True)
                asker.start()
            t0 = time.perf_counter()
            replay_s = None
            for i, ev in enumerate(events):
                if (
                    phase == "during_replay"
                    and i % 20 == 0
                    and i >= rate * seconds
                    and not any(v.state == "building" for n_ in NAMES for v in catalog.versions(n_))
                ):
                    replay_s = time.perf_counter() - t0
                    events = events[:i]
                    break
                time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
                pipeline.events.append([ev])
                appended_count += 1
                if i in sampled:
                    appended[i] = time.perf_counter()
                waiting = [j for j in appended if j not in visible]
                if waiting:
                    collection = pipeline.versions.collection("turns")
                    found = {p.id for p in pipeline.store.retrieve(collection, [pid(j) for j in waiting])}
                    now = time.perf_counter()
                    visible.update({j: now for j in waiting if pid(j) in found})
            sampled = {j for j in sampled if j in appended}  # the replay's end cut the traffic short
            deadline = time.perf_counter() + 30
            while len(visible) < len(sampled) and time.perf_counter() < deadline:
                collection = pipeline.versions.collection("turns")
                waiting = [j for j in appended if j not in visible]
                found = {p.id for p in pipeline.store.retrieve(collection, [pid(j) for j in waiting])}
                now = time.perf_counter()
                visible.update({j: now for j in waiting if pid(j) in found})
                time.sleep(0.002)
            latencies = [visible[j] - appended[j] for j in visible]
            result: dict[str, Any] = {
                "events": appended_count,
                "sampled": len(sampled),
                "visible": len(visible),
                "p50_s": round(percentile(latencies, 0.5), 4),
                "p95_s": round(percentile(latencies, 0.95), 4),
            }
            if phase == "during_replay":
                stop.set()
                result["replay_s"] = round(replay_s, 1) if replay_s is not None else None
                asker.join(10)
                result["replay_active"] = {n_: getattr(catalog.active(n_), "version", None) for n_ in NAMES}
                result["queries"] = asked
            phases[phase] = result
    finally:
        pipeline.stop()
    ratio = phases["during_replay"]["p95_s"] / max(phases["alone"]["p95_s"], 1e-6)
    return {"history_events": n, "rate_per_s": rate, "seconds": seconds, "qps": qps, **phases, "p95_ratio": round(ratio, 2)}


def replay_bench(
    events: int = 100_000,
    as_json: bool = False,
    data: str | None = None,
    *,
    onnx_events: int = 1000,
    rate: float = 20.0,
    seconds: float = 20.0,
    qps: float = 50.0,
    throughput_events: int = 20_000,
) -> dict[str, Any]:
    pairs, source = load_pairs(data)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-replay-"))
    result: dict[str, Any] = {"machine": machine_info(), "source": source}
    try:
        with ValkeyProcess(root / "valkey") as server:
            url = server.url
            rounds = [
                _throughput(root / f"tp-hash-{i}", url, f"tph{i}", "hash", pairs, min(events, throughput_events))
                for i in range(3)
            ]
            result["throughput_hash"] = {**sorted(rounds, key=lambda t: t["ratio"])[1], "ratios": [t["ratio"] for t in rounds]}
            if onnx_events:
                result["throughput_onnx"] = _throughput(root / "tp-onnx", url, "tpo", "onnx-minilm", pairs, onnx_events)
            result["freshness"] = _freshness(root / "fr", url, "fr", pairs, events, rate, seconds, qps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    f = result["freshness"]
    result["met"] = {
        "throughput_hash": result["throughput_hash"]["ratio"] >= TARGETS["throughput_ratio"],
        **(
            {"throughput_onnx": result["throughput_onnx"]["ratio"] >= TARGETS["throughput_ratio"]}
            if "throughput_onnx" in result
            else {}
        ),
        "freshness_ratio": f["p95_ratio"] <= TARGETS["freshness_ratio"],
        "freshness_p95": f["during_replay"]["p95_s"] <= TARGETS["freshness_p95_s"],
        "activation_queries": f["during_replay"]["queries"]["errors"] == 0 and f["during_replay"]["queries"]["empty"] == 0,
    }
    return result


def format_replay(r: dict[str, Any]) -> str:
    lines = [f"machine: {r['machine']}", f"texts: {r['source']}"]
    for key in ("throughput_hash", "throughput_onnx"):
        if key in r:
            t = r[key]
            lines.append(
                f"{key}: {t['events']} events, live {t['live_events_per_s']}/s, replay "
                f"{t['replay_events_per_s']}/s, ratio {t['ratio']} (target >= {TARGETS['throughput_ratio']})"
            )
    f = r["freshness"]
    lines.append(
        f"freshness at {f['rate_per_s']} turns/s over a {f['history_events']}-event log: alone p50/p95 "
        f"{f['alone']['p50_s']}/{f['alone']['p95_s']} s; during the replay "
        f"{f['during_replay']['p50_s']}/{f['during_replay']['p95_s']} s (x{f['p95_ratio']}); the replay of "
        f"all four projections took {f['during_replay']['replay_s']} s"
    )
    q = f["during_replay"]["queries"]
    lines.append(
        f"queries during the replay and its activation at {f['qps']}/s: {q['asked']} asked, "
        f"{q['errors']} errors, {q['empty']} empty; active after: {f['during_replay']['replay_active']}"
    )
    lines.append("met: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in r["met"].items()))
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench replay``'s arguments."""
    parser.add_argument(
        "--events", type=argtypes.int_between(1, 10_000_000), default=100_000, help="events in the log (default 100000)"
    )
    parser.add_argument("--data", default="", help="LoCoMo turns JSONL (default: generated text if absent)")
    parser.add_argument("--embedder", default="", help="hash: skip the onnx-minilm throughput round (default: run it)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = replay_bench(
        events=args.events,
        as_json=getattr(args, "json", False),
        data=args.data or None,
        onnx_events=0 if args.embedder == "hash" else 1000,
    )
    return show(args, result, format_replay(result))
