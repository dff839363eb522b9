"""The locomo bench's table: ``format_locomo`` (and ``format_compare`` for v1 against v2)."""

from __future__ import annotations

from typing import Any


def format_locomo(r: dict[str, Any]) -> str:
    def row(name: str, m: dict[str, Any]) -> str:
        return (
            f"  {name:<24} n={m['n']:>5}  any@5 {m['any@5']:>5}  any@10 {m['any@10']:>5}  "
            f"all@5 {m['all@5']:>5}  all@10 {m['all@10']:>5}  ndcg@10 {m['ndcg@10']:>5}"
        )

    lines = [
        f"memstream bench locomo  ({r['date']}, split {r['split']}, embedder {r['embedder']}, "
        f"{r['index']['turns']} turns indexed in {r['index']['build_s']} s, "
        f"{r['index'].get('build_s_per_1000_turns')} s per 1,000 turns)",
    ]
    if r.get("late_shed"):  # the machine was too busy to take a lone recall at once: those lost their reordering
        lines.append(
            f"({r['late_shed']} recalls answered without the late interaction: their take waited past MEMSTREAM_LATE_SHED_MS)"
        )
    lines += format_paths(r["paths"])
    lines += [
        "",
        "search path:",
        row("memstream cats 1-4", r["memstream"]["cats_1_4"]),
        row("memstream cats 1-5", r["memstream"]["cats_1_5"]),
    ]
    for name, m in r["memstream"]["per_category"].items():
        if m.get("n"):
            lines.append(row(f"  cat {name}", m))
    for name, b in r["baselines"].items():
        lines.append(row(f"{name} cats 1-4", b["cats_1_4"]))
    for name, ratio in r["ratios"].items():
        lines.append(f"  ratio to {name}: " + ", ".join(f"{m} {v}" for m, v in ratio.items()))
    lines.append(
        f"  query latency p50 {r['latency_ms']['p50']} ms p95 {r['latency_ms']['p95']} ms; "
        f"injected tokens at 5: {r['injected_tokens']['at_5_mean']}, at 10: {r['injected_tokens']['at_10_mean']}"
    )
    if "rerank_grid" in r:
        lines += format_grid(r["rerank_grid"])
    if "prefetch_grid" in r:
        lines += format_prefetch_grid(r["prefetch_grid"])
    if "compare" in r:
        lines += format_compare(r["compare"])
    v = r["verdict"]
    for path, met in v.items():
        if path != "note":
            lines.append(f"  targets of {path}: " + ", ".join(f"{m} {'met' if ok else 'MISSED'}" for m, ok in met.items()))
    if v["note"]:
        lines.append(f"  ({v['note']})")
    return "\n".join(lines)


def format_compare(c: dict[str, Any]) -> list[str]:
    """v1 and v2 of the turns projection side by side, and their per-question comparison."""
    lines = ["", "turns projection, v1 against v2 rebuilt from the same events (readers switched to v2):"]
    for v in ("v1", "v2"):
        options = ", ".join(f"{k}={val}" for k, val in c[v]["options"].items())
        lines.append(f"  {v} ({c[v]['collection']}, {c[v]['points']} points, built in {c[v]['build_s']} s): {options}")
    metrics = ("any@10", "all@10", "ndcg@10")
    lines.append(f"  {'':<22}" + "".join(f"{v + ' ' + m:>14}" for m in metrics for v in ("v1", "v2")) + f"{'all@10 +/-  p':>18}")
    groups = ["cats_1_4", "cats_1_5"] + list(c["v1"]["metrics"]["per_category"])
    for g in groups:
        m1 = c["v1"]["metrics"].get(g) or c["v1"]["metrics"]["per_category"][g]
        m2 = c["v2"]["metrics"].get(g) or c["v2"]["metrics"]["per_category"][g]
        if not m1.get("n"):
            continue
        test = c["paired"].get(g, {}).get("all@10")
        sign = f"+{test['wins']} -{test['losses']}  {test['p']:.3f}" if test else ""
        lines.append(
            f"  {g + ' (n=' + str(m1['n']) + ')':<22}"
            + "".join(f"{mm[m]:>14}" for m in metrics for mm in (m1, m2))
            + f"{sign:>18}"
        )
    for v in ("v1", "v2"):
        lat, tok = c[v]["latency_ms"], c[v]["injected_tokens"]
        lines.append(f"  {v}: query p50 {lat['p50']} ms, p95 {lat['p95']} ms; injected tokens at 10: {tok['at_10_mean']}")
    return lines


def format_paths(paths: dict[str, Any]) -> list[str]:
    """One row per read path (cats 1-4), and its sign test against prefetch."""
    lines = [
        "",
        f"  {'path (cats 1-4)':<16}{'n':>6}{'any@5':>7}{'any@10':>8}{'all@5':>7}{'all@10':>8}{'mh all@10':>11}"
        f"{'p50 ms':>9}{'p95 ms':>9}   vs prefetch any@10 / all@10 (+ - p)",
    ]
    for path, f in paths.items():
        m, mh, lat = f["metrics"]["cats_1_4"], f["metrics"]["per_category"]["1 multi-hop"], f["latency_ms"]
        test = f.get("paired_with_prefetch", {}).get("cats_1_4")
        vs = (
            " / ".join(f"+{test[x]['wins']} -{test[x]['losses']} {test[x]['p']:.3f}" for x in ("any@10", "all@10"))
            if test
            else ""
        )
        lines.append(
            f"  {path:<16}{m['n']:>6}{m['any@5']:>7}{m['any@10']:>8}{m['all@5']:>7}{m['all@10']:>8}"
            f"{mh.get('all@10', 0):>11}{lat['p50']:>9}{lat['p95']:>9}   {vs}"
        )
        for name, pair in f.items():
            if name.startswith("paired_with_") and name != "paired_with_prefetch":
                t = pair["cats_1_4"]
                tests = " / ".join(f"{x} +{t[x]['wins']} -{t[x]['losses']} {t[x]['p']:.3f}" for x in ("any@10", "all@10"))
                lines.append(" " * 18 + "vs " + name.removeprefix("paired_with_") + " (+ - p): " + tests)
    return lines


def format_grid(grid: dict[str, Any]) -> list[str]:
    """The rerank's candidate counts and weights on the same candidates."""
    lines = ["", f"rerank grid (the best 50 of search scored once in {grid['scoring_s']} s; paired with prefetch):"]
    for p in grid["points"]:
        m, mh, t = p["cats_1_4"], p["multi_hop"], p["paired"]
        lines.append(
            f"  {p.get('fusion', 'minmax'):<7} candidates {p['candidates']:>2} weight {p['weight']:<5} "
            f"any@10 {m['any@10']:>5} all@10 {m['all@10']:>5} "
            f"multi-hop all@10 {mh.get('all@10', 0):>5}  all@10 +{t['all@10']['wins']} -{t['all@10']['losses']}"
        )
    if "neighbour_points" in grid:
        lines.append(f"  with the turns beside the best m (scored in {grid['neighbour_scoring_s']} s), min-max:")
    for p in grid.get("neighbour_points", []):
        m, mh, t = p["cats_1_4"], p["multi_hop"], p["paired"]
        lines.append(
            f"  candidates {p['candidates']:>2} + beside {p['neighbours_of']:>2} weight {p['weight']:<5} "
            f"any@10 {m['any@10']:>5} all@10 {m['all@10']:>5} "
            f"multi-hop all@10 {mh.get('all@10', 0):>5}  all@10 +{t['all@10']['wins']} -{t['all@10']['losses']}"
        )
    return lines


def format_prefetch_grid(points: list[dict[str, Any]]) -> list[str]:
    """The prefetch with ranking weights moved, each point paired with the defaults."""
    lines = ["", "prefetch grid (ranking weights moved; paired with the defaults' prefetch):"]
    for p in points:
        m, mh, t, lat = p["cats_1_4"], p["multi_hop"], p["paired"], p["latency_ms"]
        setting = ", ".join(f"{name} {value}" for name, value in p.items() if name.isupper())
        lines.append(
            f"  {setting:<30} any@10 {m['any@10']:>5} all@10 {m['all@10']:>5} multi-hop all@10 {mh.get('all@10', 0):>5}"
            f"  any@10 +{t['any@10']['wins']} -{t['any@10']['losses']} {t['any@10']['p']:.3f}"
            f"  all@10 +{t['all@10']['wins']} -{t['all@10']['losses']} {t['all@10']['p']:.3f}"
            f"  p50 {lat['p50']} p95 {lat['p95']} ms"
        )
    return lines
