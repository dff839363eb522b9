"""``memstream top``: the dashboard's numbers in the terminal (rich), for a person on a host
with no browser. One frame is drawn from one ``/api/summary`` (``memstream.ops.top``): a
status line, the headline figures, the projection versions, the streams, the query path
and the agents' reports. Nothing here computes a figure; it only lays out the summary.
"""

from __future__ import annotations

import io
import time
from typing import Any, Callable

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from memstream.cli.output import rate_text, seconds_text, size

__all__ = ["frame", "watch"]

BAR = 12  # characters of a replay's progress bar
WIDE = 140  # columns from which the streams, queries and agents stand side by side


def _table(title: str) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        show_edge=False,
    )


def _n(v: object) -> str:
    """A count for people (``12,345``); ``-`` when unknown."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "-"
    return f"{v:,.0f}"


def _bar(fraction: float | None) -> str:
    if fraction is None:
        return "?"
    done = round(max(0.0, min(1.0, fraction)) * BAR)
    return "█" * done + "░" * (BAR - done) + f" {fraction * 100:3.0f}%"


def _status(summary: dict[str, Any], base: str, error: str | None, now: float) -> Text:
    up = summary.get("redis_up")
    line = Text()
    line.append("memstream top", style="bold")
    line.append(f"  {base}  ")
    line.append(
        "Redis up" if up else ("Redis down" if up is False else "Redis unknown"), style="bold green" if up else "bold red"
    )
    process = summary.get("process") or {}
    if process.get("role"):
        line.append(f"  {process['role']} {process.get('version') or ''}".rstrip())
    sampled = summary.get("sampled_at")
    if sampled:
        line.append(
            f"  {time.strftime('%H:%M:%S', time.localtime(sampled))}"
            + (f" ({now - sampled:.0f} s ago)" if now - sampled >= 5 else "")
        )
    if error:
        line.append(f"\n{error}", style="bold red")
    return line


def _served(summary: dict[str, Any]) -> list[str]:
    """The headline's figures of the log and the versions that serve (the page's tiles);
    from the rows for a service whose summary has no headline."""
    head = summary.get("headline")
    events = summary.get("events_in") or {}
    if head is None:
        applied = [r["applied_per_s"] for r in summary.get("projections") or [] if r.get("applied_per_s") is not None]
        return [
            f"events in {rate_text(events.get('per_s'))} ({_n(events.get('total'))} appended)",
            f"applied {rate_text(sum(applied)) if applied else '-'} (every version here)",
        ]
    forgotten = f", {_n(head['forgotten'])} forgotten" if head.get("forgotten") else ""
    applied = head.get("applied")
    parts = [
        f"events in {rate_text(head.get('events_in_per_s'))} ({_n(head.get('log_entries'))} in the stream{forgotten})",
        f"applied {rate_text(applied['per_s'])} (slowest active: {applied['group']})" if applied else "applied -",
    ]
    for build in head.get("building") or []:
        fraction = build.get("fraction")
        parts.append(f"building {build['group']} {'-' if fraction is None else f'{fraction:.0%}'}")
    return parts


def _headline(summary: dict[str, Any], width: int = WIDE) -> Text:
    rows = summary.get("projections") or []
    dead = sum(r.get("dead_letters") or 0 for r in rows)
    queries = summary.get("queries") or {}
    waiting = sum((queries.get("queue") or {}).values())
    fleet = summary.get("fleet")
    parts = [
        *_served(summary),
        f"dead letters {_n(dead)}",
        f"queries waiting {_n(waiting)}, p95 {seconds_text(queries.get('p95'))}",
        f"agents {_n(fleet.get('agents_active'))} active" if fleet else "agents: no reports yet",
    ]
    lines = [parts[0]]
    for part in parts[1:]:  # wrapped between figures, never inside one
        if len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    text = Text("\n".join(lines))
    if dead:
        text.highlight_words([f"dead letters {_n(dead)}"], style="bold red")
    return text


def _replay(replay: dict[str, Any]) -> str:
    return f"{_bar(replay.get('fraction'))} {_n(replay.get('applied'))} of {_n(replay.get('total'))}"


def _more(table: Table, note: str) -> None:
    """``note`` under ``table`` (a caption: its width leaves the columns alone)."""
    table.caption = f"{table.caption} · {note}" if table.caption else note
    table.caption_justify = "left"
    table.caption_style = "dim"


def _projections(summary: dict[str, Any], width: int, cap: int | None = None) -> RenderableType:
    table = _table("Projections")
    table.add_column("version", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for name in ("lag", "age", "pend.", "dead", "cons.", "applied", "p50", "p95"):
        table.add_column(name, justify="right", no_wrap=True)
    rows = summary.get("projections") or []
    retired = [r for r in rows if r.get("state") == "retired"] if cap is not None else []
    shown = [r for r in rows if r not in retired]
    hidden = max(0, len(shown) - cap) if cap is not None else 0
    shown = shown[: len(shown) - hidden]
    builds = [r for r in rows if r.get("replay")]
    inline = bool(builds) and width >= WIDE  # else the builds' progress below, one line each
    if inline:
        table.add_column("replay", no_wrap=True)
    for r in shown:
        replay = r.get("replay")
        state = r.get("state") or "-"
        table.add_row(
            r["group"],
            Text(
                state,
                style={"active": "green", "building": "blue", "failed": "red", "dropping": "red", "retired": "dim"}.get(
                    state, ""
                ),
            ),
            _n(r.get("lag_entries")),
            seconds_text(r.get("lag_seconds")),
            _n(r.get("pending")),
            Text(_n(r.get("dead_letters")), style="bold red" if r.get("dead_letters") else ""),
            Text(_n(r.get("consumers")), style="bold red" if r.get("consumers") == 0 and state in ("active", "building") else ""),
            rate_text(r.get("applied_per_s")),
            seconds_text(r.get("freshness_p50")),
            seconds_text(r.get("freshness_p95")),
            *([_replay(replay) if replay else ""] if inline else []),
            style="dim" if state == "retired" else None,
        )
    if cap is None:
        table.caption = "lag: entries not delivered · age: of the oldest waiting · p50, p95: freshness, last minute"
        table.caption_justify = "left"
    notes = ([f"+{hidden} more"] if hidden else []) + ([f"{len(retired)} retired hidden"] if retired else [])
    if notes:
        _more(table, ", ".join(notes))
    if inline or not builds:
        return table
    return Group(table, *(Text(f"replay {r['group']}: {_replay(r['replay'])}") for r in builds))


def _log(summary: dict[str, Any], cap: int | None = None) -> RenderableType:
    streams = summary.get("streams") or []
    if cap is not None and cap < 4:  # short of room: one line
        entries = sum(s.get("entries") or 0 for s in streams)
        return Text(f"Streams: {len(streams)}, {_n(entries)} entries (a taller terminal shows each)", style="dim")
    table = _table("Streams")
    table.add_column("stream")
    table.add_column("entries", justify="right")
    table.add_column("memory", justify="right")
    for s in summary.get("streams") or []:
        table.add_row(s["stream"], _n(s.get("entries")), size(s["bytes"]) if s.get("bytes") is not None else "-")
    if cap is None:
        for etype, figures in ((summary.get("events_in") or {}).get("by_type") or {}).items():
            table.add_row(Text(f"  {etype}", style="dim"), _n(figures.get("total")), rate_text(figures.get("per_s")))
    return table


def _figures(title: str) -> Table:
    """A table whose rows are counts (total, per s) or durations (p50, p95), each figure
    under its own header."""
    table = _table(title)
    table.add_column("")
    for name in ("total", "per s", "p50", "p95"):
        table.add_column(name, justify="right", no_wrap=True)
    return table


def _capped(table: Table, rows: list[tuple[str, str, str, str, str]], cap: int | None, what: str) -> Table:
    hidden = max(0, len(rows) - cap) if cap is not None else 0
    for row in rows[: len(rows) - hidden]:
        table.add_row(*row)
    if hidden:
        _more(table, f"+{hidden} more {what}")
    return table


def _queries(summary: dict[str, Any], cap: int | None = None) -> Table:
    """The query path: each op's latency, then the outcomes, then what waits (first what a
    short terminal keeps)."""
    q = summary.get("queries") or {}
    rows = [
        (f"op {op}", _n(f.get("count")), "", seconds_text(f.get("p50")), seconds_text(f.get("p95")))
        for op, f in (q.get("latency") or {}).items()
    ]
    rows += [(outcome, _n(f.get("total")), rate_text(f.get("per_s")), "", "") for outcome, f in (q.get("outcomes") or {}).items()]
    rows += [(f"waiting: {channel}", _n(n), "", "", "") for channel, n in (q.get("queue") or {}).items()]
    return _capped(_figures("Queries"), rows, cap, "rows")


def _fleet(summary: dict[str, Any], cap: int | None = None) -> RenderableType:
    """The agents' reports: how many, their hooks' durations, prefetch outcomes, spool
    refusals, then each agent's backlog."""
    fleet = summary.get("fleet")
    if not fleet:
        return Text("Agents: no agent reports yet", style="dim")
    refusals = fleet.get("refusals") or {}
    rows = [("active", _n(fleet.get("agents_active")), "", "", "")]
    rows += [
        (f"hook {hook}", "", "", seconds_text(f.get("p50")), seconds_text(f.get("p95")))
        for hook, f in (fleet.get("hooks") or {}).items()
    ]
    rows += [
        (f"prefetch {outcome}", _n(f.get("total")), rate_text(f.get("per_s")), "", "")
        for outcome, f in (fleet.get("prefetch") or {}).items()
    ]
    rows.append(("spool refusals", _n(refusals.get("total")), rate_text(refusals.get("per_s")), "", ""))
    rows += [
        (f"backlog: {a['agent']}", _n(a.get("events")), "", "", "")
        for a in (fleet.get("spool_backlog") or {}).get("agents") or []
    ]
    return _capped(_figures("Agents"), rows, cap, "rows")


def frame(
    summary: dict[str, Any],
    base: str,
    error: str | None = None,
    now: float | None = None,
    width: int = WIDE,
    height: int | None = None,
) -> RenderableType:
    """One screen of ``memstream top`` from one summary (``error``: why it is not a newer
    one), laid out for a terminal ``width`` columns wide and, given ``height``, that many
    lines tall: below ``WIDE`` columns the sections stack, so when they do not fit they
    shrink (the retired versions and the event types first, then each section to fewer
    rows, saying how many it hides) until the Queries and the Agents are on screen."""
    now = time.time() if now is None else now
    if not summary.get("sampled_at"):
        return Group(_status(summary, base, error, now), Text("waiting for the first sample", style="dim"))
    if height is None or width >= WIDE:
        return _layout(summary, base, error, now, width, None)
    for cap in FIT_ROWS:
        shown = _layout(summary, base, error, now, width, cap)
        if _lines(shown, width) <= height:
            return shown
    return shown


# the rows a section keeps, tried in turn until the frame fits (None: all of them)
FIT_ROWS: tuple[int | None, ...] = (None, 12, 8, 6, 4, 3, 2, 1, 0)


def _layout(summary: dict[str, Any], base: str, error: str | None, now: float, width: int, cap: int | None) -> RenderableType:
    parts: list[RenderableType] = [_queries(summary, cap), _fleet(summary, cap), _log(summary, cap)]
    if width >= WIDE:
        side = Table.grid(padding=(0, 4))
        side.add_row(parts[2], *parts[:2])
        parts = [side]
    elif _columns(parts[0]) + _columns(parts[1]) + 2 <= width:  # the queries and the agents side by side
        pair = Table.grid(padding=(0, 2))
        pair.add_row(*parts[:2])
        parts = [pair, *([Text("")] if cap is None else []), parts[2]]
    elif cap is None:
        parts = [p for part in parts for p in (Text(""), part)][1:]
    head = [_status(summary, base, error, now), _headline(summary, width)]
    gap = [Text("")] if cap is None else []
    return Group(*head, *gap, _projections(summary, width, cap), *gap, *parts)


def _columns(renderable: RenderableType) -> int:
    """How many columns ``renderable`` takes at most."""
    console = Console(width=WIDE, file=io.StringIO(), color_system=None)
    return console.measure(renderable).maximum


def _lines(renderable: RenderableType, width: int) -> int:
    """How many lines ``renderable`` takes ``width`` columns wide."""
    console = Console(width=width, file=io.StringIO(), color_system=None)
    return len(console.render_lines(renderable, console.options, pad=False, new_lines=False))


def watch(fetch: Callable[[], dict[str, Any]], base: str, console: Console, every: float = 2.0) -> None:
    """Draw a frame every ``every`` seconds until Ctrl-C (KeyboardInterrupt, left to the
    caller). A failed fetch keeps the last frame with the error, and tries again."""
    from rich.live import Live

    from memstream.ops import CommandError

    summary = fetch()
    failing: str | None = None
    # the terminal's own screen while it runs (as top does): a frame taller than it is cut at the bottom
    with Live(
        frame(summary, base, width=console.width, height=console.height),
        console=console,
        auto_refresh=False,
        screen=True,
        vertical_overflow="crop",
    ) as live:
        while True:
            time.sleep(every)
            try:
                summary, failing = fetch(), None
            except CommandError as exc:
                failing = f"{exc} (retrying every {every:g} s; Ctrl-C quits)"
            live.update(frame(summary, base, failing, width=console.width, height=console.height), refresh=True)
