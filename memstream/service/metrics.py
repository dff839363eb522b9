"""Prometheus metrics of ``memstream up`` and of every ``memstream worker``: ``/metrics``
on ``MEMSTREAM_METRICS_ADDR`` (docs/reference/metrics.md has the table of every metric, generated from ``FAMILIES``).

Two kinds of figures, told apart in ``FAMILIES`` by their ``source``:

- ``redis``: read from the shared Redis at each scrape (``LogCollector``): the streams, the
  events appended per type, each projection version's state, lag, pending entries, dead
  letters, consumers alive and a build's progress, the query lists and their outcomes.
  Every process that serves metrics reports the same figures: aggregate them with ``max``.
- ``process``: this process's own: the histograms its consumers and query server report
  (``Metrics`` is the process's ``memstream.core.observe`` observer: freshness, the
  seconds of each stage of a batch, embedding batches, query handler seconds) and the
  counters of its consumers (applied, dead-lettered, redelivered). Sum them across
  processes.

Served by uvicorn on a daemon thread (``memstream.service.http``) with the dashboard
(``memstream.service.dashboard``: ``/``, ``/api/summary``), whose numbers are samples of
this same registry; a scrape runs on a worker thread, never on the server's loop.

Guarantees: a scrape never fails because Redis does: ``memstream_redis_up`` is 0 then and
no Redis figure is reported (never a stale or partial one). A figure that is not known is
absent, never 0 (a lag the server cannot count, the age of an entry it cannot read).
Every label's values are bounded: streams by ``MEMSTREAM_SHARDS`` (the tenants' own logs are
summed as one, ``tenants``), groups by the catalog's
versions of the registered projections (dead letters of other groups count under
``other`` past ``MAX_DLQ_GROUPS``), event types by the event contract (any other type
counts as ``other``), query outcomes and operations by the protocol, channels to
``operator`` and ``tenants``, hooks by the provider's (``producers.report.HOOKS``, any other
counts as ``other``); ``agent`` names at most ``MEMSTREAM_METRICS_TOP_AGENTS`` reporting
processes (``HOST:PID:NONCE``, checked before it becomes a value) and ``other``; no label
names a session or a tenant. The fleet's figures (the ``agent`` families, hooks, prefetch)
are summed from the agents' reports (``memstream.service.fleet``).
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import redis
import structlog
from prometheus_client import (
    CollectorRegistry,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from memstream import __version__
from memstream.core import Settings, as_str, count, counts, keys, observe, shown
from memstream.producers import BUCKETS_NS, EVENT_TYPES, HOOKS, ROW, EventLog, TenantRegistry, parse_entry_id
from memstream.projections import STATES
from memstream.query import LATE_SHED, OPS, RERANK_SHED, operator_channel, tenant_channel
from memstream.service.dashboard import History, Sampler, dashboard_app
from memstream.service.fleet import FleetReader
from memstream.service.http import HttpServer

if TYPE_CHECKING:
    from memstream.projections import Version
    from memstream.workers import Consumer

__all__ = ["FAMILIES", "Family", "LogCollector", "Metrics", "start_metrics"]

log = structlog.get_logger("memstream.metrics")

GROUP = ("group", "projection", "version")  # the labels of a projection version's figures
QUERY_OUTCOMES = ("answered", "refused", "expired", "failed", "unsupported")  # query.server's counters
# the places ``memstream forget`` (ops.forget) counts what it removed from, and its tombstones
FORGOTTEN_PLACES = (
    "stream_entries",
    "archive_entries",
    "dead_letters",
    "embed_backlog",
    "embedding_cache",
    "spool_records",
    "tombstones",
)
RETENTION_KINDS = tuple(Settings().retention_days)  # the kinds of event a retention setting covers
MAX_DLQ_GROUPS = 64
REPORT_EVERY_OFF = Settings().report_every_s  # the agents' interval when this process's is 0 (the default)
STATE_FRESH_S = 10.0  # seconds a version's state read from the catalog is taken as current (for freshness)
SAMPLES = 5  # MEMORY USAGE's estimate from 5 nodes (Redis's default): every node counted is O(N) a scrape


@dataclass(frozen=True)
class Family:
    """One metric: its name (a counter's with ``_total``), type, labels, unit, meaning and
    where its figures come from (``redis`` or ``process``)."""

    name: str
    type: str
    labels: tuple[str, ...]
    unit: str
    help: str
    source: str
    buckets: tuple[float, ...] = ()  # a histogram's bucket bounds (upper, ascending; +Inf implied)


FAMILIES: tuple[Family, ...] = (
    Family(
        "memstream_info",
        "gauge",
        ("version", "role"),
        "",
        "1, labelled with memstream's version and the process's role (service or worker)",
        "process",
    ),
    Family(
        "memstream_redis_up",
        "gauge",
        (),
        "",
        "1 when this scrape read Redis, 0 when it could not (then no figure read from Redis is reported)",
        "process",
    ),
    Family("memstream_redis_read_seconds", "gauge", (), "seconds", "How long this scrape took to read Redis", "process"),
    # the log
    Family(
        "memstream_stream_entries",
        "gauge",
        ("stream",),
        "entries",
        "Entries in the event stream (XLEN); `stream` is `tenants` for the tenants' own logs summed",
        "redis",
    ),
    Family(
        "memstream_stream_bytes",
        "gauge",
        ("stream",),
        "bytes",
        "Memory the event stream takes in Redis (MEMORY USAGE, Redis's estimate from 5 sampled nodes; "
        "the tenants' logs summed as `tenants`)",
        "redis",
    ),
    Family(
        "memstream_stream_first_entry_age_seconds",
        "gauge",
        ("stream",),
        "seconds",
        "Age of the stream's oldest entry (absent when empty; `tenants`: the oldest of the tenants' logs)",
        "redis",
    ),
    Family(
        "memstream_stream_last_entry_age_seconds",
        "gauge",
        ("stream",),
        "seconds",
        "Age of the stream's newest entry (absent when empty; `tenants`: the newest of the tenants' logs)",
        "redis",
    ),
    Family(
        "memstream_logs_broken",
        "gauge",
        ("reason",),
        "streams",
        "Event streams (mostly tenants' own logs: a tenant can do this to its own only) whose appends "
        "fail or whose ids are not the server's: wrong_type (another type than a stream), exhausted (at the "
        "largest entry id), ahead (ids more than a day ahead of the server's clock); `memstream doctor` names them",
        "redis",
    ),
    Family(
        "memstream_counters_unreadable",
        "gauge",
        (),
        "fields",
        "Fields of the counters read this scrape (event types, spool losses, queries, forget, retention) "
        "that hold no count (a tenant may write its own counters): left out of every sum",
        "redis",
    ),
    Family(
        "memstream_events_appended_total",
        "counter",
        ("type",),
        "events",
        "Events appended to the log, by event type (a type outside the event contract counts as `other`)",
        "redis",
    ),
    # the projections
    Family(
        "memstream_projection_state",
        "gauge",
        GROUP + ("state",),
        "",
        "1 for the version's state in the catalog (building, active, retired, failed, dropping), 0 for the others",
        "redis",
    ),
    Family(
        "memstream_projection_lag_entries",
        "gauge",
        GROUP,
        "entries",
        "Entries of the log not yet delivered to the version's group (absent when the server cannot count them)",
        "redis",
    ),
    Family(
        "memstream_projection_lag_seconds",
        "gauge",
        GROUP,
        "seconds",
        "Age of the oldest entry the version has not applied (undelivered or pending); 0 when none waits, absent when unknown",
        "redis",
    ),
    Family(
        "memstream_projection_embed_waiting_points",
        "gauge",
        GROUP,
        "points",
        "A vector projection's version: "
        "points written with their keywords that wait for their dense vector (its dense stage's lag; absent "
        "without a backlog)",
        "redis",
    ),
    Family(
        "memstream_projection_embed_waiting_seconds",
        "gauge",
        GROUP,
        "seconds",
        "A vector projection's version: age of the oldest point waiting for its dense vector; 0 when none waits",
        "redis",
    ),
    Family(
        "memstream_projection_pending_entries",
        "gauge",
        GROUP,
        "entries",
        "Entries delivered to the version's consumers and not yet acknowledged",
        "redis",
    ),
    Family(
        "memstream_projection_dead_letters",
        "gauge",
        GROUP,
        "entries",
        "Dead letters of the version in the dead-letter stream now (`memstream dlq list`), its dense stage's included",
        "redis",
    ),
    Family(
        "memstream_projection_consumers",
        "gauge",
        GROUP,
        "consumers",
        "Consumers of the version that wrote their health record within MEMSTREAM_STALL_AFTER_S and are neither stopped nor dead",
        "redis",
    ),
    Family(
        "memstream_replay_applied_entries",
        "gauge",
        GROUP,
        "entries",
        "A building version: entries of the log (the archive's and the streams') it has applied (absent when unknown)",
        "redis",
    ),
    Family(
        "memstream_replay_log_entries",
        "gauge",
        GROUP,
        "entries",
        "A building version: entries of the "
        "log (the archive's and the streams') it has to apply (with the previous one: its progress)",
        "redis",
    ),
    Family(
        "memstream_projection_applied_total",
        "counter",
        GROUP,
        "events",
        "Events this process's consumer of the version applied",
        "process",
    ),
    Family(
        "memstream_projection_dead_lettered_total",
        "counter",
        GROUP,
        "entries",
        "Entries this process's consumer of the version dead-lettered",
        "process",
    ),
    Family(
        "memstream_projection_embed_dead_lettered_total",
        "counter",
        GROUP,
        "points",
        "Backlog entries "
        "this process's dense stage of the version dead-lettered (malformed, or failing alone on "
        "their last delivery): their points stay findable by keywords only until "
        "`memstream dlq retry`",
        "process",
    ),
    Family(
        "memstream_projection_redelivered_total",
        "counter",
        GROUP,
        "entries",
        "Entries this process's "
        "consumer of the version handled again after an earlier delivery (its own pending ones after a "
        "failure or restart, or reclaimed from a dead consumer)",
        "process",
    ),
    Family(
        "memstream_projection_freshness_seconds",
        "histogram",
        GROUP,
        "seconds",
        "From an entry's append to the log to its batch committed by this process's consumer of the version; "
        "for a building version, from when its consumer read the entry (a build replays old entries)",
        "process",
        # fine from 1 minute to an hour (steps of at most 1.5x): a p95 there is no interpolation across
        # a wide bucket (300 s to 3,600 s read 52 min on a log 10 minutes old)
        (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 450.0, 600.0, 900.0)
        + (1200.0, 1800.0, 2700.0, 3600.0, 7200.0, 21600.0, 86400.0),
    ),
    Family(
        "memstream_projection_stage_seconds",
        "histogram",
        GROUP + ("stage",),
        "seconds",
        "Seconds of each stage of a batch in this process: admit, apply, commit; embed (each embedding call, inside apply)",
        "process",
        (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    ),
    Family(
        "memstream_projection_embed_batch_texts",
        "histogram",
        GROUP,
        "texts",
        "Texts per embedding call of the version's projection in this process",
        "process",
        (1, 4, 16, 64, 128, 256, 1024),
    ),
    # the read path
    Family(
        "memstream_query_queue_length",
        "gauge",
        ("channel",),
        "requests",
        "Query requests waiting in the lists (LLEN): the operator's channel, and every registered tenant's summed",
        "redis",
    ),
    Family(
        "memstream_queries_total",
        "counter",
        ("outcome",),
        "requests",
        "Query requests by outcome: "
        "answered, refused, expired (nobody waited any more: the caller timed out), failed, unsupported",
        "redis",
    ),
    Family(
        "memstream_searches_unreranked_total",
        "counter",
        (),
        "requests",
        "Reranked searches answered without the rerank, in the prefetch's order, because the query server's "
        "rerank lane was busy (each also counted in memstream_queries_total as answered)",
        "redis",
    ),
    Family(
        "memstream_recalls_late_shed_total",
        "counter",
        (),
        "requests",
        "Recalls and searches answered without the late interaction, in the ranking's order, because a request "
        "of their take waited on the query list longer than MEMSTREAM_LATE_SHED_MS (each also counted in "
        "memstream_queries_total as answered)",
        "redis",
    ),
    Family(
        "memstream_spool_unreplicated_batches_total",
        "counter",
        (),
        "batches",
        "Shipped batches the "
        "primary appended but fewer than MEMSTREAM_SHIP_REPLICAS replicas confirmed in time (WAIT): kept "
        "in their spools and sent again later, over every host's shippers",
        "redis",
    ),
    Family(
        "memstream_forgotten_total",
        "counter",
        ("place",),
        "items",
        "Items `memstream forget` removed, by place: " + ", ".join(FORGOTTEN_PLACES),
        "redis",
    ),
    Family(
        "memstream_retention_erased_total",
        "counter",
        ("kind",),
        "events",
        "Events the retention job "
        "erased everywhere (as `memstream forget` does) once older than their kind's "
        "MEMSTREAM_RETENTION_*_DAYS, by kind: " + ", ".join(RETENTION_KINDS),
        "redis",
    ),
    Family(
        "memstream_dead_letters_dropped_total",
        "counter",
        (),
        "entries",
        "Entries acked without a dead letter because the dead-letter stream held MEMSTREAM_DLQ_MAX_LETTERS "
        "(they stay in the log)",
        "redis",
    ),
    Family(
        "memstream_retention_failures",
        "gauge",
        (),
        "runs",
        "Runs of the retention job that failed in a row (0 once a run succeeds): what it should erase stays",
        "redis",
    ),
    Family(
        "memstream_retention_last_run_timestamp_seconds",
        "gauge",
        (),
        "seconds",
        "When the retention job last finished a run, by the Redis server's clock (0 before the first run)",
        "redis",
    ),
    Family(
        "memstream_query_seconds",
        "histogram",
        ("op",),
        "seconds",
        "Seconds a query handler of this process took, by operation",
        "process",
        (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    ),
    # the agents' reports (memstream.service.fleet)
    Family(
        "memstream_agents_active",
        "gauge",
        (),
        "agents",
        "Agent processes whose last report is at most "
        "3 times this process's MEMSTREAM_REPORT_EVERY_S old (5 s when it is 0), by this process's clock",
        "redis",
    ),
    Family(
        "memstream_agent_spool_backlog_events",
        "gauge",
        ("agent",),
        "events",
        "Events spooled by an "
        "active agent process and not yet shipped, as of its last report: the MEMSTREAM_METRICS_TOP_AGENTS "
        "largest by name (`HOST:PID:NONCE`), the other active ones summed as `other`",
        "redis",
    ),
    Family(
        "memstream_agent_spool_refusals_total",
        "counter",
        ("agent",),
        "events",
        "Events an agent "
        "process could not keep (its spool full or failing, or not encodable) since it took its name: the "
        "MEMSTREAM_METRICS_TOP_AGENTS reports with the most, the others and the removed ones summed as "
        "`other`; the sum over `agent` never decreases, `other` decreases when an agent enters the top",
        "redis",
    ),
    Family(
        "memstream_hook_seconds",
        "histogram",
        ("hook",),
        "seconds",
        "Seconds the provider's hooks took "
        "in the agent processes, by hook (a name the provider does not have counts as `other`): every "
        "report in Redis and every removed one summed, so it never decreases (an agent that stopped "
        "reporting adds nothing to a rate)",
        "redis",
        tuple(b / 1e9 for b in BUCKETS_NS),  # the reports' bounds (producers.report), in seconds
    ),
    Family(
        "memstream_prefetch_total",
        "counter",
        ("outcome",),
        "prefetches",
        "Prefetches of the agent "
        "processes by outcome: fresh (this turn's recall in time), cached (an earlier recall of the "
        "session), empty (none in time); every report in Redis and every removed one summed",
        "redis",
    ),
    Family(
        "memstream_agent_reports_skipped",
        "gauge",
        ("reason",),
        "reports",
        "Records of the agents' "
        "reports hash this scrape left out: malformed (not a report, out of its bounds, a name that is "
        "no `HOST:PID:NONCE`), oversized (over 4 KiB), ahead (a report time more than 5 minutes ahead of "
        "this clock), unread (past what a scrape reads: 10,000 records, 1,000 of one tenant's)",
        "redis",
    ),
)
_BY_NAME = {f.name: f for f in FAMILIES}

# bucket bounds (their home: each histogram's Family), few enough to keep a scrape small
FRESHNESS_BUCKETS = _BY_NAME["memstream_projection_freshness_seconds"].buckets
STAGE_BUCKETS = _BY_NAME["memstream_projection_stage_seconds"].buckets
QUERY_BUCKETS = _BY_NAME["memstream_query_seconds"].buckets
BATCH_BUCKETS = _BY_NAME["memstream_projection_embed_batch_texts"].buckets


def _group_labels(group: str) -> tuple[str, str, str]:
    """(group, projection, version) of a group named ``NAME.vN``."""
    name, dot_v, version = group.rpartition(".v")
    return (group, name, version) if dot_v and version.isdigit() else (group, group, "")


def _family(name: str) -> GaugeMetricFamily | CounterMetricFamily:
    f = _BY_NAME[name]
    if f.type == "counter":
        return CounterMetricFamily(f.name, f.help, labels=f.labels, unit="")
    return GaugeMetricFamily(f.name, f.help, labels=f.labels, unit="")


def _histogram(name: str) -> HistogramMetricFamily:
    f = _BY_NAME[name]
    return HistogramMetricFamily(f.name, f.help, labels=f.labels, unit="")


_READ_HISTOGRAMS = tuple(f.name for f in FAMILIES if f.source == "redis" and f.type == "histogram")
HOOK_BUCKETS = _BY_NAME["memstream_hook_seconds"].buckets  # the reports' bucket bounds, seconds


def _length(reply: object) -> int:
    """A list's length read in a scrape's pipeline (0: a tenant's channel of another type)."""
    return reply if isinstance(reply, int) and not isinstance(reply, bool) else 0


def _tenants_channel_error(reply: Exception) -> bool:
    """A tenant's query channel of another type (its own to break): counted as empty."""
    return isinstance(reply, redis.ResponseError) and not isinstance(reply, redis.exceptions.NoPermissionError)


def _age(entry_id: str | None, now: float) -> float | None:
    if not entry_id:
        return None
    try:
        return max(0.0, now - parse_entry_id(entry_id)[0] / 1000.0)
    except ValueError:
        return None


class LogCollector(Collector):
    """The figures read from Redis at scrape time, and the counters of ``consumers()``
    (this process's consumers)."""

    def __init__(
        self,
        eventlog: EventLog,
        projections: Sequence[tuple[str, str]],
        *,
        consumers: Callable[[], Iterable[Consumer]] = lambda: (),
        role: str = "service",
        alive_within: float = 60.0,
        archived: Callable[[], int | None] = lambda: 0,
        top_agents: int = 20,
        agents_active_within: float = 15.0,
    ) -> None:
        self.log = eventlog
        self.archived = archived  # entries in the log's archive (None: unreadable)
        self.client = eventlog.client
        self.prefix = eventlog.prefix
        self.projections = list(projections)  # (name, group of its first version) of every registered projection
        self.consumers = consumers
        self.role = role
        self.alive_within = alive_within
        self.registry = TenantRegistry(self.client, self.prefix)
        self.fleet = FleetReader(self.client, self.prefix, top=top_agents, active_within=agents_active_within)
        self._dlq_lock = threading.Lock()
        self._dlq_state: tuple[int, str] | None = None
        self._dlq_counts: dict[str, int] = {}
        self._local = threading.local()  # quiet: this thread's collections log nothing
        self._embed_dead: dict[str, int] = {}  # group -> backlog entries its dense stage here dead-lettered
        self._embed_dead_lock = threading.Lock()
        # group -> (its state in the catalog, when read: monotonic seconds); "" for none
        self._states: dict[str, tuple[str, float]] = {}

    def state_of(self, group: str) -> str:
        """``group``'s state in the catalog (``building``, ``active``, ...; "" when it has none):
        as the last scrape read it, or read now when that read is older than ``STATE_FRESH_S``
        (a process nobody scrapes reads it at most once in that time for a group)."""
        now = time.monotonic()
        known = self._states.get(group)
        if known is not None and now - known[1] <= STATE_FRESH_S:
            return known[0]
        from memstream.projections import Catalog

        try:
            read = {v.group: (v.state, now) for v in Catalog(self.client, self.prefix).versions(_group_labels(group)[1])}
        except redis.RedisError:
            return known[0] if known is not None else ""  # unreadable now: as last read (none: a live version's)
        self._states = {**self._states, group: ("", now), **read}  # replaced whole: read by other threads
        return self._states[group][0]

    def count_embed_dead_lettered(self, group: str, entries: int) -> None:
        """Count backlog entries of ``group`` that a dense stage of this process dead-lettered."""
        with self._embed_dead_lock:
            self._embed_dead[group] = self._embed_dead.get(group, 0) + entries

    @contextmanager
    def quietly(self) -> Iterator[None]:
        """This thread's collections in the block log no warning (the dashboard's sampler,
        every few seconds: it shows Redis down on the page; a scrape still logs it)."""
        self._local.quiet = True
        try:
            yield
        finally:
            self._local.quiet = False

    def describe(self) -> Iterator[Metric]:
        for f in FAMILIES:
            if f.type != "histogram":
                yield _family(f.name)
        for name in _READ_HISTOGRAMS:
            yield _histogram(name)

    def collect(self) -> Iterator[Metric]:
        info = _family("memstream_info")
        info.add_metric([__version__, self.role], 1)
        yield info
        read = {f.name: _family(f.name) for f in FAMILIES if f.source == "redis" and f.type != "histogram"}
        histograms = {name: _histogram(name) for name in _READ_HISTOGRAMS}
        started = time.perf_counter()
        try:
            self._read(read, time.time())
            self._fleet(read, histograms, time.time())
            up = 1
        except (redis.RedisError, OSError, ValueError) as exc:  # ValueError: a count that is no number
            if not getattr(self._local, "quiet", False):
                log.warning(
                    "metrics.redis_unreadable",
                    error=f"{type(exc).__name__}: {exc}"[:300],
                    action="the scrape reports memstream_redis_up 0 and no figure read from Redis",
                )
            read = {name: _family(name) for name in read}
            histograms = {name: _histogram(name) for name in histograms}
            up = 0
        seconds = _family("memstream_redis_read_seconds")
        seconds.add_metric([], time.perf_counter() - started)
        redis_up = _family("memstream_redis_up")
        redis_up.add_metric([], up)
        yield redis_up
        yield seconds
        yield from read.values()
        yield from histograms.values()
        yield from self._consumer_counters()

    def _consumer_counters(self) -> Iterator[Metric]:
        applied = _family("memstream_projection_applied_total")
        dead = _family("memstream_projection_dead_lettered_total")
        again = _family("memstream_projection_redelivered_total")
        for c in list(self.consumers()):
            labels = list(_group_labels(c.group))
            applied.add_metric(labels, c.stats.applied)
            dead.add_metric(labels, c.stats.dead_lettered)
            again.add_metric(labels, c.stats.redelivered)
        embed_dead = _family("memstream_projection_embed_dead_lettered_total")
        with self._embed_dead_lock:
            counted = sorted(self._embed_dead.items())
        for group, n in counted:
            embed_dead.add_metric(list(_group_labels(group)), n)
        yield from (applied, dead, again, embed_dead)

    # -- reading Redis ---------------------------------------------------------------------
    def _read(self, f: dict[str, GaugeMetricFamily | CounterMetricFamily], now: float) -> None:
        from memstream.projections import Catalog
        from memstream.workers import build_progress, consuming, embed_waiting, group_progress, read_health, waiting

        c, streams = self.client, self.log.stream_keys
        tenants: dict[str, Any] = {"length": 0, "bytes": None, "first": [], "last": []}
        for info in self.log.stream_info():
            stream = info["stream"]
            used = self.log.memory_bytes(stream, samples=SAMPLES)
            ages = {which: _age(info[f"{which}_id"], now) for which in ("first", "last")}
            if keys.stream_tenant(self.prefix, stream) is not None:  # no label names a tenant: summed
                tenants["length"] += int(info["length"])
                if used is not None:
                    tenants["bytes"] = (tenants["bytes"] or 0) + used
                for which, age in ages.items():
                    if age is not None:
                        tenants[which].append(age)
                continue
            f["memstream_stream_entries"].add_metric([stream], int(info["length"]))
            if used is not None:  # None: a server without MEMORY USAGE
                f["memstream_stream_bytes"].add_metric([stream], used)
            for which, age in ages.items():
                if age is not None:
                    f[f"memstream_stream_{which}_entry_age_seconds"].add_metric([stream], age)
        if len(streams) > self.log.shards:
            f["memstream_stream_entries"].add_metric(["tenants"], tenants["length"])
            if tenants["bytes"] is not None:
                f["memstream_stream_bytes"].add_metric(["tenants"], tenants["bytes"])
            if tenants["first"]:
                f["memstream_stream_first_entry_age_seconds"].add_metric(["tenants"], max(tenants["first"]))
            if tenants["last"]:
                f["memstream_stream_last_entry_age_seconds"].add_metric(["tenants"], min(tenants["last"]))
        broken: dict[str, int] = dict.fromkeys(("wrong_type", "exhausted", "ahead"), 0)
        for reason in self.log.damaged().values():
            broken[reason] = broken.get(reason, 0) + 1
        for reason, n in broken.items():
            f["memstream_logs_broken"].add_metric([reason], n)
        types: dict[str, int] = {}
        counted, unreadable = self.log.counters("types")
        for etype, n in counted.items():
            label = etype if etype in EVENT_TYPES else "other"
            types[label] = types.get(label, 0) + n
        for etype, n in sorted(types.items()):
            f["memstream_events_appended_total"].add_metric([etype], n)
        catalog = Catalog(c, self.prefix)
        groups: list[str] = []
        archived: int | None = None  # entries in the archive, read once a scrape, for builds only
        states: dict[str, tuple[str, float]] = {}
        read_at = time.monotonic()
        for name, first in self.projections:
            versions = catalog.versions(name)
            for v in versions:
                states[v.group] = (v.state, read_at)
                for state in STATES:
                    f["memstream_projection_state"].add_metric(
                        [v.group, name, str(v.version), state], 1 if v.state == state else 0
                    )
            running: list[tuple[str, Version | None]] = [(v.group, v) for v in versions if v.state not in ("dropping", "failed")]
            for group, built in running or [(first, None)]:  # no catalog yet: its first version
                groups.append(group)
                labels = list(_group_labels(group))
                progress = group_progress(c, streams, group)
                if progress.lag is not None:
                    f["memstream_projection_lag_entries"].add_metric(labels, progress.lag)
                f["memstream_projection_pending_entries"].add_metric(labels, progress.pending)
                left = waiting(c, streams, group)
                if not left.entries:
                    f["memstream_projection_lag_seconds"].add_metric(labels, 0.0)
                elif left.since:  # unknown (unreadable entry ids): absent, never 0
                    f["memstream_projection_lag_seconds"].add_metric(labels, max(0.0, now - left.since))
                dense = embed_waiting(c, self.prefix, group)
                if dense.exists:
                    f["memstream_projection_embed_waiting_points"].add_metric(labels, dense.entries)
                    f["memstream_projection_embed_waiting_seconds"].add_metric(
                        labels, max(0.0, now - dense.since) if dense.since else 0.0
                    )
                alive = consuming(read_health(c, self.prefix, group), now, self.alive_within)
                f["memstream_projection_consumers"].add_metric(labels, alive)
                if built is not None and built.state == "building":
                    if archived is None:
                        archived = self.archived()
                    if archived is not None:  # an unreadable archive: the build's progress is unknown
                        done, total = build_progress(
                            progress,
                            archived_total=archived,
                            archive_done=built.archive_done,
                            archive_applied=built.archive_applied,
                        )
                        if done is not None:
                            f["memstream_replay_applied_entries"].add_metric(labels, done)
                        f["memstream_replay_log_entries"].add_metric(labels, total)
        self._states = states
        dead, counted = f["memstream_projection_dead_letters"], self._dead_letters()
        for group in groups:  # a running version without dead letters has 0, known
            counted.setdefault(group, 0)
        for group, n in counted.items():
            dead.add_metric(list(_group_labels(group)), n)
        self._queues(f, unreadable)

    def _fleet(
        self, f: dict[str, GaugeMetricFamily | CounterMetricFamily], histograms: dict[str, HistogramMetricFamily], now: float
    ) -> None:
        """The agents' reports, summed (``memstream.service.fleet``)."""
        fleet = self.fleet.read(now)
        f["memstream_agents_active"].add_metric([], fleet.active)
        for agent, n in fleet.backlog:
            f["memstream_agent_spool_backlog_events"].add_metric([agent], n)
        for agent, n in fleet.refusals:
            f["memstream_agent_spool_refusals_total"].add_metric([agent], n)
        for outcome, n in fleet.prefetch.items():
            f["memstream_prefetch_total"].add_metric([outcome], n)
        for reason, n in fleet.skipped.items():
            f["memstream_agent_reports_skipped"].add_metric([reason], n)
        hooks = histograms["memstream_hook_seconds"]
        les = [floatToGoString(b) for b in HOOK_BUCKETS] + ["+Inf"]
        empty = [0.0] * ROW
        for hook in (*HOOKS, *(["other"] if "other" in fleet.hooks else [])):
            row = fleet.hooks.get(hook, empty)
            buckets, cumulative = [], 0.0
            for le, calls in zip(les, row[:-1]):
                cumulative += calls
                buckets.append((le, cumulative))
            hooks.add_metric([hook], buckets, row[-1] / 1e9)

    def _dead_letters(self) -> dict[str, int]:
        """Group -> dead letters, recounted only when the dead-letter stream changed (its
        length or its newest id) since the last scrape."""
        from memstream.workers import DeadLetters

        key = keys.dlq(self.prefix)
        length = int(self.client.xlen(key))
        newest = self.client.xrevrange(key, count=1)
        state = (length, as_str(newest[0][0]) if newest else "")
        with self._dlq_lock:
            if state != self._dlq_state:
                counts = DeadLetters(self.client, self.prefix).count_by_group() if length else {}
                kept = dict(sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_DLQ_GROUPS])
                rest = sum(counts.values()) - sum(kept.values())
                if rest:
                    kept["other"] = kept.get("other", 0) + rest
                self._dlq_state, self._dlq_counts = state, kept
            return dict(self._dlq_counts)

    def _queues(self, f: dict[str, GaugeMetricFamily | CounterMetricFamily], types_unreadable: int) -> None:
        c = self.client
        tenants = list(self.registry.all())
        pipe = c.pipeline(transaction=False)
        pipe.llen(operator_channel(self.prefix))
        for tenant in tenants:
            pipe.llen(tenant_channel(self.prefix, tenant))
        pipe.hgetall(keys.query_counters(self.prefix))
        pipe.hgetall(keys.forget_counters(self.prefix))
        pipe.hgetall(keys.retention_counters(self.prefix))
        pipe.hget(keys.dlq_counters(self.prefix), "dropped")
        *lengths, counters, forgotten, retained, dropped = pipe.execute(raise_on_error=False)
        for reply in (lengths[0], counters, forgotten, retained, dropped, *lengths[1:]):
            if isinstance(reply, Exception) and not (reply in lengths[1:] and _tenants_channel_error(reply)):
                raise reply
        spool, unreadable = self.log.counters("spool")  # added to by every host's shipper
        dropped_letters = count(dropped) if dropped is not None else 0
        f["memstream_dead_letters_dropped_total"].add_metric([], dropped_letters or 0)
        f["memstream_spool_unreplicated_batches_total"].add_metric([], spool.get("unreplicated", 0))
        f["memstream_query_queue_length"].add_metric(["operator"], _length(lengths[0]))
        f["memstream_query_queue_length"].add_metric(["tenants"], sum(_length(n) for n in lengths[1:]))
        outcomes, bad_outcomes = counts(counters)
        unreadable += dropped_letters is None
        for outcome in QUERY_OUTCOMES:
            f["memstream_queries_total"].add_metric([outcome], outcomes.get(outcome, 0))
        f["memstream_searches_unreranked_total"].add_metric([], outcomes.get(RERANK_SHED, 0))
        f["memstream_recalls_late_shed_total"].add_metric([], outcomes.get(LATE_SHED, 0))
        removed, bad_removed = counts(forgotten)
        for place in FORGOTTEN_PLACES:
            f["memstream_forgotten_total"].add_metric([place], removed.get(place, 0))
        f["memstream_counters_unreadable"].add_metric([], unreadable + bad_outcomes + bad_removed + types_unreadable)
        retention = {shown(k): shown(v) for k, v in (retained or {}).items()}
        for kind in RETENTION_KINDS:
            f["memstream_retention_erased_total"].add_metric([kind], _number(retention.get(kind)))
        f["memstream_retention_last_run_timestamp_seconds"].add_metric([], _number(retention.get("last_run")))
        f["memstream_retention_failures"].add_metric([], _number(retention.get("failures")))


class BatchHistogram(Collector):
    """A histogram fed a batch of values at a time: one lock and one bucket search (bisect)
    per value, instead of prometheus_client's lock per bucket and sum per value; collected
    as a ``HistogramMetricFamily`` (the same exposition as a ``Histogram``'s)."""

    def __init__(self, family: Family, bounds: Sequence[float]) -> None:
        self.family = family
        self.bounds = tuple(float(b) for b in bounds)
        self.les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], list[float]] = {}  # labels -> count per bucket, then the sum

    def observe(self, labels: tuple[str, ...], values: Sequence[float]) -> None:
        where = [bisect.bisect_left(self.bounds, v) for v in values]  # bounds[i-1] < v <= bounds[i]
        total = math.fsum(values)
        with self._lock:
            row = self._series.get(labels)
            if row is None:
                row = self._series[labels] = [0.0] * (len(self.bounds) + 2)
            for i in where:
                row[i] += 1
            row[-1] += total

    def _empty(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.family.name, self.family.help, labels=self.family.labels)

    def describe(self) -> Iterator[Metric]:
        yield self._empty()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            series = {labels: list(row) for labels, row in self._series.items()}
        out = self._empty()
        for labels, row in series.items():
            cumulative, buckets = 0.0, []
            for le, n in zip(self.les, row[:-1]):
                cumulative += n
                buckets.append((le, cumulative))
            out.add_metric(list(labels), buckets, row[-1])
        yield out


class Metrics:
    """The metrics of one process: its registry (``LogCollector``, the histograms, the
    process collector), the observer its consumers and query server report to, and the
    HTTP server of ``/metrics`` and the dashboard with its sampler (``start``/``stop``)."""

    def __init__(
        self,
        eventlog: EventLog,
        settings: Settings,
        *,
        consumers: Callable[[], Iterable[Consumer]] = lambda: (),
        role: str = "service",
        projections: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        self.settings = settings
        disable_created_metrics()  # no `_created` series: a third of a scrape, and no rule needs them
        self.registry = CollectorRegistry()
        if projections is None:
            projections = _registered(settings)
        self.collector = LogCollector(
            eventlog,
            projections,
            consumers=consumers,
            role=role,
            alive_within=settings.stall_after_s,
            archived=lambda: _archived(settings.archive_path),
            top_agents=settings.metrics_top_agents,
            agents_active_within=3 * (settings.report_every_s or REPORT_EVERY_OFF),
        )
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        r = self.registry
        self.freshness = BatchHistogram(_BY_NAME["memstream_projection_freshness_seconds"], FRESHNESS_BUCKETS)
        r.register(self.freshness)
        self.stages = Histogram(
            "memstream_projection_stage_seconds",
            _BY_NAME["memstream_projection_stage_seconds"].help,
            GROUP + ("stage",),
            registry=r,
            buckets=STAGE_BUCKETS,
        )
        self.embed_batch = Histogram(
            "memstream_projection_embed_batch_texts",
            _BY_NAME["memstream_projection_embed_batch_texts"].help,
            GROUP,
            registry=r,
            buckets=BATCH_BUCKETS,
        )
        self.queries = Histogram(
            "memstream_query_seconds", _BY_NAME["memstream_query_seconds"].help, ("op",), registry=r, buckets=QUERY_BUCKETS
        )
        self._children: dict[tuple[int, str, str], Any] = {}  # (histogram, group, stage) -> its child
        self._server: HttpServer | None = None
        self._sampler: Sampler | None = None
        self.history: History | None = None  # the dashboard's samples while serving
        self.address: tuple[str, int] | None = None

    # -- the observer (memstream.core.observe) -------------------------------------------
    def _child(self, histogram: Histogram, group: str, stage: str = "") -> Any:
        key = (id(histogram), group, stage)
        child = self._children.get(key)
        if child is None:
            labels = _group_labels(group) + ((stage,) if stage else ())
            child = self._children[key] = histogram.labels(*labels)
        return child

    def batch(self, group: str, stages: dict[str, float], applied: list[str], at: float) -> None:
        for stage, seconds in stages.items():
            self._child(self.stages, group, stage).observe(seconds)
        if not applied:
            return
        if self.collector.state_of(group) == "building":
            # a build replays entries appended long ago: its freshness runs from its read (the
            # batch's stages: from the read's reply to the commit), not from each append
            self.freshness.observe(_group_labels(group), [max(0.0, sum(stages.values()))] * len(applied))
            return
        now_ms = at * 1000.0
        self.freshness.observe(
            _group_labels(group), [max(0.0, now_ms - int(entry_id[: entry_id.find("-")])) / 1000.0 for entry_id in applied]
        )

    def embedded(self, group: str, texts: int, seconds: float) -> None:
        self._child(self.stages, group, "embed").observe(seconds)
        self._child(self.embed_batch, group).observe(texts)

    def embed_dead_lettered(self, group: str, entries: int) -> None:
        self.collector.count_embed_dead_lettered(group, entries)

    def answered(self, op: str, seconds: float) -> None:
        if op in OPS:
            self.queries.labels(op).observe(seconds)

    # -- serving ---------------------------------------------------------------------------
    @property
    def url(self) -> str | None:
        """``http://HOST:PORT/metrics`` while serving, else None."""
        if self.address is None:
            return None
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"

    @property
    def base_url(self) -> str | None:
        """``http://HOST:PORT`` (the dashboard's address) while serving, else None."""
        url = self.url
        return url[: -len("/metrics")] if url is not None else None

    def sample(self) -> Iterator[Metric]:
        """The registry's figures, collected for the dashboard (quietly: see ``LogCollector.quietly``)."""
        with self.collector.quietly():
            yield from self.registry.collect()

    def start(self, host: str, port: int) -> Metrics:
        """Serve ``/metrics`` and the dashboard on ``host:port`` (port 0: a free one;
        ``address`` says which), sample the registry for the dashboard, and become the
        process's observer. Raises OSError when the address cannot be bound."""
        history = History()
        server = HttpServer(
            lambda executor: dashboard_app(self.registry, history, executor), host, port, name="memstream-metrics"
        )
        self._server = server.start()
        self.address = server.address
        self.history = history
        self._sampler = Sampler(self.sample, history).start()
        observe.install(self)
        return self

    def stop(self) -> None:
        """Stop serving and sampling; the process has no observer any more (unless another
        replaced this one). Leaves no thread and no socket of its own."""
        if observe.current() is self:
            observe.install(None)
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        self.history = None
        self.address = None


def _archived(path: Path) -> int | None:
    """Entries in the archive at ``path`` (0 without one; None when it is unreadable)."""
    from memstream.producers import Archive, ArchiveError

    try:
        return Archive(path).count()
    except ArchiveError as exc:
        log.warning("metrics.archive_unreadable", error=str(exc)[:300])
        return None


def _registered(settings: Settings) -> list[tuple[str, str]]:
    from memstream.projections import PROJECTIONS, all_registered

    try:
        rows = all_registered(settings.projections)
    except Exception as exc:  # noqa: BLE001  a projection of your own that cannot load: the built-in ones
        log.warning("metrics.projections_unloadable", error=f"{type(exc).__name__}: {exc}"[:300])
        rows = PROJECTIONS
    return [(row.name, row.group) for row in rows]


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def start_metrics(
    settings: Settings, eventlog: EventLog, *, consumers: Callable[[], Iterable[Consumer]] = lambda: (), role: str = "service"
) -> Metrics | None:
    """This process's metrics, served on ``MEMSTREAM_METRICS_ADDR``; None when it is empty,
    or when the address cannot be bound (a port another process holds: a warning says so,
    and the process goes on without metrics)."""
    address = settings.metrics_address
    if address is None:
        return None
    host, port = address
    metrics = Metrics(eventlog, settings, consumers=consumers, role=role)
    try:
        metrics.start(host, port)
    except OSError as exc:
        log.warning(
            "metrics.not_served",
            address=settings.metrics_addr,
            pid=os.getpid(),
            error=f"{type(exc).__name__}: {exc}"[:300],
            action="this process runs without metrics; give it its own MEMSTREAM_METRICS_ADDR "
            "(HOST:0 picks a free port) or empty it to turn metrics off",
        )
        return None
    assert metrics.address is not None
    if not _loopback(metrics.address[0]):
        log.warning(
            "metrics.not_loopback",
            url=metrics.url,
            action="keep /metrics and the dashboard off public interfaces: a firewall or a reverse proxy in front "
            "(docs/reference/metrics.md)",
        )
    log.info("metrics.serving", url=metrics.url, role=role)
    return metrics


def _number(text: str | None) -> float:
    """A counter's text from Redis (untrusted) as a finite number; 0 when it is not one."""
    try:
        value = float(text or 0)
    except ValueError:
        return 0.0
    return value if math.isfinite(value) and value >= 0 else 0.0
