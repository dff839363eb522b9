"""Where a served recall's CPU goes, for ``memstream bench reads`` (``memstream.bench.reads``):
per recall answered, the serving threads' CPU in ``handle_batch`` and in the take (BLMPOP),
the rest of the query process (its other threads: the engine's, the idle lane), the callers'
CPU, the share of recalls answered without the late interaction (they waited too long), and
the sizes of the batches the servers took (counted in the query process, ``reads_child``)."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["served_figures", "served_lines", "served_summary"]

FIELDS = ("handle_ms", "take_ms", "callers_ms", "batch_mean", "late_shed_pct")


def served_figures(stopped: list[dict[str, Any]], callers_cpu: float, answered: int) -> dict[str, Any]:
    """Per recall answered (ms): the serving threads' CPU in ``handle_batch`` and in the take,
    the callers' CPU; the mean and the table of the batches' sizes, from the query processes'
    ``stop`` answers (``stopped``) and the callers' CPU seconds."""
    sizes: dict[int, int] = {}
    for s in stopped:
        for size, n in s.get("batch_sizes", {}).items():
            sizes[int(size)] = sizes.get(int(size), 0) + n
    per = 1000 / max(1, answered)
    return {
        "handle_ms": per * sum(s.get("handle_cpu_s", 0.0) for s in stopped),
        "take_ms": per * sum(s.get("take_cpu_s", 0.0) for s in stopped),
        "callers_ms": per * callers_cpu,
        "batch_mean": sum(k * n for k, n in sizes.items()) / max(1, sum(sizes.values())),
        # recalls answered without the late interaction: they waited past MEMSTREAM_LATE_SHED_MS
        "late_shed_pct": 100 * sum(s.get("late_shed", 0) for s in stopped) / max(1, answered),
        "batch_sizes": dict(sorted(sizes.items())),
    }


def served_summary(rounds: list[dict[str, Any]], median: Callable[[list[Any]], float | None]) -> dict[str, Any]:
    """The rounds' figures: the median of each, and the batch sizes summed."""
    sizes: dict[int, int] = {}
    for r in rounds:
        for k, n in r["batch_sizes"].items():
            sizes[int(k)] = sizes.get(int(k), 0) + n
    return {"served": {f: median([r[f] for r in rounds]) for f in FIELDS}, "batch_sizes": dict(sorted(sizes.items()))}


def served_lines(trees: dict[str, Any]) -> list[str]:
    """The report's table: per tree, the CPU per recall served and where it went."""
    lines = [
        "served, CPU ms per recall: the serving threads in handle_batch and in the take (BLMPOP), the rest, the callers",
        "tree      served  handle_batch  take  other  callers  late shed %  batch mean  batch sizes (size: batches)",
    ]
    for label, tree in trees.items():
        s, v = tree["summary"], tree["summary"]["served"]
        other = (s["cpu_ms_per_recall"] or 0) - (v["handle_ms"] or 0) - (v["take_ms"] or 0)
        lines.append(
            f"{label:<8}  {s['cpu_ms_per_recall'] or 0:>6.2f}  {v['handle_ms'] or 0:>12.2f}  {v['take_ms'] or 0:>4.2f}  "
            f"{other:>5.2f}  {v['callers_ms'] or 0:>7.2f}  {v.get('late_shed_pct') or 0:>11.1f}  {v['batch_mean'] or 0:>10.2f}  "
            f"{s['batch_sizes']}"
        )
    return lines
