"""What the command line prints: a result for people or as one JSON line (``--json``),
memory text cut for the terminal, and a failure as one line with its exit code.

Exit codes: ``OK`` 0 success; ``FAILED`` 1 the command ran but the answer is "not ok"
(doctor), the log is unreachable, or the command failed; ``USAGE`` 2 usage errors
(argparse); ``INTERRUPTED`` 130 (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

__all__ = [
    "ERROR_CUT", "FAILED", "INTERRUPTED", "OK", "TEXT_CUT", "USAGE",
    "archive_text", "cut", "dead_letter_line", "doctor_text", "fail", "import_text", "one_line", "print_result",
    "projections_text", "search_line", "size", "stats_text", "stdout_to_devnull",
]

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130

TEXT_CUT = 300  # characters of memory text shown per item; --json carries it whole
ERROR_CUT = 300  # characters of an error message (dead letters) shown per item
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def cut(text: object, limit: int = TEXT_CUT) -> str:
    """``text`` for one terminal line: control characters (escape sequences from the shared
    Redis included) shown as spaces, cut to ``limit`` characters with a note of the rest."""
    text = _CONTROL.sub(" ", str(text))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters; --json shows all]"


def print_result(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    """``data`` as one JSON line with ``--json``; otherwise ``text`` (``data`` indented when None)."""
    if getattr(args, "json", False):
        print(json.dumps(data, default=str))
    else:
        print(text if text is not None else json.dumps(data, indent=2, default=str))


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` with its whitespace runs as single spaces, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null: the interpreter's flush at exit then
    writes nowhere instead of raising BrokenPipeError again (and printing it)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (in-process)
        pass


def fail(args: argparse.Namespace | None, prog: str, message: str) -> int:
    """Say that the command failed: ``PROG: error: MESSAGE`` as one line on stderr (and
    ``{"ok": false, "error": MESSAGE}`` on stdout with ``--json``); returns ``FAILED``."""
    message = one_line(message)
    try:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": message}))
            sys.stdout.flush()
    except BrokenPipeError:
        stdout_to_devnull()
    print(f"{prog}: error: {message}", file=sys.stderr)
    return FAILED


# -- each command's text for people --------------------------------------------------------
def doctor_text(result: dict) -> str:
    """The verdict, then a line per check: its details, or its error when it failed."""
    lines = [f"memstream {result['version']}: {'ok' if result['ok'] else 'NOT OK'}"]
    for name, c in result["checks"].items():
        detail = c.get("error") or ", ".join(f"{k}={'unknown' if v is None else v}" for k, v in c.items()
                                             if k not in ("ok", "settings", "streams", "problems")
                                             and not isinstance(v, (dict, list)))
        lines.append(f"  [{'ok' if c.get('ok') else 'FAIL'}] {name}: {detail}")
    return "\n".join(lines)


def size(n: object) -> str:
    """A number of bytes for people: ``512 B``, ``1.5 KiB``, ``12.3 MiB``, ``1.1 GiB``; ``?`` when unknown."""
    if not isinstance(n, int):
        return "?"
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def stats_text(result: dict) -> str:
    """A line per stream (with its bytes in Redis and in the archive) and per event type,
    per projection, the spool and its losses."""
    lines = []
    for s in result["streams"]:
        line = (f"{s['stream']}: {s['length']} events, first {s['first_id']}, last {s['last_id']}, "
                f"{size(s.get('memory_bytes'))} in Redis")
        archived = s.get("archive") or {}
        if archived.get("events"):
            line += (f"; archived {archived['events']} events, {size(archived['bytes'])} in "
                     f"{archived['segments']} segments (up to {archived['last_id']})")
        lines.append(line)
    if (result.get("archive") or {}).get("error"):
        lines.append(f"archive {result['archive']['directory']}: {cut(result['archive']['error'], ERROR_CUT)}")
    lines += [f"  {t}: {n}" for t, n in result["types"].items()]
    for group, p in result["projections"].items():
        h = p["health"]
        lines.append(f"{group}: lag {p['lag']}, pending {p['pending']}, dead letters {p['dead_letters']}, "
                     f"items {p['items']}, last applied {p['last_applied_at']}, {h['status']}"
                     + (f" for {h['stalled_for_s']}s (last error: {h['last_error'][:200] or 'none'})"
                        if h["status"] == "stalled" else ""))
    usage = result["spool"]
    if usage:
        lines.append(f"spool: {usage['segments']} segments, {usage['unshipped_bytes']} bytes unshipped, "
                     f"{usage['quarantined']} quarantined")
    losses = result["spool_losses"]
    if losses:
        lines.append("spool losses reported by agents (all hosts): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(losses.items())))
    return "\n".join(lines)


def archive_text(result: dict) -> str:
    """What ``memstream archive`` did: the totals, then a line per stream."""
    seconds = result.get("seconds") or {}
    lines = [f"archived {result['archived']} events into {result['segments']} new segments "
             f"({size(result['bytes'])}) in {result['directory']}; trimmed {result['trimmed']} entries from Redis"
             + (f" ({seconds.get('write', 0) + seconds.get('trim', 0):.1f}s)" if seconds else "")]
    for key, row in result["streams"].items():
        kept = f", trimmed {row['trimmed']} below {row['trimmed_below']}" if row.get("trimmed_below") else ""
        lines.append(f"  {key}: {row['archived']} archived below {row['before']}, archive up to "
                     f"{row['watermark'] or 'nothing'}{kept}")
    return "\n".join(lines)


def search_line(result: dict) -> str:
    """One search result: score, kind, agent, time and its text, cut."""
    score = result.get("score")
    shown = f"{score:.3f}" if isinstance(score, (int, float)) else "?"
    return (f"{shown} [{cut(result.get('kind'), 40)}] {cut(result.get('agent'), 80)} "
            f"{cut(result.get('occurred_at'), 40)}: {cut(result.get('text', ''))}")


def dead_letter_line(item: dict) -> str:
    """One dead letter: its ids, group, type, deliveries and error, cut."""
    return (" ".join(cut(item.get(k, "?"), 80) for k in ("dlq_id", "group", "stream", "entry_id", "type"))
            + f" deliveries={cut(item.get('deliveries'), 20)}: {cut(item.get('error'), ERROR_CUT)}")


def _ago(ts: float | None) -> str:
    if not ts:
        return "-"
    import time

    s = max(0.0, time.time() - float(ts))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def projections_text(rows: list[dict]) -> str:
    """``memstream projections`` for people: one line per version."""
    lines = [f"{'version':<16} {'state':<11} {'embedder':<22} {'items':>8} {'lag':>8}  {'built':<10} activated"]
    for r in rows:
        model = r.get("model") or r.get("embedder") or "-"
        embedder = f"{cut(model, 16)} {r['dim']}d" if r.get("dim") else cut(model, 22)
        items = "-" if r.get("items") is None else str(r["items"])
        lag = "unknown" if r.get("lag") is None and r.get("state") not in (None, "not started") else str(r.get("lag", "-"))
        state = str(r.get("state"))
        if state == "building" and r.get("total"):
            state += f" {100 * (r.get('done') or 0) // max(1, r['total'])}%"
        lines.append(f"{cut(r['group'], 16):<16} {state:<11} {embedder:<22} {items:>8} {lag:>8}  "
                     f"{_ago(r.get('created_at')):<10} {_ago(r.get('activated_at'))}"
                     + (f"  error: {cut(r['error'], 120)}" if r.get("error") else ""))
    return "\n".join(lines)


def import_text(result: dict) -> str:
    """What an import read, appended (or would append: dry run) and skipped, and why."""
    if result["source"] == "hermes":
        read = (f"{result['home']}: {result['sessions']} sessions, {result['turns']} turns, "
                f"{result['memories']} memories, {result['session_ends']} session ends, "
                f"{result['session_switches']} session switches: {result['events']} events")
    else:
        read = f"{result['file']}: {result['events']} events"
    done = (f"would append {result['new']}" if result["dry_run"] else f"appended {result['appended']}")
    skipped = ", ".join(f"{n} {reason}" for reason, n in result["skipped"].items())
    return f"{read}; {done}" + (f"; skipped {skipped}" if skipped else "") + (
        " (dry run: nothing written)" if result["dry_run"] else "")
