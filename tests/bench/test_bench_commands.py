"""``memstream bench NAME``: each benchmark a subcommand with its own arguments and ``run``,
loaded only when chosen; the command lines the docs give still parse; no benchmark module
grows past ~400 lines. Nothing here runs a benchmark."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import sys
from pathlib import Path

import pytest

from memstream import cli
from memstream.bench import BENCHMARKS
from memstream.cli import commands

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "memstream" / "bench"
MOST_LINES = 400


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_help_lists_every_benchmark(capsys):
    code, out, err = _run(capsys, "bench", "--help")
    assert code == 0 and err == ""
    for name in BENCHMARKS:
        assert re.search(rf"^\s+{re.escape(name)}\b", out, re.M), name


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_benchmark_has_its_own_help_with_every_default_said(capsys, name):
    code, out, err = _run(capsys, "bench", name, "--help")
    assert code == 0 and err == ""
    assert out.startswith(f"usage: memstream bench {name}")
    assert "--json" in out
    module = importlib.import_module(BENCHMARKS[name][0])
    assert callable(module.add_arguments) and callable(module.run)
    parser = commands.build_parser().subcommands["bench"]  # type: ignore[attr-defined]
    chosen = next(a for a in parser._actions if a.dest == "which").choices[name]
    module.add_arguments(chosen)
    for action in chosen._actions:
        if action.option_strings and action.default not in (None, False, "", argparse.SUPPRESS):
            assert action.help and "default" in action.help, f"{name} {action.option_strings[0]}: its default unsaid"
        if "--runs" in action.option_strings:
            assert action.help and "default" in action.help, f"{name} --runs: what a run is, and its default"


def test_a_benchmark_module_loads_only_when_it_is_chosen(capsys, monkeypatch):
    for module, _ in BENCHMARKS.values():
        monkeypatch.delitem(sys.modules, module, raising=False)
    code, out, err = _run(capsys, "bench", "--help")
    assert code == 0
    assert not [m for m, _ in BENCHMARKS.values() if m in sys.modules]
    _run(capsys, "bench", "text", "--help")
    assert "memstream.bench.text" in sys.modules and "memstream.bench.fleet" not in sys.modules


def _documented() -> list[list[str]]:
    """Every concrete ``memstream bench ...`` command line in README.md and BENCHMARKS.md
    (placeholders like ``[--runs N]`` or ``DIR`` left out)."""
    lines = set()
    for doc in ("README.md", "BENCHMARKS.md"):
        for match in re.finditer(r"memstream bench [a-z]+[^`|\n]*", (ROOT / doc).read_text()):
            line = match.group(0).split("#")[0].split(">")[0].strip()
            if re.search(r"[\[\]\\<>]|\b(DIR|PATH|FILE|N|R|S|W|P|E)\b|--embedder$", line):  # a placeholder, or cut by a code span
                continue
            lines.add(line)
    return [shlex.split(line)[1:] for line in sorted(lines)]


@pytest.mark.parametrize("argv", _documented(), ids=" ".join)
def test_every_documented_bench_command_line_still_parses(argv):
    parser = commands.build_parser()
    args, extra = parser.parse_known_args(argv)
    assert not extra, (argv, extra)
    assert args.which == argv[1] and args.func is commands.cmd_bench


def test_json_before_or_after_the_name_is_kept():
    parser = commands.build_parser()
    assert parser.parse_args(["bench", "--json", "text"]).json is True
    assert parser.parse_args(["bench", "text", "--json"]).json is True
    assert parser.parse_args(["bench", "text"]).json is False


def test_a_flag_of_another_benchmark_is_a_usage_error_naming_it(capsys):
    code, out, err = _run(capsys, "bench", "hotpath", "--agents", "4")
    assert code == 2 and "unrecognized arguments: --agents 4" in err


@pytest.mark.parametrize("name", ["queries", "chaos"])
def test_a_benchmark_without_rq_says_how_to_install_it(capsys, monkeypatch, name):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda module, *a: None if module == "rq" else real(module, *a))
    code, out, err = _run(capsys, "bench", name)
    assert code == 1
    assert f"memstream bench: error: bench {name} needs rq" in err and "pip install 'memstream[bench]'" in err


def test_no_module_of_the_bench_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in BENCH.rglob("*.py") if (n := len(p.read_text().splitlines())) > MOST_LINES}
    assert not long, f"split these by what they hold: {long}"
