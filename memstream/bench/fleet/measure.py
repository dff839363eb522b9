"""What the bench process measures while a level runs: append-to-searchable probes
(``Prober``), the server and the processes sampled every second (``Sampler``), and the
summaries of both."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from memstream.bench.fleet.plan import PROBE_POLL_S, TENANT
from memstream.bench.fleet.supervise import cpu_seconds, machine_jiffies, threads_cpu
from memstream.bench.stats import latency_summary, percentile
from memstream.core import keys


@dataclass
class _Probe:
    token: str
    agent: str
    t: float  # monotonic (CLOCK_MONOTONIC, the same in every process) when sync_turn was called
    wall: float  # unix time of the same moment
    event_id: str
    entry: tuple[str, str] | None = None  # (stream, entry id) once the turn is in the log
    logged_s: float | None = None
    applied_s: float | None = None
    found_s: float | None = None
    next_poll: float = 0.0
    busy: bool = False


class Prober:
    """Follows every probed turn: into the log and through the turns projection (one
    watcher thread, reading the streams and the group's position), and until a search finds
    it (``PROBE_THREADS`` threads, so that a slow answer delays no other probe)."""

    PROBE_THREADS = 8
    WATCH_EVERY = 0.02

    def __init__(self, url: str, prefix: str, shards: int, group: str) -> None:
        self.url, self.prefix, self.group = url, prefix, group
        self.streams = [keys.events(prefix, s) for s in range(shards)]
        self.lock = threading.Lock()
        self.probes: list[_Probe] = []
        self.round_trips_ms: list[float] = []
        self.errors = 0
        self.stop_at: float | None = None  # monotonic: stop then, whatever is pending
        self.threads: list[threading.Thread] = []

    def add(self, message: dict[str, Any]) -> bool:
        if "probe" not in message:
            return False
        probe = _Probe(
            str(message["probe"]),
            str(message["agent"]),
            float(message["t"]),
            float(message["wall"]),
            str(message.get("event_id") or ""),
        )
        with self.lock:
            self.probes.append(probe)
        return True

    def start(self) -> None:
        self.threads = [
            threading.Thread(target=self._search, name=f"fleet-prober-{i}", daemon=True) for i in range(self.PROBE_THREADS)
        ]
        self.threads.append(threading.Thread(target=self._watch, name="fleet-watcher", daemon=True))
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _over(self, done: Any) -> bool:
        """True once told to stop and nothing is left, or past the stop time."""
        if self.stop_at is None:
            return False
        if time.monotonic() >= self.stop_at:
            return True
        with self.lock:
            return all(done(p) for p in self.probes)

    def _search(self) -> None:
        from memstream.producers import redis_client
        from memstream.query import SearchRequest, ask

        client = redis_client(self.url, timeout=15)
        try:
            while not self._over(lambda p: p.found_s is not None):
                now = time.monotonic()
                with self.lock:
                    due = [p for p in self.probes if p.found_s is None and not p.busy and p.next_poll <= now]
                    probe = min(due, key=lambda p: p.t) if due else None
                    if probe is not None:
                        probe.busy = True
                if probe is None:
                    time.sleep(0.005)
                    continue
                request = SearchRequest(tenant=TENANT, agent=probe.agent, query=probe.token, kind="turns", k=3)
                sent = time.monotonic()
                try:
                    answer = ask(client, self.prefix, request, timeout=10.0)
                except Exception:  # noqa: BLE001 - counted; the probe is asked again
                    answer = {}
                    with self.lock:
                        self.errors += 1
                got = time.monotonic()
                items = answer.get("results") or []
                hit = any(isinstance(i, dict) and probe.token in str(i.get("text", "")) for i in items)
                with self.lock:
                    self.round_trips_ms.append((got - sent) * 1000)
                    if hit:
                        probe.found_s = got - probe.t
                    probe.next_poll = got + PROBE_POLL_S
                    probe.busy = False
        finally:
            client.close()

    def _watch(self) -> None:
        """Where each probed turn is in the log (its entry, found by event id) and when the
        turns projection's position passed it (the time its position was recorded)."""
        from memstream.core import as_str
        from memstream.producers import parse_entry_id, redis_client, xrange_entry
        from memstream.workers import Positions

        client = redis_client(self.url, timeout=15)
        positions = Positions(client, self.prefix)
        seen: dict[str, tuple[str, str]] = {}  # event id -> (stream, entry id), everything read so far
        cursor = {stream: "-" for stream in self.streams}
        try:
            while not self._over(lambda p: p.applied_s is not None):
                for stream in self.streams:
                    while True:
                        start = cursor[stream] if cursor[stream] == "-" else f"({cursor[stream]}"
                        batch = [xrange_entry(e) for e in client.xrange(stream, min=start, max="+", count=2000) or ()]
                        for entry_id, fields in batch:
                            raw = fields.get(b"id")
                            if raw is not None:
                                seen[as_str(raw)] = (stream, entry_id)
                        if batch:
                            cursor[stream] = batch[-1][0]
                        if len(batch) < 2000:
                            break
                with self.lock:
                    waiting = [p for p in self.probes if p.applied_s is None]
                if waiting:
                    applied = positions.get(self.group)
                    for probe in waiting:
                        if probe.entry is None and probe.event_id in seen:
                            probe.entry = seen[probe.event_id]
                            probe.logged_s = parse_entry_id(probe.entry[1])[0] / 1000.0 - probe.wall
                        if probe.entry is None:
                            continue
                        mine = applied.get(probe.entry[0])
                        if mine and parse_entry_id(mine["position"]) >= parse_entry_id(probe.entry[1]):
                            probe.applied_s = min(time.time(), mine["applied_at"] or time.time()) - probe.wall
                time.sleep(self.WATCH_EVERY)
        finally:
            client.close()

    def figures(self) -> dict[str, Any]:
        """Per stage, seconds from the sync_turn call (p50, p95; a probe that never got there
        counts as infinitely late)."""
        with self.lock:
            probes = list(self.probes)
        out: dict[str, Any] = {"sampled": len(probes)}
        for key, attr in (("searchable", "found_s"), ("in_log", "logged_s"), ("applied", "applied_s")):
            got = [getattr(p, attr) for p in probes if getattr(p, attr) is not None]
            values = sorted(got) + [float("inf")] * (len(probes) - len(got))
            p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
            out[key] = {
                "n": len(got),
                "p50": round(p50, 3) if got and p50 != float("inf") else None,
                "p95": round(p95, 3) if got and p95 != float("inf") else None,
                "max": round(max(got), 3) if got else None,
            }
        out["probe_round_trip_ms"] = latency_summary(self.round_trips_ms, digits=2)
        out["probe_errors"] = self.errors
        return out


@dataclass
class Sampler:
    """Once a second: worker lag, the query backlog, Valkey's INFO, CPU of every process."""

    url: str
    prefix: str
    shards: int
    pids: dict[str, int | None]
    service_threads: dict[int, str] = field(default_factory=dict)  # native id -> name, as the service says
    samples: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: int = 0

    def sample(self, client: Any) -> dict[str, Any]:
        from memstream.core import as_str
        from memstream.workers import waiting

        now = time.time()
        out: dict[str, Any] = {"t": time.monotonic()}
        streams = [keys.events(self.prefix, s) for s in range(self.shards)]
        groups: set[str] = set()
        for stream in streams:
            try:
                groups |= {as_str(g["name"]) for g in client.xinfo_groups(stream)}
            except Exception:  # noqa: BLE001 - no stream yet
                continue
        lag: dict[str, tuple[int, float]] = {}
        for group in sorted(groups):
            w = waiting(client, streams, group)
            lag[group] = (w.entries, round(max(0.0, now - w.since), 3) if w.since is not None else 0.0)
        out["lag"] = lag
        out["query_backlog"] = int(client.llen(keys.queries(self.prefix)))
        out["queries_answered"] = int(client.hget(keys.query_counters(self.prefix), "answered") or 0)
        info = client.info()
        out["redis_cpu_s"] = float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0))
        out["used_memory"] = int(info.get("used_memory", 0))
        out["clients"] = int(info.get("connected_clients", 0))
        out["cpu_s"] = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        out["service_threads_cpu_s"] = threads_cpu(self.pids.get("service"), dict(self.service_threads))
        out["machine"] = machine_jiffies()
        return out

    def run(self) -> None:
        from memstream.producers import redis_client

        client = redis_client(self.url, timeout=10)
        try:
            while True:
                try:
                    self.samples.append(self.sample(client))
                except Exception:  # noqa: BLE001 - a missed sample is counted, not fatal
                    self.errors += 1
                if self.stop.wait(1.0):
                    return
        finally:
            client.close()


def rate_between(samples: list[dict[str, Any]], value: Any) -> tuple[float | None, float | None]:
    """(mean over the samples, highest one-interval value) of the rate of the cumulative
    ``value(sample)``, per second; None when fewer than two samples have it."""
    points = [(s["t"], value(s)) for s in samples]
    points = [(t, v) for t, v in points if v is not None]
    if len(points) < 2:
        return None, None
    rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(points, points[1:]) if b[0] > a[0]]
    mean = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
    return mean, max(rates, default=None)


def pct(pair: tuple[float | None, float | None]) -> dict[str, float | None]:
    mean, peak = pair
    return {"mean": None if mean is None else round(100 * mean, 1), "max": None if peak is None else round(100 * peak, 1)}


def machine_busy(samples: list[dict[str, Any]]) -> dict[str, float | None]:
    points = [s["machine"] for s in samples if s.get("machine")]
    if len(points) < 2:
        return {"mean": None, "max": None}
    shares = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(points, points[1:]) if b[1] > a[1]]
    total = (points[-1][0] - points[0][0]) / max(1, points[-1][1] - points[0][1])
    return {"mean": round(100 * total, 1), "max": round(100 * max(shares, default=0.0), 1)}


def us_figures(ns: list[int]) -> dict[str, float]:
    return latency_summary([x / 1000.0 for x in ns], digits=1)


def ms_figures(ns: list[int]) -> dict[str, float]:
    return latency_summary([x / 1e6 for x in ns], digits=3)


def count_log(url: str, prefix: str, shards: int) -> dict[str, int]:
    """How many times each event id is in the log (every stream, read whole)."""
    from memstream.core import as_str
    from memstream.producers import EventLog, redis_client

    client = redis_client(url, timeout=30)
    counts: dict[str, int] = {}
    try:
        for _stream, _entry, fields in EventLog(client, prefix, shards).entries(count=5000):
            raw = fields.get(b"id")
            if raw is None:
                continue
            event_id = as_str(raw)
            counts[event_id] = counts.get(event_id, 0) + 1
    finally:
        client.close()
    return counts


def spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if p < total % parts else 0) for p in range(parts)]
