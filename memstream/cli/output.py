"""What the command line prints: a result for people or as one JSON line (``--json``),
memory text cut for the terminal, and a failure as one line with its exit code.

Times for people are relative (``ago``: "12s ago", "3h ago"); ``--json`` keeps the numbers.

Exit codes: ``OK`` 0 success; ``FAILED`` 1 the command ran but the answer is "not ok"
(doctor), the log is unreachable, or the command failed; ``USAGE`` 2 usage errors
(argparse); ``INTERRUPTED`` 130 (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from datetime import datetime
from typing import Any

__all__ = [
    "forget_text",
    "ERROR_CUT",
    "FAILED",
    "INTERRUPTED",
    "OK",
    "TEXT_CUT",
    "USAGE",
    "ago",
    "archive_text",
    "cut",
    "dead_letter_line",
    "doctor_text",
    "export_text",
    "fail",
    "import_text",
    "one_line",
    "print_result",
    "projections_text",
    "rate_text",
    "search_line",
    "search_text",
    "seconds_text",
    "size",
    "span",
    "stats_text",
    "stdout_to_devnull",
    "verify_text",
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
    try:
        print(f"{prog}: error: {message}", file=sys.stderr)
    except (OSError, ValueError):  # stderr on a full disk or closed: the exit code says it
        pass
    return FAILED


# -- times and sizes for people -----------------------------------------------------------
def span(seconds: float) -> str:
    """A duration in its largest whole unit: ``45s``, ``12m``, ``3h``, ``2d``, ``1y`` (365 days)."""
    s = max(0.0, float(seconds))
    if not math.isfinite(s):
        return "?"
    for unit, length in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if s >= length:
            return f"{int(s // length)}{unit}"
    return f"{int(s)}s"


def ago(when: object, now: float | None = None, never: str = "-") -> str:
    """How long ago ``when`` was, for people: ``12s ago``, ``3h ago``. ``when`` is seconds
    since the epoch (a number or its text) or an ISO 8601 time; ``never`` when it is empty,
    zero or unreadable. A time ahead of ``now`` (another host's clock) is ``0s ago``."""
    if isinstance(when, bool) or not isinstance(when, (int, float, str)):
        return never
    try:
        ts = float(when)
    except ValueError:  # not a number: an ISO time, or nothing readable
        try:
            ts = datetime.fromisoformat(str(when)).timestamp()
        except ValueError:
            return never
    if not ts or not math.isfinite(ts):
        return never
    return f"{span((time.time() if now is None else now) - ts)} ago"


def size(n: object) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ``1.0 GiB``."""
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        return str(n)
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)  # not reached


def seconds_text(seconds: object, unknown: str = "-") -> str:
    """A short duration for people, to the millisecond: ``0.4 ms``, ``230 ms``, ``4.2 s``,
    then ``span``'s units (``12m``); ``unknown`` when it is no number."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return unknown
    s = max(0.0, float(seconds))
    if s == 0:
        return "0 s"
    if s < 0.001:
        return f"{s * 1000:.2f} ms"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    return span(s)


def rate_text(per_second: object, unknown: str = "-") -> str:
    """Events (or requests) a second for people: ``0.4/s``, ``12/s``, ``1,250/s``."""
    if isinstance(per_second, bool) or not isinstance(per_second, (int, float)) or not math.isfinite(per_second):
        return unknown
    return f"{per_second:.1f}/s" if abs(per_second) < 10 and per_second != int(per_second) else f"{per_second:,.0f}/s"


def _plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` agreeing: "1 event", "2 events", "0 events" (``many``: the plural
    when it is not ``word`` + s, "entries")."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def _count_of(n: int, things: str) -> str:
    """``n`` of a plural noun phrase ("stream entries", "points"): "1 stream entry"."""
    if n != 1:
        return f"{n} {things}"
    return f"1 {things[:-3] + 'y' if things.endswith('ies') else things.removesuffix('s')}"


# -- each command's text for people --------------------------------------------------------
_MARK = {"ok": "[ok]", "warning": "[warn]", "failed": "[FAIL]"}
_VERDICT = {"ok": "ok", "warning": "ok, with warnings", "failed": "NOT OK"}


def doctor_text(result: dict) -> str:
    """The verdict, then a line per check: ``[ok]``, ``[warn]`` or ``[FAIL]``, its name and
    what it found, its warning, or why it failed."""
    state = result.get("state") or ("ok" if result["ok"] else "failed")
    lines = [f"memstream {result['version']}: {_VERDICT.get(state, state)}"]
    for name, c in result["checks"].items():
        c_state = c.get("state") or ("ok" if c.get("ok") else "failed")
        if c_state == "failed":
            detail = str(c.get("error") or _check_summary(name, c))
        else:
            summary, warning = _check_summary(name, c), str(c.get("warning") or "")
            detail = "; ".join(part for part in (summary, warning) if part)
        lines.append(f"  {_MARK.get(c_state, c_state)} {name}: {one_line(detail)}")
    return "\n".join(lines)


def _check_summary(name: str, c: dict) -> str:
    """What the check found, as a phrase; its fields as ``key=value`` for a check without one."""
    if name in _SUMMARIES:
        try:
            return _SUMMARIES[name](c)
        except (KeyError, TypeError, ValueError):  # shaped otherwise (a caller's check): its fields
            pass
    return ", ".join(
        f"{k}={'unknown' if v is None else v}"
        for k, v in c.items()
        if k not in ("ok", "state", "warning", "error", "settings", "streams", "problems", "sources")
        and not isinstance(v, (dict, list))
    )


def _config_summary(c: dict) -> str:
    by_source: dict[str, list[str]] = {}
    for setting, source in (c.get("sources") or {}).items():
        if source.startswith("MEMSTREAM_"):
            by_source.setdefault("the environment", []).append(source)
        elif source == "given":
            by_source.setdefault("the caller", []).append(setting)
        else:
            by_source.setdefault(source, []).append(setting)
    parts = [f"home {c['home']}"]
    parts += [f"from {where}: {', '.join(names)}" for where, names in by_source.items()]
    parts.append("the rest are defaults" if by_source else "every setting at its default")
    return "; ".join(parts)


def _redis_summary(c: dict) -> str:
    server = (
        f"Valkey {c['valkey_version']} (Redis {c['redis_version']})" if c.get("valkey_version") else f"Redis {c['redis_version']}"
    )
    tls = f"; TLS {c['tls']}" if str(c.get("tls", "")).startswith("verified") else ""
    return (
        f"{c['mode']} {server} at {c['url']}"
        + (f", primary {c['primary']}" if c.get("primary") else "")
        + (f", {_plural(int(c['replicas']), 'replica')} connected" if "replicas" in c else "")
        + tls
    )


def _streams_summary(c: dict) -> str:
    if c.get("note"):
        return str(c["note"])
    streams = _plural(int(c["count"]), "stream")
    if not c["events"]:
        return f"{streams}, no events yet"
    return f"{streams}, {_plural(int(c['events']), 'event')}, first appended {ago(c['first_at'])}, last {ago(c['last_at'])}"


def _logs_summary(c: dict) -> str:
    if c.get("note"):
        return str(c["note"])
    return f"{_plural(int(c['logs']), 'log')}" + ("" if c.get("broken") else ", each takes appends")


def _queries_summary(c: dict) -> str:
    if not c.get("answering"):
        return ""
    return f"a query server answers ({c['round_trip_ms']} ms round trip)"


def _tenants_summary(c: dict) -> str:
    if "registered" not in c:
        return _plural(c["credentials"], "credential")
    if not c["registered"]:
        return str(c.get("note") or "no tenant registered")
    return f"{c['registered']} registered, {_plural(c['credentials'], 'credential')}: {c['enforced']}"


def _projections_summary(c: dict) -> str:
    if c.get("note"):
        return str(c["note"])
    progress = max((float(g.get("last_progress_at") or 0) for g in c["groups"].values()), default=0.0)
    return (
        f"{c['status']} (last progress {ago(progress, never='never')}; stalled after {span(c['stall_after_s'])} without progress)"
    )


def _dense_summary(c: dict) -> str:
    if c.get("note"):
        return str(c["note"])
    if not c["groups"]:
        return "no backlog: dense vectors are written with the keywords (or nothing was written yet)"
    parts = []
    for group, g in c["groups"].items():
        part = f"{group} {_plural(int(g['waiting']), 'point')} waiting"
        if g.get("oldest_s") is not None:
            part += f" (oldest {span(float(g['oldest_s']))})"
        part += f", {_plural(int(g['readers']), 'dense stage')} reading"
        if g.get("dead_letters"):
            part += f", {g['dead_letters']} dead letters"
        parts.append(part)
    return "; ".join(parts)


def _spool_summary(c: dict) -> str:
    return (
        f"{size(c['unshipped_bytes'])} unshipped of {size(c['max_bytes'])} allowed, "
        f"{_plural(int(c['segments']), 'segment')}, {c['quarantined']} quarantined, in {c['dir']}"
    )


def _hermes_summary(c: dict) -> str:
    if c.get("skipped"):
        return f"not checked: {c.get('reason') or 'skipped'}"
    if c.get("verdict"):
        return str(c["verdict"])
    provider = c.get("memory_provider") or "unset"
    return (
        f"plugin {'installed' if c.get('plugin_installed') else 'not installed'} in {c['plugin_dir']}, "
        f"memory.provider: {provider}"
    )


_SUMMARIES = {
    "config": _config_summary,
    "redis": _redis_summary,
    "streams": _streams_summary,
    "logs": _logs_summary,
    "queries": _queries_summary,
    "tenants": _tenants_summary,
    "projections": _projections_summary,
    "dense": _dense_summary,
    "spool": _spool_summary,
    "hermes": _hermes_summary,
}


def stats_text(result: dict) -> str:
    """A line per stream (how long ago its first and last entries were appended, its bytes in
    Redis and in the archive) and per event type, per projection, the spool and its losses."""
    lines = []
    for s in result["streams"]:
        line = f"{s['stream']}: {_plural(int(s['length']), 'event')}"
        if s["length"]:
            line += f", first {s['first_id']} ({ago(s.get('first_at'))}), last {s['last_id']} ({ago(s.get('last_at'))})"
        memory = s.get("memory_bytes")
        line += f", {size(memory) if isinstance(memory, int) else '?'} in Redis"
        archived = s.get("archive") or {}
        if archived.get("events"):
            line += (
                f"; archived {_plural(int(archived['events']), 'event')}, {size(archived['bytes'])} in "
                f"{_plural(int(archived['segments']), 'segment')} (up to {archived['last_id']})"
            )
            both = int(archived.get("also_in_redis") or 0)
            if both:  # the trim keeps the boundary entry: export counts each entry once
                line += (
                    f"; {_plural(both, 'entry', 'entries')} in both, "
                    f"{_plural(int(s['length']) + int(archived['events']) - both, 'event')} in all"
                )
        lines.append(line)
    if (result.get("archive") or {}).get("error"):
        lines.append(f"archive {result['archive']['directory']}: {cut(result['archive']['error'], ERROR_CUT)}")
    lines += [f"  {t}: {n}" for t, n in result["types"].items()]
    for group, p in result["projections"].items():
        h = p["health"]
        e = p.get("embedding") or {}
        lines.append(
            f"{group}: lag {'unknown' if p['lag'] is None else p['lag']}, pending {p['pending']}, "
            f"dead letters {p['dead_letters']}, items {p['items']}, "
            f"last applied {ago(p['last_applied_at'], never='never')}, {h['status']}"
            + (
                f" for {span(h['stalled_for_s'] or 0)} (last error: {h['last_error'][:200] or 'none'})"
                if h["status"] == "stalled"
                else ""
            )
            + (
                f"; {_plural(int(e['waiting']), 'point')} wait for their dense vector"
                + (f" (oldest {span(e['oldest_s'])})" if e.get("oldest_s") is not None else "")
                if e.get("waiting")
                else ""
            )
            + (
                f"; {_plural(int(e['dead_letters']), 'point')} dead-lettered by its dense stage "
                "(keywords only until `memstream dlq retry`)"
                if e.get("dead_letters")
                else ""
            )
        )
    tiers = result.get("tiers") or {}
    if tiers:
        hot = f"the last {tiers['hot_days']:g} days" if tiers["hot_days"] else "every turn"
        line = f"tiers of tenant {tiers['tenant']} (hot: memories, facts and turns of {hot}; prefetch reads hot only)"
        counts = ", ".join(f"{name} {row['hot']} hot / {row['cold']} cold" for name, row in tiers["tiers"].items())
        lines.append(line + (f": {counts} points" if counts else ": no service answered"))
    retention = result.get("retention") or {}
    if retention:
        parts = []
        for kind, row in retention["kinds"].items():
            if not row["days"]:
                parts.append(f"{kind} forever")
                continue
            nxt = row["next_expiry"]
            when = "none pending" if nxt is None else ("next now" if nxt <= time.time() else f"next in {span(nxt - time.time())}")
            parts.append(f"{kind} {row['days']:g} days ({row['erased']} erased, {when})")
        lines.append(
            "retention: " + "; ".join(parts) + (f"; last run {ago(retention['last_run'])}" if retention.get("last_run") else "")
        )
    usage = result["spool"]
    if usage:
        lines.append(
            f"spool: {_plural(int(usage['segments']), 'segment')}, {size(usage['unshipped_bytes'])} unshipped, "
            f"{usage['quarantined']} quarantined"
        )
    losses = dict(result["spool_losses"])
    unreplicated = losses.pop("unreplicated", 0)  # no loss: those batches stayed in their spools
    if losses:
        lines.append("spool losses reported by agents (all hosts): " + ", ".join(f"{k} {v}" for k, v in sorted(losses.items())))
    if unreplicated:
        lines.append(f"shipped batches too few replicas confirmed, kept and sent again (all hosts): {unreplicated}")
    if result.get("unreadable_counters"):
        lines.append(
            f"counters left out: {_plural(int(result['unreadable_counters']), 'field')} of the types and spool counters "
            "hold no count (a tenant may write its own)"
        )
    return "\n".join(lines)


def forget_text(result: dict) -> str:
    removed = result["removed"]
    verb = "would remove" if result["dry_run"] else "removed"
    lines = [
        _plural(len(result["events"]), "event")
        + (" forgotten" if not result["dry_run"] else " matches" if len(result["events"]) == 1 else " match")
        + ("" if result["dry_run"] else f"; {_plural(result['tombstones'], 'tombstone')} appended")
    ]
    lines += [f"  {verb} {_count_of(n, place.replace('_', ' '))}" for place, n in removed.items()]
    if result["dry_run"]:
        lines += [f"  event {event_id}" for event_id in result["events"]]
    else:
        lines.append(f"  append-only file: {result['aof']['state']}")
    lines += [f"note: {note}" for note in result["notes"]]
    return "\n".join(lines)


def export_text(count: int, bad: int) -> str:
    """What ``memstream export`` wrote (to stderr: stdout is the events)."""
    return f"memstream export: {_plural(count, 'event')}" + (f", {bad} undecodable (skipped)" if bad else "")


def verify_text(result: dict) -> str:
    """What ``memstream archive --verify`` checked."""
    return (
        f"archive {result['directory']}: {_plural(result['segments'], 'segment')}, "
        f"{_plural(result['events'], 'event')}, {size(result['bytes'])}; every file matches its sha256"
    )


def archive_text(result: dict) -> str:
    """What ``memstream archive`` did: the totals, then a line per stream."""
    seconds = result.get("seconds") or {}
    lines = [
        f"archived {_plural(result['archived'], 'event')} into {_plural(result['segments'], 'new segment')} "
        f"({size(result['bytes'])}) in {result['directory']}; trimmed {_plural(result['trimmed'], 'entry', 'entries')} from Redis"
        + (f" ({seconds.get('write', 0) + seconds.get('trim', 0):.1f}s)" if seconds else "")
    ]
    for key, row in result["streams"].items():
        kept = f", trimmed {row['trimmed']} below {row['trimmed_below']}" if row.get("trimmed_below") else ""
        lines.append(
            f"  {key}: {row['archived']} archived below {row['before']}, archive up to {row['watermark'] or 'nothing'}{kept}"
        )
    return "\n".join(lines)


def search_line(result: dict) -> str:
    """One search result: score, kind, agent, how long ago it happened and its text, cut."""
    score = result.get("score")
    shown = f"{score:.3f}" if isinstance(score, (int, float)) else "?"
    return (
        f"{shown} [{cut(result.get('kind'), 40)}] {cut(result.get('agent'), 80)} "
        f"{ago(result.get('occurred_at'), never='?')}: {cut(result.get('text', ''))}"
    )


def search_text(answer: dict, defaulted: bool = False) -> str:
    """``memstream search`` for people: which agents it searched (``defaulted``: the agent
    came from no --agent), the results, and how many items of other agents share words with
    the query."""
    searched = answer.get("searched") or {}
    agents = searched.get("agents")
    if searched.get("scope") == "session":
        head = "searched this session"
    elif agents is None:
        head = "searched every agent of the tenant"
    else:
        head = f"searched agent {', '.join(cut(a, 80) for a in agents)}"
        if defaulted and searched.get("scope") == "current":
            head += " (no --agent given: the agent `default`)"
    results = [r for r in answer.get("results") or [] if isinstance(r, dict)]
    lines = [head + ":", *(search_line(r) for r in results)] if results else [head + ": no results"]
    others = {a: n for a, n in (answer.get("elsewhere") or {}).items() if isinstance(n, int) and n > 0}
    if others:
        total = sum(others.values())
        shown = ", ".join(f"{cut(a, 40)} {n}" for a, n in list(others.items())[:5]) + (", ..." if len(others) > 5 else "")
        lines.append(f"{total} more in other agents ({shown}): --scope all, or --scope AGENT")
    if answer.get("reranked") is False:
        lines.append(f"not reranked: {cut(answer.get('rerank_error'), ERROR_CUT)}")
    return "\n".join(lines)


def dead_letter_line(item: dict) -> str:
    """One dead letter: its ids, group, type, deliveries, when it died and its error, cut."""
    return (
        " ".join(cut(item.get(k, "?"), 80) for k in ("dlq_id", "group", "stream", "entry_id", "type"))
        + f" deliveries={cut(item.get('deliveries'), 20)} dead {ago(item.get('dead_at'), never='?')}: "
        f"{cut(item.get('error'), ERROR_CUT)}"
    )


def projections_text(rows: list[dict]) -> str:
    """``memstream projections`` for people: one line per version."""
    lines = [f"{'version':<16} {'state':<11} {'embedder':<22} {'items':>8} {'lag':>8}  {'built':<10} activated"]
    for r in rows:
        spec = _CONTROL.sub(" ", str(r.get("embedder") or r.get("model") or "-"))
        embedder = f"{spec[:16]} {r['dim']}d" if r.get("dim") else spec[:22]
        items = "-" if r.get("items") is None else str(r["items"])
        lag = "unknown" if r.get("lag") is None and r.get("state") not in (None, "not started") else str(r.get("lag", "-"))
        state = str(r.get("state"))
        if state == "building" and r.get("total"):
            state += f" {100 * (r.get('done') or 0) // max(1, r['total'])}%"
        lines.append(
            f"{cut(r['group'], 16):<16} {state:<11} {embedder:<22} {items:>8} {lag:>8}  "
            f"{ago(r.get('created_at')):<10} {ago(r.get('activated_at'))}"
            + (f"  error: {cut(r['error'], 120)}" if r.get("error") else "")
        )
    return "\n".join(lines)


def import_text(result: dict) -> str:
    """What an import read, appended (or would append: dry run) and skipped, and why."""
    if result["source"] == "hermes":
        read = (
            f"{result['home']}: {_plural(result['sessions'], 'session')}, {_plural(result['turns'], 'turn')}, "
            f"{_plural(result['memories'], 'memory', 'memories')}, {_plural(result['session_ends'], 'session end')}, "
            f"{_plural(result['session_switches'], 'session switch', 'session switches')}: {_plural(result['events'], 'event')}"
        )
    else:
        read = f"{result['file']}: {_plural(result['events'], 'event')}"
    done = f"would append {result['new']}" if result["dry_run"] else f"appended {result['appended']}"
    skipped = ", ".join(f"{n} {reason}" for reason, n in result["skipped"].items())
    return (
        f"{read}; {done}"
        + (f"; skipped {skipped}" if skipped else "")
        + (" (dry run: nothing written)" if result["dry_run"] else "")
    )
