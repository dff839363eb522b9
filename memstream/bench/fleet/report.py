"""The fleet bench's table: ``format_fleet`` renders ``fleet_bench``'s dict."""

from __future__ import annotations

from typing import Any, Iterable

from memstream.bench.fleet.plan import HOOKS, TARGETS


# -- the table ----------------------------------------------------------------------------------
def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_fleet(r: dict[str, Any]) -> str:
    """A table of ``fleet_bench``'s result, a column per level (and the tree before's, run
    with ``against``, below it)."""
    m = r["machine"]
    lines = [
        f"memstream bench fleet — {r['date']}; {r['embedder']} embedder"
        + (f" ({r['embed_threads']} threads)" if r.get("embed_threads") else "")
        + (f", late interaction {r['late_rerank']}" if r.get("late_rerank", "auto") != "auto" else "")
        + f", questions: {r.get('questions', 'cached')}; "
        f"{r['rate_per_agent']} turns/s per agent, "
        f"{r['seconds']:g} s per level, {r['processes']} agent processes; {r['total_s']} s in all",
        f"machine: {m.get('cpus')} CPUs ({m.get('cpu_model', '')}), Python {m.get('python')}; load average "
        f"{m.get('loadavg_at_start')} at start, {m.get('loadavg_at_end')} at end",
        "",
    ]
    before = r.get("against")
    if before:
        lines.append("this tree:")
    lines += _table(r)
    if before:
        lines += ["", f"the tree before ({before['path']}), in the same run:"] + _table(before)
    lines.append("(floor: the same call on a do-nothing provider, same thread, same moment; ×: memstream's p99 / the floor's)")
    return "\n".join(lines)


def _table(r: dict[str, Any]) -> list[str]:
    """The rows of one tree's levels, its knee and whether it lost nothing."""
    levels = r["levels"]
    lines: list[str] = []
    width = 18
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cells: Iterable[str]) -> None:
        rows.append((label, list(cells)))

    row("agents", (_f(lv["agents"]) for lv in levels))
    row("load average at start", (str(lv["loadavg_at_start"][0]) for lv in levels))
    row("turns/s (target)", (f"{_f(lv['turns_per_s'])} ({_f(lv['target_turns_per_s'])})" for lv in levels))
    row(
        "turn start late ms p50/p99",
        (f"{_f(lv['turn_late_ms'].get('p50'))}/{_f(lv['turn_late_ms'].get('p99'))}" for lv in levels),
    )
    row("hook µs p50/p99 (floor p99, ×)", ("" for _ in levels))
    for h in HOOKS:
        cells = []
        for lv in levels:
            e = lv["hooks"][h]
            mm, ff = e["memstream_us"], e["floor_us"]
            ratio = e["p99_ratio"]
            shown = "-" if ratio is None else f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.1f}"
            cells.append(
                f"{_f(mm.get('p50'), 0)}/{_f(mm.get('p99'), 0)} ({_f(ff.get('p99'), 0)}, {shown}×)" if mm.get("n") else "-"
            )
        row(f"  {h}", cells)
    row(
        "prefetch fresh in budget",
        (
            f"{100 * lv['prefetch']['fresh_fraction']:.1f}%" if lv["prefetch"]["fresh_fraction"] is not None else "-"
            for lv in levels
        ),
    )
    row("prefetch ms p50/p99", (f"{_f(lv['prefetch']['ms'].get('p50'))}/{_f(lv['prefetch']['ms'].get('p99'))}" for lv in levels))
    row("query (tool search) ms p50/p95", (f"{_f(lv['query_ms'].get('p50'))}/{_f(lv['query_ms'].get('p95'))}" for lv in levels))
    for key, label in (
        ("searchable", "append→searchable s p50/p95"),
        ("in_log", "  → in the log"),
        ("applied", "  → applied (turns)"),
    ):
        row(
            label,
            (
                f"{_f(lv['append_to_searchable_s'][key]['p50'], 2)}/{_f(lv['append_to_searchable_s'][key]['p95'], 2)}"
                for lv in levels
            ),
        )
    row(
        "  probes found/sampled",
        (f"{lv['append_to_searchable_s']['searchable']['n']}/{lv['append_to_searchable_s']['sampled']}" for lv in levels),
    )
    row(
        "  probe search ms p50/p95",
        (
            f"{_f(lv['append_to_searchable_s']['probe_round_trip_ms'].get('p50'))}/"
            f"{_f(lv['append_to_searchable_s']['probe_round_trip_ms'].get('p95'))}"
            for lv in levels
        ),
    )
    row(
        "worker lag max entries / s",
        (f"{_f(lv['worker_lag']['max_entries'])} / {_f(lv['worker_lag']['max_s'])}" for lv in levels),
    )
    row(
        "queries/s: agents ask, all answered",
        (f"{_f(lv['queries_per_s']['asked'])}, {_f(lv['queries_per_s']['answered']['mean'])}" for lv in levels),
    )
    row("query backlog max", (_f(lv["query_backlog_max"]) for lv in levels))
    row("queries answered / expired; shed: late, rerank", (_shed(lv.get("query_counters") or {}) for lv in levels))
    row("Redis CPU % mean/max", (f"{_f(lv['redis']['cpu_pct']['mean'])}/{_f(lv['redis']['cpu_pct']['max'])}" for lv in levels))
    row("Redis used_memory MB", (_f(lv["redis"]["used_memory_mb_max"]) for lv in levels))
    row(
        "Redis clients (per agent)",
        (f"{lv['redis']['clients_max']} ({_f(lv['redis']['clients_per_agent'], 2)})" for lv in levels),
    )
    row(
        "service CPU % mean/max",
        (f"{_f(lv['cpu_pct']['service']['mean'])}/{_f(lv['cpu_pct']['service']['max'])}" for lv in levels),
    )
    row(
        "  threads: queries/projections/native/other/ended",
        (
            "/".join(
                [_f(lv["cpu_pct"]["service_threads"][k]["mean"], 0) for k in ("queries", "projections", "native", "other")]
                + [_f(lv["cpu_pct"]["service_exited_threads"]["mean"], 0)]
            )
            for lv in levels
        ),
    )
    row("agent procs CPU % (sum)", (_f(lv["cpu_pct"]["agent_processes_sum_mean"]) for lv in levels))
    row(
        "machine busy % mean/max",
        (f"{_f(lv['cpu_pct']['machine_busy']['mean'])}/{_f(lv['cpu_pct']['machine_busy']['max'])}" for lv in levels),
    )
    row("events emitted", (_f(lv["events"]["emitted"]) for lv in levels))
    row("lost / duplicated", (f"{lv['events']['lost']} / {lv['events']['duplicated']}" for lv in levels))
    label_width = max(len(label) for label, _ in rows) + 2
    width = max([width] + [len(c) + 2 for _, cells in rows for c in cells])
    for label, cells in rows:
        lines.append(f"{label:<{label_width}}" + "".join(f"{c:>{width}}" for c in cells))
    lines += [
        "",
        f"knee (largest N with prefetch fresh within budget ≥ {100 * TARGETS['fresh_fraction']:.0f}% and "
        f"append→searchable p95 ≤ {TARGETS['append_to_searchable_p95_s']:g} s): "
        + (_f(r["knee"]) if r["knee"] is not None else "none of the levels"),
        f"lossless (every emitted event in the log exactly once, every level): {'yes' if r['lossless'] else 'NO'}",
    ]
    return lines


def _shed(counters: dict[str, int]) -> str:
    """The service's query counters of a level: answered, expired on the list, and answered
    without the late interaction (the take waited) or without the rerank (the lane was busy)."""
    c = {k: int(counters.get(k, 0)) for k in ("answered", "expired", "late_shed", "rerank_shed")}
    return f"{c['answered']:,} / {c['expired']:,}; {c['late_shed']:,}, {c['rerank_shed']:,}"
