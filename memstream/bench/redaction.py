"""``memstream bench redaction``: how well and how fast secrets are redacted.

Quality, on the labelled corpus of ``memstream.bench.testbed.secretcorpus`` (the texts the tests read
from tests/text/corpus/): the share of secrets redacted in the tuned and the held-out
parts, and the share of ordinary turns changed (false positives: the 6,000 ordinary turns,
and the turns naming hex digests of the tuned and held-out draws), for memstream's rules
(``memstream.text.redaction``) and, when the ``detect-secrets`` package is installed, for
detect-secrets with its default plugins and filters, with its entropy limits raised until
its false positives fit the same budget, and for the two together. detect-secrets reports
lines, not spans (for a prefixed token it reports the prefix alone), so it is scored as a
line redactor: every line it flags is replaced whole, which is the most it could remove.
Each turn is scanned as a file of its own (its YAML and .ini transformers see the turn
alone), the way it scans a repository's files.
``--data`` (the LoCoMo directory or its ``locomo10_turns.jsonl``) adds the share of real
chat turns changed.

Speed, per thread: ``redact`` over the ordinary turns (texts/s and MB/s of UTF-8), and the
shipper's step per event (decode, then the log's door: ``admit``, redacted and clipped,
encoded when something changed) against the same loop without redaction and, with a
baseline, the step as that version's shipper did it (``redact_event`` with its rules),
interleaved round by round; medians of ``rounds``, with their ratios. Timing belongs here, not in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from memstream.bench.command import BenchError, show
from memstream.bench.stats import machine
from memstream.bench.testbed.secretcorpus import PARTS, leaked, ordinary, ordinary_digests, secrets
from memstream.core import argtypes

__all__ = ["redaction_bench", "format_redaction", "BUDGET", "add_arguments", "run"]

BUDGET = 0.002  # at most this share of ordinary turns changed

Redactor = Callable[[list[str]], list[str]]


def _memstream(texts: list[str]) -> list[str]:
    from memstream.text import redact

    return [redact(t)[0] for t in texts]


def _detect_secrets(base64_limit: float | None = None, hex_limit: float | None = None) -> Redactor | None:
    """detect-secrets as a line redactor (None when the package is not installed)."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import transient_settings
    except ImportError:
        return None
    limits = {"Base64HighEntropyString": base64_limit, "HexHighEntropyString": hex_limit}
    # every plugin, as its default_settings() does (its default filters come with them)
    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    plugins = [{"name": cls.__name__, **({"limit": limits[cls.__name__]} if limits.get(cls.__name__) else {})} for cls in classes]

    def run(texts: list[str]) -> list[str]:
        out = []
        with tempfile.TemporaryDirectory(prefix="memstream-bench-redaction-") as d, transient_settings({"plugins_used": plugins}):
            path = os.path.join(d, "turn.txt")
            for text in texts:  # one file a turn: its transformers (YAML, .ini) see the turn alone
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text + "\n")
                flagged = {found.line_number - 1 for found in scan_file(path)}
                out.append(
                    "\n".join("[REDACTED]" if j in flagged else line for j, line in enumerate(text.split("\n")))
                    if flagged
                    else text
                )
        return out

    return run


def _quality(redactor: Redactor, corpus: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for part in PARTS:
        items = corpus[part]
        outs = redactor([it["text"] for it in items])
        missed = [it for it, out in zip(items, outs) if any(leaked(out, s, it["text"]) for s in it["secrets"])]
        row[part] = {
            "secrets": len(items),
            "redacted": len(items) - len(missed),
            "recall": round(1 - len(missed) / len(items), 4),
            "missed_kinds": sorted({it["kind"] for it in missed}),
        }
    for name in ("ordinary", "digests_tuned", "digests_heldout", "locomo"):
        texts = corpus.get(name)
        if not texts:
            continue
        outs = redactor(texts)
        changed = sum(1 for a, b in zip(texts, outs) if a != b)
        row[name] = {"turns": len(texts), "changed": changed, "share": round(changed / len(texts), 5)}
    return row


def _locomo(data: str | Path) -> list[str]:
    path = Path(data)
    if path.is_dir():
        path = path / "locomo10_turns.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def _speed(turns: list[str], rounds: int, before: Callable[[str], tuple[str, int]] | None = None) -> dict[str, Any]:
    from memstream.core import new_event_id
    from memstream.producers import Record, Scope, TurnRecorded, admit, decode, encode, redact_event, utcnow
    from memstream.text import redact

    size = sum(len(t.encode("utf-8")) for t in turns)
    scope = Scope(tenant="bench", agent="a", session_id="s")
    payloads = [
        encode(
            TurnRecorded(
                id=new_event_id(),
                occurred_at=utcnow(),
                scope=scope,
                turn_index=i,
                user_text=turns[i],
                assistant_text=turns[(i + 1) % len(turns)],
            )
        )
        for i in range(len(turns))
    ]
    event_bytes = sum(len(p) for p in payloads)

    def plain() -> None:
        for p in payloads:
            Record.of(decode(p), data=p)

    def redacting() -> None:  # the shipper's step: through the log's door (redacted, clipped)
        for p in payloads:
            admit(decode(p), data=p)

    def redacting_before() -> None:  # the same step with the baseline's rules, as the shipper did it
        for p in payloads:
            event, found = redact_event(decode(p), before)
            Record.of(event, data=None if found else p)

    def texts() -> None:
        for t in turns:
            redact(t)

    times: dict[str, list[float]] = {"redact": [], "ship_plain": [], "ship_redacting": [], "ship_before": []}
    redact(turns[0])  # compile the patterns before timing
    loops = [("ship_plain", plain), ("ship_redacting", redacting), ("redact", texts)]
    if before is not None:
        before(turns[0])
        loops.append(("ship_before", redacting_before))
    else:
        del times["ship_before"]
    for _ in range(rounds):  # interleaved: each round runs the loops back to back
        for name, fn in loops:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "turns": len(turns),
        "mb": round(size / 1e6, 3),
        "rounds": rounds,
        "redact_texts_per_s": round(len(turns) / med["redact"]),
        "redact_mb_per_s": round(size / 1e6 / med["redact"], 2),
        "redact_us_per_text": round(med["redact"] / len(turns) * 1e6, 1),
        "ship_events_per_s_plain": round(len(payloads) / med["ship_plain"]),
        "ship_events_per_s_redacting": round(len(payloads) / med["ship_redacting"]),
        "ship_mb_per_s_redacting": round(event_bytes / 1e6 / med["ship_redacting"], 2),
        "ship_cost_ratio": round(med["ship_redacting"] / med["ship_plain"], 2),
        **(
            {
                "ship_events_per_s_before": round(len(payloads) / med["ship_before"]),
                "ship_throughput_vs_before": round(med["ship_before"] / med["ship_redacting"], 3),
            }
            if "ship_before" in med
            else {}
        ),
    }


def _baseline_redact(path: str | Path) -> Callable[[str], tuple[str, int]]:
    """The ``redact`` of another version of memstream/text/redaction.py (a file), e.g.
    ``git show main:memstream/text/redaction.py > /tmp/before.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("memstream_bench_baseline_redaction", path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    redact: Callable[[str], tuple[str, int]] = module.redact
    return redact


def _baseline(path: str | Path) -> Redactor:
    redact = _baseline_redact(path)
    return lambda texts: [redact(t)[0] for t in texts]


def redaction_bench(
    data: str | Path | None = None, rounds: int = 5, detect_secrets: bool = True, baseline: str | Path | None = None
) -> dict[str, Any]:
    """Quality of each detector on the corpus (and LoCoMo with ``data``; ``baseline``: the
    redaction.py of another version, scored too), and the speed of memstream's redaction
    and of the shipper's step. A JSON-ready dict."""
    corpus: dict[str, Any] = {part: secrets(part) for part in PARTS}
    corpus["ordinary"] = ordinary()
    for part in PARTS:  # ordinary technical turns that name hex digests (cache keys, commits, checksums)
        corpus[f"digests_{part}"] = ordinary_digests(part)
    if data is not None:
        corpus["locomo"] = _locomo(data)
    detectors: dict[str, Any] = {"memstream": _quality(_memstream, corpus)}
    if baseline is not None:
        detectors[f"baseline {Path(baseline).name}"] = _quality(_baseline(baseline), corpus)
    ds = _detect_secrets() if detect_secrets else None
    if ds is not None:
        detectors["detect-secrets (defaults)"] = _quality(ds, corpus)
        # raise the entropy limits until its false positives fit the budget (or the last step)
        for b64, hexl in ((5.0, 3.5), (5.5, 4.0), (6.0, 4.5)):
            strict = _detect_secrets(b64, hexl)
            assert strict is not None
            row = _quality(strict, corpus)
            row["limits"] = {"base64": b64, "hex": hexl}
            if row["ordinary"]["share"] <= BUDGET or b64 == 6.0:
                detectors[f"detect-secrets (limits {b64}/{hexl})"] = row
                both = strict
                break
        # memstream's marks first, then the lines detect-secrets flags in what is left
        detectors["memstream + detect-secrets"] = _quality(lambda texts: both(_memstream(texts)), corpus)
    return {
        "benchmark": "redaction",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "budget": BUDGET,
        "detectors": detectors,
        "detect_secrets": "not installed" if ds is None else _version("detect-secrets"),
        "speed": _speed(corpus["ordinary"], rounds, _baseline_redact(baseline) if baseline is not None else None),
    }


def _version(dist: str) -> str:
    from importlib.metadata import version

    try:
        return version(dist)
    except Exception:  # noqa: BLE001  only for the report
        return "?"


def format_redaction(r: dict[str, Any]) -> str:
    lines = [
        f"memstream bench redaction  ({r['date']}; detect-secrets {r['detect_secrets']}; "
        f"false-positive budget {r['budget']:.1%})",
        "",
    ]
    head = f"{'detector':<36}{'tuned':>14}{'held-out':>14}{'ordinary changed':>20}{'digests t/h changed':>22}"
    if any("locomo" in row for row in r["detectors"].values()):
        head += f"{'LoCoMo changed':>18}"
    lines.append(head)
    for name, row in r["detectors"].items():
        cells = [f"{row[p]['redacted']}/{row[p]['secrets']} {row[p]['recall']:.1%}" for p in PARTS]
        line = f"{name:<36}" + "".join(f"{c:>14}" for c in cells)
        o = row["ordinary"]
        line += f"{o['changed']}/{o['turns']} {o['share']:.2%}".rjust(20)
        if "digests_tuned" in row:
            line += (
                f"{row['digests_tuned']['changed']}/{row['digests_heldout']['changed']} of {row['digests_tuned']['turns']}".rjust(
                    22
                )
            )
        if "locomo" in row:
            lc = row["locomo"]
            line += f"{lc['changed']}/{lc['turns']} {lc['share']:.2%}".rjust(18)
        lines.append(line)
    for name, row in r["detectors"].items():
        kinds = sorted(set(row["tuned"]["missed_kinds"]) | set(row["heldout"]["missed_kinds"]))
        if kinds:
            lines.append(f"  {name} misses: {', '.join(kinds)}")
    s = r["speed"]
    lines += [
        "",
        f"speed, one thread, medians of {s['rounds']} interleaved rounds over {s['turns']} ordinary turns ({s['mb']} MB):",
        f"  redact: {s['redact_texts_per_s']:,} texts/s, {s['redact_mb_per_s']} MB/s ({s['redact_us_per_text']} us a text)",
        f"  shipper step per event: {s['ship_events_per_s_redacting']:,} events/s with redaction "
        f"({s['ship_mb_per_s_redacting']} MB/s), {s['ship_events_per_s_plain']:,} without: "
        f"x{s['ship_cost_ratio']} the time",
    ]
    if "ship_events_per_s_before" in s:
        lines.append(
            f"  the same step with the baseline's rules: {s['ship_events_per_s_before']:,} events/s; "
            f"this version's throughput x{s['ship_throughput_vs_before']} the baseline's"
        )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench redaction``'s arguments."""
    parser.add_argument("--data", default="", help="the LoCoMo directory or its turns JSONL: also count the LoCoMo turns changed")
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=5, help="interleaved rounds of the speed measurement (default 5)"
    )
    parser.add_argument(
        "--baseline", default="", help="another version's memstream/text/redaction.py (a file), scored on the same corpus"
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    try:
        result = redaction_bench(data=args.data or None, rounds=args.runs, baseline=args.baseline or None)
    except OSError as exc:
        raise BenchError(f"bench redaction: {exc} (--data is the LoCoMo directory or its turns JSONL)") from exc
    return show(args, result, format_redaction(result))
