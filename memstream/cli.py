"""The ``memstream`` command. Every subcommand takes ``--json``.

Exit codes: 0 success; 1 the command ran but the answer is "not ok" (doctor) or the
log is unreachable; 2 usage errors (argparse).
"""

from __future__ import annotations

import argparse
import json
import sys
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
        info["groups"] = [{k if isinstance(k, str) else k.decode(): (v.decode() if isinstance(v, bytes) else v)
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


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    eventlog = _connect(settings)
    usage = spool_usage(settings.spool_dir) if settings.spool_dir.exists() else {}
    result = {"streams": _streams(eventlog), "types": eventlog.type_counts(), "spool": usage}
    lines = [f"{s['stream']}: {s['length']} events, first {s['first_id']}, last {s['last_id']}"
             for s in result["streams"]]
    lines += [f"  {t}: {n}" for t, n in result["types"].items()]
    if usage:
        lines.append(f"spool: {usage['segments']} segments, {usage['unshipped_bytes']} bytes unshipped, "
                     f"{usage['quarantined']} quarantined")
    _print(args, result, "\n".join(lines))
    return 0


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
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
        entry = _connect(settings).append([event])[0]
        _print(args, {"id": event.id, "entry_id": entry, "state": "logged"},
               f"added {event.id} (log entry {entry})")
        return 0
    writer = Writer.shared(settings)
    writer.emit(event)
    shipped = writer.flush(settings.shutdown_timeout)
    writer.release(0.5)
    state = "logged" if shipped else "spooled"
    _print(args, {"id": event.id, "state": state},
           f"added {event.id}" + ("" if shipped else " (spooled: it ships when the log is reachable)"))
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
    p = add("install-hermes", cmd_install_hermes, "install the memstream plugin into a Hermes home and select it")
    p.add_argument("--home", default="", help="Hermes home (default: $HERMES_HOME or ~/.hermes)")
    p = add("bench", cmd_bench, "benchmarks")
    p.add_argument("which", choices=["hotpath"])
    p.add_argument("--calls", type=int, default=2000, help="hook calls per burst")
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
