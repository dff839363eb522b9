"""Numeric argument types for argparse: every value checked at parse time, so a bad one is a
usage error (exit 2) naming the argument. Shared by the command line (``memstream.cli.args``)
and the benchmarks' own arguments (``memstream.bench``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["TIMEOUT_MAX", "ascending_counts", "int_between", "minutes", "per_second", "seconds", "shown"]

TIMEOUT_MAX = 3600.0  # seconds


def shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def seconds(text: str) -> float:
    """A finite number of seconds above 0 and at most ``TIMEOUT_MAX``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= TIMEOUT_MAX):
        raise argparse.ArgumentTypeError(
            f"seconds must be a finite number above 0 and at most {TIMEOUT_MAX:g} (got {shown(text)})"
        )
    return value


def minutes(text: str) -> float:
    """A finite number of minutes above 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number of minutes") from None
    if not (math.isfinite(value) and 0 < value <= 24 * 60):
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most a day (got {shown(text)})")
    return value


def per_second(text: str) -> float:
    """A finite rate above 0 and at most 1,000 a second."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number per second") from None
    if not (math.isfinite(value) and 0 < value <= 1000):
        raise argparse.ArgumentTypeError(f"a rate must be above 0 and at most 1000 a second (got {shown(text)})")
    return value


def int_between(low: int, high: int) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high} (got {value})")
        return value

    parse.__name__ = f"int {low}..{high}"
    return parse


def ascending_counts(text: str) -> tuple[int, ...]:
    """Comma-separated positive counts in ascending order (at most ten million each)."""
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or max(sizes) > 10_000_000 or list(sizes) != sorted(sizes):
        raise argparse.ArgumentTypeError(f"ascending positive counts, e.g. 10000,100000 (got {shown(text)})")
    return sizes
