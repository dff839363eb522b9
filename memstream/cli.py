"""The ``memstream`` command. Every subcommand takes ``--json``.

Exit codes: 0 success; 1 the command ran but the answer is "not ok" (doctor), the log is
unreachable, or the command failed; 2 usage errors (argparse: every argument is checked
before anything runs); 130 interrupted (Ctrl-C).

Guarantee: ``main()`` returns an exit code and lets no exception out. A failure is one
line on stderr, ``memstream CMD: error: ...`` (and ``{"ok": false, "error": ...}`` on
stdout with ``--json``); an unexpected exception is one line naming its type, with the
traceback only when ``MEMSTREAM_DEBUG=1``. A closed stdout (``memstream search ... | head``)
ends the command quietly. Memory text printed for a person is cut to ``TEXT_CUT``
characters with a note of how much was cut; ``--json`` and ``export`` carry it whole.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from typing import Any

import redis

from memstream import __version__
from memstream.core import (
    PermanentError,
    Settings,
    configure,
    keys,
    mask_url,
    new_event_id,
)
from memstream.producers import (
    EventLog,
    LogLocator,
    MemoryWritten,
    Scope,
    Writer,
    spool_usage,
    to_builtins,
    utcnow,
)
from memstream.text import clean_text

__all__ = ["main"]


class CommandError(PermanentError):
    """A command failed in a way the user can act on (message says how).

    Permanent: the command as given fails the same way again until the user acts."""


# -- argument types: every value is checked at parse time (usage error, exit 2) --------
NAME_MAX = 256  # tenant, agent, session, scope, group, worker name: characters
QUERY_MAX = 4096  # search query: characters
K_MAX = 50  # search results: the query server's bound
TIMEOUT_MAX = 3600.0  # seconds
COUNT_MAX = 100_000  # dlq list
_U64 = (1 << 64) - 1
_ENTRY_ID = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _shown(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= TIMEOUT_MAX):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number above 0 and at most "
                                         f"{TIMEOUT_MAX:g} (got {_shown(text)})")
    return value


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of minutes") from None
    if not (math.isfinite(value) and 0 < value <= 24 * 60):
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most a day (got {_shown(text)})")
    return value


def _int_between(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high} (got {value})")
        return value

    parse.__name__ = f"int {low}..{high}"
    return parse


def _entry_id(text: str) -> str:
    """A stream entry id ``MS[-SEQ]``, each part a 64-bit unsigned number."""
    match = _ENTRY_ID.fullmatch(text)
    if not match or int(match.group(1)) > _U64 or int(match.group(2) or 0) > _U64:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a log entry id (MS-SEQ, e.g. 1795398237060-0, each part at most "
            f"{_U64}; `memstream export` prints each event's entry_id)")
    return text


def _name(what: str, limit: int = NAME_MAX):
    def parse(text: str) -> str:
        if not text.strip() or len(text) > limit or not text.isprintable():
            raise argparse.ArgumentTypeError(f"{what} must be 1 to {limit} printable characters, "
                                             f"not all spaces (got {_shown(text)})")
        return text

    parse.__name__ = what
    return parse


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or max(sizes) > 10_000_000 or list(sizes) != sorted(sizes):
        raise argparse.ArgumentTypeError(f"ascending positive counts, e.g. 10000,100000 (got {_shown(text)})")
    return sizes


# -- terminal output -------------------------------------------------------------------
TEXT_CUT = 300  # characters of memory text shown per item; --json carries it whole
ERROR_CUT = 300  # characters of an error message (dead letters) shown per item
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _cut(text: object, limit: int = TEXT_CUT) -> str:
    """``text`` for one terminal line: control characters (escape sequences from the shared
    Redis included) shown as spaces, cut to ``limit`` characters with a note of the rest."""
    text = _CONTROL.sub(" ", str(text))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters; --json shows all]"


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
    from memstream.service import AlreadyRunning, Service, detach

    if args.detach:
        info = detach(settings)
        info = {**info, "url": mask_url(str(info.get("url", "")))}  # the password stays in the run file
        _print(args, info, None if args.quiet else
               f"memstream service {'already ' if info.get('already_running') else ''}running "
               f"(pid {info['pid']}) at {info['url']}")
        return 0
    configure("INFO")
    service = Service(settings)
    try:
        info = service.start()
    except AlreadyRunning as exc:
        exc.info["url"] = mask_url(str(exc.info.get("url", "")))
        _print(args, {**exc.info, "already_running": True},
               f"memstream service already running (pid {exc.info.get('pid')}) at {exc.info.get('url')}")
        return 0
    except KeyboardInterrupt:  # Ctrl-C while starting: stop what did start
        service.close()
        return 130
    service.handle_signals()  # before saying so: from here a Ctrl-C stops it cleanly
    info = {**info, "url": mask_url(str(info.get("url", "")))}
    if not args.quiet:
        _print(args, info, f"memstream service running at {info['url']} (home {settings.home}); Ctrl-C stops it")
        sys.stdout.flush()
    service.serve()
    return 0


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.service import stop_service

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
        try:
            server = eventlog.client.info("server")
        except redis.exceptions.NoPermissionError:  # a tenant's credentials: PING only
            return {"ok": True, "mode": mode, "url": mask_url(url),
                    "redis_version": "not shown to a tenant's credentials"}, eventlog
    except redis.RedisError as exc:
        return {"ok": False, "mode": mode, "url": mask_url(url),
                "error": f"{type(exc).__name__}: {exc}"}, None
    version = str(server.get("redis_version", "0"))
    major = int(version.split(".")[0] or 0)
    check = {"ok": major >= 7, "mode": mode, "url": mask_url(url),
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
    from memstream.hermes import check as hermes_check

    checks: dict[str, dict] = {}
    checks["config"] = {"ok": not settings.problems, "problems": list(settings.problems),
                        "settings": settings.public()}
    if settings.problems:
        checks["config"]["error"] = "; ".join(settings.problems)
    checks["embedder"] = _check_embedder(settings)
    checks["redis"], eventlog = _check_redis(settings)
    if eventlog is not None:
        try:
            checks["streams"] = {"ok": True, "streams": _streams(eventlog)}
        except redis.exceptions.NoPermissionError:
            checks["streams"] = {"ok": True, "note": "a tenant's credentials append to the streams but may not read them"}
        checks["queries"] = _check_queries(eventlog, settings.tenant)
        checks["tenants"] = _check_tenants(eventlog)
        try:
            checks["projections"] = _check_projections(eventlog, settings.stall_after_s)
        except redis.exceptions.NoPermissionError:
            checks["projections"] = {"ok": True, "note": "a tenant's credentials may not read the projections' "
                                                         "positions: run doctor with the operator's to check them"}
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
        detail = c.get("error") or ", ".join(f"{k}={'unknown' if v is None else v}" for k, v in c.items()
                                             if k not in ("ok", "settings", "streams", "problems") and not isinstance(v, (dict, list)))
        lines.append(f"  [{'ok' if c.get('ok') else 'FAIL'}] {name}: {detail}")
    _print(args, result, "\n".join(lines))
    return 0 if ok else 1


def _check_embedder(settings: Settings) -> dict:
    """The embedder the projections would use, as configured (nothing loaded, nothing asked):
    its spec, URL (masked) and model, vector size (None: learnt from its first answer) and
    threads; fails when the spec names no embedder or a remote one lacks its model."""
    from memstream.projections import EmbedderError, describe_embedder

    try:
        return {"ok": True, **describe_embedder(settings)}
    except EmbedderError as exc:
        return {"ok": False, "embedder": settings.embedder, "error": str(exc)}


def _check_tenants(eventlog: EventLog) -> dict:
    """Whether tenants are separated (see Security in the README): informational."""
    from memstream.producers import TenantRegistry

    try:
        tenants = TenantRegistry(eventlog.client, eventlog.prefix).all(fresh=True)
    except redis.exceptions.NoPermissionError:
        return {"ok": True, "credentials": "a tenant's (append, own queries only)"}
    if not tenants:
        return {"ok": True, "registered": 0,
                "note": "no tenant registered: any holder of these Redis credentials writes and reads for any tenant"}
    return {"ok": True, "registered": len(tenants), "credentials": "the operator's",
            "enforced": "events must be signed by their registered tenant"}


def _check_queries(eventlog: EventLog, tenant: str) -> dict:
    """Whether a query server (the service or a worker) answers: recall and tools need one.
    Informational: workers may live on other hosts and be restarting; events still spool.
    Asks as the agents do (``exists`` in this tenant), so it works with a tenant's
    credentials too."""
    from memstream.query import QueryRefused, QueryTimeout, ask

    started = time.perf_counter()
    try:
        answer = ask(eventlog.client, eventlog.prefix, {"op": "exists", "tenant": tenant, "id": "doctor-check"},
                     timeout=2.0)
    except (QueryTimeout, QueryRefused, redis.RedisError) as exc:
        return {"ok": True, "answering": False,
                "warning": f"no query server answered ({type(exc).__name__}): start `memstream up` or a "
                           "`memstream worker`; until then prefetch injects nothing and tools return errors"}
    return {"ok": True, "answering": "error" not in answer,
            "round_trip_ms": round((time.perf_counter() - started) * 1000, 1)}


_GROUPS = ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")


def _health(eventlog: EventLog, group: str, stall_after_s: float) -> dict:
    """``memstream.workers.health.projection_health`` of ``group`` (positions as progress too)."""
    from memstream.workers import Positions, projection_health

    pos = Positions(eventlog.client, eventlog.prefix).get(group)
    applied = max((p["applied_at"] for p in pos.values()), default=0.0)
    return projection_health(eventlog.client, eventlog.prefix, eventlog.stream_keys, group,
                             threshold=stall_after_s, applied_at=applied)


def _check_projections(eventlog: EventLog, stall_after_s: float) -> dict:
    """Fails when a projection has entries waiting and made no progress for
    ``stall_after_s`` (``MEMSTREAM_STALL_AFTER_S``): its group, for how long, its last error."""
    health = {g: _health(eventlog, g, stall_after_s) for g in _GROUPS}
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


def _projection_stats(eventlog: EventLog, stall_after_s: float) -> dict:
    """Per projection group: position, lag, pending, dead letters, freshness, items."""

    from memstream.projections import Counters, FactsTable
    from memstream.workers import DeadLetters, Positions

    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    dead = {}
    for item in dlq.list(count=100000):
        dead[item.get("group")] = dead.get(item.get("group"), 0) + 1
    positions = Positions(eventlog.client, eventlog.prefix)
    # points in the stores, counted by the process that holds them (the service or a worker)
    try:
        from memstream.query import QueryTimeout, ask

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
            "health": _health(eventlog, group, stall_after_s),
        }
    return out


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    eventlog = _connect(settings)
    usage = spool_usage(settings.spool_dir) if settings.spool_dir.exists() else {}
    losses = {(k.decode() if isinstance(k, bytes) else k): int(v)
              for k, v in eventlog.client.hgetall(keys.spool_counters(eventlog.prefix)).items()}
    result = {"streams": _streams(eventlog), "types": eventlog.type_counts(), "spool": usage,
              "spool_losses": losses, "projections": _projection_stats(eventlog, settings.stall_after_s)}
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
def _read_text(source, name: str, limit: int) -> tuple[str, bool]:
    """(text, more): at most ``limit`` UTF-8 bytes of the binary stream ``source`` decoded
    (strictly: invalid UTF-8 is an error), ``more`` when the input goes on past them."""
    data = source.read(limit + 1)
    more = len(data) > limit
    data = data[:limit]
    try:
        return data.decode("utf-8"), more
    except UnicodeDecodeError as exc:
        if more and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8"), more  # a character cut by the bound
        raise CommandError(f"{name} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def _add_text(args: argparse.Namespace, limit: int) -> tuple[str, str, bool]:
    """(text, where it came from, more than ``limit`` bytes): TEXT, ``-`` (stdin) or --file."""
    if args.file is not None:
        try:
            with open(args.file, "rb") as source:
                text, more = _read_text(source, args.file, limit)
        except FileNotFoundError:
            raise CommandError(f"--file {args.file}: no such file") from None
        except IsADirectoryError:
            raise CommandError(f"--file {args.file}: is a directory, not a file") from None
        except OSError as exc:
            raise CommandError(f"--file {args.file}: cannot read it ({exc.strerror or exc})") from None
        except ValueError:  # a NUL in the path
            raise CommandError(f"--file {args.file!r} is not a valid path") from None
        return text, args.file, more
    if args.text == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise CommandError("`add -` reads the text from stdin, and there is no stdin")
        text, more = _read_text(stdin, "stdin", limit)
        return text, "stdin", more
    if args.text is None:
        raise CommandError("nothing to add: give TEXT, `-` to read stdin, or --file PATH")
    return args.text, "TEXT", len(args.text.encode("utf-8", "replace")) > limit


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    raw, where, more = _add_text(args, settings.max_text_bytes)
    if where != "TEXT" and not more:
        raw = raw.removesuffix("\n").removesuffix("\r")  # the file's (or echo's) final newline
    text, problems = clean_text(raw, settings.max_text_bytes)
    if more and "clipped" not in problems:
        # only the bound's worth was read: one more character makes clean_text clip it
        # exactly as the writer clips the whole text (the same prefix, the same mark)
        text, problems = clean_text(raw + " ", settings.max_text_bytes)
    if not text.strip():
        raise CommandError(f"nothing to add: the text ({where}) is empty")
    if "clipped" in problems:
        print(f"memstream add: the text ({where}) is over MEMSTREAM_MAX_TEXT_BYTES="
              f"{settings.max_text_bytes} bytes: stored clipped to that bound, flagged clipped", file=sys.stderr)
    event = MemoryWritten(
        id=new_event_id(), occurred_at=utcnow(),
        scope=Scope(tenant=args.tenant or settings.tenant, app=settings.app, agent=args.agent,
                    session_id=args.session or "", platform="cli"),
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

    from memstream.workers import DeadLetters, is_applied

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
    from memstream.query import QueryRefused, QueryTimeout, ask

    eventlog = _connect(settings)
    request = {"op": "search", "query": args.query, "tenant": args.tenant or settings.tenant,
               "agent": args.agent, "scope": args.scope, "k": args.k}
    try:
        answer = ask(eventlog.client, eventlog.prefix, request, timeout=args.timeout)
    except (QueryTimeout, QueryRefused) as exc:
        raise CommandError(str(exc)) from exc
    if "error" in answer:
        raise CommandError(f"search failed: {answer['error']}")
    results = answer.get("results", [])
    lines = [_search_line(r) for r in results if isinstance(r, dict)]
    _print(args, {"results": results}, "\n".join(lines) or "no results")
    return 0


def _search_line(result: dict) -> str:
    score = result.get("score")
    shown = f"{score:.3f}" if isinstance(score, (int, float)) else "?"
    return (f"{shown} [{_cut(result.get('kind'), 40)}] {_cut(result.get('agent'), 80)} "
            f"{_cut(result.get('occurred_at'), 40)}: {_cut(result.get('text', ''))}")


def cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.workers import DeadLetters

    eventlog = _connect(settings)
    dlq = DeadLetters(eventlog.client, eventlog.prefix)
    if args.action == "list":
        items = dlq.list(count=args.count, group=args.group or None)
        lines = [" ".join(_cut(i.get(k, "?"), 80) for k in ("dlq_id", "group", "stream", "entry_id", "type"))
                 + f" deliveries={_cut(i.get('deliveries'), 20)}: {_cut(i.get('error'), ERROR_CUT)}"
                 for i in items]
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

    from memstream.projections import StoreError, StoreUnavailable
    from memstream.workers import Pipeline, PipelineConfig

    if not settings.redis_url:
        raise CommandError("in embedded mode `memstream up` runs the workers (the embedded store "
                           "admits one process); set MEMSTREAM_REDIS_URL and MEMSTREAM_QDRANT_URL "
                           "to run workers on several hosts")
    if not settings.qdrant_url and not args.embedded_store:
        raise CommandError("set MEMSTREAM_QDRANT_URL: workers on several hosts must share one Qdrant "
                           "server (each embedded store would hold only the events its worker took); "
                           "--embedded-store runs a single worker on this host's embedded store")
    configure("INFO")
    from memstream.core import PRIVATE_UMASK, private_dir

    os.umask(PRIVATE_UMASK)  # the embedded store and the embedding cache: owner-only
    private_dir(settings.home)
    try:
        pipeline = Pipeline(settings, _connect(settings), PipelineConfig.of(settings, consumer=args.name or "")).start()
    except (StoreError, StoreUnavailable) as exc:  # StoreLocked: another process holds it
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

    from memstream.hermes import install

    result = install(Path(args.home).expanduser() if args.home else None)
    _print(args, result, f"installed the memstream plugin into {result.get('plugin_dir')} "
                         f"and selected it (memory.provider: memstream in {result.get('config')})")
    return 0


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.bench import hotpath as bench

    if args.which == "hotpath":
        result = bench.hotpath(calls=args.calls)
        _print(args, result, bench.format_hotpath(result))
        return 0
    if args.which == "ingest":
        from memstream.bench import ingest as bench_ingest

        result = bench_ingest.ingest(events=args.events, as_json=args.json, data=args.data or None,
                                     runs=args.runs or 4)
        _print(args, result, bench_ingest.format_ingest(result))
        return 0
    if args.which == "prefetch":
        from memstream.bench import prefetch as bench_prefetch

        result = bench_prefetch.prefetch_bench(sizes=args.sizes or (10000, 100000), queries=args.queries,
                                               embedder=args.embedder or "hash")
        _print(args, result, bench_prefetch.format_prefetch(result))
        return 0
    if args.which == "locomo":
        from memstream.bench import locomo as bench_locomo

        if not args.data:
            raise CommandError("bench locomo needs --data DIR (the LoCoMo directory: locomo10_turns.jsonl, "
                               "locomo10_qrels.jsonl)")
        try:
            result = bench_locomo.locomo(args.data, split=args.split, embedder=args.embedder or "onnx-minilm")
        except bench_locomo.BenchDataError as exc:
            raise CommandError(str(exc)) from exc
        _print(args, result, bench_locomo.format_locomo(result))
        return 0
    if args.which == "chaos":
        from memstream.bench import chaos as bench_chaos

        result = bench_chaos.chaos_bench(minutes=args.minutes, agents=args.agents, seed=args.seed)
        _print(args, result, bench_chaos.format_chaos(result))
        return 0
    if args.which == "queries":
        from memstream.bench import queries as bench_queries

        result = bench_queries.queries_bench(queries=args.queries, rounds=args.runs or 4)
        _print(args, result, bench_queries.format_queries(result))
        return 0
    if args.which == "text":
        from memstream.bench import text as bench_text

        result = bench_text.text_bench(sizes_kib=args.sizes or (16, 64, 256), runs=args.runs or 5)
        _print(args, result, bench_text.format_text(result))
        return 0
    raise CommandError(f"unknown benchmark {args.which!r}")


# -- tenants -------------------------------------------------------------------------------
def cmd_tenant(args: argparse.Namespace, settings: Settings) -> int:
    """Register tenants: an ACL user each, whose credentials an agent host of that tenant
    uses (see producers/tenants.py). Needs the operator's credentials."""
    from urllib.parse import quote, urlsplit, urlunsplit

    from memstream.producers import TenantError, TenantRegistry

    eventlog = _connect(settings)
    registry = TenantRegistry(eventlog.client, eventlog.prefix)
    try:
        if args.action == "list":
            tenants = registry.all(fresh=True)
            rows = [{"tenant": t.name, "user": t.user, "created_at": t.created_at} for t in tenants.values()]
            _print(args, {"tenants": rows}, "\n".join(f"{r['tenant']} (user {r['user']})" for r in rows)
                   or "no tenants registered: every host with the Redis credentials may write for any tenant")
            return 0
        if not args.name:
            raise CommandError(f"tenant {args.action} needs a tenant name")
        if args.action == "remove":
            removed = registry.remove(args.name)
            _print(args, {"removed": removed, "tenant": args.name},
                   f"tenant {args.name} {'removed' if removed else 'was not registered'}")
            return 0 if removed else 1
        tenant, password = registry.add(args.name, rotate=args.rotate)
    except TenantError as exc:
        raise CommandError(str(exc)) from exc
    except redis.exceptions.NoPermissionError as exc:
        raise CommandError(f"these credentials may not manage tenants ({exc}): use the operator's") from exc
    base = urlsplit(LogLocator(settings, autostart=False).url() or "")
    host = base.hostname or "127.0.0.1"
    netloc = f"{quote(tenant.user, safe='')}:{quote(password, safe='')}@{host}" + (f":{base.port}" if base.port else "")
    url = urlunsplit((base.scheme or "redis", netloc, base.path or "/0", "", ""))
    _print(args, {"tenant": tenant.name, "user": tenant.user, "redis_url": url},
           f"tenant {tenant.name}: its agent hosts set\n"
           f"  MEMSTREAM_TENANT={tenant.name}\n  MEMSTREAM_REDIS_URL={url}\n"
           "The password is shown once (Redis keeps only its hash); `--rotate` issues a new one.")
    return 0


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
    p.add_argument("--since", type=_entry_id, help="only entries after this stream entry id")
    p = add("add", cmd_add, "append a memory write by hand")
    p.add_argument("--sync", action="store_true", help="append directly and fail if the log is unreachable")
    p.add_argument("--tenant", type=_name("tenant"), help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", default="default", type=_name("agent"), help="agent identity")
    p.add_argument("--session", type=_name("session"), help="session id")
    p.add_argument("--target", choices=["memory", "user"], default="memory")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("text", nargs="?", help="the memory to add; - reads it from stdin")
    source.add_argument("--file", metavar="PATH", help="read the memory from this UTF-8 file")
    p.add_argument("--timeout", type=_seconds, default=10.0, help="--sync: seconds to wait for the projections")
    p = add("search", cmd_search, "search the projections (turns, memories, facts)")
    p.add_argument("--tenant", type=_name("tenant"), help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", default="default", type=_name("agent"), help="the asking agent")
    p.add_argument("--scope", default="current", type=_name("scope"), help="current | all | AGENT")
    p.add_argument("-k", type=_int_between(1, K_MAX), default=10, help=f"results (1 to {K_MAX})")
    p.add_argument("--timeout", type=_seconds, default=10.0, help="seconds to wait for the answer")
    p.add_argument("query", type=_name("query", QUERY_MAX))
    p = add("dlq", cmd_dlq, "inspect and replay dead letters")
    p.add_argument("action", choices=["list", "retry", "drop"])
    p.add_argument("ids", nargs="*", type=_entry_id, help="DLQ ids (retry/drop)")
    p.add_argument("--group", type=_name("group"), help="only this projection group (list)")
    p.add_argument("--count", type=_int_between(1, COUNT_MAX), default=100,
                   help=f"at most this many (1 to {COUNT_MAX})")
    p = add("worker", cmd_worker, "run projection workers against a shared Redis and Qdrant")
    p.add_argument("--embedded-store", action="store_true",
                   help="no Qdrant server: one worker owning the embedded store under MEMSTREAM_HOME")
    p.add_argument("--name", type=_name("name"), help="stable consumer name (default: host name)")
    p = add("tenant", cmd_tenant, "register tenants: a Redis user each, limited to its own data")
    p.add_argument("action", choices=["add", "list", "remove"])
    p.add_argument("name", nargs="?", default="", help="tenant name (add, remove)")
    p.add_argument("--rotate", action="store_true", help="add: issue a new password for an existing tenant")
    p = add("install-hermes", cmd_install_hermes, "install the memstream plugin into a Hermes home and select it")
    p.add_argument("--home", default="", help="Hermes home (default: $HERMES_HOME or ~/.hermes)")
    p = add("bench", cmd_bench, "benchmarks")
    p.add_argument("which", choices=["hotpath", "ingest", "prefetch", "locomo", "queries", "chaos", "text"])
    p.add_argument("--minutes", type=_minutes, default=2.0, help="chaos: how long things break")
    p.add_argument("--agents", type=_int_between(1, 64), default=4, help="chaos: agent processes")
    p.add_argument("--seed", type=_int_between(0, 2**32 - 1), default=0, help="chaos: the random choices")
    p.add_argument("--calls", type=_int_between(1, 10_000_000), default=2000, help="hotpath: hook calls per burst")
    p.add_argument("--events", type=_int_between(1, 10_000_000), default=1000,
                   help="ingest: events per pipeline drain")
    p.add_argument("--data", default="", help="ingest: LoCoMo turns JSONL (default: generated text if absent); "
                   "locomo: the LoCoMo directory")
    p.add_argument("--split", default="dev", choices=["dev", "test", "all"], help="locomo: conversations to run")
    p.add_argument("--runs", type=_int_between(1, 1000), default=None,
                   help="ingest: runs per measurement (pipeline and raw alternate which goes first; default 4); "
                   "text: runs per median (default 5); queries: rounds (default 4)")
    p.add_argument("--sizes", type=_sizes, default=None,
                   help="prefetch: memory counts to measure at, ascending (default 10000,100000); "
                   "text: sizes in KiB (default 16,64,256)")
    p.add_argument("--queries", type=_int_between(1, 1_000_000), default=200,
                   help="prefetch: questions per size; queries: round trips per round")
    p.add_argument("--embedder", default="", help="embedder of the benchmark's pipeline (prefetch: default hash; locomo: onnx-minilm)")
    return parser


def _one_line(text: str, limit: int = 1000) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null: the interpreter's flush at exit then
    writes nowhere instead of raising BrokenPipeError again (and printing it)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (in-process)
        pass


def _fail(args: argparse.Namespace | None, prog: str, message: str) -> int:
    message = _one_line(message)
    try:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": message}))
            sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code (see the module docstring). Never raises."""
    args: argparse.Namespace | None = None
    prog = "memstream"
    for stream in (sys.stdout, sys.stderr):  # an argument from undecodable bytes must not crash a print
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # usage errors (2), --help and --version (0)
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        prog = f"memstream {args.command}"
        configure("WARNING")
        settings = Settings.load()
        if args.command != "doctor":  # doctor reports them as its config check
            for problem in settings.problems:
                print(f"{prog}: warning: {_one_line(problem)}", file=sys.stderr)
        code = int(args.func(args, settings) or 0)
        sys.stdout.flush()  # here, not at exit: a closed stdout is handled below
        return code
    except BrokenPipeError:  # stdout closed by the reader (`| head`): nothing left to say
        _stdout_to_devnull()
        return 1
    except KeyboardInterrupt:
        return 130
    except CommandError as exc:
        return _fail(args, prog, str(exc))
    except redis.RedisError as exc:
        return _fail(args, prog, f"Redis: {type(exc).__name__}: {exc}")
    except Exception as exc:
        if os.environ.get("MEMSTREAM_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()
        return _fail(args, prog, f"unexpected {type(exc).__name__}: {exc} "
                                 "(MEMSTREAM_DEBUG=1 shows the traceback)")


if __name__ == "__main__":
    raise SystemExit(main())
