"""The command line's argument types and bounds: every value is checked at parse time, so
a bad one is a usage error (exit 2) naming the argument, before anything runs. The numeric
types (``seconds``, ``int_between``, ...) are in ``memstream.core.argtypes``, shared with the
benchmarks' own arguments."""

from __future__ import annotations

import argparse
import re

from memstream.core import argtypes
from memstream.query import most

__all__ = [
    "COUNT_MAX",
    "K_MAX",
    "NAME_MAX",
    "QUERY_MAX",
    "archive_point",
    "entry_id",
    "printable",
]

NAME_MAX = 256  # tenant, agent, session, scope, group, worker name: characters
QUERY_MAX = 4096  # search query: characters
K_MAX = most("search", "k")  # search results: the query protocol's bound
COUNT_MAX = 100_000  # dlq list
_U64 = (1 << 64) - 1
_ENTRY_ID = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def entry_id(text: str) -> str:
    """A stream entry id ``MS[-SEQ]``, each part a 64-bit unsigned number."""
    match = _ENTRY_ID.fullmatch(text)
    if not match or int(match.group(1)) > _U64 or int(match.group(2) or 0) > _U64:
        raise argparse.ArgumentTypeError(
            f"{argtypes.shown(text)} is not a log entry id (MS-SEQ, e.g. 1795398237060-0, each part at most "
            f"{_U64}; `memstream export` prints each event's entry_id)"
        )
    return text


def printable(what: str, limit: int = NAME_MAX):
    """A name or text called ``what``: 1 to ``limit`` printable characters, not all spaces."""

    def parse(text: str) -> str:
        if not text.strip() or len(text) > limit or not text.isprintable():
            raise argparse.ArgumentTypeError(
                f"{what} must be 1 to {limit} printable characters, not all spaces (got {argtypes.shown(text)})"
            )
        return text

    parse.__name__ = what
    return parse


def archive_point(text: str) -> str:
    """Where an archive stops: a log entry id ``MS[-SEQ]`` or a date or time (ISO, UTC when
    it names no zone), as the entry id ``MS-SEQ`` it means."""
    from memstream.producers import entry_id_of

    try:
        return entry_id_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
