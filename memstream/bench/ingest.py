"""``memstream bench ingest``: how fast the projection workers turn events into memory.

One run measures, on this machine and in this process (the bench process IS the worker):

* ``onnx``: ``events`` TurnRecorded events (realistic texts: LoCoMo dialogue turns paired
  as user/assistant when available, else generated agent-style turns) appended to a real
  Valkey (``ValkeyProcess``, temp dir), then ``Pipeline.drain()`` (turns, memories and
  facts projections, onnx-minilm embedder, a fresh home and so a fresh embedding cache
  per run) timed -> events/s. The texts the turns projection hands to the embedder are
  recorded per call; a fresh raw embedder then embeds the very same calls (same texts,
  same batches) -> texts/s. ``ratio`` = raw embed seconds / pipeline seconds (= pipeline
  texts/s / raw texts/s; 1.0 means the pipeline costs nothing beyond the model).
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
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import percentile
from memstream.core import Settings, argtypes, new_event_id
from memstream.producers import EventLog, Scope, TurnRecorded, redis_client, utcnow
from memstream.service import SidecarDrain, ValkeyProcess

if TYPE_CHECKING:
    import cProfile

    import numpy as np

    from memstream.projections import Embedder, TurnsProjection
    from memstream.text import BoilerplateFilter
    from memstream.workers import Pipeline

__all__ = ["ingest", "format_ingest", "DEFAULT_DATA", "TARGETS", "add_arguments", "run"]

DEFAULT_DATA = "/work/shared/datasets/locomo/locomo10_turns.jsonl"
TARGETS = {"ratio": 0.9, "hash_events_per_s": 2000.0, "freshness_p95_s": 1.0}


# -- inputs --------------------------------------------------------------------------------
def _load_pairs(data: str | None) -> tuple[list[tuple[str, str]], str]:
    """(user, assistant) text pairs and where they came from."""
    path = Path(data) if data else Path(DEFAULT_DATA)
    if path.is_dir():
        path = path / "locomo10_turns.jsonl"
    if path.is_file():
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pairs = []
        for a, b in zip(rows[0::2], rows[1::2]):
            if a.get("sample_id") != b.get("sample_id"):
                continue
            pairs.append((str(a.get("text", "")), str(b.get("text", ""))))
        if pairs:
            return pairs, f"LoCoMo turns ({path.name}, consecutive turns paired user/assistant)"
    elif data:
        raise FileNotFoundError(f"--data {data}: no such file")
    from memstream.bench.stages import synthetic_turns

    turns = synthetic_turns(4000)
    return [(t["user"], t["assistant"]) for t in turns], "generated agent-style turns (memstream.bench.stages)"


def _texts(pairs: list[tuple[str, str]], n: int, salt: str) -> list[tuple[str, str]]:
    """``n`` pairs; beyond the data set, pairs repeat with a suffix so no text repeats
    (a repeated text would be served by the embedding cache and hide model cost)."""
    out = []
    for i in range(n):
        user, assistant = pairs[i % len(pairs)]
        if i >= len(pairs):
            user = f"{user} ({salt} {i // len(pairs)})"
        out.append((user, assistant))
    return out


def _events(pairs: list[tuple[str, str]], tenant: str = "bench") -> list[TurnRecorded]:
    out = []
    for i, (user, assistant) in enumerate(pairs):
        scope = Scope(tenant=tenant, agent=f"agent{i % 4}", session_id=f"s{i // 50}", platform="cli")
        out.append(
            TurnRecorded(
                id=new_event_id(), occurred_at=utcnow(), scope=scope, turn_index=i, user_text=user, assistant_text=assistant
            )
        )
    return out


# -- memory ---------------------------------------------------------------------------------
def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _maxrss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class _Phase:
    """Peak RSS (MB) of one phase: VmHWM after a reset, else ru_maxrss (lifetime)."""

    def __enter__(self) -> _Phase:
        gc.collect()
        self.reset = _reset_hwm()
        return self

    def __exit__(self, *exc: object) -> None:
        hwm = _status_kb("VmHWM") if self.reset else None
        self.peak_mb = round(hwm / 1024, 1) if hwm else _maxrss_mb()
        self.kind = "VmHWM" if hwm else "ru_maxrss"


# -- the pipeline under test ---------------------------------------------------------------------
class _Recorder:
    """Wraps the turns projection's embedder: records each ``embed`` call and its time."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []
        self.seconds = 0.0

    name = property(lambda self: self.inner.name)
    dim = property(lambda self: self.inner.dim)
    max_tokens = property(lambda self: self.inner.max_tokens)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = list(texts)
        started = time.perf_counter()
        out = self.inner.embed(items)
        self.seconds += time.perf_counter() - started
        self.calls.append(items)
        return out


def _settings(root: Path, url: str, prefix: str, embedder: str) -> Settings:
    """The defaults, but for the run's own place and ``MEMSTREAM_EMBED_THREADS`` (as the
    raw embedder has it)."""
    return Settings(
        redis_url=url,
        home=root,
        autostart=False,
        stream_prefix=prefix,
        embedder=embedder,
        embed_threads=Settings.load().embed_threads,
    ).validated()


def _turns(pipeline: Pipeline) -> TurnsProjection:
    from memstream.projections import TurnsProjection

    turns = pipeline.projection("turns")
    assert isinstance(turns, TurnsProjection)
    return turns


def _apart() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the projections with vectors, those without): the split ``memstream up`` makes."""
    from memstream.projections import PROJECTIONS

    return (tuple(r.name for r in PROJECTIONS if r.vectors), tuple(r.name for r in PROJECTIONS if not r.vectors))


def _pipeline(root: Path, url: str, prefix: str, embedder: str, apart: bool = False) -> tuple[Pipeline, EventLog, _Recorder]:
    from memstream.workers import Pipeline, PipelineConfig

    settings = _settings(root, url, prefix, embedder)
    eventlog = EventLog(redis_client(url), prefix, settings.shards)
    pipeline = Pipeline(settings, eventlog, PipelineConfig(embedder=embedder, projections=_apart()[0] if apart else ()))
    turns = _turns(pipeline)
    recorder = _Recorder(turns.embedder)
    turns.embedder = recorder
    return pipeline, eventlog, recorder


def _drain_run(
    root: Path, url: str, prefix: str, embedder: str, pairs: list[tuple[str, str]], profile: bool = False, apart: bool = False
) -> dict[str, Any]:
    pipeline, eventlog, recorder = _pipeline(root, url, prefix, embedder, apart)
    child: SidecarDrain | None = None
    try:
        events = _events(pairs)
        for start in range(0, len(events), 500):
            eventlog.append(events[start : start + 500])
        for c in pipeline.consumers:
            c.ensure_groups()
        if apart:
            child = SidecarDrain(pipeline.settings, url, _apart()[1], log_level="WARNING")
        # the model's first calls are slow (session and arena warm-up): warm it as the raw run
        # is warmed, through the inner embedder so the cache does not learn these texts
        getattr(pipeline.embedder, "inner", pipeline.embedder).embed(_warm_texts(pairs))
        per_consumer: dict[str, float] = {}
        for c in pipeline.consumers:  # time each consumer inside Pipeline.drain()

            def timed(inner: Callable[[], int] = c.drain, group: str = c.group) -> int:
                t = time.perf_counter()
                n = inner()
                per_consumer[group] = round(time.perf_counter() - t, 4)
                return n

            c.drain = timed  # type: ignore[method-assign, assignment]  # timed: wraps the drain
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        if child is not None:
            child.go()
        handled = pipeline.drain()
        cpu = time.process_time() - cpu_started
        applied = {c.group: c.stats.applied for c in pipeline.consumers}
        if child is not None:
            there = child.done()
            handled += int(there["drained"])
            cpu += float(there["cpu_seconds"])
            applied.update(there["applied"])
            per_consumer["apart"] = round(float(there["seconds"]), 4)
        seconds = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
        texts = sum(len(c) for c in recorder.calls)
        points = pipeline.store.count(_turns(pipeline).collection)
        result = {
            "events": len(events),
            "handled": handled,
            "seconds": round(seconds, 4),
            "cpu_seconds": round(cpu, 4),
            "events_per_s": round(len(events) / seconds, 1),
            "texts_embedded": texts,
            "embed_calls": len(recorder.calls),
            "embed_seconds": round(recorder.seconds, 4),
            "turn_points": points,
            "consumer_seconds": per_consumer,
            "applied": applied,
        }
        result["_calls"] = recorder.calls
        if profiler is not None:
            result["_profile"] = profiler
        return result
    finally:
        if child is not None:
            child.close()
        pipeline.stop()
        eventlog.client.close()


def _warm_texts(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"User: {u}\nAssistant: {a}" for u, a in pairs[:32]]


def _raw_run(calls: list[list[str]], warm: list[str], model: str = "onnx-minilm") -> dict[str, Any]:
    from memstream.projections import configured_embedder

    embedder = configured_embedder(Settings.load(), model)
    flat = [t for c in calls for t in c]
    embedder.embed(warm)  # warm-up, untimed, as the pipeline's embedder is warmed
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    for c in calls:
        embedder.embed(c)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    return {
        "texts": len(flat),
        "calls": len(calls),
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4),
        "texts_per_s": round(len(flat) / seconds, 1),
        "threads": getattr(embedder, "threads", None),
        "batch_size": getattr(embedder, "batch_size", None),
    }


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else float("nan")


# -- freshness ------------------------------------------------------------------------------
def _substantive(event: TurnRecorded, boilerplate: BoilerplateFilter) -> bool:
    from memstream.projections import TurnsProjection

    text, reason = TurnsProjection.turn_text(boilerplate, event)
    return reason is None and bool(text)


def _freshness_run(
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
    events = _events(_texts(pairs, n, f"fresh-{prefix}"))
    bp = BoilerplateFilter()
    sampled = {i for i in range(n) if i % every == 0}
    sampled = {i for i in sampled if _substantive(events[i], bp)}
    from memstream.service import Sidecar

    pipeline, eventlog, recorder = _pipeline(root, url, prefix, embedder, apart)
    sidecar = Sidecar(pipeline.settings, url, _apart()[1], log_level="WARNING").start() if apart else None
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
        groups = sum(map(len, _apart()))

        def consumers() -> list[Any]:
            return [*pipeline.consumers, *(sidecar.consumers if sidecar is not None else ())]

        turns = _turns(pipeline)
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


# -- the benchmark ---------------------------------------------------------------------------------
def _profile_top(profiler: cProfile.Profile, limit: int = 25) -> list[dict[str, Any]]:
    import pstats

    stats = pstats.Stats(profiler)
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]  # pstats keeps its table there, untyped
        rows.append(
            {"function": f"{Path(file).name}:{line}:{func}", "calls": nc, "tottime": round(tt, 4), "cumtime": round(ct, 4)}
        )
    rows.sort(key=lambda r: -r["tottime"])
    return rows[:limit]


def ingest(
    events: int = 1000,
    as_json: bool = False,
    data: str | None = None,
    *,
    runs: int = 3,
    hash_events: int | None = None,
    rate: float = 100.0,
    seconds: float = 15.0,
    onnx_seconds: float = 10.0,
    onnx_rate: float = 20.0,
    onnx_high_rate: float = 300.0,
    freshness_onnx: bool = True,
    profile: bool = False,
    onnx: bool = True,
    freshness_runs: int = 1,
    model: str = "onnx-minilm",
) -> dict[str, Any]:
    """Run the ingest benchmark and return its results (JSON-ready either way); ``onnx``
    False: the hash embedder's phases only; ``model``: the local model of the pipeline
    against raw model phase (``onnx-minilm`` or ``bge-small``)."""
    pairs, source = _load_pairs(data)
    machine = machine_info()
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-ingest-"))
    server = ValkeyProcess(root / "valkey").start()
    result: dict[str, Any] = {
        "benchmark": "ingest",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "data": source,
        "events": events,
        "runs": runs,
        "targets": TARGETS,
    }
    try:
        url = server.url
        k = 0

        def fresh(name: str) -> tuple[Path, str]:
            nonlocal k
            k += 1
            return root / f"{name}-{k}", f"b{k}"

        # 1. hash ceiling
        hash_n = hash_events or max(events, 2000)
        with _Phase() as phase:
            hruns, aruns, ratios = [], [], []
            for r in range(runs):
                # one process and apart alternate, and so does which of them goes first
                pair: dict[bool, dict[str, Any]] = {}
                for apart in (False, True) if r % 2 == 0 else (True, False):
                    home, prefix = fresh("hash-apart" if apart else "hash")
                    run = _drain_run(home, url, prefix, "hash", _texts(pairs, hash_n, f"hash{r}{apart}"), apart=apart)
                    run.pop("_calls", None)
                    pair[apart] = run
                hruns.append(pair[False])
                aruns.append(pair[True])
                ratios.append(pair[True]["events_per_s"] / pair[False]["events_per_s"])
        result["hash_apart"] = {
            "events": hash_n,
            "events_per_s": _median([r["events_per_s"] for r in aruns]),
            "seconds": _median([r["seconds"] for r in aruns]),
            "cpu_seconds": _median([r["cpu_seconds"] for r in aruns]),
            "consumer_seconds": {g: _median([r["consumer_seconds"][g] for r in aruns]) for g in aruns[0]["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in aruns],
            "applied": aruns[0]["applied"],
        }
        result["apart_ratio"] = round(_median(ratios), 3)
        result["per_run_apart_ratio"] = [round(x, 3) for x in ratios]
        result["hash"] = {
            "events": hash_n,
            "events_per_s": _median([r["events_per_s"] for r in hruns]),
            "seconds": _median([r["seconds"] for r in hruns]),
            "cpu_seconds": _median([r["cpu_seconds"] for r in hruns]),
            "consumer_seconds": {g: _median([r["consumer_seconds"][g] for r in hruns]) for g in hruns[0]["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in hruns],
            "peak_rss_mb": phase.peak_mb,
            "rss_kind": phase.kind,
        }
        # 2. freshness, hash: one process and apart, ``freshness_runs`` pairs, the order alternating
        fruns: dict[str, list[dict[str, Any]]] = {"freshness_hash": [], "freshness_hash_apart": []}
        for r in range(max(1, freshness_runs)):
            order = (("freshness_hash", False), ("freshness_hash_apart", True))
            for key, apart in order if r % 2 == 0 else order[::-1]:
                with _Phase() as phase:
                    home, prefix = fresh(key.replace("_", "-"))
                    fh = _freshness_run(home, url, prefix, "hash", pairs, rate, seconds, apart=apart)
                fh["peak_rss_mb"], fh["rss_kind"] = phase.peak_mb, phase.kind
                fruns[key].append(fh)
        for key, done in fruns.items():
            result[key] = dict(done[0])  # the first run's counts; its latencies: the medians of the runs
            for figure in ("keyword_p50_s", "keyword_p95_s", "p50_s", "p95_s"):
                result[key][figure] = round(_median([f[figure] for f in done]), 4)
                result[key][f"per_run_{figure}"] = [f[figure] for f in done]
            result[key]["max_s"] = max(f["max_s"] for f in done)
            result[key]["keyword_max_s"] = max(f["keyword_max_s"] for f in done)
            result[key]["runs"] = len(done)
        if not onnx:
            return _finish(result, server, root)
        # 3. onnx pipeline vs raw embedder, alternating
        with _Phase() as phase:
            oruns, rruns = [], []
            texts = _texts(pairs, events, "onnx")
            profiler = None
            calls: list[list[str]] | None = None
            for r in range(runs):
                # order alternates (pipeline first, then raw first, ...) so that neither
                # side always runs second on a warmer or busier machine; the raw run
                # embeds the calls the pipeline made (the same for every run: same texts,
                # same batches)
                raw = _raw_run(calls, _warm_texts(texts), model) if r % 2 and calls else None
                raw_first = raw is not None
                home, prefix = fresh("onnx")
                run = _drain_run(home, url, prefix, model, texts, profile=profile and r == runs - 1)
                calls = run.pop("_calls")
                profiler = run.pop("_profile", profiler)
                oruns.append(run)
                if raw is None:
                    raw = _raw_run(calls, _warm_texts(texts), model)
                raw["order"] = "raw first" if raw_first else "pipeline first"
                raw["ratio"] = round(raw["seconds"] / run["seconds"], 3)
                raw["cpu_ratio"] = round(raw["cpu_seconds"] / run["cpu_seconds"], 3)
                rruns.append(raw)
        o = oruns[0]
        result["onnx"] = {
            "model": model,
            "events": events,
            "texts_embedded": o["texts_embedded"],
            "embed_calls": o["embed_calls"],
            "turn_points": o["turn_points"],
            "events_per_s": _median([r["events_per_s"] for r in oruns]),
            "seconds": _median([r["seconds"] for r in oruns]),
            "texts_per_s": _median([r["texts_embedded"] / r["seconds"] for r in oruns]),
            "embed_seconds_in_pipeline": _median([r["embed_seconds"] for r in oruns]),
            "consumer_seconds": {g: _median([r["consumer_seconds"][g] for r in oruns]) for g in o["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in oruns],
            "peak_rss_mb": phase.peak_mb,
            "rss_kind": phase.kind,
        }
        result["raw"] = {
            "texts": rruns[0]["texts"],
            "calls": rruns[0]["calls"],
            "threads": rruns[0]["threads"],
            "batch_size": rruns[0]["batch_size"],
            "texts_per_s": _median([r["texts_per_s"] for r in rruns]),
            "seconds": _median([r["seconds"] for r in rruns]),
            "per_run_texts_per_s": [r["texts_per_s"] for r in rruns],
        }
        result["ratio"] = _median([r["ratio"] for r in rruns])
        result["per_run_ratio"] = [r["ratio"] for r in rruns]
        result["per_run_order"] = [r["order"] for r in rruns]
        # CPU seconds (this process, all threads) are less disturbed by other jobs than wall time
        result["cpu_ratio"] = _median([r["cpu_ratio"] for r in rruns])
        result["onnx"]["cpu_seconds"] = _median([r["cpu_seconds"] for r in oruns])
        result["raw"]["cpu_seconds"] = _median([r["cpu_seconds"] for r in rruns])
        if profiler is not None:
            result["profile_top_tottime"] = _profile_top(profiler)
        # 4. freshness, onnx
        if freshness_onnx:
            with _Phase() as phase:
                home, prefix = fresh("fresh-onnx")
                fo = _freshness_run(
                    home, url, prefix, "onnx-minilm", pairs, rate, onnx_seconds, settle=max(90.0, 0.25 * rate * onnx_seconds)
                )
            fo["peak_rss_mb"], fo["rss_kind"] = phase.peak_mb, phase.kind
            result["freshness_onnx"] = fo
            for key, extra_rate in (("freshness_onnx_low", onnx_rate), ("freshness_onnx_high", onnx_high_rate)):
                if not extra_rate:
                    continue
                with _Phase() as phase:
                    home, prefix = fresh(key.replace("_", "-"))
                    fx = _freshness_run(
                        home,
                        url,
                        prefix,
                        "onnx-minilm",
                        pairs,
                        extra_rate,
                        onnx_seconds,
                        settle=max(90.0, 0.25 * extra_rate * onnx_seconds),
                    )  # the backlog's drain
                fx["peak_rss_mb"], fx["rss_kind"] = phase.peak_mb, phase.kind
                result[key] = fx
    except BaseException:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return _finish(result, server, root)


def _finish(result: dict[str, Any], server: ValkeyProcess, root: Path) -> dict[str, Any]:
    """Stop the server, remove the run's files, and add the process peak, the load and
    which targets were met."""
    # the VmHWM resets also reset ru_maxrss: the process peak is the largest phase peak
    peaks = [v["peak_rss_mb"] for v in result.values() if isinstance(v, dict) and "peak_rss_mb" in v]
    result["ru_maxrss_mb"] = max(peaks + [_maxrss_mb()])
    try:
        result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    server.stop()
    shutil.rmtree(root, ignore_errors=True)
    result["met"] = {
        "hash_events_per_s": result["hash"]["events_per_s"] >= TARGETS["hash_events_per_s"],
        "hash_apart_events_per_s": result["hash_apart"]["events_per_s"] >= TARGETS["hash_events_per_s"],
        "freshness_hash_p95": result["freshness_hash"]["p95_s"] <= TARGETS["freshness_p95_s"],
        "freshness_hash_apart_p95": result["freshness_hash_apart"]["p95_s"] <= TARGETS["freshness_p95_s"],
    }
    if "ratio" in result:
        result["met"]["ratio"] = result["ratio"] >= TARGETS["ratio"]
    for key in ("freshness_onnx", "freshness_onnx_low", "freshness_onnx_high"):
        if key in result:
            result["met"][f"{key}_p95"] = result[key]["p95_s"] <= TARGETS["freshness_p95_s"]
            result["met"][f"{key}_keyword_p95"] = result[key]["keyword_p95_s"] <= TARGETS["freshness_p95_s"]
    return result


def format_ingest(result: dict[str, Any]) -> str:
    m = result["machine"]
    h, a = result["hash"], result["hash_apart"]
    ok = lambda key: "met" if result["met"].get(key) else "MISSED"  # noqa: E731
    lines = [
        f"memstream bench ingest — {result['date']}",
        f"machine: {m.get('cpus')} CPUs {m.get('cpu_model', '')}, Python {m.get('python')}; load average "
        f"{m.get('loadavg_at_start')} at start, {m.get('loadavg_at_end')} at end",
        f"data: {result['data']}; medians of {result['runs']} runs",
        "",
    ]
    if "onnx" in result:
        lines += _format_onnx(result)
    lines += [
        f"pipeline drain, hash embedder, one process: {h['events']} events = {h['events_per_s']} events/s "
        f"(runs {h['per_run_events_per_s']}; target ≥ {TARGETS['hash_events_per_s']:.0f}: "
        f"{ok('hash_events_per_s')}; {h['cpu_seconds']} CPU s)",
        "  per consumer (s): " + ", ".join(f"{g} {s}" for g, s in h["consumer_seconds"].items()),
        f"pipeline drain, hash embedder, facts and sessions apart: {a['events_per_s']} events/s "
        f"(runs {a['per_run_events_per_s']}; target: {ok('hash_apart_events_per_s')}; {a['cpu_seconds']} CPU s "
        f"in both processes); ratio apart / one process {result['apart_ratio']} (runs {result['per_run_apart_ratio']})",
        "  per consumer (s): " + ", ".join(f"{g} {s}" for g, s in a["consumer_seconds"].items()),
        "",
    ]
    for key, label in (
        ("freshness_hash", "hash"),
        ("freshness_hash_apart", "hash, apart"),
        ("freshness_onnx_low", "onnx-minilm"),
        ("freshness_onnx", "onnx-minilm"),
        ("freshness_onnx_high", "onnx-minilm"),
    ):
        f = result.get(key)
        if not f:
            continue
        met = result["met"].get(f"{key}_keyword_p95", result["met"].get(f"{key}_p95"))
        drain = f.get("backlog_drain_s")
        lines.append(
            f"freshness ({label}), {f['achieved_rate_per_s']} turns/s for {f['produced_seconds']} s: "
            f"append → keyword-searchable p50 {f['keyword_p50_s'] * 1000:.0f} ms, p95 {f['keyword_p95_s'] * 1000:.0f} ms "
            f"(target p95 ≤ 1 s: {'met' if met else 'MISSED'}); → vector-searchable p50 {f['p50_s'] * 1000:.0f} ms, "
            f"p95 {f['p95_s'] * 1000:.0f} ms, max {f['max_s'] * 1000:.0f} ms ({f['visible']}/{f['sampled']} sampled "
            f"turns seen; dense {'inline' if f.get('inline') else 'deferred'}, backlog peak {f.get('backlog_peak')}, "
            f"emptied {'never' if drain is None else f'{drain} s'} after the last append; "
            f"mean embed batch {f['mean_embed_batch']})"
        )
    lines += [
        "",
        "peak RSS (MB): hash drains {}, freshness hash {}{}; process peak {}".format(
            h["peak_rss_mb"],
            result["freshness_hash"]["peak_rss_mb"],
            "".join(
                f", {k.replace('_', ' ')} {result[k]['peak_rss_mb']}"
                for k in ("onnx", "freshness_onnx", "freshness_onnx_low", "freshness_onnx_high")
                if k in result
            ),
            result["ru_maxrss_mb"],
        ),
    ]
    if result.get("profile_top_tottime"):
        lines.append("")
        lines.append("profile (last onnx drain, top by own time):")
        for r in result["profile_top_tottime"][:15]:
            lines.append(f"  {r['tottime']:8.3f} s own  {r['cumtime']:8.3f} s cum  {r['calls']:>8}  {r['function']}")
    return "\n".join(lines)


def _format_onnx(result: dict[str, Any]) -> list[str]:
    o, raw = result["onnx"], result["raw"]
    ok = lambda key: "met" if result["met"].get(key) else "MISSED"  # noqa: E731
    return [
        f"pipeline drain, {o.get('model', 'onnx-minilm')}: {o['events']} events in {o['seconds']} s = "
        f"{o['events_per_s']} events/s "
        f"({o['texts_embedded']} texts embedded in {o['embed_calls']} calls, {o['turn_points']} turn points; "
        f"{o['texts_per_s']:.1f} texts/s)",
        "  per consumer (s): "
        + ", ".join(f"{g} {s}" for g, s in o["consumer_seconds"].items())
        + f"; inside embed: {o['embed_seconds_in_pipeline']} s",
        f"raw embedder, same texts and calls: {raw['texts_per_s']} texts/s ({raw['seconds']} s; "
        f"{raw['threads']} threads, model batch {raw['batch_size']})",
        f"ratio pipeline/raw: {result['ratio']} (runs {result['per_run_ratio']}; target ≥ "
        f"{TARGETS['ratio']}: {ok('ratio')}); by CPU seconds {result.get('cpu_ratio')} "
        f"(pipeline {o.get('cpu_seconds')} s, raw {raw.get('cpu_seconds')} s)",
        "",
    ]


# -- the command ---------------------------------------------------------------------------------
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


if __name__ == "__main__":  # python -m memstream.bench.ingest
    from memstream.core import configure

    _parser = argparse.ArgumentParser(prog="python -m memstream.bench.ingest")
    _parser.add_argument("--json", action="store_true")
    add_arguments(_parser)
    configure("WARNING")
    raise SystemExit(run(_parser.parse_args()))
