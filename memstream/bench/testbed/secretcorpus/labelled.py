"""The labelled secrets of a part (``secrets``): every draw with its seed and carriers."""

from __future__ import annotations

import random
from typing import Any

from memstream.bench.testbed.secretcorpus.fourth import fourth_draw
from memstream.bench.testbed.secretcorpus.named import LAST_CARRIERS, MORE_CARRIERS, THIRD_CARRIERS, TUNED_CARRIERS, named_secrets
from memstream.bench.testbed.secretcorpus.shapes import special_secrets
from memstream.bench.testbed.secretcorpus.values import PARTS, PROVIDERS, ValueMaker


def secrets(part: str) -> list[dict[str, Any]]:
    """The labelled secrets of ``part`` (``tuned`` or ``heldout``): each a dict with ``text``,
    ``secrets`` (the values that must not survive), ``kind``, ``form`` and ``part``.

    ``tuned`` is three draws (seeds 1, 7 and 23, each with its own carriers and templates);
    ``heldout`` a fourth (seed 31, its own carriers and templates), written before it was
    first measured and not tuned on."""
    if part not in PARTS:
        raise ValueError(f"part is one of {PARTS}")
    if part == "heldout":
        return fourth_draw(ValueMaker(random.Random(131)), 1, part)
    v = ValueMaker(random.Random(31))  # the third held-out draw, measured then tuned on
    out = named_secrets(v, LAST_CARRIERS, 3 * len(PROVIDERS), part) + special_secrets(v, 3, part)
    for seed, carriers, variant, extra in (
        (1, TUNED_CARRIERS, 0, 40),
        (7, MORE_CARRIERS, 1, 10),
        (23, THIRD_CARRIERS, 2, len(PROVIDERS)),
    ):
        v = ValueMaker(random.Random(seed))
        out += named_secrets(v, carriers, 2 * len(PROVIDERS) + extra, part) + special_secrets(v, variant, part)
    return out + fourth_draw(ValueMaker(random.Random(101)), 0, part)
