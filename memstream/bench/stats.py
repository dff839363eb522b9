"""What every benchmark shares: one percentile definition, the machine's description and a
process's resident memory.

Percentiles are nearest-rank (the smallest sample with at least ``q`` of the samples at
or below it: ``sorted[ceil(q * n) - 1]``), never interpolated, so a reported p99 is a
time some call really took. Medians are ``statistics.median`` (the mean of the two
middle samples of an even count).
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any, Sequence

__all__ = ["percentile", "latency_summary", "machine", "rss_mb", "sign_test"]


def rss_mb(pid: int | str = "self") -> float:
    """The resident memory of process ``pid`` now (``VmRSS``; this process by default), MB;
    0.0 when it cannot be read (the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q`` percentile (0 < q <= 1) of ``values``; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def latency_summary(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """n, p50 (median), p95, p99 and max of ``values``, in their own unit."""
    import statistics

    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(statistics.median(values), digits),
        "p95": round(percentile(values, 0.95), digits),
        "p99": round(percentile(values, 0.99), digits),
        "max": round(max(values), digits),
    }


def machine() -> dict[str, Any]:
    """CPUs, CPU model, Python, platform and the load average when the benchmark starts."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": load,
    }


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of paired outcomes: the probability, with no difference
    between the two systems, of a split of the ``wins + losses`` discordant pairs at least
    as uneven as this one (ties are left out before). 1.0 with no discordant pair."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / float(2**n)
    return min(1.0, 2 * tail)
