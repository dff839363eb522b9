"""What every benchmark's command shares: its failure (``BenchError``: one line, exit 1),
how it prints its result (one JSON line with ``--json``, else its table), and what it says
when a package it compares against is missing (``needs``). A benchmark module has
``add_arguments(parser)`` (its own flags, each saying its default; their types from
``memstream.core.argtypes``) and ``run(args) -> int`` (the exit code); ``memstream bench
NAME`` finds it in ``memstream.bench.BENCHMARKS``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memstream.core import LATE_RERANK_MODES, PermanentError

__all__ = ["BenchError", "OK", "late_rerank_option", "needs", "show"]

OK = 0


class BenchError(PermanentError):
    """A benchmark that cannot run as asked (bad input, missing data, a server that did not
    come up): the command prints this one line and exits 1."""


def checkout(path: str, needs: str) -> Path:
    """``path``, another checkout measured beside this one (``--against``), resolved;
    ``BenchError`` when it holds no ``needs`` (the part of the tree the bench runs there)."""
    resolved = Path(path).resolve()
    if not (resolved / needs).exists():
        raise BenchError(f"{resolved} is not a memstream checkout (no {needs})")
    return resolved


def show(args: argparse.Namespace, result: Any, text: str) -> int:
    """``result`` as one JSON line with ``--json``, otherwise ``text``; the exit code."""
    print(json.dumps(result, default=str) if getattr(args, "json", False) else text)
    return OK


def needs(module: str, bench: str, why: str) -> None:
    """Raise ``BenchError`` saying how to install ``module`` when it is missing: some
    benchmarks measure against packages that running memstream does not need (the ``bench``
    extra)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise BenchError(f"bench {bench} needs {module} ({why}), which is not installed: pip install 'memstream[bench]'")


def late_rerank_option(parser: argparse.ArgumentParser, default: str, whose: str, default_is: str) -> None:
    """``--late-rerank``: the late interaction (``MEMSTREAM_LATE_RERANK``) of every process
    ``whose`` names, one of the setting's values; ``default_is`` says what ``default`` means."""
    parser.add_argument(
        "--late-rerank",
        choices=LATE_RERANK_MODES,
        default=default,
        help=f"the late interaction of every {whose} (MEMSTREAM_LATE_RERANK; default: {default_is})",
    )
