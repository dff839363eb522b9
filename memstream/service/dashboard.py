"""The dashboard of ``memstream up`` and of every ``memstream worker``, served beside
``/metrics`` on ``MEMSTREAM_METRICS_ADDR``: ``/`` (a page that draws its charts and tables
from ``/api/summary`` every 2 s), ``/api/summary`` (the numbers as JSON), ``/static/...``
(the page's script and style, shipped in ``memstream/service/static``) and ``/metrics``
(the Prometheus exposition of the same registry).

One source: every number of the summary is computed from samples of the metrics registry
that ``/metrics`` exposes, never from a second reading of Redis. A sampler thread collects
the registry every ``INTERVAL`` seconds while the server runs (``Sampler``) and
``History`` keeps ``KEEP`` seconds of them, so a page's first load already has history
to draw, and what watching costs does not grow with the viewers (a request reads the ring).

- Rates (events in per type, applied per projection version, refusals, prefetches) come
  from counters between samples (a counter that went down restarted: its new value is the
  increase, as Prometheus's ``rate`` takes it), over the last ``RATE_WINDOW`` seconds: the
  current rate and each chart point alike, so a chart's newest point is the figure shown
  beside it. A series absent from either sample has no rate (null).
- The headline (``headline``) describes what serves now: the active versions only (their
  slowest applied rate, largest lag, oldest waiting entry, worst freshness p95); a building
  version's progress and freshness apart (``building``; its freshness runs from its read
  of each entry, as ``memstream_projection_freshness_seconds`` measures a build); the
  entries in the streams (what the Streams table shows) and how many ``forget`` removed
  from them and retention erased.
- Percentiles (freshness, query seconds, hook seconds) come from the histogram buckets
  filled over the last ``WINDOW`` seconds, interpolated within a bucket as Prometheus's
  ``histogram_quantile`` does; null when nothing was observed in the window.
- A figure the registry does not report (a lag the server cannot count, a replay's unknown
  progress, any Redis figure while Redis is down) is null, never 0.

Never memory text: the registry holds none (its labels are streams, projection versions,
event types, operations, outcomes, channels, agent ids and hooks), and the summary carries
only those labels and numbers.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import threading
import time
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, Iterable

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["History", "Sampler", "dashboard_app", "INTERVAL", "KEEP", "RATE_WINDOW", "WINDOW", "quantile", "serving"]

log = structlog.get_logger("memstream.dashboard")

INTERVAL = 2.0  # seconds between two samples of the registry
KEEP = 600.0  # seconds of history kept (300 samples)
WINDOW = 60.0  # seconds of histogram observations a percentile is computed over
RATE_WINDOW = 10.0  # seconds a current rate is computed over
FIRST_SAMPLE_WAIT = 5.0  # seconds a summary waits for the first sample of a process that has just started
TOP_AGENTS = 5  # agents shown by name in the fleet's spool backlog and refusals; the rest as `other`

# the fleet's families: another process's reports, shown when the registry has them
FLEET = (
    "memstream_agents_active",
    "memstream_agent_spool_backlog_events",
    "memstream_agent_spool_refusals_total",
    "memstream_hook_seconds",
    "memstream_prefetch_total",
)
# histograms the summary reads, and the label that tells their series apart
HISTOGRAMS = {
    "memstream_projection_freshness_seconds": "group",
    "memstream_query_seconds": "op",
    "memstream_hook_seconds": "hook",
}
# the other samples the summary reads
VALUES = frozenset(
    {
        "memstream_info",
        "memstream_redis_up",
        "memstream_stream_entries",
        "memstream_stream_bytes",
        "memstream_events_appended_total",
        "memstream_projection_state",
        "memstream_projection_lag_entries",
        "memstream_projection_lag_seconds",
        "memstream_projection_pending_entries",
        "memstream_projection_dead_letters",
        "memstream_projection_consumers",
        "memstream_replay_applied_entries",
        "memstream_replay_log_entries",
        "memstream_projection_applied_total",
        "memstream_query_queue_length",
        "memstream_queries_total",
        "memstream_agents_active",
        "memstream_agent_spool_backlog_events",
        "memstream_agent_spool_refusals_total",
        "memstream_prefetch_total",
        "memstream_forgotten_total",
        "memstream_retention_erased_total",
    }
)
# counters read from Redis: absent while Redis cannot be read (the fleet's too, to be safe)
REDIS_COUNTERS = frozenset(
    {
        "memstream_events_appended_total",
        "memstream_queries_total",
        "memstream_agent_spool_refusals_total",
        "memstream_prefetch_total",
    }
)
GROUP_FIGURES = ("lag_entries", "lag_seconds", "pending", "dead_letters", "consumers")
_GROUP_SAMPLES = {
    "lag_entries": "memstream_projection_lag_entries",
    "lag_seconds": "memstream_projection_lag_seconds",
    "pending": "memstream_projection_pending_entries",
    "dead_letters": "memstream_projection_dead_letters",
    "consumers": "memstream_projection_consumers",
}

Labels = dict[str, str]
Buckets = list[tuple[float, float]]  # (upper bound, cumulative count), ascending, +Inf last


@dataclass
class Snapshot:
    """One collection of the registry, reduced to what the summary reads."""

    at: float
    families: set[str] = field(default_factory=set)  # family names present (a counter's with _total)
    values: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)  # sample name -> its series
    buckets: dict[tuple[str, str], Buckets] = field(default_factory=dict)  # (histogram, series) -> buckets
    labels: dict[tuple[str, str], Labels] = field(default_factory=dict)  # (histogram, series) -> its labels

    def series(self, name: str) -> list[tuple[Labels, float]]:
        return self.values.get(name, [])

    def by(self, name: str, label: str) -> dict[str, float]:
        """Sample ``name``'s values by one label (summed over the others)."""
        out: dict[str, float] = {}
        for labels, v in self.series(name):
            key = labels.get(label, "")
            out[key] = out.get(key, 0.0) + v
        return out

    def one(self, name: str) -> float | None:
        found = self.series(name)
        return found[0][1] if found else None


def snapshot(metrics: Iterable[Metric], at: float) -> Snapshot:
    """The figures of a registry's collected ``metrics`` that the summary reads."""
    snap = Snapshot(at)
    counts: dict[tuple[str, str], dict[float, float]] = {}  # (histogram, series) -> bound -> count
    for family in metrics:
        name = family.name + "_total" if family.type == "counter" else family.name
        snap.families.add(name)
        label = HISTOGRAMS.get(family.name)
        if label is not None:
            for s in family.samples:
                if s.name == family.name + "_bucket":
                    key = (family.name, s.labels.get(label, ""))
                    le = float(s.labels.get("le", "+Inf"))
                    row = counts.setdefault(key, {})
                    row[le] = row.get(le, 0.0) + s.value  # series told apart by other labels: added up
                    if key not in snap.labels:
                        snap.labels[key] = {k: v for k, v in s.labels.items() if k != "le"}
            continue
        if name not in VALUES:
            continue
        for s in family.samples:
            if s.name in VALUES and math.isfinite(s.value):  # a figure that is no number: unknown
                snap.values.setdefault(s.name, []).append((s.labels, s.value))
    snap.buckets = {key: sorted(row.items()) for key, row in counts.items()}
    return snap


def quantile(q: float, buckets: Buckets) -> float | None:
    """The ``q`` quantile of a histogram's cumulative ``buckets``, as Prometheus's
    ``histogram_quantile``: linear within the bucket that holds it (from 0 for the first),
    the highest finite bound when it falls in +Inf; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower
            if count == below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def _since(new: Buckets, old: Buckets | None) -> Buckets:
    """The observations of ``new`` made after ``old`` (a restarted histogram: all of ``new``)."""
    if not old or [le for le, _ in old] != [le for le, _ in new] or old[-1][1] > new[-1][1]:
        return new
    return [(le, n - o) for (le, n), (_, o) in zip(new, old)]


def _merged(rows: Iterable[Buckets]) -> Buckets:
    """Histograms with the same bounds added up (those with other bounds left out)."""
    out: Buckets = []
    for row in rows:
        if not out:
            out = list(row)
        elif [le for le, _ in row] == [le for le, _ in out]:
            out = [(le, a + b) for (le, a), (_, b) in zip(out, row)]
    return out


def _increase(new: float, old: float) -> float:
    return new - old if new >= old else new  # a counter that went down restarted


def _rate(new: Snapshot, old: Snapshot | None, name: str, label: str) -> dict[str, float | None]:
    """Per second, between ``old`` and ``new``, of each series of counter ``name`` by ``label``.
    A series ``old`` lacks counted 0 there when ``old`` read it (a process's counter is made at
    0; a Redis one is absent until counted, when Redis was read), else it has no rate."""
    now = new.by(name, label)
    if old is None or new.at <= old.at:
        return {k: None for k in now}
    before = old.by(name, label)
    read = name in old.families and (name not in REDIS_COUNTERS or old.one("memstream_redis_up") == 1)
    span = new.at - old.at
    return {k: (_increase(v, before[k]) / span if k in before else (v / span if read else None)) for k, v in now.items()}


def _total(rates: dict[str, float | None]) -> float | None:
    known = [v for v in rates.values() if v is not None]
    return sum(known) if known and len(known) == len(rates) else None


def _percentiles(new: Snapshot, base: Snapshot | None, histogram: str) -> dict[str, tuple[float | None, float | None, float]]:
    """Each series of ``histogram``: (p50, p95, observations) over the window since ``base``."""
    out = {}
    for (name, key), row in new.buckets.items():
        if name == histogram:
            seen = _since(row, base.buckets.get((name, key)) if base is not None else None)
            out[key] = (quantile(0.5, seen), quantile(0.95, seen), seen[-1][1] if seen else 0.0)
    return out


def _all_percentiles(new: Snapshot, base: Snapshot | None, histogram: str) -> tuple[float | None, float | None]:
    rows = [
        _since(row, base.buckets.get((name, key)) if base is not None else None)
        for (name, key), row in new.buckets.items()
        if name == histogram
    ]
    merged = _merged(rows)
    return quantile(0.5, merged), quantile(0.95, merged)


def _short(v: float | None) -> float | None:
    """A history figure to 4 significant digits (what a chart can show)."""
    return None if v is None else float(f"{v:.4g}")


def _count(v: float | None) -> float | int | None:
    """A count as an integer when it is one."""
    if v is None:
        return None
    return int(v) if v == int(v) and abs(v) < 2**53 else round(v, 6)


def _group_of(labels: Labels) -> str:
    return labels.get("group", "")


class History:
    """The samples of a registry: ``record`` one, ``summary`` the numbers. Bounded: the
    chart points of the last ``KEEP`` seconds and the snapshots of the last ``WINDOW``."""

    def __init__(
        self, interval: float = INTERVAL, keep: float = KEEP, window: float = WINDOW, rate_window: float = RATE_WINDOW
    ) -> None:
        self.interval, self.window, self.rate_window = interval, window, rate_window
        self._lock = threading.Lock()
        self._points: deque[dict[str, Any]] = deque(maxlen=max(2, int(keep / interval)))
        self._snaps: deque[Snapshot] = deque()
        self._first = threading.Event()  # set by the first sample

    def __len__(self) -> int:
        with self._lock:
            return len(self._points)

    def _older(self, at: float) -> Snapshot | None:
        """The newest snapshot taken at or before ``at`` (under the lock)."""
        found = None
        for snap in self._snaps:
            if snap.at > at:
                break
            found = snap
        return found

    def record(self, metrics: Iterable[Metric], at: float | None = None) -> Snapshot:
        """Add one collection of the registry (taken at unix time ``at``, default now)."""
        snap = snapshot(metrics, time.time() if at is None else at)
        with self._lock:
            # the rate's base as the summary takes it: the newest snapshot a rate window old
            recent = self._older(snap.at - self.rate_window) or (self._snaps[0] if self._snaps else None)
            self._points.append(self._point(snap, recent, self._older(snap.at - self.window)))
            self._snaps.append(snap)
            # keep the newest snapshot a window old (the base of a percentile) and those after it
            horizon = snap.at - max(self.window, self.rate_window)
            while len(self._snaps) > 1 and self._snaps[1].at <= horizon:
                self._snaps.popleft()
        self._first.set()
        return snap

    def wait(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for a first sample; whether there is one."""
        return self._first.wait(timeout)

    @staticmethod
    def _point(snap: Snapshot, prev: Snapshot | None, base: Snapshot | None) -> dict[str, Any]:
        """The chart figures of one sample: rates since ``prev``, percentiles since ``base``."""
        groups: dict[str, dict[str, float | None]] = {}

        def put(figure: str, group: str, v: float | None) -> None:
            groups.setdefault(figure, {})[group] = _short(v)

        for figure in ("lag_entries", "lag_seconds", "dead_letters"):
            for labels, v in snap.series(_GROUP_SAMPLES[figure]):
                put(figure, _group_of(labels), v)
        for group, r in _rate(snap, prev, "memstream_projection_applied_total", "group").items():
            put("events_out", group, r)
        for group, (p50, p95, _) in _percentiles(snap, base, "memstream_projection_freshness_seconds").items():
            put("freshness_p50", group, p50)
            put("freshness_p95", group, p95)
        q50, q95 = _all_percentiles(snap, base, "memstream_query_seconds")
        backlog = snap.series("memstream_agent_spool_backlog_events")
        fleet = "memstream_agent_spool_backlog_events" in snap.families
        return {
            "t": round(snap.at, 3),
            "redis_up": snap.one("memstream_redis_up"),
            "events_in": _short(_total(_rate(snap, prev, "memstream_events_appended_total", "type"))),
            **groups,
            "query_p50": _short(q50),
            "query_p95": _short(q95),
            "agents_active": _short(snap.one("memstream_agents_active")),
            "spool_backlog": _short(sum(v for _, v in backlog)) if fleet else None,
        }

    def summary(self, since: float | None = None) -> dict[str, Any]:
        """The dashboard's numbers (see the module doc) from the newest sample; the
        history's points after unix time ``since`` (all kept ones without it)."""
        with self._lock:
            if not self._snaps:
                return {"sampled_at": None, "redis_up": None, "history": {"t": []}}
            snap = self._snaps[-1]
            older = self._older(snap.at - self.rate_window) or self._snaps[0]
            base = self._older(snap.at - self.window)
            points = [p for p in self._points if since is None or p["t"] > since]
        recent = None if older is snap else older
        streams = [
            {
                "stream": labels.get("stream", ""),
                "entries": _count(v),
                "bytes": _count(snap.by("memstream_stream_bytes", "stream").get(labels.get("stream", ""))),
            }
            for labels, v in sorted(snap.series("memstream_stream_entries"), key=lambda lv: lv[0].get("stream", ""))
        ]
        events_in = self._events_in(snap, recent)
        projections = self._projections(snap, recent, base)
        return {
            "sampled_at": round(snap.at, 3),
            "interval_s": self.interval,
            "window_s": self.window,
            "rate_window_s": self.rate_window,
            "process": self._process(snap),
            "redis_up": None if snap.one("memstream_redis_up") is None else snap.one("memstream_redis_up") == 1,
            "streams": streams,
            "events_in": events_in,
            "projections": projections,
            "headline": _headline(snap, streams, events_in, projections),
            "queries": self._queries(snap, recent, base),
            "fleet": self._fleet(snap, recent, base),
            "history": _columns(points),
        }

    @staticmethod
    def _process(snap: Snapshot) -> dict[str, Any]:
        info = snap.series("memstream_info")
        labels = info[0][0] if info else {}
        return {"version": labels.get("version"), "role": labels.get("role")}

    @staticmethod
    def _events_in(snap: Snapshot, recent: Snapshot | None) -> dict[str, Any]:
        rates = _rate(snap, recent, "memstream_events_appended_total", "type")
        totals = snap.by("memstream_events_appended_total", "type")
        return {
            "per_s": _total(rates),
            "total": _count(sum(totals.values())) if totals else None,
            "by_type": {t: {"total": _count(n), "per_s": rates.get(t)} for t, n in sorted(totals.items())},
        }

    @staticmethod
    def _projections(snap: Snapshot, recent: Snapshot | None, base: Snapshot | None) -> list[dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}

        def row(labels: Labels) -> dict[str, Any]:
            group = _group_of(labels)
            if group not in rows:
                rows[group] = {
                    "group": group,
                    "projection": labels.get("projection", group),
                    "version": labels.get("version", ""),
                    "state": None,
                    **{figure: None for figure in GROUP_FIGURES},
                    "applied_total": None,
                    "applied_per_s": None,
                    "freshness_p50": None,
                    "freshness_p95": None,
                    "replay": None,
                }
            return rows[group]

        for labels, v in snap.series("memstream_projection_state"):
            r = row(labels)
            if v == 1:
                r["state"] = labels.get("state")
        for figure, name in _GROUP_SAMPLES.items():
            for labels, v in snap.series(name):
                row(labels)[figure] = _count(v) if figure != "lag_seconds" else round(v, 3)
        applied = _rate(snap, recent, "memstream_projection_applied_total", "group")
        for labels, v in snap.series("memstream_projection_applied_total"):
            r = row(labels)
            r["applied_total"] = _count((r["applied_total"] or 0) + v)
            r["applied_per_s"] = applied.get(_group_of(labels))
        fresh = _percentiles(snap, base, "memstream_projection_freshness_seconds")
        for group in fresh:
            row(snap.labels.get(("memstream_projection_freshness_seconds", group), {"group": group}))
        done = snap.by("memstream_replay_applied_entries", "group")
        for labels, total in snap.series("memstream_replay_log_entries"):
            group = _group_of(labels)
            applied_entries = done.get(group)
            row(labels)["replay"] = {
                "applied": _count(applied_entries),
                "total": _count(total),
                "fraction": (min(1.0, applied_entries / total) if total else 1.0) if applied_entries is not None else None,
            }
        for group, r in rows.items():
            if group in fresh:
                r["freshness_p50"], r["freshness_p95"] = fresh[group][0], fresh[group][1]
        return sorted(rows.values(), key=lambda r: (r["projection"], _version_order(r["version"]), r["group"]))

    @staticmethod
    def _queries(snap: Snapshot, recent: Snapshot | None, base: Snapshot | None) -> dict[str, Any]:
        outcomes = snap.by("memstream_queries_total", "outcome")
        rates = _rate(snap, recent, "memstream_queries_total", "outcome")
        p50, p95 = _all_percentiles(snap, base, "memstream_query_seconds")
        return {
            "queue": {k: _count(v) for k, v in sorted(snap.by("memstream_query_queue_length", "channel").items())},
            "outcomes": {k: {"total": _count(v), "per_s": rates.get(k)} for k, v in sorted(outcomes.items())},
            "p50": p50,
            "p95": p95,
            "latency": {
                op: {"p50": a, "p95": b, "count": _count(n)}
                for op, (a, b, n) in sorted(_percentiles(snap, base, "memstream_query_seconds").items())
            },
        }

    @staticmethod
    def _fleet(snap: Snapshot, recent: Snapshot | None, base: Snapshot | None) -> dict[str, Any] | None:
        if not any(name in snap.families for name in FLEET):
            return None
        refusals = _rate(snap, recent, "memstream_agent_spool_refusals_total", "agent")
        prefetch = _rate(snap, recent, "memstream_prefetch_total", "outcome")
        if not (
            snap.one("memstream_agents_active")
            or any(snap.by("memstream_agent_spool_backlog_events", "agent").values())
            or any(snap.by("memstream_agent_spool_refusals_total", "agent").values())
            or any(snap.by("memstream_prefetch_total", "outcome").values())
            or any(row and row[-1][1] for (name, _), row in snap.buckets.items() if name == "memstream_hook_seconds")
        ):
            return None  # no agent has reported (or every report has been retired): "no agent reports yet"
        return {
            "agents_active": _count(snap.one("memstream_agents_active")),
            "spool_backlog": _top(snap.by("memstream_agent_spool_backlog_events", "agent")),
            "refusals": {
                **_top(snap.by("memstream_agent_spool_refusals_total", "agent")),
                "per_s": _total(refusals) if refusals else None,
            },
            "hooks": {
                hook: {"p50": a, "p95": b, "count": _count(n)}
                for hook, (a, b, n) in sorted(_percentiles(snap, base, "memstream_hook_seconds").items())
            },
            "prefetch": {
                k: {"total": _count(v), "per_s": prefetch.get(k)}
                for k, v in sorted(snap.by("memstream_prefetch_total", "outcome").items())
            },
            "families": [name for name in FLEET if name in snap.families],
        }


def serving(row: dict[str, Any]) -> bool:
    """Whether a projection row of the summary is a version readers use now: active in the
    catalog, or a version the log is read for before any catalog names its state."""
    return row["state"] == "active" or (row["state"] is None and row["lag_entries"] is not None)


def _worst(rows: list[dict[str, Any]], figure: str) -> dict[str, Any] | None:
    """The row with the largest known ``figure``: its group and value (None: none known)."""
    known = [(r[figure], r["group"]) for r in rows if r[figure] is not None]
    if not known:
        return None
    value, group = max(known, key=lambda vg: vg[0])  # the first in the table's order on a tie
    return {"group": group, "value": value}


def _headline(
    snap: Snapshot, streams: list[dict[str, Any]], events_in: dict[str, Any], rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """The figures of the page's tiles: what serves now (see the module doc)."""
    live = [r for r in rows if serving(r)]
    rates = sorted((r["applied_per_s"], r["group"]) for r in live if r["applied_per_s"] is not None)
    forgotten = snap.by("memstream_forgotten_total", "place")
    erased = snap.by("memstream_retention_erased_total", "kind")
    entries = [s["entries"] for s in streams if s["entries"] is not None]
    return {
        "events_in_per_s": events_in["per_s"],
        "log_entries": _count(sum(entries)) if entries else None,
        "forgotten": _count(forgotten["stream_entries"]) if "stream_entries" in forgotten else None,
        "expired": _count(sum(erased.values())) if erased else None,
        "serving": [r["group"] for r in live],
        "applied": {"per_s": rates[0][0], "group": rates[0][1], "versions": len(rates)} if rates else None,
        "lag_entries": _worst(live, "lag_entries"),
        "lag_seconds": _worst(live, "lag_seconds"),
        "freshness_p95": _worst(live, "freshness_p95"),
        "dead_letters": _count(sum(r["dead_letters"] for r in rows if r["dead_letters"] is not None)),
        "building": [
            {
                "group": r["group"],
                "fraction": (r["replay"] or {}).get("fraction"),
                "applied": (r["replay"] or {}).get("applied"),
                "total": (r["replay"] or {}).get("total"),
                "applied_per_s": r["applied_per_s"],
                "freshness_p95": r["freshness_p95"],
            }
            for r in rows
            if r["state"] == "building"
        ],
    }


def _top(by_agent: dict[str, float]) -> dict[str, Any]:
    """The total and the ``TOP_AGENTS`` largest agents by name, the rest summed as ``other``."""
    ranked = sorted(by_agent.items(), key=lambda kv: (-kv[1], kv[0]))
    agents = [{"agent": a, "events": _count(v)} for a, v in ranked[:TOP_AGENTS]]
    rest = ranked[TOP_AGENTS:]
    if rest:
        agents.append({"agent": "other", "events": _count(sum(v for _, v in rest)), "agents": len(rest)})
    return {"total": _count(sum(by_agent.values())), "agents": agents}


def _version_order(version: str) -> int:
    return int(version) if version.isdigit() else -1


def _columns(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Chart points as columns: ``t`` and each figure's values (per group: a column each),
    null where a point lacks it."""
    out: dict[str, Any] = {"t": [p["t"] for p in points]}
    for figure in ("redis_up", "events_in", "query_p50", "query_p95", "agents_active", "spool_backlog"):
        out[figure] = [p.get(figure) for p in points]
    for figure in ("events_out", "lag_entries", "lag_seconds", "freshness_p50", "freshness_p95", "dead_letters"):
        groups = sorted({g for p in points for g in p.get(figure, {})})
        out[figure] = {g: [p.get(figure, {}).get(g) for p in points] for g in groups}
    return out


class Sampler:
    """A daemon thread that records ``collect()`` into ``history`` every ``interval``
    seconds, the first at once; ``stop()`` ends it. A failed collection is logged and
    skipped (the next one tries again)."""

    def __init__(self, collect: Callable[[], Iterable[Metric]], history: History, interval: float = INTERVAL) -> None:
        self.collect, self.history, self.interval = collect, history, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memstream-dashboard-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        try:
            self.history.record(list(self.collect()))
        except Exception as exc:  # noqa: BLE001  a collector's failure: the next sample tries again
            log.warning("dashboard.sample_failed", error=f"{type(exc).__name__}: {exc}"[:300])

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            self.sample()
            if self._stop.wait(max(0.0, self.interval - (time.monotonic() - started))):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10.0)


# -- the application -------------------------------------------------------------------------
STATIC = ("dashboard.js", "dashboard.css")
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8"}
# the page loads its own script and style only, and talks to its own origin only
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _assets() -> dict[str, bytes]:
    """The page and its static files, read once from the package (``memstream/service/static``)."""
    folder = resources.files("memstream.service").joinpath("static")
    return {name: folder.joinpath(name).read_bytes() for name in ("index.html", *STATIC)}


def dashboard_app(registry: CollectorRegistry, history: History, executor: Executor) -> Starlette:
    """The ASGI application: ``/metrics``, ``/``, ``/api/summary`` and ``/static/NAME``.
    Blocking work (a scrape reads Redis; the summary's JSON) runs on ``executor``."""
    assets = _assets()

    async def work(fn: Callable[[], Response]) -> Response:
        return await asyncio.get_running_loop().run_in_executor(executor, fn)

    async def metrics(request: Request) -> Response:
        accept = request.headers.get("accept", "")
        packed = gzip_accepted(request.headers.get("accept-encoding", ""))
        names = request.query_params.getlist("name[]")

        def scrape() -> Response:
            encoder, content_type = choose_encoder(accept)
            body = encoder(registry.restricted_registry(names) if names else registry)
            if packed:
                return Response(gzip.compress(body), media_type=content_type, headers={"Content-Encoding": "gzip"})
            return Response(body, media_type=content_type)

        return await work(scrape)

    async def summary(request: Request) -> Response:
        try:
            since = float(request.query_params["since"]) if "since" in request.query_params else None
        except ValueError:
            return JSONResponse({"error": "since: a unix time in seconds"}, status_code=400, headers=HEADERS)
        if since is not None and not math.isfinite(since):
            since = None

        def render() -> Response:
            history.wait(FIRST_SAMPLE_WAIT)  # a process that has just started: its first sample
            body = json.dumps(history.summary(since), separators=(",", ":"), allow_nan=False).encode()
            return Response(body, media_type="application/json", headers=HEADERS)

        return await work(render)

    async def page(request: Request) -> Response:
        return Response(assets["index.html"], media_type=_TYPES[".html"], headers=HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response(b"not found\n", status_code=404, media_type="text/plain")
        return Response(assets[name], media_type=_TYPES[name[name.rindex(".") :]], headers=HEADERS)

    return Starlette(
        routes=[
            Route("/metrics", metrics),
            Route("/", page),
            Route("/api/summary", summary),
            Route("/static/{name}", static),
        ]
    )
