"""The ingest bench's pipeline under test: its drains timed (``drain_run``, the embedder's
calls recorded, and the late-interaction model's where the pipeline stores token vectors) and
the raw models on the very same calls (``raw_run``)."""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from memstream.bench.workload import pipeline_settings, turn_events
from memstream.core import Settings
from memstream.producers import EventLog, redis_client
from memstream.service import SidecarDrain

if TYPE_CHECKING:
    import numpy as np

    from memstream.projections import Embedder, TurnsProjection
    from memstream.workers import Pipeline


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


class _LateRecorder:
    """Wraps the late-interaction model the dense stage stores passages' token vectors with:
    records each ``passage_blobs`` call (the texts it was given: ``LatePassages.warm``'s)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def passage_blobs(self, texts: Sequence[str]) -> Any:
        items = list(texts)
        self.calls.append(items)
        return self.inner.passage_blobs(items)


def turns_of(pipeline: Pipeline) -> TurnsProjection:
    from memstream.projections import TurnsProjection

    return pipeline.projection("turns", TurnsProjection)


def apart_groups() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the projections with vectors, those without): the split ``memstream up`` makes."""
    from memstream.projections import PROJECTIONS

    return (tuple(r.name for r in PROJECTIONS if r.vectors), tuple(r.name for r in PROJECTIONS if not r.vectors))


def pipeline_under_test(
    root: Path, url: str, prefix: str, embedder: str, apart: bool = False
) -> tuple[Pipeline, EventLog, _Recorder]:
    from memstream.workers import Pipeline, PipelineConfig

    settings = pipeline_settings(root, url, prefix, embedder)
    eventlog = EventLog(redis_client(url), prefix, settings.shards)
    pipeline = Pipeline(settings, eventlog, PipelineConfig(embedder=embedder, projections=apart_groups()[0] if apart else ()))
    turns = turns_of(pipeline)
    recorder = _Recorder(turns.embedder)
    turns.embedder = recorder
    return pipeline, eventlog, recorder


def _record_late(pipeline: Pipeline) -> _LateRecorder | None:
    """The late-interaction model's calls recorded, where the dense stage stores the passages'
    token vectors (None: it stores none); the model is loaded here and warmed by ``drain_run``
    (``inner``: unrecorded), before the drain's clock starts, as the embedder is."""
    if pipeline.late is None:
        return None
    late = _LateRecorder(pipeline.late.scorer())
    pipeline.late.scorer = lambda: late  # type: ignore[assignment, return-value]  # a recording proxy of the model
    return late


def drain_run(
    root: Path, url: str, prefix: str, embedder: str, pairs: list[tuple[str, str]], profile: bool = False, apart: bool = False
) -> dict[str, Any]:
    pipeline, eventlog, recorder = pipeline_under_test(root, url, prefix, embedder, apart)
    late = _record_late(pipeline)
    child: SidecarDrain | None = None
    try:
        events = turn_events(pairs)
        for start in range(0, len(events), 500):
            eventlog.append(events[start : start + 500])
        for c in pipeline.consumers:
            c.ensure_groups()
        if apart:
            child = SidecarDrain(pipeline.settings, url, apart_groups()[1], log_level="WARNING")
        # the models' first calls are slow (session and arena warm-up): warm them as the raw run
        # warms its own, through the inner embedder and the late model itself, so that neither
        # the cache nor the recorded calls learn these texts
        warm = warm_texts(pairs)
        getattr(pipeline.embedder, "inner", pipeline.embedder).embed(warm)
        if late is not None:
            late.inner.passages(warm)
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
        points = pipeline.store.count(turns_of(pipeline).collection)
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
        result["_late_calls"] = late.calls if late is not None else []
        if profiler is not None:
            result["_profile"] = profiler
        return result
    finally:
        if child is not None:
            child.close()
        pipeline.stop()
        eventlog.client.close()


def warm_texts(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"User: {u}\nAssistant: {a}" for u, a in pairs[:32]]


def raw_run(
    calls: list[list[str]], warm: list[str], model: str = "onnx-minilm", late_calls: Sequence[list[str]] = ()
) -> dict[str, Any]:
    """The raw models on the pipeline's calls: the embedder on ``calls`` and, where the pipeline
    stored passages' token vectors, the late-interaction model on ``late_calls``, each warmed
    first (untimed), with the threads the pipeline's were given."""
    from memstream.projections import configured_embedder, shared_late_scorer

    settings = Settings.load()
    embedder = configured_embedder(settings, model)
    late = shared_late_scorer(settings.embed_threads or None) if late_calls else None
    flat = [t for c in calls for t in c]
    embedder.embed(warm)  # warm-up, untimed, as the pipeline's embedder is warmed
    if late is not None:
        late.passages(warm)
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    for c in calls:
        embedder.embed(c)
    for c in late_calls:
        late.passages(c)  # type: ignore[union-attr]  # set when there are late calls
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    return {
        "texts": len(flat),
        "calls": len(calls),
        "late_texts": sum(len(c) for c in late_calls),
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4),
        "texts_per_s": round(len(flat) / seconds, 1),
        "threads": getattr(embedder, "threads", None),
        "batch_size": getattr(embedder, "batch_size", None),
    }


def median_of(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else float("nan")
