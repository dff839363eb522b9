"""``memstream doctor``: every check, as data.

Each check is a dict with ``ok``, its ``state`` and what it found. ``state`` is ``ok``,
``warning`` (``ok`` stays True: nothing is broken, but something needs a look, said in
``warning``) or ``failed`` (``ok`` False, why in ``error``). Informational checks (queries,
tenants) never fail: workers may live on other hosts; no query server answering is a warning.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import redis
from redis.sentinel import SentinelConnectionPool

from memstream import __version__
from memstream.core import Settings, keys, mask_url, shown
from memstream.ops.stats import group_health, streams
from memstream.producers import EventLog, LogLocator, spool_usage

__all__ = [
    "STATES",
    "check_config",
    "check_dense",
    "check_embedder",
    "check_logs",
    "check_projections",
    "check_queries",
    "check_redis",
    "check_retention",
    "check_spool",
    "check_streams",
    "check_tenants",
    "doctor",
    "state_of",
]

STATES = ("ok", "warning", "failed")  # a check's state, best first; the report's is its worst check's


def doctor(settings: Settings, hermes: Callable[[], dict] | None = None) -> dict:
    """``{"ok": no check failed, "state": the worst check's, "version", "checks": {name:
    check}}``: config, embedder, redis, streams, then (when the log answers) logs, queries,
    tenants, projections, retention and dense, then spool and, when given, ``hermes`` (its caller's check; an
    exception from it is a failed check). Each check carries ``ok`` and ``state`` first."""
    checks: dict[str, dict] = {}
    checks["config"] = check_config(settings)
    checks["embedder"] = check_embedder(settings)
    checks["redis"], eventlog = check_redis(settings)
    if eventlog is not None:
        try:
            checks["streams"] = check_streams(eventlog)
        except redis.exceptions.NoPermissionError:
            checks["streams"] = {"ok": True, "note": "a tenant's credentials append to the streams but may not read them"}
        try:
            checks["logs"] = check_logs(eventlog)
        except redis.exceptions.NoPermissionError:
            checks["logs"] = {"ok": True, "note": "a tenant's credentials may not read the logs: run doctor with the operator's"}
        checks["queries"] = check_queries(eventlog, settings.tenant)
        checks["tenants"] = check_tenants(eventlog)
        try:
            checks["projections"] = check_projections(eventlog, settings.stall_after_s)
        except redis.exceptions.NoPermissionError:
            checks["projections"] = {
                "ok": True,
                "note": "a tenant's credentials may not read the projections' "
                "positions: run doctor with the operator's to check them",
            }
        try:
            checks["retention"] = check_retention(eventlog, settings)
        except redis.exceptions.NoPermissionError:
            checks["retention"] = {"ok": True, "note": "a tenant's credentials may not read the retention job's record"}
        try:
            checks["dense"] = check_dense(eventlog, settings)
        except redis.exceptions.NoPermissionError:
            checks["dense"] = {
                "ok": True,
                "note": "a tenant's credentials may not read the dense stages' backlogs: "
                "run doctor with the operator's to check them",
            }
    else:
        checks["streams"] = {"ok": False, "error": "log unreachable"}
    checks["spool"] = check_spool(settings)
    if hermes is not None:
        try:
            checks["hermes"] = hermes()
        except Exception as exc:
            checks["hermes"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    checks = {
        name: {"ok": bool(c.get("ok")), "state": state_of(c), **{k: v for k, v in c.items() if k not in ("ok", "state")}}
        for name, c in checks.items()
    }
    worst = max((STATES.index(c["state"]) for c in checks.values()), default=0)
    return {"ok": STATES[worst] != "failed", "state": STATES[worst], "version": __version__, "checks": checks}


def state_of(check: dict) -> str:
    """``failed`` when not ``ok``, ``warning`` when it says one, else ``ok``."""
    if not check.get("ok"):
        return "failed"
    return "warning" if check.get("warning") else "ok"


def check_config(settings: Settings) -> dict:
    """Every setting in effect (secrets masked), the home, and where each value that is no
    default came from (``sources``: setting -> variable name, file path or ``given``);
    fails on a problem (a bad value, a name that is no setting)."""
    check = {
        "ok": not settings.problems,
        "home": str(settings.home),
        "sources": dict(settings.sources),
        "problems": list(settings.problems),
        "settings": settings.public(),
    }
    if settings.problems:
        check["error"] = "; ".join(settings.problems)
    return check


def check_embedder(settings: Settings) -> dict:
    """The embedder the projections would use, as configured (nothing loaded, nothing asked):
    its spec, URL (masked) and model, vector size (None: learnt from its first answer) and
    threads; fails when the spec names no embedder or a remote one lacks its model."""
    from memstream.projections import EmbedderError, describe_embedder

    try:
        return {"ok": True, **describe_embedder(settings)}
    except EmbedderError as exc:
        return {"ok": False, "embedder": settings.embedder, "error": str(exc)}


def check_redis(settings: Settings) -> tuple[dict, EventLog | None]:
    """The log's server: reachable, and Redis 7.0+ or Valkey; with the log when it answers."""
    locator = LogLocator(settings, autostart=False)
    url = locator.url()
    mode = "external" if settings.redis_url else "embedded"
    if url is None:
        return {
            "ok": False,
            "mode": mode,
            "error": "no memstream service is running; start it with `memstream up --detach`",
        }, None
    try:
        eventlog = locator()
        try:
            server = eventlog.client.info("server")
        except redis.exceptions.NoPermissionError:  # a tenant's or the workers' credentials: no INFO
            return {
                "ok": True,
                "mode": mode,
                "url": mask_url(url),
                "tls": _tls(url, settings),
                "redis_version": "not shown to these credentials",
            }, eventlog
    except redis.RedisError as exc:
        return {"ok": False, "mode": mode, "url": mask_url(url), "error": f"{type(exc).__name__}: {exc}"}, None
    version = str(server.get("redis_version", "0"))
    major = int(version.split(".")[0] or 0)
    check = {"ok": major >= 7, "mode": mode, "url": mask_url(url), "tls": _tls(url, settings), "redis_version": version}
    if server.get("valkey_version"):
        check["valkey_version"] = server["valkey_version"]
    if major < 7:
        check["error"] = "memstream needs Redis 7.0+ or Valkey"
    _memory(eventlog.client, check)
    pool = eventlog.client.connection_pool
    if isinstance(pool, SentinelConnectionPool):  # the primary the Sentinels name now
        host, port = pool.get_master_address()
        check["primary"] = f"{host}:{port}"
    if settings.ship_replicas:
        try:
            replicas = int(eventlog.client.info("replication").get("connected_slaves", 0))
        except redis.RedisError:
            replicas = -1  # not shown to these credentials
        if replicas >= 0:
            check["replicas"] = replicas
            if replicas < settings.ship_replicas and check["ok"]:
                check["ok"] = False
                check["error"] = (
                    f"MEMSTREAM_SHIP_REPLICAS={settings.ship_replicas} but the primary has {replicas} "
                    "replicas connected: no batch is confirmed, the spools keep growing"
                )
    return check, eventlog


MEMORY_WARN = 0.9  # of maxmemory: a warning from here


def _memory(client: redis.Redis, check: dict) -> None:
    """Add the server's memory to ``check``: failed at its ``maxmemory`` (every append is
    refused with OOM, or keys are evicted), a warning from ``MEMORY_WARN`` of it and under
    a policy that may evict the log's keys."""
    try:
        memory = client.info("memory")
    except redis.RedisError:
        return  # not shown to these credentials
    used, most = int(memory.get("used_memory", 0) or 0), int(memory.get("maxmemory", 0) or 0)
    policy = str(memory.get("maxmemory_policy", "noeviction"))
    check.update(used_memory=used, maxmemory=most or None, maxmemory_policy=policy)
    if not most:
        return
    if used >= most and check["ok"]:
        check["ok"] = False
        check["error"] = (
            f"Redis is at its maxmemory ({used} of {most} bytes, policy {policy}): "
            + ("every append is refused (OOM) and spools grow" if policy == "noeviction" else "it evicts keys, the log's too")
            + "; raise maxmemory, archive (`memstream archive`) or forget old events"
        )
    elif used >= MEMORY_WARN * most:
        check["warning"] = f"Redis uses {used} of its maxmemory of {most} bytes: appends fail (OOM) when it is full"
    if check["ok"] and policy.startswith("allkeys"):
        check["warning"] = (check.get("warning", "") + "; " if check.get("warning") else "") + (
            f"maxmemory-policy {policy} may evict the log's keys when Redis is full: use noeviction"
        )


def check_retention(eventlog: EventLog, settings: Settings) -> dict:
    """The retention job (``workers.retention``), as every process that runs it records it in
    Redis: fails when its last runs failed in a row (what it should erase stays: its last
    error says why), a warning after one failure; its last run and what it erased."""
    counters = {shown(k): shown(v) for k, v in eventlog.client.hgetall(keys.retention_counters(eventlog.prefix)).items()}

    def number(name: str) -> float:
        try:
            value = float(counters.get(name) or 0)
        except ValueError:
            return 0.0
        return value if value == value and value >= 0 else 0.0

    failures = int(number("failures"))
    days = {k: v for k, v in settings.retention_days.items() if v > 0}
    check: dict[str, Any] = {
        "ok": failures < 2,
        "retention_days": days,
        "runs": int(number("runs")),
        "last_run": number("last_run") or None,
        "failures": failures,
    }
    if failures:
        said = (
            f"the retention job failed its last {failures} run{'s' if failures > 1 else ''}"
            f" (last error: {counters.get('last_error', '?')[:300]}): what expired is not erased"
        )
        check["error" if failures >= 2 else "warning"] = said
    return check


def _tls(url: str, settings: Settings) -> str:
    """How the connection is protected, in words (``tls_kwargs`` decides)."""
    if not url.lower().startswith("rediss://"):
        return "none (redis://)"
    ca = settings.redis_tls_ca_file or "the system's CAs"
    host = "host name checked" if settings.redis_tls_check_hostname else "host name NOT checked"
    client = "client certificate sent" if settings.redis_tls_cert_file else "no client certificate"
    return f"verified against {ca}, {host}, {client}"


def check_streams(eventlog: EventLog) -> dict:
    """The event streams: how many, their events, when the oldest and the newest entry
    were appended (``first_at``, ``last_at``: seconds since the epoch, None when empty) and
    each stream as ``memstream.ops.stats.streams`` gives it."""
    found = streams(eventlog)
    firsts = [s["first_at"] for s in found if s["first_at"] is not None]
    lasts = [s["last_at"] for s in found if s["last_at"] is not None]
    return {
        "ok": True,
        "count": len(found),
        "events": sum(int(s["length"]) for s in found),
        "first_at": min(firsts, default=None),
        "last_at": max(lasts, default=None),
        "streams": found,
    }


# what a reason of ``EventLog.damaged`` means to the operator
_DAMAGE = {
    "wrong_type": "holds another type than a stream: its hosts' appends fail and the workers skip it until it is deleted",
    "exhausted": "is at the largest entry id: every append to it fails until its entries are moved to a new log",
    "ahead": "holds ids more than a day ahead of the server's clock (appended with explicit ids)",
}


def check_logs(eventlog: EventLog) -> dict:
    """The event streams whose appends fail or whose ids are not the server's
    (``EventLog.damaged``): a tenant can do this to its own log only, and harms only itself,
    so it is a warning naming the log and what it means (``broken``: key -> reason)."""
    broken = eventlog.damaged()
    check: dict[str, Any] = {"ok": True, "logs": len(eventlog.stream_keys) + len(eventlog.broken()), "broken": broken}
    if broken:
        check["warning"] = "; ".join(
            f"{_owner(eventlog, key)} {key} {_DAMAGE.get(reason, reason)} ({reason})" for key, reason in sorted(broken.items())
        )
    return check


def _owner(eventlog: EventLog, key: str) -> str:
    tenant = keys.stream_tenant(eventlog.prefix, key)
    return f"tenant {tenant}'s log" if tenant is not None else "the operator's stream"


def check_tenants(eventlog: EventLog) -> dict:
    """Whether tenants are separated (see docs/security.md): fails when a registered
    tenant's Redis user has other key rules than the current ones (made by an older release,
    which let it append to the operator's streams: ``memstream tenant update``)."""
    from memstream.producers import TenantRegistry

    registry = TenantRegistry(eventlog.client, eventlog.prefix)
    try:
        tenants = registry.all(fresh=True)
    except redis.exceptions.NoPermissionError:
        return {"ok": True, "credentials": "a tenant's (append to its own log, own queries only)"}
    if not tenants:
        return {
            "ok": True,
            "registered": 0,
            "note": "no tenant registered: any holder of these Redis credentials writes and reads for any tenant",
        }
    check: dict[str, Any] = {
        "ok": True,
        "registered": len(tenants),
        "credentials": "the operator's",
        "enforced": "each tenant appends to its own log only (Redis ACL); events in the operator's streams "
        "must be signed by their registered tenant",
    }
    try:
        stale = registry.stale()
    except redis.exceptions.NoPermissionError:
        check["note"] = "these credentials may not read the tenants' users (ACL GETUSER): the admin's may"
        return check
    if stale:
        check["ok"] = False
        check["stale"] = stale
        check["error"] = (
            "the Redis users of tenants "
            + ", ".join(sorted(stale))
            + " have other key rules than the current ones (an older release's let a tenant append to, trim or "
            "delete what other tenants read): run `memstream tenant update` (passwords stay)"
        )
    return check


def check_queries(eventlog: EventLog, tenant: str) -> dict:
    """Whether a query server (the service or a worker) answers: recall and tools need one.
    Never fails: workers may live on other hosts and be restarting; events still spool. A
    warning when none answers or one answers with an error.
    Asks as the agents do (``exists`` in this tenant), so it works with a tenant's
    credentials too."""
    from memstream.query import ExistsRequest, QueryRefused, QueryTimeout, ask

    started = time.perf_counter()
    try:
        answer = ask(eventlog.client, eventlog.prefix, ExistsRequest(tenant=tenant, id="doctor-check"), timeout=2.0)
    except (QueryTimeout, QueryRefused, redis.RedisError) as exc:
        return {
            "ok": True,
            "answering": False,
            "warning": f"no query server answered ({type(exc).__name__}): start `memstream up` or a "
            "`memstream worker`; until then prefetch injects nothing and tools return errors",
        }
    check: dict[str, Any] = {
        "ok": True,
        "answering": "error" not in answer,
        "round_trip_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    if "error" in answer:
        check["warning"] = f"a query server answered with an error: {str(answer['error'])[:200]}"
    return check


def check_projections(eventlog: EventLog, stall_after_s: float) -> dict:
    """Fails when a projection has entries waiting and made no progress for
    ``stall_after_s`` (``MEMSTREAM_STALL_AFTER_S``): its group, for how long, its last error."""
    from memstream.projections import running_versions

    health = {g: group_health(eventlog, g, stall_after_s) for _, _, g in running_versions(eventlog.client, eventlog.prefix)}
    stalled = {g: h for g, h in health.items() if not h["ok"]}
    check: dict = {
        "ok": not stalled,
        "status": ", ".join(f"{g} {h['status']}" for g, h in health.items()),
        "stall_after_s": next(iter(health.values()))["threshold_s"],
        "groups": {
            g: {k: h[k] for k in ("status", "waiting", "last_progress_at", "stalled_for_s", "last_error", "restarts")}
            for g, h in health.items()
        },
    }
    if stalled:
        check["error"] = "; ".join(
            f"{g} not advancing: {h['waiting']} entries waiting, no progress for {h['stalled_for_s']}s"
            + ("" if h["exists"] else " (no worker has read the log)")
            + (f", last error: {h['last_error'][:200]}" if h["last_error"] else "")
            + (f", {h['restarts']} restarts" if h["restarts"] else "")
            for g, h in stalled.items()
        )
    return check


def check_dense(eventlog: EventLog, settings: Settings, now: float | None = None) -> dict:
    """The dense stage of each running version of a vector projection with a backlog
    (``workers.embedding``; a version that embeds inline has none): the points waiting for
    their dense vector, the age of the oldest, the dense stages reading the backlog (seen
    within ``MEMSTREAM_STALL_AFTER_S``) and its dead letters (``memstream dlq list``).

    Fails when points waited longer than ``MEMSTREAM_STALL_AFTER_S`` while no dense stage
    read the backlog within it (none runs: the backlog only grows, its points stay
    keyword-only), as ``check_projections`` fails a projection that does not advance.
    Warns when more than ``MEMSTREAM_EMBED_WARN_POINTS`` wait, when the oldest waited
    longer than ``MEMSTREAM_EMBED_WARN_S`` (a stage that runs but does not keep up, or
    fails and retries: its last error is in its logs), or when the dense stage
    dead-lettered entries (their points stay keyword-only until ``memstream dlq retry``)."""
    from memstream.projections import running_versions
    from memstream.workers import DeadLetters, embed_readers, embed_waiting

    now = time.time() if now is None else now
    client, prefix = eventlog.client, eventlog.prefix
    versions = [group for row, _, group in running_versions(client, prefix) if row.vectors]
    dead = DeadLetters(client, prefix).count_by("stream") if client.exists(keys.dlq(prefix)) else {}
    groups: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    warned: list[str] = []
    for group in versions:
        backlog = keys.embed_backlog(prefix, group)
        w = embed_waiting(client, prefix, group)
        if not w.exists:
            continue  # embeds inline, or never wrote a point
        readers = embed_readers(client, prefix, group)
        alive = [name for name, r in readers.items() if r["idle_s"] <= settings.stall_after_s]
        oldest_s = round(max(0.0, now - w.since), 1) if w.since else None
        letters = int(dead.get(backlog, 0))
        groups[group] = {
            "waiting": w.entries,
            "oldest_s": oldest_s,
            "readers": len(alive),
            "last_read_s": min((r["idle_s"] for r in readers.values()), default=None),
            "dead_letters": letters,
        }
        if oldest_s is not None and oldest_s > settings.stall_after_s and not alive:
            failed.append(
                f"{group}: {w.entries} points waited up to {oldest_s:.0f} s for their dense vector and "
                + (
                    "no dense stage ever read the backlog"
                    if not readers
                    else f"no dense stage read it for {groups[group]['last_read_s']:.0f} s"
                )
                + ": start `memstream up` or a `memstream worker` with this version's embedder"
            )
            continue
        if w.entries > settings.embed_warn_points:
            warned.append(f"{group}: {w.entries} points wait for their dense vector (more than {settings.embed_warn_points})")
        elif oldest_s is not None and oldest_s > settings.embed_warn_s:
            warned.append(
                f"{group}: the oldest point waited {oldest_s or 0.0:.0f} s for its dense vector "
                f"(more than {settings.embed_warn_s:.0f} s): the dense stage is behind or failing"
            )
        if letters:
            warned.append(
                f"{group}: {letters} backlog entries dead-lettered (`memstream dlq list --group {group}`, "
                "`memstream dlq retry`): their points are found by keywords only"
            )
    check: dict[str, Any] = {
        "ok": not failed,
        "warn_points": settings.embed_warn_points,
        "warn_s": settings.embed_warn_s,
        "stall_after_s": settings.stall_after_s,
        "groups": groups,
    }
    if failed:
        check["error"] = "; ".join(failed + warned)
    elif warned:
        check["warning"] = "; ".join(warned)
    return check


def check_spool(settings: Settings) -> dict:
    """This host's spool: fails at its bound (new events are refused until it ships); a
    warning when corrupt regions were quarantined."""
    usage = (
        spool_usage(settings.spool_dir)
        if settings.spool_dir.exists()
        else {"dir": str(settings.spool_dir), "segments": 0, "bytes": 0, "unshipped_bytes": 0, "quarantined": 0}
    )
    spool_ok = int(str(usage["unshipped_bytes"])) < settings.spool_max_bytes
    check = {"ok": spool_ok, **usage, "max_bytes": settings.spool_max_bytes}
    if not spool_ok:
        check["error"] = "the spool is at its bound: new events are refused until it ships"
    elif usage["quarantined"]:
        check["warning"] = (
            f"corrupt spool regions set aside in {usage['dir']}/quarantine: "
            f"{usage['quarantined']} (the events in them could not be read)"
        )
    return check
