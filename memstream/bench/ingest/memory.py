"""The ingest bench's memory figures: peak RSS per phase (VmHWM, reset through
/proc/self/clear_refs when the kernel allows) and the process's high-water."""

from __future__ import annotations

import gc
import resource
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


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


def maxrss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class Phase:
    """Peak RSS (MB) of one phase: VmHWM after a reset, else ru_maxrss (lifetime)."""

    def __enter__(self) -> Phase:
        gc.collect()
        self.reset = _reset_hwm()
        return self

    def __exit__(self, *exc: object) -> None:
        hwm = _status_kb("VmHWM") if self.reset else None
        self.peak_mb = round(hwm / 1024, 1) if hwm else maxrss_mb()
        self.kind = "VmHWM" if hwm else "ru_maxrss"
