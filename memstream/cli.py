"""The ``memstream`` command. Every subcommand takes ``--json``.

Exit codes: 0 success; 1 the command ran but the answer is "not ok" (doctor) or the
log is unreachable; 2 usage errors (argparse).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import redis

from producers import (
    EventLog,
    MemoryWritten,
    Scope,
    Settings,
    Writer,
    clean_text,
    new_event_id,
    spool_usage,
    to_builtins,
    utcnow,
)
from producers.connect import LogLocator, read_run_file
from producers.stream import parse_entry_id

from . import __version__
from .logs import configure

__all__ = ["main"]


class CommandError(Exception):
    """A command failed in a way the user can act on (message says how)."""


def _print(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, default=str))
    else:
        print(text if text is not None else json.dumps(data, indent=2, default=str))


def _connect(settings: Settings) -> EventLog:
    try:
        return LogLocator(settings, autostart=False)()
    except redis.RedisError as exc:
        raise CommandError(f"cannot reach the log: {exc}") from exc


# -- up / down ---------------------------------------------------------------------------
def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from .service import AlreadyRunning, Service, detach

    if args.detach:
        info = detach(settings)
        _print(args, info, None if args.quiet else
               f"memstream service {'already ' if info.get('already_running') else ''}running "
               f"(pid {info['pid']}) at {info['url']}")
        return 0
    configure("INFO")
    service = Service(settings)
    try:
        info = service.start()
    except AlreadyRunning as exc:
        _print(args, {**exc.info, "already_running": True},
               f"memstream service already running (pid {exc.info.get('pid')}) at {exc.info.get('url')}")
        return 0
    except KeyboardInterrupt:  # Ctrl-C while starting: stop what did start
        service.close()
        return 130
    service.handle_signals()  # before saying so: from here a Ctrl-C stops it cleanly
    if not args.quiet:
        _print(args, info, f"memstream service running at {info['url']} (home {settings.home}); Ctrl-C stops it")
        sys.stdout.flush()
    service.serve()
    return 0


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    from .service import stop_service

    result = stop_service(settings)
    _print(args, result, "stopped" if result.get("stopped") else result.get("reason", "not stopped"))
    return 0 if result.get("stopped") or "no memstream service" in result.get("reason", "") else 1


# -- doctor / stats / export --------------------------------------------------------------
def _check_redis(settings: Settings) -> tuple[dict, EventLog | None]:
    locator = LogLocator(settings, autostart=False)
    url = locator.url()
    mode = "external" if settings.redis_url else "embedded"
    if url is None:
        return {"ok": False, "mode": mode,
                "error": "no memstream service is running; start it with `memstream up --detach`"}, None
    try:
        eventlog = locator()
        server = eventlog.client.info("server")
    except redis.RedisError as exc:
        return {"ok": False, "mode": mode, "url": Settings(redis_url=url).public()["redis_url"],
                "error": f"{type(exc).__name__}: {exc}"}, None
    version = str(server.get("redis_version", "0"))
    major = int(version.split(".")[0] or 0)
    check = {"ok": major >= 7, "mode": mode, "url": Settings(redis_url=url).public()["redis_url"],
             "redis_version": version}
    if server.get("valkey_version"):
        check["valkey_version"] = server["valkey_version"]
    if major < 7:
        check["error"] = "memstream needs Redis 7.0+ or Valkey"
    return check, eventlog


def _streams(eventlog: EventLog) -> list[dict]:
    out = []
    for info in eventlog.stream_info():
        try:
            groups = eventlog.client.xinfo_groups(info["stream"]) if info["length"] else []
        except redis.ResponseError:
            groups = []
        # a group anyone created on the stream may have any name: never fail to show it
        info["groups"] = [{k if isinstance(k, str) else k.decode("utf-8", "backslashreplace"):
                           (v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v)
                           for k, v in g.items()} for g in groups]
        out.append(info)
    return out


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from .hermes_install import check as hermes_check

    checks: dict[str, dict] = {}
    checks["config"] = {"ok": not settings.problems, "problems": list(settings.problems),
                        "settings": settings.public()}
    checks["redis"], eventlog = _check_redis(settings)
    if eventlog is not None:
        checks["streams"] = {"ok": True, "streams": _streams(eventlog)}
        checks["queries"] = _check_queries(eventlog)
        checks["projections"] = _check_projections(eventlog)
    else:
        checks["streams"] = {"ok": False, "error": "log unreachable"}
    usage = spool_usage(settings.spool_dir) if settings.spool_dir.exists() else {
        "dir": str(settings.spool_dir), "segments": 0, "bytes": 0, "unshipped_bytes": 0, "quarantined": 0}
    spool_ok = usage["unshipped_bytes"] < settings.spool_max_bytes
    checks["spool"] = {"ok": spool_ok, **usage, "max_bytes": settings.spool_max_bytes}
    if not spool_ok:
        checks["spool"]["error"] = "the spool is at its bound: new events are refused until it ships"
    try:
        checks["hermes"] = hermes_check(None)
    except Exception as exc:
        checks["hermes"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    ok = all(c.get("ok") for c in checks.values())
    result = {"ok": ok, "version": __version__, "checks": checks}
    lines = [f"memstream {__version__}: {'ok' if ok else 'NOT OK'}"]
    for name, c in checks.items():
        detail = c.get("error") or ", ".join(f"{k}={v}" for k, v in c.items()
                                             if k not in ("ok", "settings", "streams", "problems") and not isinstance(v, (dict, list)))
        lines.append(f"  [{'ok' if c.get('ok') else 'FAIL'}] {name}: {detail}")
    _print(args, result, "\n".join(lines))
    return 0 if ok else 1


def _check_queries(eventlog: EventLog) -> dict:
    """Whether a query server (the service or a worker) answers: recall and tools need one.
    Informational: workers may live on other hosts and be restarting; events still spool."""
    from workers.queries import QueryTimeout, ask

    started = time.perf_counter()
    try:
        answer = ask(eventlog.client, eventlog.prefix, {"op": "count"}, timeout=2.0)
    except (QueryTimeout, redis.RedisError) as exc:
        return {"ok": True, "answering": False,
                "warning": f"no query server answered ({type(exc).__name__}): start `memstream up` or a "
                           "`memstream worker`; until then prefetch injects nothing and tools return errors"}
    return {"ok": True, "answering": "error" not in answer,
            "round_trip_ms": round((time.perf_counter() - started) * 1000, 1)}


_GROUPS = ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")


def _health(eventlog: EventLog, group: str) -> dict:
    """``workers.health.projection_health`` of ``group`` (positions as progress too)."""
    from workers.consumer import Positions
    from workers.health import projection_health

    pos = Positions(eventlog.client, eventlog.prefix).get(group)
    applied = max((p["applied_at"] for p in pos.values()), default=0.0)
    return projection_health(eventlog.client, eventlog.prefix, eventlog.stream_keys, group, applied_at=applied)


def _check_projections(eventlog: EventLog) -> dict:
    """Fails when a projection has entries waiting and made no progress for the stall
    threshold (``MEMSTREAM_STALL_AFTER_S``, 60 s): its group, for how long, its last error."""
    health = {g: _health(eventlog, g) for g in _GROUPS}
    stalled = {g: h for g, h in health.items() if not h["ok"]}
    check: dict = {"ok": not stalled, "status": ", ".join(f"{g} {h['status']}" for g, h in health.items()),
                   "stall_after_s": next(iter(health.values()))["threshold_s"],
                   "groups": {g: {k: h[k] for k in ("status", "waiting", "last_progress_at", "stalled_for_s",
                                                    "last_error", "restarts")} for g, h in health.items()}}
    if stalled:
        check["error"] = "; ".join(
            f"{g} not advancing: {h['waiting']} entries waiting, no progress for {h['stalled_for_s']}s"
            + ("" if h["exists"] else " (no worker has read the log)")
            + (f", last error: {h['last_error'][:200]}" if h["last_error"] else "")
            + (f", {h['restarts']} restarts" if h["restarts"] else "")
            for g, h in stalled.items())
    return check


def _projection_stats(eventlog: EventLog) -> dict:
    """Per projection group: position, lag, pending, dead letters, freshness, items."""

    from projections.facts_table import FactsTable
    from workers.consumer import DeadLetters, Positions
    from workers.projectors import Counters

    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    dead = {}
    for item in dlq.list(count=100000):
        dead[item.get("group")] = dead.get(item.get("group"), 0) + 1
    positions = Positions(eventlog.client, eventlog.prefix)
    # points in the stores, counted by the process that holds them (the service or a worker)
    try:
        from workers.queries import QueryTimeout, ask

        stored = ask(eventlog.client, eventlog.prefix, {"op": "count"}, timeout=1.0).get("items") or {}
    except (QueryTimeout, redis.RedisError, ValueError):
        stored = {}
    out: dict[str, dict] = {}
    for group in ("turns.v1", "memories.v1", "facts.v1", "sessions.v1"):
        lag, pending, known = 0, 0, False
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
        if group == "facts.v1":
            items, source = FactsTable(eventlog.client, eventlog.prefix).count(), "facts table"
        elif group == "sessions.v1":
            items, source = counters.get("turns", 0), "turns recorded"
        elif group in stored:
            items, source = int(stored[group]), "store"
        else:  # no service or worker answered: the projection's count of points written
            items, source = counters.get("points", 0), "points written (no worker answered)"
        out[group] = {
            "exists": known, "positions": {k: v["position"] for k, v in pos.items()},
            "lag": lag if known else None, "pending": pending, "dead_letters": dead.get(group, 0),
            "last_applied_at": applied or None,
            "freshness_s": round(time.time() - applied, 3) if applied else None,
            "items": items, "items_source": source, "counters": counters,
            "health": _health(eventlog, group),
        }
    return out


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    eventlog = _connect(settings)
    usage = spool_usage(settings.spool_dir) if settings.spool_dir.exists() else {}
    losses = {(k.decode() if isinstance(k, bytes) else k): int(v)
              for k, v in eventlog.client.hgetall(f"{eventlog.prefix}:counters:spool").items()}
    result = {"streams": _streams(eventlog), "types": eventlog.type_counts(), "spool": usage,
              "spool_losses": losses, "projections": _projection_stats(eventlog)}
    lines = [f"{s['stream']}: {s['length']} events, first {s['first_id']}, last {s['last_id']}"
             for s in result["streams"]]
    lines += [f"  {t}: {n}" for t, n in result["types"].items()]
    for group, p in result["projections"].items():
        h = p["health"]
        lines.append(f"{group}: lag {p['lag']}, pending {p['pending']}, dead letters {p['dead_letters']}, "
                     f"items {p['items']}, last applied {p['last_applied_at']}, {h['status']}"
                     + (f" for {h['stalled_for_s']}s (last error: {h['last_error'][:200] or 'none'})"
                        if h["status"] == "stalled" else ""))
    if usage:
        lines.append(f"spool: {usage['segments']} segments, {usage['unshipped_bytes']} bytes unshipped, "
                     f"{usage['quarantined']} quarantined")
    if losses:
        lines.append("spool losses reported by agents (all hosts): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(losses.items())))
    _print(args, result, "\n".join(lines))
    return 0


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    if args.since:
        try:
            parse_entry_id(args.since)
        except ValueError:
            raise CommandError(f"--since {args.since!r} is not a log entry id (MS-SEQ, e.g. 1795398237060-0; "
                               "`memstream export` prints each event's entry_id)") from None
    eventlog = _connect(settings)
    bad = 0
    count = 0
    for stream, entry_id, fields in eventlog.entries(since=args.since or "-"):
        try:
            event = to_builtins(eventlog.decode_entry(fields))
        except ValueError as exc:
            bad += 1
            print(f"memstream export: entry {entry_id} of {stream} is not a valid event: {exc}", file=sys.stderr)
            continue
        sys.stdout.write(json.dumps({"stream": stream, "entry_id": entry_id, **event}, ensure_ascii=False) + "\n")
        count += 1
    print(f"memstream export: {count} events" + (f", {bad} undecodable (skipped)" if bad else ""), file=sys.stderr)
    return 0


# -- add -----------------------------------------------------------------------------------
def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    text, problems = clean_text(args.text, settings.max_text_bytes)
    if not text.strip():
        raise CommandError("nothing to add: TEXT is empty")
    event = MemoryWritten(
        id=new_event_id(), occurred_at=utcnow(),
        scope=Scope(tenant=args.tenant or settings.tenant, app=settings.app, agent=args.agent,
                    session_id=args.session, platform="cli"),
        clipped=["content"] if "clipped" in problems else [],
        action="add", target=args.target, content=text, origin="memstream-cli")
    if args.sync:
        eventlog = _connect(settings)
        entry = eventlog.append([event])[0]
        state = _wait_projected(eventlog, event, entry, args.timeout)
        _print(args, {"id": event.id, "entry_id": entry, "state": state},
               f"added {event.id} (log entry {entry}, {state})")
        return 0 if state == "searchable" else 1
    writer = Writer.shared(settings)
    writer.emit(event)
    shipped = writer.flush(settings.shutdown_timeout)
    writer.release(0.5)
    state = "logged" if shipped else "spooled"
    _print(args, {"id": event.id, "state": state},
           f"added {event.id}" + ("" if shipped else " (spooled: it ships when the log is reachable)"))
    return 0


def _wait_projected(eventlog: EventLog, event, entry: str, timeout: float) -> str:
    """Read-your-writes: wait until every projection group has applied ``entry``."""

    from workers.consumer import DeadLetters, is_applied

    stream = eventlog.stream_for(event.scope.tenant, event.scope.agent)
    groups = ["memories.v1", "facts.v1"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(is_applied(eventlog.client, stream, g, entry) for g in groups):
            # applied, or dead-lettered: a dead letter is out of the group's pending list too
            dead = [d for d in DeadLetters(eventlog.client, eventlog.prefix).list(count=100000)
                    if d.get("entry_id") == entry and d.get("group") in groups]
            if dead:
                return f"dead-lettered in {dead[0]['group']}: {dead[0].get('error', '')[:200]}"
            return "searchable"
        time.sleep(0.02)
    return "logged (not yet projected: are the workers running?)"


# -- search / dlq / worker -------------------------------------------------------------
def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from workers.queries import QueryTimeout, ask

    eventlog = _connect(settings)
    request = {"op": "search", "query": args.query, "tenant": args.tenant or settings.tenant,
               "agent": args.agent, "scope": args.scope, "k": args.k}
    try:
        answer = ask(eventlog.client, eventlog.prefix, request, timeout=args.timeout)
    except QueryTimeout as exc:
        raise CommandError(str(exc)) from exc
    if "error" in answer:
        raise CommandError(f"search failed: {answer['error']}")
    results = answer.get("results", [])
    lines = [f"{r['score']:.3f} [{r['kind']}] {r['agent']} {r['occurred_at']}: {r['text']}" for r in results]
    _print(args, {"results": results}, "\n".join(lines) or "no results")
    return 0


def cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    from workers.consumer import DeadLetters

    eventlog = _connect(settings)
    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    if args.action == "list":
        items = dlq.list(count=args.count, group=args.group or None)
        lines = [f"{i['dlq_id']} {i.get('group')} {i.get('stream')} {i.get('entry_id')} "
                 f"{i.get('type', '?')} deliveries={i.get('deliveries')}: {i.get('error')}" for i in items]
        _print(args, {"dead_letters": items}, "\n".join(lines) or "no dead letters")
        return 0
    if not args.ids:
        raise CommandError(f"dlq {args.action} needs one or more DLQ ids (see `memstream dlq list`)")
    done = {}
    for dlq_id in args.ids:
        done[dlq_id] = dlq.retry(dlq_id) if args.action == "retry" else dlq.drop(dlq_id)
    _print(args, {args.action: done}, "\n".join(f"{k}: {v}" for k, v in done.items()))
    return 0 if all(done.values()) else 1


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    import signal
    import threading

    from workers.pipeline import Pipeline, PipelineConfig

    from projections.store import StoreError

    if not settings.redis_url:
        raise CommandError("in embedded mode `memstream up` runs the workers (the embedded store "
                           "admits one process); set MEMSTREAM_REDIS_URL and MEMSTREAM_QDRANT_URL "
                           "to run workers on several hosts")
    if not settings.qdrant_url and not args.embedded_store:
        raise CommandError("set MEMSTREAM_QDRANT_URL: workers on several hosts must share one Qdrant "
                           "server (each embedded store would hold only the events its worker took); "
                           "--embedded-store runs a single worker on this host's embedded store")
    configure("INFO")
    try:
        pipeline = Pipeline(settings, _connect(settings), PipelineConfig.of(settings, consumer=args.name)).start()
    except StoreError as exc:
        raise CommandError(f"cannot open the projections' store: {exc}") from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    pipeline.stop()  # each consumer finishes its batch
    return 0


# -- install-hermes / bench --------------------------------------------------------------------
def cmd_install_hermes(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from .hermes_install import install

    result = install(Path(args.home).expanduser() if args.home else None)
    _print(args, result, f"installed the memstream plugin into {result.get('plugin_dir')} "
                         f"and selected it (memory.provider: memstream in {result.get('config')})")
    return 0


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from . import bench

    if args.which == "hotpath":
        result = bench.hotpath(calls=args.calls)
        _print(args, result, bench.format_hotpath(result))
        return 0
    if args.which == "ingest":
        from . import bench_ingest

        result = bench_ingest.ingest(events=args.events, as_json=args.json, data=args.data or None,
                                     runs=args.runs)
        _print(args, result, bench_ingest.format_ingest(result))
        return 0
    if args.which == "prefetch":
        from . import bench_prefetch

        sizes = tuple(int(x) for x in args.sizes.split(",") if x.strip())
        if not sizes or min(sizes) < 1 or list(sizes) != sorted(sizes):
            raise CommandError(f"--sizes: ascending positive counts, e.g. 10000,100000 (got {args.sizes!r})")
        result = bench_prefetch.prefetch_bench(sizes=sizes, queries=args.queries,
                                               embedder=args.embedder or "hash")
        _print(args, result, bench_prefetch.format_prefetch(result))
        return 0
    if args.which == "locomo":
        from . import bench_locomo

        if not args.data:
            raise CommandError("bench locomo needs --data DIR (the LoCoMo directory: locomo10_turns.jsonl, "
                               "locomo10_qrels.jsonl)")
        try:
            result = bench_locomo.locomo(args.data, split=args.split, embedder=args.embedder or "onnx-minilm")
        except bench_locomo.BenchDataError as exc:
            raise CommandError(str(exc)) from exc
        _print(args, result, bench_locomo.format_locomo(result))
        return 0
    raise CommandError(f"unknown benchmark {args.which!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description="Event-sourced memory for Hermes agents.")
    parser.add_argument("--version", action="version", version=f"memstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)
        return p

    p = add("up", cmd_up, "run the memstream service (embedded Valkey unless MEMSTREAM_REDIS_URL is set)")
    p.add_argument("--detach", action="store_true", help="run it in the background")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    add("down", cmd_down, "stop the background memstream service")
    add("doctor", cmd_doctor, "check configuration, Redis, streams, spool and the Hermes plugin")
    add("stats", cmd_stats, "per-stream length, first/last id, events per type, spool size")
    p = add("export", cmd_export, "every event in the log as JSON lines, oldest first")
    p.add_argument("--since", default="", help="only entries after this stream entry id")
    p = add("add", cmd_add, "append a memory write by hand")
    p.add_argument("--sync", action="store_true", help="append directly and fail if the log is unreachable")
    p.add_argument("--tenant", default="", help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", default="default", help="agent identity")
    p.add_argument("--session", default="", help="session id")
    p.add_argument("--target", choices=["memory", "user"], default="memory")
    p.add_argument("text", help="the memory to add")
    p.add_argument("--timeout", type=float, default=10.0, help="--sync: seconds to wait for the projections")
    p = add("search", cmd_search, "search the projections (turns, memories, facts)")
    p.add_argument("--tenant", default="", help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", default="default", help="the asking agent")
    p.add_argument("--scope", default="current", help="current | all | AGENT")
    p.add_argument("-k", type=int, default=10, help="results")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("query")
    p = add("dlq", cmd_dlq, "inspect and replay dead letters")
    p.add_argument("action", choices=["list", "retry", "drop"])
    p.add_argument("ids", nargs="*", help="DLQ ids (retry/drop)")
    p.add_argument("--group", default="", help="only this projection group (list)")
    p.add_argument("--count", type=int, default=100)
    p = add("worker", cmd_worker, "run projection workers against a shared Redis and Qdrant")
    p.add_argument("--embedded-store", action="store_true",
                   help="no Qdrant server: one worker owning the embedded store under MEMSTREAM_HOME")
    p.add_argument("--name", default="", help="stable consumer name (default: host name)")
    p = add("install-hermes", cmd_install_hermes, "install the memstream plugin into a Hermes home and select it")
    p.add_argument("--home", default="", help="Hermes home (default: $HERMES_HOME or ~/.hermes)")
    p = add("bench", cmd_bench, "benchmarks")
    p.add_argument("which", choices=["hotpath", "ingest", "prefetch", "locomo"])
    p.add_argument("--calls", type=int, default=2000, help="hotpath: hook calls per burst")
    p.add_argument("--events", type=int, default=1000, help="ingest: events per pipeline drain")
    p.add_argument("--data", default="", help="ingest: LoCoMo turns JSONL (default: generated text if absent); "
                   "locomo: the LoCoMo directory")
    p.add_argument("--split", default="dev", choices=["dev", "test", "all"], help="locomo: conversations to run")
    p.add_argument("--runs", type=int, default=4,
                   help="ingest: runs per measurement (pipeline and raw alternate which goes first)")
    p.add_argument("--sizes", default="10000,100000", help="prefetch: memory counts to measure at, ascending")
    p.add_argument("--queries", type=int, default=200, help="prefetch: questions per size")
    p.add_argument("--embedder", default="", help="embedder of the benchmark's pipeline (prefetch: default hash; locomo: onnx-minilm)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure("WARNING")
    settings = Settings.load()
    try:
        return int(args.func(args, settings) or 0)
    except CommandError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": str(exc)}))
        print(f"memstream {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
