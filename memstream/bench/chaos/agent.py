"""The chaos bench's agent process: a real provider taking turns at a steady rate, each
event written to its ledger before the hook, its hook times written at exit."""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid


def agent_main(home: str, name: str, rate: float, ledger: str, stats_path: str) -> None:
    """One agent: sync_turn at ``rate`` turns/s until SIGTERM; ledger line per returned turn."""
    from memstream.core import Settings
    from memstream.provider import MemstreamProvider

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    settings = Settings.load(home=home)
    provider = MemstreamProvider(settings)
    session = f"{name}-{uuid.uuid4().hex[:8]}"
    provider.initialize(session, platform="cli", agent_identity=name)
    out = open(ledger, "a", buffering=1)
    durations: list[float] = []
    n = 0
    last_stats = time.monotonic()
    while not stop["now"]:
        marker = f"chaos-{name}-{uuid.uuid4().hex[:12]}"
        t = time.perf_counter()
        provider.sync_turn(
            f"{marker}: the deploy of service {n % 17} moved to region {n % 5}", f"Noted {marker}.", session_id=session
        )
        durations.append((time.perf_counter() - t) * 1000)
        out.write(marker + "\n")
        n += 1
        if time.monotonic() - last_stats > 0.5:
            _write_stats(stats_path, durations)
            last_stats = time.monotonic()
        time.sleep(random.expovariate(rate) if rate > 0 else 0.1)
    _write_stats(stats_path, durations)
    provider.shutdown()
    out.close()


def _write_stats(path: str, durations: list[float]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(
            {
                "calls": len(durations),
                "max_ms": max(durations, default=0.0),
                "durations": [round(d, 3) for d in durations[-20000:]],
            },
            f,
        )
    os.replace(tmp, path)
