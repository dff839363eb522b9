"""``memstream bench text``: the text stages on adversarial input, to show they stay linear.

The stages (``redact``, ``boilerplate``, ``chunking``, ``facts``) run on every turn a
worker projects, on text of up to ``MEMSTREAM_MAX_TEXT_BYTES`` (256 KiB by default) that
can be anything an agent echoed (a fetched web page, a log). A pattern that re-reads the
rest of the text from each of many starting points costs time quadratic in the size and
stalls the workers; this benchmark feeds each stage inputs built to provoke exactly that
(``ADVERSARIAL``: one short unit repeated up to the size, e.g. ``"token:" * n``, plus a
``mixed`` text cycling through all of them) and ordinary prose (``prose``) as the
baseline, at several sizes, and reports per stage the median milliseconds, the worst
input, and the ratio of the time at the largest size to the time at the next one (4x the
size: about 4 when linear, about 16 when quadratic).

The same corpus is used by ``tests/workers/test_text_linear.py``. ``text_bench`` returns a
JSON-ready dict; ``format_text`` renders it. Timing belongs here, not in the test suite.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any, Callable

from memstream.bench.command import show
from memstream.core import argtypes

__all__ = ["ADVERSARIAL", "STAGES", "adversarial", "prose", "corpus", "text_bench", "format_text", "add_arguments", "run"]

# name -> the unit repeated to the size. Each targets a pattern (or a family) that could
# scan ahead from many starting points: secret names with and without a value, flags,
# URLs, PEM and JWT prefixes, token prefixes, injected-note prefixes, long runs without
# a separator, many line breaks, quotes, CJK, and the words the fact rules look for.
ADVERSARIAL: dict[str, str] = {
    "token:": "token:",
    "password:": "password:",
    "-token:": "-token:",
    "pwd:x": "pwd:x",
    "pwd: x": "pwd: x",
    "secret=aa.": "secret=aa.",
    "token:a)": ".token:a)",
    "token: '": "token: '",
    "token: quoted": 'token: "ab ',
    "a=": "a=",
    "--password": "--password ",
    "://": "://",
    "://a:": "://a:",
    "BEGIN": "-----BEGIN ",
    "BEGIN key": "-----BEGIN RSA PRIVATE KEY-----",
    "eyJ": "eyJ",
    "eyJa.": "eyJaaaaa.",
    "Bearer": "Bearer ",
    "Authorization": "Authorization: Bearer ",
    "sk-": "sk-",
    "ghp_": "ghp_",
    "AccountKey=": "AccountKey=",
    # the generic secret rules: words between a name and "is", "as the key", flags, glued
    # names, look-alikes and zero-width characters, wrapped lines, prefixes without a body
    "password is": "password is ",
    "key for": "key for the a b ",
    "token far": "token a b c d e f g h ",
    "value=": 'key="a" value=',
    "` as the key": "`abcdef123456` as the ",
    "mysql -p": "mysql -p",
    "redis-cli": "redis-cli -h a ",
    "-u a:": "-u a:",
    "credentials:": "credentials: a ",
    "PGPASSWORD": "PGPASSWORD",
    "AKIA": "AKIA",
    "aws 40": "aws " + "Ab1/" * 9,
    "SG.": "SG.",
    ":AA": "123456789:AA",
    "discord": "MTIzNDU2Nzg5MDEyMzQ1Njc4.Gh7jKl.",
    "zero-width": "ab\u200bcd",
    "lookalike": "abcdеf123456",
    "wrapped": "[REDACTED:secret]\nAb1",
    "-----BEGIN lower": "-----BEGIN private key-----",
    "[System note:": "[System note: ",
    "[": "[",
    "<memory-context>": "<memory-context>",
    "one char": "a",
    "digits": "1.2",
    "newlines": "\n",
    "quotes": "\"'",
    "CJK": "好的谢谢",
    "Hangul": "감사합니다",
    "paths": "~/a ",
    "hosts": "a.com ",
    "I newline": "I\n",
    "I'm:": "I'm:",
    "my name is": "my name is ",
    "I love": "I love ",
    "we decided": "we decided ",
    "port": "the port is 80 ",
    "C[x]:": "C[x]: ",
    # the rules of registry tokens, logins, markup, config files and other languages
    "prefix_": "ab_",
    "prefix_run": "ab_aB1cD2eF3gH4iJ5kL6m",
    "login -p": "login -u a ",
    "secret set": "secret set a ",
    "<password>": "<password>a",
    "<x name=password>": '<x name="db.password"',
    "pgpass": "a:5432:b:c:",
    "netrc": "machine a login b ",
    "config password": "\na_pass: ",
    "mot de passe": "mot de passe du ",
    "密码": "密码是",
    "cache key": "the cache key ",
    "atlasv1": "a.atlasv1.",
    "Q~": "abc8Q~",
}

_PROSE = (
    "We moved the billing worker to the new cluster last week, and it has been stable since. "
    "The staging database is at db-staging.internal:5432; Grafana is at https://grafana.example.com/d/abc. "
    "I prefer short answers, and I live in Lisbon now. Never force-push to main.\n"
    "Here is the plan:\n\n1. Drain the queue.\n2. Apply migration 0042.\n3. Restart the workers one at a "
    "time and watch the lag.\n\nThe crash came from a stale configuration map: the worker still read "
    "DATABASE_HOST from the old ConfigMap, so it connected to a host that no longer exists. "
    "See the runbook in docs/ops/restart.md for the exact steps, and ping Maria if the lag grows. "
)


def _fill(unit: str, size: int) -> str:
    """``unit`` repeated to at most ``size`` UTF-8 bytes (whole units)."""
    return unit * max(1, size // len(unit.encode("utf-8")))


def adversarial(name: str, size: int) -> str:
    """The adversarial input ``name`` (a key of ``ADVERSARIAL``, or ``"mixed"``) at about
    ``size`` UTF-8 bytes. ``mixed`` cycles through every unit, 64 repetitions at a time."""
    if name == "mixed":
        block = "".join(unit * 64 for unit in ADVERSARIAL.values())
        if len(block.encode("utf-8")) > size:
            return block.encode("utf-8")[:size].decode("utf-8", "ignore")
        return _fill(block, size)
    return _fill(ADVERSARIAL[name], size)


def prose(size: int) -> str:
    """Ordinary agent prose (a paragraph of chat, a plan, a URL, a path) to ``size`` bytes."""
    return _fill(_PROSE, size)


def corpus(size: int) -> dict[str, str]:
    """Every adversarial input (and ``mixed``) at ``size`` bytes, by name."""
    names = [*ADVERSARIAL, "mixed"]
    return {name: adversarial(name, size) for name in names}


def _stages() -> dict[str, Callable[[str], object]]:
    from memstream.text import BoilerplateFilter, chunk, extract_facts, redact

    boilerplate = BoilerplateFilter()
    return {
        "redact": redact,
        "boilerplate": lambda text: (boilerplate.reason(text), boilerplate.clean(text)),
        "chunking": chunk,
        "facts": lambda text: extract_facts(text, speaker="user"),
    }


STAGES: tuple[str, ...] = ("redact", "boilerplate", "chunking", "facts")


def _median_ms(fn: Callable[[str], object], text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(text)
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def text_bench(
    sizes_kib: tuple[int, ...] = (16, 64, 256),
    runs: int = 5,
    stages: dict[str, Callable[[str], object]] | None = None,
    inputs: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Median ms of each stage on each input at each size (KiB), prose included; per stage
    the worst input at the largest size and its ratio to the next size down. ``stages``
    replaces the stage functions (e.g. an older implementation to compare with)."""
    fns = stages if stages is not None else _stages()
    names = list(inputs) if inputs is not None else [*ADVERSARIAL, "mixed"]
    sizes = tuple(sorted(sizes_kib))
    rows: list[dict[str, Any]] = []
    for kib in sizes:
        texts = {name: adversarial(name, kib * 1024) for name in names}
        texts["prose"] = prose(kib * 1024)
        for stage, fn in fns.items():
            for name, text in texts.items():
                rows.append({"stage": stage, "input": name, "kib": kib, "ms": round(_median_ms(fn, text, runs), 2)})
    ms = {(r["stage"], r["input"], r["kib"]): r["ms"] for r in rows}
    top = sizes[-1]
    prev = sizes[-2] if len(sizes) > 1 else None
    summary: dict[str, Any] = {}
    for stage in fns:
        worst = max(names, key=lambda name: ms[(stage, name, top)])
        entry: dict[str, Any] = {
            "worst_input": worst,
            "worst_ms": ms[(stage, worst, top)],
            "prose_ms": ms[(stage, "prose", top)],
        }
        if prev is not None:
            entry["worst_ratio"] = round(ms[(stage, worst, top)] / max(ms[(stage, worst, prev)], 1e-3), 1)
            entry["max_ratio"] = (
                round(max(ms[(stage, n, top)] / max(ms[(stage, n, prev)], 1e-3) for n in names if ms[(stage, n, top)] >= 5.0), 1)
                if any(ms[(stage, n, top)] >= 5.0 for n in names)
                else None
            )
        summary[stage] = entry
    return {
        "benchmark": "text",
        "sizes_kib": list(sizes),
        "runs": runs,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "summary": summary,
        "rows": rows,
    }


def format_text(result: dict[str, Any]) -> str:
    """A table (input x stage, median ms at each size) and the per-stage summary."""
    sizes = result["sizes_kib"]
    stages = list(result["summary"])
    ms = {(r["stage"], r["input"], r["kib"]): r["ms"] for r in result["rows"]}
    inputs = list(dict.fromkeys(r["input"] for r in result["rows"]))
    size_hdr = "/".join(f"{k}K" for k in sizes)
    lines = [f"text stages, median ms of {result['runs']} runs at {size_hdr}"]
    lines.append(f"{'input':<18}" + "".join(f"{s:>26}" for s in stages))
    for name in inputs:
        cells = ["/".join(f"{ms[(s, name, k)]:.1f}" for k in sizes) for s in stages]
        lines.append(f"{name:<18}" + "".join(f"{c:>26}" for c in cells))
    lines.append("")
    top = sizes[-1]
    for stage, e in result["summary"].items():
        ratio = (
            f", x{e['worst_ratio']} vs {sizes[-2]}K (largest ratio of any input {e['max_ratio']})" if "worst_ratio" in e else ""
        )
        lines.append(
            f"{stage:<12} worst {e['worst_input']!r}: {e['worst_ms']:.1f} ms at {top}K{ratio}; prose {e['prose_ms']:.1f} ms"
        )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench text``'s arguments."""
    parser.add_argument(
        "--sizes", type=argtypes.ascending_counts, default=(16, 64, 256), help="input sizes in KiB, ascending (default 16,64,256)"
    )
    parser.add_argument("--runs", type=argtypes.int_between(1, 1000), default=5, help="runs per median (default 5)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = text_bench(sizes_kib=args.sizes, runs=args.runs)
    return show(args, result, format_text(result))
