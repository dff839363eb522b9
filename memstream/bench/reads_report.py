"""The text report of ``memstream bench reads`` (``memstream.bench.reads``): per tree its
recalls/s, round trips, CPU per recall and floor, the CPU by stage, where the served CPU went
(``reads_served``), and the ratios against the tree before and of N query processes."""

from __future__ import annotations

from typing import Any

from memstream.bench.reads_served import served_lines

__all__ = ["format_reads"]


def format_reads(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"memstream bench reads  ({r['date']}, embedder {r['embedder']}{_late_label(r)}, questions: {r['questions']}, "
        f"{r['memories']:,} memories, {r['clients']} callers in {r['processes']} processes, {r['threads']} server "
        f"threads, {r['seconds']} s x {r['rounds']} rounds; {m.get('cpus')} CPUs, load at start {m.get('loadavg_at_start')})",
        "tree      recalls/s  rt p50  rt p95  errors  cpu ms/recall  floor lone  floor batch  rss MB  late",
    ]
    for label, tree in r["trees"].items():
        s = tree["summary"]
        lines.append(
            f"{label:<8}  {s['recalls_per_s'] or 0:>9.1f}  {s['round_trip_p50_ms'] or 0:>6.1f}  "
            f"{s['round_trip_p95_ms'] or 0:>6.1f}  {s['errors']:>6}  {s['cpu_ms_per_recall'] or 0:>13.2f}  "
            f"{s['floor_lone_ms'] or 0:>10.2f}  {s['floor_batch_ms'] or 0:>11.2f}  {tree.get('rss_mb', 0):>6.0f}  "
            f"{_on(tree.get('late_interaction'))}"
        )
    lines.append("CPU ms per recall by stage (handler called directly; transport = served minus handler):")
    lines.append(
        "tree      mode   embed  searches (dense  keyword)  facts  late (query  passages  rest  computed)  per-hit  handler"
        "  transport"
    )
    for label, tree in r["trees"].items():
        s = tree["summary"]
        for mode, st in s["stages"].items():
            lines.append(
                f"{label:<8}  {mode:<5}  {st['embed']:>5.2f}  {st['searches']:>8.2f}  "
                + (f"({st['dense']:>5.2f}  {st['keyword']:>7.2f})" if st["dense"] or st["keyword"] else "(one call)      ")
                + f"  {st['facts']:>5.2f}  {_late(st)}  {st['per_hit']:>7.2f}  {st['handler']:>7.2f}  "
                + (f"{s['transport_ms']:>9.2f}" if mode == "lone" and s["transport_ms"] is not None else "")
            )
    lines += served_lines(r["trees"])
    if "ratio" in r:
        lines.append(
            f"this / against: recalls/s x{r['ratio']['recalls_per_s']}, CPU per recall x{r['ratio']['cpu_ms_per_recall']}"
        )
    if "replicas" in r:
        q = r["replicas"]
        lines.append(
            f"this, {r['query_processes']} query processes: {q['recalls_per_s'] or 0:.1f} recalls/s "
            f"(rounds {q['per_round_recalls_per_s']}), x{q['ratio_to_one']} one process of the same round, "
            f"cpu ms/recall {q['cpu_ms_per_recall'] or 0:.2f}, errors {q['errors']}, peak RSS MB per process {q['rss_mb']}"
        )
    return "\n".join(lines)


def _late(st: dict[str, Any]) -> str:
    """The late interaction's columns: its CPU in all, its parts, and the passages a recall
    encoded on the read path (not stored by the dense stage)."""
    parts = [st.get(s) or 0.0 for s in ("late_query", "late_passages", "late_rest")]
    return f"{sum(parts):>4.2f} ({parts[0]:>5.2f}  {parts[1]:>8.2f}  {parts[2]:>4.2f}  {st.get('late_computed') or 0.0:>8.2f})"


def _late_label(r: dict[str, Any]) -> str:
    """The late interaction's state when the run says it (a run before the field: nothing)."""
    if "late_interaction" not in r:
        return ""
    return f" (late interaction {'on' if r['late_interaction'] else 'off'}, setting {r['late_rerank']})"


def _on(flag: bool | None) -> str:
    """Whether a tree's read side ran the late interaction (its own answer; "-": a run before the field)."""
    return "-" if flag is None else ("on" if flag else "off")
