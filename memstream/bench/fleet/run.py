"""The run over every level (``fleet_bench``), the tree before's beside it, and the knee."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.fleet.level import level
from memstream.bench.fleet.plan import (
    LEVELS,
    MEMORY_EVERY,
    PROBES_PER_S,
    PROCESSES,
    RATE,
    SEARCH_EVERY,
    SECONDS,
    SETTLE_S,
    TARGETS,
)
from memstream.bench.fleet.supervise import Child
from memstream.bench.stats import machine
from memstream.core import stop_process


def _interrupt_on_sigterm() -> Any:
    """SIGTERM stops the run as Ctrl-C does (the children stopped, the temp dir removed);
    the former handler (None: not on the main thread, nothing changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def knee(levels: list[dict[str, Any]]) -> int | None:
    """The largest N whose prefetch was fresh within budget in at least 95% of the turns and
    whose append-to-searchable p95 was at most 1 s (None: no level)."""
    good = [
        lv["agents"]
        for lv in levels
        if (lv["prefetch"]["fresh_fraction"] or 0.0) >= TARGETS["fresh_fraction"]
        and lv["append_to_searchable_s"]["searchable"]["p95"] is not None
        and lv["append_to_searchable_s"]["searchable"]["p95"] <= TARGETS["append_to_searchable_p95_s"]
    ]
    return max(good, default=None)


def _lossless(levels: list[dict[str, Any]]) -> bool:
    return all(lv["events"]["lost"] == 0 and lv["events"]["duplicated"] == 0 for lv in levels)


def fleet_bench(
    levels: tuple[int, ...] = LEVELS,
    rate: float = RATE,
    seconds: float = SECONDS,
    processes: int = PROCESSES,
    embedder: str = "hash",
    *,
    probes_per_s: float = PROBES_PER_S,
    settle: float = SETTLE_S,
    seed: int = 7,
    memory_every: int = MEMORY_EVERY,
    search_every: int = SEARCH_EVERY,
    cached: bool = False,
    against: str = "",
    embed_threads: int = 0,
    late_rerank: str = "auto",
) -> dict[str, Any]:
    """Run every level (see the module doc); JSON-ready results. ``memory_every`` and
    ``search_every``: an agent's turns per memory write and per tool search; ``cached``: the
    agents ask 60 questions over and over instead of a new one every turn; ``against``: another
    checkout whose service runs each level too (the trees alternating which goes first), its
    levels and knee under ``against``; ``embed_threads``: every service's onnxruntime threads
    (``MEMSTREAM_EMBED_THREADS``; 0: the setting's default); ``late_rerank``: every service's
    late interaction (``MEMSTREAM_LATE_RERANK``; auto: the setting's default)."""
    started = time.monotonic()
    out: dict[str, Any] = {
        "benchmark": "fleet",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": embedder,
        "rate_per_agent": rate,
        "seconds": seconds,
        "processes": processes,
        "probes_per_s": probes_per_s,
        "memory_every": memory_every,
        "search_every": search_every,
        "questions": "cached" if cached else "fresh",
        "embed_threads": embed_threads,
        "late_rerank": late_rerank,
        "targets": TARGETS,
        "levels": [],
    }
    before: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-fleet-"))
    children: list[Child] = []
    former = _interrupt_on_sigterm()
    try:
        for i, n in enumerate(levels):
            trees = [("", out["levels"])] + ([(against, before)] if against else [])
            for tree, into in trees[:: -1 if i % 2 else 1]:
                into.append(
                    level(
                        root / f"level-{i}-{n}{'-against' if tree else ''}",
                        n,
                        max(1, processes),
                        rate,
                        seconds,
                        embedder,
                        probes_per_s,
                        settle,
                        seed + i,
                        (memory_every, search_every),
                        children,
                        cached,
                        tree,
                        embed_threads,
                        late_rerank,
                    )
                )
    finally:
        for child in reversed(children):  # agents first, then the service (and its Valkey)
            stop_process(child.proc, 10)
        if os.environ.get("MEMSTREAM_BENCH_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)
        if former is not None:
            signal.signal(signal.SIGTERM, former)
    out["knee"] = knee(out["levels"])
    out["lossless"] = _lossless(out["levels"])
    if against:
        out["against"] = {"path": against, "levels": before, "knee": knee(before), "lossless": _lossless(before)}
    out["total_s"] = round(time.monotonic() - started, 1)
    out["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out
