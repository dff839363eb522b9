"""The ingest bench's phases in order and their result (``ingest``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.bench.ingest.drain import drain_run, median_of, raw_run, warm_texts
from memstream.bench.ingest.freshness import freshness_run
from memstream.bench.ingest.memory import Phase, maxrss_mb
from memstream.bench.stats import machine as machine_info
from memstream.bench.workload import load_pairs, sample_texts
from memstream.service import ValkeyProcess

if TYPE_CHECKING:
    import cProfile


TARGETS = {"ratio": 0.9, "hash_events_per_s": 2000.0, "freshness_p95_s": 1.0}


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
    pairs, source = load_pairs(data)
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
        with Phase() as phase:
            hruns, aruns, ratios = [], [], []
            for r in range(runs):
                # one process and apart alternate, and so does which of them goes first
                pair: dict[bool, dict[str, Any]] = {}
                for apart in (False, True) if r % 2 == 0 else (True, False):
                    home, prefix = fresh("hash-apart" if apart else "hash")
                    run = drain_run(home, url, prefix, "hash", sample_texts(pairs, hash_n, f"hash{r}{apart}"), apart=apart)
                    run.pop("_calls", None)
                    pair[apart] = run
                hruns.append(pair[False])
                aruns.append(pair[True])
                ratios.append(pair[True]["events_per_s"] / pair[False]["events_per_s"])
        result["hash_apart"] = {
            "events": hash_n,
            "events_per_s": median_of([r["events_per_s"] for r in aruns]),
            "seconds": median_of([r["seconds"] for r in aruns]),
            "cpu_seconds": median_of([r["cpu_seconds"] for r in aruns]),
            "consumer_seconds": {g: median_of([r["consumer_seconds"][g] for r in aruns]) for g in aruns[0]["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in aruns],
            "applied": aruns[0]["applied"],
        }
        result["apart_ratio"] = round(median_of(ratios), 3)
        result["per_run_apart_ratio"] = [round(x, 3) for x in ratios]
        result["hash"] = {
            "events": hash_n,
            "events_per_s": median_of([r["events_per_s"] for r in hruns]),
            "seconds": median_of([r["seconds"] for r in hruns]),
            "cpu_seconds": median_of([r["cpu_seconds"] for r in hruns]),
            "consumer_seconds": {g: median_of([r["consumer_seconds"][g] for r in hruns]) for g in hruns[0]["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in hruns],
            "peak_rss_mb": phase.peak_mb,
            "rss_kind": phase.kind,
        }
        # 2. freshness, hash: one process and apart, ``freshness_runs`` pairs, the order alternating
        fruns: dict[str, list[dict[str, Any]]] = {"freshness_hash": [], "freshness_hash_apart": []}
        for r in range(max(1, freshness_runs)):
            order = (("freshness_hash", False), ("freshness_hash_apart", True))
            for key, apart in order if r % 2 == 0 else order[::-1]:
                with Phase() as phase:
                    home, prefix = fresh(key.replace("_", "-"))
                    fh = freshness_run(home, url, prefix, "hash", pairs, rate, seconds, apart=apart)
                fh["peak_rss_mb"], fh["rss_kind"] = phase.peak_mb, phase.kind
                fruns[key].append(fh)
        for key, done in fruns.items():
            result[key] = dict(done[0])  # the first run's counts; its latencies: the medians of the runs
            for figure in ("keyword_p50_s", "keyword_p95_s", "p50_s", "p95_s"):
                result[key][figure] = round(median_of([f[figure] for f in done]), 4)
                result[key][f"per_run_{figure}"] = [f[figure] for f in done]
            result[key]["max_s"] = max(f["max_s"] for f in done)
            result[key]["keyword_max_s"] = max(f["keyword_max_s"] for f in done)
            result[key]["runs"] = len(done)
        if not onnx:
            return _finish(result, server, root)
        # 3. onnx pipeline vs raw embedder, alternating
        with Phase() as phase:
            oruns, rruns = [], []
            texts = sample_texts(pairs, events, "onnx")
            profiler = None
            calls: list[list[str]] | None = None
            late_calls: list[list[str]] = []
            for r in range(runs):
                # order alternates (pipeline first, then raw first, ...) so that neither
                # side always runs second on a warmer or busier machine; the raw run
                # embeds the calls the pipeline made (the same for every run: same texts,
                # same batches)
                raw = raw_run(calls, warm_texts(texts), model, late_calls) if r % 2 and calls else None
                raw_first = raw is not None
                home, prefix = fresh("onnx")
                run = drain_run(home, url, prefix, model, texts, profile=profile and r == runs - 1)
                calls = run.pop("_calls")
                late_calls = run.pop("_late_calls")
                profiler = run.pop("_profile", profiler)
                oruns.append(run)
                if raw is None:
                    raw = raw_run(calls, warm_texts(texts), model, late_calls)
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
            "events_per_s": median_of([r["events_per_s"] for r in oruns]),
            "seconds": median_of([r["seconds"] for r in oruns]),
            "texts_per_s": median_of([r["texts_embedded"] / r["seconds"] for r in oruns]),
            "embed_seconds_in_pipeline": median_of([r["embed_seconds"] for r in oruns]),
            "consumer_seconds": {g: median_of([r["consumer_seconds"][g] for r in oruns]) for g in o["consumer_seconds"]},
            "per_run_events_per_s": [r["events_per_s"] for r in oruns],
            "peak_rss_mb": phase.peak_mb,
            "rss_kind": phase.kind,
        }
        result["raw"] = {
            "texts": rruns[0]["texts"],
            "calls": rruns[0]["calls"],
            "late_texts": rruns[0]["late_texts"],
            "threads": rruns[0]["threads"],
            "batch_size": rruns[0]["batch_size"],
            "texts_per_s": median_of([r["texts_per_s"] for r in rruns]),
            "seconds": median_of([r["seconds"] for r in rruns]),
            "per_run_texts_per_s": [r["texts_per_s"] for r in rruns],
        }
        result["ratio"] = median_of([r["ratio"] for r in rruns])
        result["per_run_ratio"] = [r["ratio"] for r in rruns]
        result["per_run_order"] = [r["order"] for r in rruns]
        # CPU seconds (this process, all threads) are less disturbed by other jobs than wall time
        result["cpu_ratio"] = median_of([r["cpu_ratio"] for r in rruns])
        result["onnx"]["cpu_seconds"] = median_of([r["cpu_seconds"] for r in oruns])
        result["raw"]["cpu_seconds"] = median_of([r["cpu_seconds"] for r in rruns])
        if profiler is not None:
            result["profile_top_tottime"] = _profile_top(profiler)
        # 4. freshness, onnx
        if freshness_onnx:
            with Phase() as phase:
                home, prefix = fresh("fresh-onnx")
                fo = freshness_run(
                    home, url, prefix, "onnx-minilm", pairs, rate, onnx_seconds, settle=max(90.0, 0.25 * rate * onnx_seconds)
                )
            fo["peak_rss_mb"], fo["rss_kind"] = phase.peak_mb, phase.kind
            result["freshness_onnx"] = fo
            for key, extra_rate in (("freshness_onnx_low", onnx_rate), ("freshness_onnx_high", onnx_high_rate)):
                if not extra_rate:
                    continue
                with Phase() as phase:
                    home, prefix = fresh(key.replace("_", "-"))
                    fx = freshness_run(
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
    result["ru_maxrss_mb"] = max(peaks + [maxrss_mb()])
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
