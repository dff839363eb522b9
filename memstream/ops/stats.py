"""``memstream stats``: the streams (with their bytes in Redis and in the archive), events
per type, the spool, and each projection's position, lag, pending entries, dead letters,
freshness, items and health."""

from __future__ import annotations

import math
import time
from pathlib import Path

import redis

from memstream.core import Settings, keys, shown
from memstream.ops.connect import connect
from memstream.producers import Archive, ArchiveError, EventLog, parse_entry_id, spool_usage

__all__ = ["archive_stats", "group_health", "projection_stats", "retention_stats", "stats", "streams", "tier_stats"]


def streams(eventlog: EventLog) -> list[dict]:
    """Each event stream: length, first and last id, when they were appended (``first_at``,
    ``last_at``: seconds since the epoch, from the ids; None when empty) and its consumer
    groups as Redis reports them (text; a group anyone created on the stream may have any
    name)."""
    out = []
    for info in eventlog.stream_info():
        info["first_at"], info["last_at"] = (
            None if i is None else parse_entry_id(i)[0] / 1000.0 for i in (info["first_id"], info["last_id"])
        )
        try:
            groups = eventlog.client.xinfo_groups(info["stream"]) if info["length"] else []
        except redis.ResponseError:
            groups = []
        # a group anyone created on the stream may have any name: never fail to show it
        info["groups"] = [{shown(k): (shown(v) if isinstance(v, bytes) else v) for k, v in g.items()} for g in groups]
        out.append(info)
    return out


def archive_stats(directory: Path) -> dict:
    """The archive in ``directory``: its totals and, per stream, ``events``, ``bytes``,
    ``segments`` and ``last_id``; an ``error`` instead when its manifest is unreadable."""
    out: dict = {"directory": str(directory), "events": 0, "bytes": 0, "segments": 0, "streams": {}}
    try:
        usage = Archive(directory).usage()
    except ArchiveError as exc:
        return {**out, "error": str(exc)}
    out["streams"] = usage
    for row in usage.values():
        for k in ("events", "bytes", "segments"):
            out[k] += row[k]
    return out


def group_health(eventlog: EventLog, group: str, stall_after_s: float) -> dict:
    """``memstream.workers.projection_health`` of ``group`` (positions as progress too)."""
    from memstream.workers import Positions, projection_health

    pos = Positions(eventlog.client, eventlog.prefix).get(group)
    applied = max((p["applied_at"] for p in pos.values()), default=0.0)
    return projection_health(
        eventlog.client, eventlog.prefix, eventlog.stream_keys, group, threshold=stall_after_s, applied_at=applied
    )


def projection_stats(eventlog: EventLog, stall_after_s: float) -> dict:
    """Per projection group: position, lag, pending, dead letters, freshness, items; for a
    vector projection also ``embedding``: the points waiting for their dense vector (found
    by keywords meanwhile), the age of the oldest (seconds; None when none waits) and the
    dead letters of its dense stage (counted in ``dead_letters`` too)."""

    from memstream.projections import Counters, FactsTable, running_versions
    from memstream.workers import DeadLetters, Positions, embed_waiting

    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    dead = dlq.count_by_group()
    dead_by_stream = dlq.count_by("stream") if dead else {}
    positions = Positions(eventlog.client, eventlog.prefix)
    # points in the stores, counted by the process that holds them (the service or a worker)
    try:
        from memstream.query import CountRequest, QueryTimeout, ask

        stored = ask(eventlog.client, eventlog.prefix, CountRequest(), timeout=1.0).get("items") or {}
    except (QueryTimeout, redis.RedisError, ValueError):
        stored = {}
    out: dict[str, dict] = {}
    for row, version, group in running_versions(eventlog.client, eventlog.prefix):
        lag: int | None = 0
        pending, known = 0, False
        for key in eventlog.stream_keys:
            try:
                infos = eventlog.client.xinfo_groups(key)
            except redis.ResponseError:
                continue
            for g in infos:
                name = g["name"].decode("utf-8", "backslashreplace") if isinstance(g["name"], bytes) else g["name"]
                if name == group:
                    known = True
                    pending += int(g.get("pending", 0))
                    lag = None if lag is None or g.get("lag") is None else lag + int(g["lag"])
        pos = positions.get(group)
        applied = max((p["applied_at"] for p in pos.values()), default=0.0)
        counters = Counters(eventlog.client, eventlog.prefix, group).get()
        if row.name == "facts":
            items, source = FactsTable(eventlog.client, eventlog.prefix, version=version).count(), "facts table"
        elif row.name == "sessions":
            items, source = counters.get("turns", 0), "turns recorded"
        elif group in stored:
            items, source = int(stored[group]), "store"
        else:  # no service or worker answered: the projection's count of points written
            items, source = counters.get("points", 0), "points written (no worker answered)"
        out[group] = {
            "exists": known,
            "positions": {k: v["position"] for k, v in pos.items()},
            "lag": lag if known else None,
            "pending": pending,
            "dead_letters": dead.get(group, 0),
            "last_applied_at": applied or None,
            "freshness_s": round(time.time() - applied, 3) if applied else None,
            "items": items,
            "items_source": source,
            "counters": counters,
            "health": group_health(eventlog, group, stall_after_s),
        }
        if row.vectors:
            w = embed_waiting(eventlog.client, eventlog.prefix, group)
            out[group]["embedding"] = {
                "waiting": w.entries,
                "oldest_s": round(time.time() - w.since, 3) if w.since else None,
                "dead_letters": dead_by_stream.get(keys.embed_backlog(eventlog.prefix, group), 0),
            }
    return out


def retention_stats(settings: Settings, eventlog: EventLog) -> dict:
    """The retention settings per kind (``days``, 0: forever), what the retention job erased
    (``erased``), when each kind's next event expires (``next_expiry``, unix seconds; None:
    none found or kept forever), the last run (``last_run``), the runs and the interval."""
    from memstream.workers import Retention

    counters = {shown(k): shown(v) for k, v in eventlog.client.hgetall(keys.retention_counters(eventlog.prefix)).items()}
    try:
        expiry = Retention(settings, eventlog).next_expiry()
    except (redis.ResponseError, ArchiveError):
        expiry = {}

    def number(text: str | None) -> float:
        try:
            value = float(text or 0)
        except ValueError:
            return 0.0
        return value if math.isfinite(value) and value >= 0 else 0.0

    kinds = {
        kind: {"days": days, "erased": int(number(counters.get(kind))), "next_expiry": expiry.get(kind)}
        for kind, days in settings.retention_days.items()
    }
    last = number(counters.get("last_run"))
    return {
        "kinds": kinds,
        "every_s": settings.retention_every_s,
        "runs": int(number(counters.get("runs"))),
        "last_run": last or None,
    }


def tier_stats(settings: Settings, stored: dict) -> dict:
    """The hot and cold tiers of this installation's tenant: ``hot_days`` and, per vector
    projection (turns, memories), the points in each tier (``tiers``: as the process that
    holds the store counted them; {} when none answered)."""
    raw = stored.get("tiers")
    tiers = {
        str(name): {t: int(row[t]) for t in ("hot", "cold")}
        for name, row in (raw.items() if isinstance(raw, dict) else ())
        if isinstance(row, dict) and all(isinstance(row.get(t), int) for t in ("hot", "cold"))
    }
    return {"tenant": settings.tenant, "hot_days": settings.hot_days, "tiers": tiers}


# entries of a stream counted as also archived, at most (past it the count says "at least")
OVERLAP_MAX = 10_000


def _also_archived(eventlog: EventLog, info: dict) -> int:
    """How many of the stream's entries in Redis the archive holds too (at or below its last
    id: the trim keeps the boundary entry, and an archive not yet trimmed keeps them all);
    at most ``OVERLAP_MAX``."""
    last = info["archive"].get("last_id")
    if not last or not info.get("length") or not info.get("first_id"):
        return 0
    if parse_entry_id(info["first_id"]) > parse_entry_id(last):
        return 0
    return len(eventlog.client.xrange(info["stream"], "-", last, count=OVERLAP_MAX) or [])


def stats(settings: Settings) -> dict:
    """``streams`` (each with its ``memory_bytes`` in Redis and what of it is in the
    ``archive``, its ``also_in_redis`` the entries in both), ``archive`` (its directory and totals), ``types`` (events per type),
    ``spool`` (this host's, {} without one), ``spool_losses`` (reported by every host's
    shipper), ``unreadable_counters`` (fields of those counters that hold no count: left
    out), ``projections``, ``tiers`` (``tier_stats``) and ``retention`` (``retention_stats``)."""
    eventlog = connect(settings)
    usage = spool_usage(settings.spool_dir) if settings.spool_dir.exists() else {}
    losses, unreadable = eventlog.counters("spool")  # every host's shipper: the operator's and each tenant's
    types, unreadable_types = eventlog.counters("types")
    archived = archive_stats(settings.archive_path)
    infos = streams(eventlog)
    for info in infos:
        info["memory_bytes"] = eventlog.memory_bytes(info["stream"])  # every node counted
        info["archive"] = archived["streams"].get(info["stream"]) or {"events": 0, "bytes": 0, "segments": 0, "last_id": None}
        info["archive"]["also_in_redis"] = _also_archived(eventlog, info)
    return {
        "streams": infos,
        "archive": archived,
        "types": types,
        "spool": usage,
        "spool_losses": losses,
        "unreadable_counters": unreadable + unreadable_types,
        "projections": projection_stats(eventlog, settings.stall_after_s),
        "tiers": tier_stats(settings, _count(eventlog, settings.tenant)),
        "retention": retention_stats(settings, eventlog),
    }


def _count(eventlog: EventLog, tenant: str) -> dict:
    """The ``count`` answer of the process that holds the store ({} when none answered)."""
    try:
        from memstream.query import CountRequest, QueryTimeout, ask

        answer = ask(eventlog.client, eventlog.prefix, CountRequest(tenant=tenant), timeout=1.0)
    except (QueryTimeout, redis.RedisError, ValueError):
        return {}
    return answer
