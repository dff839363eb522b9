"""The command line's argument types and bounds: every value is checked at parse time, so
a bad one is a usage error (exit 2) naming the argument, before anything runs."""

from __future__ import annotations

import argparse
import math
import re

from memstream.query import most

__all__ = [
    "COUNT_MAX",
    "K_MAX",
    "NAME_MAX",
    "QUERY_MAX",
    "TIMEOUT_MAX",
    "archive_point",
    "ascending_counts",
    "entry_id",
    "int_between",
    "minutes",
    "per_second",
    "printable",
    "seconds",
]

NAME_MAX = 256  # tenant, agent, session, scope, group, worker name: characters
QUERY_MAX = 4096  # search query: characters
K_MAX = most("search", "k")  # search results: the query protocol's bound
TIMEOUT_MAX = 3600.0  # seconds
COUNT_MAX = 100_000  # dlq list
_U64 = (1 << 64) - 1
_ENTRY_ID = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _shown(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def seconds(text: str) -> float:
    """A finite number of seconds above 0 and at most ``TIMEOUT_MAX``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= TIMEOUT_MAX):
        raise argparse.ArgumentTypeError(
            f"seconds must be a finite number above 0 and at most {TIMEOUT_MAX:g} (got {_shown(text)})"
        )
    return value


def minutes(text: str) -> float:
    """A finite number of minutes above 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of minutes") from None
    if not (math.isfinite(value) and 0 < value <= 24 * 60):
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most a day (got {_shown(text)})")
    return value


def per_second(text: str) -> float:
    """A finite rate above 0 and at most 1,000 a second."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number per second") from None
    if not (math.isfinite(value) and 0 < value <= 1000):
        raise argparse.ArgumentTypeError(f"a rate must be above 0 and at most 1000 a second (got {_shown(text)})")
    return value


def int_between(low: int, high: int):
    """A whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high} (got {value})")
        return value

    parse.__name__ = f"int {low}..{high}"
    return parse


def entry_id(text: str) -> str:
    """A stream entry id ``MS[-SEQ]``, each part a 64-bit unsigned number."""
    match = _ENTRY_ID.fullmatch(text)
    if not match or int(match.group(1)) > _U64 or int(match.group(2) or 0) > _U64:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a log entry id (MS-SEQ, e.g. 1795398237060-0, each part at most "
            f"{_U64}; `memstream export` prints each event's entry_id)"
        )
    return text


def printable(what: str, limit: int = NAME_MAX):
    """A name or text called ``what``: 1 to ``limit`` printable characters, not all spaces."""

    def parse(text: str) -> str:
        if not text.strip() or len(text) > limit or not text.isprintable():
            raise argparse.ArgumentTypeError(
                f"{what} must be 1 to {limit} printable characters, not all spaces (got {_shown(text)})"
            )
        return text

    parse.__name__ = what
    return parse


def ascending_counts(text: str) -> tuple[int, ...]:
    """Comma-separated positive counts in ascending order (at most ten million each)."""
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or max(sizes) > 10_000_000 or list(sizes) != sorted(sizes):
        raise argparse.ArgumentTypeError(f"ascending positive counts, e.g. 10000,100000 (got {_shown(text)})")
    return sizes


def archive_point(text: str) -> str:
    """Where an archive stops: a log entry id ``MS[-SEQ]`` or a date or time (ISO, UTC when
    it names no zone), as the entry id ``MS-SEQ`` it means."""
    from memstream.producers import entry_id_of

    try:
        return entry_id_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
