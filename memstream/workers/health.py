"""Liveness of the projection consumers, readable by any process through Redis.

Keys (``P`` = prefix): ``P:health:{group}`` hash consumer name -> JSON record of that
consumer (last step, last progress, applied, errors, last error, restarts), written by
the consumer at most once a second (``Health.beat``) and expiring ``KEEP_S`` after the
last write of any consumer of the group.

A projection is *stalled* when entries wait for it (undelivered or pending) and none of
it has made progress (a batch committed by any consumer, or a position recorded) for the
threshold (``MEMSTREAM_STALL_AFTER_S``, passed by the caller) while the oldest waiting entry
is at least that old: ``memstream doctor`` fails then, and ``memstream stats`` says so per
projection.

``waiting`` says what waits for a group and since when (the projection's lag in entries
and in seconds); ``consuming`` how many of its consumers wrote their record lately.

Guarantees: ``Health.beat`` never raises (a Redis error only delays the record); the
readers never raise on a malformed record (it is ignored).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import redis
import structlog

from memstream.core import keys, shown
from memstream.producers import after, parse_entry_id, xrange_entry
from memstream.workers.stats import ConsumerStats

__all__ = ["Health", "Waiting", "consuming", "projection_health", "read_health", "waiting"]

log = structlog.get_logger("memstream.health")

KEEP_S = 7 * 86400
ERROR_CHARS = 300


class Health:
    """One consumer's health record; ``beat`` writes it (throttled to ``every`` seconds)."""

    def __init__(self, client: redis.Redis, prefix: str, group: str, consumer: str, every: float = 1.0):
        self.client = client
        self.key = keys.health(prefix, group)
        self.group = group
        self.consumer = consumer
        self.every = every
        self.started_at = time.time()
        self.last_step_at = 0.0
        self.last_progress_at = 0.0
        self.last_error = ""
        self.last_error_at = 0.0
        self.state = "starting"
        self._written = 0.0
        self.written_at = 0.0  # when a record was last written (0: never yet)

    def step(self, handled: int) -> None:
        now = time.time()
        self.last_step_at = now
        if handled:
            self.last_progress_at = now
        self.state = "running"

    def error(self, message: str, state: str = "backing off") -> None:
        self.last_error = message[:ERROR_CHARS]
        self.last_error_at = time.time()
        self.state = state

    def record(self, stats: ConsumerStats) -> dict[str, Any]:
        return {
            "group": self.group,
            "consumer": self.consumer,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "state": self.state,
            "started_at": self.started_at,
            "last_step_at": self.last_step_at or None,
            "last_progress_at": self.last_progress_at or None,
            "applied": stats.applied,
            "dead_lettered": stats.dead_lettered,
            "skipped_unknown": stats.skipped_unknown,
            "clipped": stats.clipped,
            "errors": stats.errors,
            "transient_failures": stats.transient_failures,
            "restarts": stats.restarts,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at or None,
            "updated_at": time.time(),
        }

    def beat(self, stats: ConsumerStats, force: bool = False) -> bool:
        """Write the record if ``every`` seconds passed since the last write (or ``force``).
        Returns whether it was written; never raises."""
        now = time.monotonic()
        if not force and now - self._written < self.every:
            return False
        self._written = now
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(self.key, self.consumer, json.dumps(self.record(stats)))
            pipe.expire(self.key, KEEP_S)
            pipe.execute()
            self.written_at = time.time()
            return True
        except Exception as exc:  # the record waits for the next beat
            log.debug("health.write_failed", group=self.group, error=f"{type(exc).__name__}: {exc}")
            return False


def read_health(client: redis.Redis, prefix: str, group: str) -> dict[str, dict[str, Any]]:
    """Consumer name -> its last record (malformed records are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for name, raw in (client.hgetall(keys.health(prefix, group)) or {}).items():
        try:
            record = json.loads(raw)
        except (ValueError, TypeError):
            continue
        if isinstance(record, dict):
            out[shown(name)] = record
    return out


def _num(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def entry_time(entry_id: str | bytes) -> float:
    try:
        return parse_entry_id(entry_id)[0] / 1000.0
    except (ValueError, UnicodeDecodeError):
        return 0.0


@dataclass(frozen=True)
class Waiting:
    """What waits for a group on the streams: ``entries`` (undelivered, a lower bound when
    the server cannot count them, plus pending), ``since`` (unix time the oldest of them was
    appended: None when none waits) and whether the group ``exists`` on any stream."""

    entries: int
    since: float | None
    exists: bool


def waiting(client: redis.Redis, stream_keys: list[str], group: str) -> Waiting:
    """The entries of ``stream_keys`` that ``group`` has not applied yet (``Waiting``): on
    a stream without the group, every entry; else those after its last delivered one and
    those it holds pending."""
    entries, since, exists = 0, None, False
    for key in stream_keys:
        try:
            entries, since, exists = _waiting_on(client, key, group, entries, since, exists)
        except redis.ResponseError:  # no stream yet, or a tenant's log made another type
            continue
    return Waiting(entries=entries, since=since, exists=exists)


def _waiting_on(
    client: redis.Redis, key: str, group: str, entries: int, since: float | None, exists: bool
) -> tuple[int, float | None, bool]:
    """``waiting``'s sums with the stream ``key`` added."""
    infos = client.xinfo_groups(key)
    mine = [g for g in infos if shown(g.get("name", "")) == group]
    if not mine:
        first = client.xrange(key, count=1)
        if first:
            entries += int(client.xlen(key))
            t = entry_time(xrange_entry(first[0])[0])
            since = t if since is None else min(since, t)
        return entries, since, exists
    g = mine[0]
    delivered = shown(g.get("last-delivered-id", "0-0"))
    lag = g.get("lag")
    bound = after(delivered)  # None: the largest id was delivered, nothing can follow
    nxt = client.xrange(key, min=bound, count=1) if bound is not None else []
    if lag is None:  # servers or versions that cannot tell: what follows the last delivered
        lag = 1 if nxt else 0
    if int(lag) and nxt:
        entries += int(lag)
        t = entry_time(xrange_entry(nxt[0])[0])
        since = t if since is None else min(since, t)
    pending = int(g.get("pending", 0) or 0)
    if pending:
        entries += pending
        lowest = client.xpending(key, group).get("min")
        if lowest:
            t = entry_time(lowest)
            since = t if since is None else min(since, t)
    return entries, since, True


def consuming(records: dict[str, dict[str, Any]], now: float, within: float) -> int:
    """How many consumers of ``records`` (``read_health``) wrote their record in the last
    ``within`` seconds before ``now`` and are neither stopped nor dead."""
    return sum(
        1 for r in records.values() if now - _num(r.get("updated_at")) <= within and r.get("state") not in ("stopped", "dead")
    )


def projection_health(
    client: redis.Redis,
    prefix: str,
    stream_keys: list[str],
    group: str,
    *,
    threshold: float,
    applied_at: float = 0.0,
    now: float | None = None,
) -> dict[str, Any]:
    """Whether ``group`` advances: its waiting entries (undelivered ``lag`` + ``pending``),
    since when the oldest waits, its last progress (health records, or ``applied_at``: the
    newest position recorded), its consumers' errors and restarts, and a ``status``:
    ``ok``, ``idle`` (nothing waits), ``stalled`` (entries waited ``threshold`` seconds
    with no progress) or ``not started`` (no group yet; stalled too once its entries waited
    ``threshold`` seconds). ``ok`` is False when stalled."""
    now = time.time() if now is None else now
    found = waiting(client, stream_keys, group)
    waiting_entries, since, exists = found.entries, found.since, found.exists
    consumers = read_health(client, prefix, group)
    progress = max([_num(r.get("last_progress_at")) for r in consumers.values()] + [applied_at or 0.0])
    errored = sorted(consumers.values(), key=lambda r: _num(r.get("last_error_at")))
    last_error = next((str(r.get("last_error")) for r in reversed(errored) if r.get("last_error")), "")
    restarts = sum(int(_num(r.get("restarts"))) for r in consumers.values())
    waited = now - max(progress, since or now)
    if not waiting_entries:
        status = "idle" if exists else "not started"
    elif waited > threshold:
        status = "stalled"
    else:
        status = "ok" if exists else "not started"
    return {
        "ok": status != "stalled",
        "status": status,
        "exists": exists,
        "waiting": waiting_entries,
        "waiting_since": since,
        "last_progress_at": progress or None,
        "stalled_for_s": round(waited, 1) if status == "stalled" else 0.0,
        "threshold_s": threshold,
        "last_error": last_error,
        "restarts": restarts,
        "consumers": {
            name: {
                k: r.get(k)
                for k in (
                    "state",
                    "last_step_at",
                    "last_progress_at",
                    "applied",
                    "errors",
                    "restarts",
                    "last_error",
                    "host",
                    "pid",
                )
            }
            for name, r in consumers.items()
        },
    }
