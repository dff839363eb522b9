"""``memstream bench NAME``: one subcommand per benchmark, each with its own arguments
(``add_arguments``) and work (``run``) in its module (``memstream.bench.BENCHMARKS``). A
benchmark's module, and what it imports, loads only when the benchmark is chosen (its
``--help`` included), so building the parser stays cheap for every other command."""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import Any

from memstream.bench import BENCHMARKS, BenchError
from memstream.core import Settings
from memstream.ops import CommandError

__all__ = ["add_benchmarks", "cmd_bench"]


def _module(parser: argparse.ArgumentParser) -> ModuleType:
    return importlib.import_module(parser.get_default("bench_module"))


class _Benchmarks(argparse._SubParsersAction):  # argparse's own subcommand action, loading on choice
    """The chosen benchmark's subparser gets its arguments just before it parses them."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        chosen = self._name_parser_map.get(values[0]) if values else None
        if chosen is not None and not chosen.get_default("bench_loaded"):
            _module(chosen).add_arguments(chosen)
            chosen.set_defaults(bench_loaded=True)
        super().__call__(parser, namespace, values, option_string)


def add_benchmarks(bench: argparse.ArgumentParser) -> None:
    """Give the ``bench`` subcommand's parser one subcommand per benchmark."""
    names = bench.add_subparsers(dest="which", metavar="NAME", required=True, action=_Benchmarks)
    for name, (module, help) in BENCHMARKS.items():
        p = names.add_parser(name, help=help, description=f"memstream bench {name}: {help}")
        # after the name as well as before it; SUPPRESS keeps a --json given before the name
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
        p.set_defaults(bench_module=module, bench_loaded=False)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    """Run the chosen benchmark; its failure is the command's (one line, exit 1)."""
    try:
        return int(importlib.import_module(args.bench_module).run(args))
    except BenchError as exc:
        raise CommandError(str(exc)) from exc
