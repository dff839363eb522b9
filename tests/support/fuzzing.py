"""How hard the property-based tests push: each runs its CI number of examples times
``MEMSTREAM_FUZZ_SCALE`` (default 1). CI runs them time-boxed at scale 1; the longer
fuzzing run is ``make fuzz`` (scale 50), recorded in BENCHMARKS.md."""

from __future__ import annotations

import os


def _scale() -> int:
    try:
        return max(1, int(os.environ.get("MEMSTREAM_FUZZ_SCALE", "1")))
    except ValueError:
        return 1


SCALE = _scale()


def examples(n: int) -> int:
    """``n`` examples in CI, ``n * MEMSTREAM_FUZZ_SCALE`` in a fuzzing run."""
    return n * SCALE
