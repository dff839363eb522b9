"""The hot-path bench's table: ``format_hotpath`` renders ``hotpath``'s dict."""

from __future__ import annotations

from typing import Any

from memstream.bench.hotpath.plan import BASELINE, HOOKS, TARGET_P99_US, TARGET_P999_US


def format_hotpath(result: dict[str, Any]) -> str:
    """A human table of ``hotpath``'s result."""
    m, f, c = result["machine"], result["floor"], result["conditions"]
    lines = [
        f"memstream bench hotpath: {result['date']}, {result['rounds']} interleaved rounds "
        f"({result['method']['chunks']['0ms']} turns a chunk at 0 ms, {result['method']['chunks']['20ms']} at 20 ms; "
        f"warm-up {result['warmup']}); {result['rounds_s']} s",
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, load at start "
        f"{m['loadavg_at_start']}; gc disabled during the timed chunks",
        "",
        f"{'hook cost (µs)':<24}{'hook':<17}{'n':>6}{'p50':>8}{'p99':>8}{'p99.9':>9}{'max':>9}"
        f"{'p50 x':>7}{'p99 x':>7}{'p99.9 x':>9}",
    ]
    for name, entry in c.items():
        for h in HOOKS:
            s = entry[h]
            vs = entry.get("vs_redis_up", {}).get(h)
            ratio = (
                "".join(
                    f"{(vs['ratios'][q] if vs and vs['ratios'][q] is not None else float('nan')):>{w}.2f}"
                    for q, w in (("p50_us", 7), ("p99_us", 7), ("p999_us", 9))
                )
                if vs
                else ""
            )
            lines.append(
                f"{name:<24}{h:<17}{s['n']:>6}{s['p50_us']:>8.1f}{s['p99_us']:>8.1f}{s['p999_us']:>9.1f}"
                f"{s['max_us']:>9.1f}{ratio}"
            )
    lines.append(
        f"{'floor: fixed Python work':<41}{f['python_work']['n']:>6}{f['python_work']['p50_us']:>8.1f}"
        f"{f['python_work']['p99_us']:>8.1f}{f['python_work']['p999_us']:>9.1f}{f['python_work']['max_us']:>9.1f}"
    )
    fa = f.get("python_work_after_20ms")
    if fa and fa["n"]:
        lines.append(
            f"{'floor: the same, after 20 ms of work':<41}{fa['n']:>6}{fa['p50_us']:>8.1f}{fa['p99_us']:>8.1f}"
            f"{fa['p999_us']:>9.1f}{fa['max_us']:>9.1f}"
        )
    lines.append(
        f"{'floor: write() of 2 KB':<41}{f['write_2kb']['n']:>6}{f['write_2kb']['p50_us']:>8.1f}"
        f"{f['write_2kb']['p99_us']:>8.1f}{f['write_2kb']['p999_us']:>9.1f}{f['write_2kb']['max_us']:>9.1f}"
    )
    lines += [
        "",
        "(x: ratio to redis_up at the same work)",
        f"target p99 <= {TARGET_P99_US:.0f} µs and p99.9 <= {TARGET_P999_US:.0f} µs for every hook and condition: "
        + (
            "met"
            if result["meets_target"]
            else "MISSED (" + ", ".join(n for n, e in c.items() if n != BASELINE and not e["meets_target"]) + ")"
        ),
    ]
    lines += [f"REGRESSION: {r}" for r in result["regressions"]] or ["no condition worse than redis_up beyond the noise"]
    if "reporting" in result:
        t = result["tally_ns_per_hook"]
        lines += ["", f"fleet report every {result['method']['report_every_s']} s (redis_up) against off (report_off):"]
        for work, by_hook in result["reporting"].items():
            lines.append(
                f"  {work}: "
                + ", ".join(
                    f"{h} p99 x{c['ratios']['p99_us']} (noise x{c['noise_p99']}, worse in {c['rounds_worse']}, "
                    f"better in {c['rounds_better']}, p={c['sign_p']})"
                    for h, c in by_hook.items()
                )
            )
        lines.append(
            f"  a trivial hook: {t['on_ns']} ns timed, {t['off_ns']} ns untimed (median difference "
            f"{t['difference_ns']} ns over {t['calls']} calls each); reports sent: "
            + ", ".join(f"{name} {n}" for name, n in result["reports_sent"].items() if n)
        )
    g = result["gateway_cycle"]
    lines += ["", "gateway cycle (a provider per message: initialize, one turn, on_session_end, shutdown), µs"]
    for kind in ("redis_up", "redis_down"):
        for step in ("initialize", "shutdown"):
            s = g[kind][step]
            lines.append(
                f"  {kind:<12}{step:<12}{s['n']:>6}{s['p50_us']:>10.1f}{s['p99_us']:>10.1f}{s['max_us']:>10.1f}"
                "   (n, p50, p99, max)"
            )
    lines.append(f"  up cycles: {g['redis_up']['events_in_log']}/{g['redis_up']['events_expected']} events in the log")
    lines += ["", "delivery (every event of every condition, the down ones after their Valkey started)"]
    for name, d in result["delivery"].items():
        lines.append(
            f"  {name:<22}{d['distinct']}/{d['expected']} in the log"
            + (f", shipped in {d['ship_s'] * 1000:.0f} ms" if "ship_s" in d else "")
        )
    lines += [
        f"  lossless: {'yes' if result['lossless'] else 'NO'}",
        "",
        "for scale (measured by others, quoted, not by this benchmark):",
    ]
    lines += [f"  {ref['name']}: {ref['figure']}" + (f" ({ref['note']})" if ref["note"] else "") for ref in result["references"]]
    return "\n".join(lines)
