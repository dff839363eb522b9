"""Memory given back at rest: once a process that worked goes quiet, a full garbage
collection and the free pages of the C heap returned to the system (``AtRest``).

A process keeps what it freed: Python's collector frees the cycles of a burst of work only
when a generation fills, and glibc keeps the pages freed in each thread's arena for later
allocations. In the service after the first session that is about 6 MB, and 2 MB in its
child (BENCHMARKS.md, "Memory of the embedded default, again"). Whether the process rests is
read from its own CPU time (every thread's: the models', the engine's), so no loop needs to
report its work; a resting process gives back once, not again until it has worked."""

from __future__ import annotations

import gc
import time
from typing import Callable

from memstream.core import release_freed_heap

__all__ = ["AtRest"]


class AtRest:
    """Call ``tick`` from a loop that runs every second or so: every ``PERIOD_S`` it reads the
    process's CPU time; a period under ``QUIET_CPU_S`` after at least one busy period (the
    process's start counts as one) gives the memory back (True). ``given_back`` counts. Under a
    load that comes and goes that is one full collection (tens of ms) per busy spell at most."""

    PERIOD_S = 5.0
    QUIET_CPU_S = 0.25  # CPU seconds in a period: the service at rest uses about 0.08

    def __init__(self, *, cpu: Callable[[], float] = time.process_time, clock: Callable[[], float] = time.monotonic) -> None:
        self._cpu_of, self._clock = cpu, clock
        self._cpu, self._at = 0.0, clock()  # from the process's start: its imports and loads are work
        self._worked = False
        self.given_back = 0

    def tick(self) -> bool:
        now = self._clock()
        if now - self._at < self.PERIOD_S:
            return False
        cpu = self._cpu_of()
        used, self._cpu, self._at = cpu - self._cpu, cpu, now
        if used >= self.QUIET_CPU_S:
            self._worked = True
            return False
        if not self._worked:
            return False
        self._worked = False
        gc.collect()
        release_freed_heap()
        self.given_back += 1
        return True
