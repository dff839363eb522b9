"""The ``memstream`` command: the parser, ``main`` and one function per command. Every
subcommand takes ``--json``. A command function parses nothing more, calls
``memstream.ops`` (or the service, bench and hermes packages) and prints
(``memstream.cli.output``).

Guarantee: ``main()`` returns an exit code (``memstream.cli.output``) and lets no
exception out. A failure is one line on stderr, ``memstream CMD: error: ...`` (and
``{"ok": false, "error": ...}`` on stdout with ``--json``); an unexpected exception is one
line naming its type, with the traceback only when ``MEMSTREAM_DEBUG=1``. A closed stdout
(``memstream search ... | head``) ends the command quietly. Memory text printed for a
person is cut to ``TEXT_CUT`` characters with a note of how much was cut; ``--json`` and
``export`` carry it whole.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import msgspec
import redis

from memstream import __version__, ops
from memstream.cli.args import (
    COUNT_MAX,
    K_MAX,
    QUERY_MAX,
    archive_point,
    entry_id,
    printable,
)
from memstream.cli.bench import add_benchmarks, cmd_bench
from memstream.cli.output import (
    FAILED,
    INTERRUPTED,
    OK,
    USAGE,
    ago,
    archive_text,
    dead_letter_line,
    doctor_text,
    export_text,
    fail,
    forget_text,
    import_text,
    one_line,
    print_result,
    projections_text,
    search_text,
    stats_text,
    stdout_to_devnull,
    verify_text,
)
from memstream.core import Settings, argtypes, configure, say_ready, take_ready_fd
from memstream.ops import CommandError

__all__ = ["build_parser", "main"]


# -- up / down / worker --------------------------------------------------------------------
def _logs(args: argparse.Namespace, level: str) -> None:
    """Log lines on stderr: JSON with ``--json`` or when stderr is no terminal, else
    structlog's console lines."""
    configure(level, json=True if getattr(args, "json", False) else None)


def _dashboard(info: dict[str, object]) -> str:
    """``, dashboard at http://HOST:PORT/`` when the service serves its metrics, else nothing."""
    metrics = info.get("metrics")
    if not isinstance(metrics, str) or not metrics.endswith("/metrics"):
        return ""
    return f", dashboard at {metrics[: -len('metrics')]}"


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    env: dict[str, str] = {}
    if args.query_replicas is not None:
        settings = msgspec.structs.replace(settings, query_replicas=args.query_replicas)
        env["MEMSTREAM_QUERY_REPLICAS"] = str(args.query_replicas)
    if args.detach:
        info = ops.up_detached(settings, env=env)
        if not args.quiet:
            print_result(
                args,
                info,
                f"memstream service {'already ' if info.get('already_running') else ''}running "
                f"(pid {info['pid']}) at {info['url']}{_dashboard(info)}; "
                "`memstream down` stops it" + (f"\nwarning: {info['warning']}" if info.get("warning") else ""),
            )
        return OK
    _logs(args, "INFO")
    service, info = ops.start_foreground(settings)
    if service is None:
        if not args.quiet:
            print_result(args, info, f"memstream service already running (pid {info.get('pid')}) at {info.get('url')}")
        return OK
    service.handle_signals()  # before saying so: from here a Ctrl-C stops it cleanly
    if not args.quiet:
        try:
            print_result(
                args,
                info,
                f"memstream service running at {info['url']}{_dashboard(info)} (home {settings.home}); Ctrl-C stops it",
            )
            sys.stdout.flush()
        except OSError:  # a full disk under its log: the service serves all the same
            pass
    service.serve()
    return OK


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    result, ok = ops.stop_service(settings)
    print_result(args, result, "stopped" if result.get("stopped") else result.get("reason", "not stopped"))
    return OK if ok else FAILED


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    import signal
    import threading

    projections = ops.worker_projections(settings, args.projections)
    ops.check_worker(settings, args.embedded_store, projections)
    _logs(args, "INFO")
    stop = threading.Event()

    def stopping(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: at once
        stop.set()

    # from the start: a SIGTERM or a Ctrl-C while starting stops it cleanly once started
    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    worker = ops.start_worker(settings, args.name, projections)
    stop.wait()
    worker.stop()  # each consumer finishes its batch
    return OK


# -- doctor / stats / top / export ---------------------------------------------------------
def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.hermes import check as hermes_check

    result = ops.doctor(settings, hermes=lambda: hermes_check(None))
    print_result(args, result, doctor_text(result))
    return OK if result["ok"] else FAILED


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    result = ops.stats(settings)
    print_result(args, result, stats_text(result))
    return OK


def cmd_top(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from rich.console import Console

    from memstream.cli.top import frame, watch

    base = ops.dashboard_url(settings, args.url)
    every = 2.0
    try:
        summary = ops.fetch_summary(base)
        if args.json:
            while True:  # one JSON line a refresh
                print(json.dumps(summary), flush=True)
                if args.once:
                    return OK
                time.sleep(every)
                summary = ops.fetch_summary(base)
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # a pipe or a file: the projections' table on one line each
        if args.once or not console.is_terminal:
            while True:  # on a terminal with --once, or not on a terminal: one frame a refresh, printed
                console.print(frame(summary, base, width=console.width, height=console.height if console.is_terminal else None))
                if args.once:
                    return OK
                time.sleep(every)
                summary = ops.fetch_summary(base)
        watch(lambda: ops.fetch_summary(base), base, console, every)
    except KeyboardInterrupt:  # Ctrl-C is how top ends
        return OK
    return OK


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    bad = 0
    count = 0
    for item in ops.export(settings, args.since):
        if isinstance(item, ops.Undecodable):
            bad += 1
            print(f"memstream export: entry {item.entry_id} of {item.stream} is not a valid event: {item.error}", file=sys.stderr)
            continue
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")
        count += 1
    print(export_text(count, bad), file=sys.stderr)
    return OK


# -- archive -------------------------------------------------------------------------------
def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.cli.progress import Progress

    if args.verify:
        result = ops.verify_archive(settings, args.to)
        print_result(args, result, verify_text(result))
        return OK
    with Progress(json_lines=args.json) as progress:
        result = ops.archive(settings, args.before, args.to, progress=progress.update)
    print_result(args, result, archive_text(result))
    return OK


# -- import --------------------------------------------------------------------------------
def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from memstream.cli.progress import Progress

    started = time.monotonic()
    with Progress(json_lines=args.json) as bar:

        def progress(done: int, total: int) -> None:
            elapsed = time.monotonic() - started
            bar.update(
                f"import {args.source}", done, total, **({"rate": round(done / elapsed, 1)} if done and elapsed > 0 else {})
            )

        if args.source == "hermes":
            from memstream.hermes import hermes_home

            result = ops.import_hermes(
                settings,
                hermes_home(args.home or None),
                agent=args.agent,
                tenant=args.tenant,
                dry_run=args.dry_run,
                progress=progress,
            )
        else:
            from pathlib import Path

            result = ops.import_jsonl(settings, Path(args.file), dry_run=args.dry_run, progress=progress)
    print_result(args, result, import_text(result))
    return OK


# -- add / search / dlq --------------------------------------------------------------------
def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    raw, where, more = ops.source_text(
        settings.max_text_bytes, text=args.text, file=args.file, stdin=getattr(sys.stdin, "buffer", None)
    )
    event, clipped = ops.memory_event(
        settings, raw, where, more, tenant=args.tenant, agent=args.agent, session=args.session, target=args.target
    )
    if clipped:
        print(
            f"memstream add: the text ({where}) is over MEMSTREAM_MAX_TEXT_BYTES="
            f"{settings.max_text_bytes} bytes: stored clipped to that bound, flagged clipped",
            file=sys.stderr,
        )
    if args.sync:
        result = ops.add_logged(settings, event, args.timeout)
        entry = f"log entry {result['entry_id']}" if result["entry_id"] else "in the log"
        print_result(args, result, f"added {result['id']} ({entry}, {result['state']})")
        if result["state"] == "searchable":
            return OK
        print(
            f"memstream add: {result['id']} is in the log; adding it again would add it twice"
            + ("" if result["checked"] else " (only whether it is searchable yet could not be checked)"),
            file=sys.stderr,
        )
        return OK if not result["checked"] else FAILED
    # the shipper's warnings while it waits for the log (or for the service it starts) are
    # not for this command's reader: the result line says where the memory is
    configure("ERROR", json=True if args.json else None)
    result = ops.add_spooled(settings, event)
    if result.get("service_started") and not args.json:
        started = result["service_started"]
        print(
            f"memstream add: no memstream service was running: started one in the background "
            f"(pid {started['pid']}, home {started['home']}); `memstream down` stops it",
            file=sys.stderr,
        )
    print_result(
        args,
        result,
        f"added {result['id']}" + ("" if result["state"] == "logged" else " (spooled: it ships when the log is reachable)"),
    )
    return OK


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    agent = args.agent or "default"
    answer = ops.search(
        settings,
        args.query,
        tenant=args.tenant,
        agent=agent,
        scope=args.scope,
        k=args.k,
        timeout=args.timeout,
        rerank=not args.no_rerank,
    )
    print_result(args, answer, search_text(answer, defaulted=args.agent is None))
    return OK


def cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "list":
        items = ops.dead_letters(settings, args.count, args.group)
        print_result(args, {"dead_letters": items}, "\n".join(dead_letter_line(i) for i in items) or "no dead letters")
        return OK
    result = ops.settle(settings, args.action, args.ids)
    lines = [
        f"{dlq_id}: no such dead letter (`memstream dlq list` shows them)"
        if value is None
        else (f"{dlq_id}: retried as log entry {value}" if args.action == "retry" else f"{dlq_id}: dropped")
        for dlq_id, value in result[args.action].items()
    ]
    print_result(args, result, "\n".join(lines))
    return FAILED if result["missing"] else OK


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    selector = ops.Selector(
        events=tuple(args.event or ()),
        session=args.session,
        agent=args.agent,
        tenant=args.tenant,
        match=args.match,
        tombstoned=args.tombstoned,
    )
    result = ops.forget(settings, selector, dry_run=args.dry_run, wait=args.wait)
    print_result(args, result, forget_text(result))
    return OK


# -- replay / projections ------------------------------------------------------------------
def _options(pairs: list[str] | None) -> dict[str, object]:
    """``--option NAME=VALUE`` pairs; a value is read as JSON when it parses (numbers, true)."""
    out: dict[str, object] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CommandError(f"--option {pair!r}: use NAME=VALUE")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def _watch(args: argparse.Namespace, settings: Settings, groups: list[str]) -> int:
    """Show the builds' progress until they finish; Ctrl-C detaches and leaves them running."""
    from memstream.cli.progress import Progress

    rates: dict[str, tuple[float, int]] = {}
    try:
        with Progress(json_lines=args.json) as progress:

            def report(rows: list[dict]) -> None:
                import time

                for r in rows:
                    done = r["done"]
                    first = rates.setdefault(r["group"], (time.monotonic(), done or 0))
                    elapsed = time.monotonic() - first[0]
                    rate = (done - first[1]) / elapsed if done is not None and elapsed > 0.5 else None
                    progress.update(
                        r["group"],
                        done or 0,
                        r["total"],
                        state=r["state"],
                        lag=r["lag"],
                        **({"rate": round(rate, 1)} if rate is not None else {}),
                    )

            rows = ops.wait_replay(settings, groups, report)
    except KeyboardInterrupt:
        print("memstream replay: detached; the build goes on (`memstream replay --status` re-attaches)", file=sys.stderr)
        return OK
    states = {r["group"]: r["state"] for r in rows}
    print_result(
        args,
        {"versions": rows},
        "\n".join(
            f"{g}: {s}" + (" (activate it with `memstream projections activate`)" if s == "building" else "")
            for g, s in states.items()
        )
        or "nothing is building",
    )
    return OK


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    if args.cancel:
        result = ops.cancel_replay(settings, args.cancel)
        print_result(
            args,
            result,
            f"cancelled {result['group']}"
            + ("; its data is removed" if result.get("removed") else f"; {result.get('note', '')}"),
        )
        return OK
    if args.status:
        rows = ops.replay_status(settings, args.projections or None)
        if not rows:
            print_result(args, {"versions": []}, "nothing is building")
            return OK
        if args.detach:
            print_result(
                args,
                {"versions": rows},
                "\n".join(f"{r['group']}: {r['state']}, {r['done']} of {r['total']} events, lag {r['lag']}" for r in rows),
            )
            return OK
        return _watch(args, settings, [r["group"] for r in rows if r["state"] == "building"])
    if not args.projections:
        raise CommandError(
            "name the projections to replay (turns, memories, facts, sessions, or yours), or use --status / --cancel NAME"
        )
    started = ops.start_replay(
        settings, args.projections, embedder=args.embedder or None, activate=args.activate, options=_options(args.option)
    )
    if not args.json:
        for v in started:
            print(
                f"building {v['group']}"
                + (f" with {v['embedder']} ({v['dim']}-d)" if v.get("embedder") else "")
                + f"; activation {v['activate']}",
                file=sys.stderr,
            )
    if args.detach:
        print_result(args, {"versions": started}, "\n".join(f"building {v['group']}" for v in started))
        return OK
    return _watch(args, settings, [v["group"] for v in started])


def cmd_projections(args: argparse.Namespace, settings: Settings) -> int:
    if args.action in ("activate", "drop"):
        if not args.name or args.version is None:
            raise CommandError(f"usage: memstream projections {args.action} NAME VERSION")
        if args.action == "activate":
            result = ops.activate_version(settings, args.name, args.version)
            print_result(args, result, f"{result['group']} is active: queries read it")
        else:
            result = ops.drop_version(settings, args.name, args.version)
            print_result(
                args,
                result,
                f"dropping {result['group']}"
                + (": its data is removed" if result.get("removed") else f": {result.get('note', '')}"),
            )
        return OK
    rows = ops.projection_versions(settings)
    print_result(args, {"projections": rows}, projections_text(rows))
    return OK


# -- tenants -------------------------------------------------------------------------------
def cmd_tenant(args: argparse.Namespace, settings: Settings) -> int:
    """Register tenants: an ACL user each, whose credentials an agent host of that tenant
    uses (see producers/tenants.py). Needs the operator's credentials."""
    if args.action == "list":
        rows = ops.tenants(settings)
        print_result(
            args,
            {"tenants": rows},
            "\n".join(
                f"{r['tenant']} (user {r['user']}, registered {ago(r.get('created_at'), never='at an unknown time')})"
                for r in rows
            )
            or "no tenants registered: every host with the Redis credentials may write for any tenant",
        )
        return OK
    if args.action == "update":
        updated = ops.update_tenants(settings)
        print_result(
            args,
            {"updated": updated},
            f"the Redis users of {len(updated)} tenants have the current rules (their passwords unchanged)"
            + (f": {', '.join(updated)}" if updated else ""),
        )
        return OK
    if args.action == "remove":
        removed = ops.remove_tenant(settings, args.name)
        print_result(
            args,
            {"removed": removed, "tenant": args.name},
            f"tenant {args.name} {'removed' if removed else 'was not registered'}",
        )
        return OK if removed else FAILED
    added = ops.add_tenant(settings, args.name, rotate=args.rotate)
    print_result(
        args,
        added,
        f"tenant {added['tenant']}: its agent hosts set\n"
        f"  MEMSTREAM_TENANT={added['tenant']}\n  MEMSTREAM_REDIS_URL={added['redis_url']}\n"
        "The password is shown once (Redis keeps only its hash); `--rotate` issues a new one.",
    )
    return OK


def cmd_acl(args: argparse.Namespace, settings: Settings) -> int:
    """The ACL SETUSER commands of the worker's and the admin's Redis users (docs/security.md)."""
    users = ops.acl_recipe(settings)
    lines = [
        f"# memstream's Redis users for the key prefix {settings.stream_prefix!r} (Redis/Valkey 7+).",
        "# Run these as the server's own admin (e.g. redis-cli), then ACL SAVE (with an aclfile) or",
        "# CONFIG REWRITE so they outlive a restart. The passwords are new on every run, shown once.",
        "# Each tenant's agent hosts get their user from `memstream tenant add NAME`, run with the admin's URL.",
    ]
    for u in users:
        lines += ["", f"# {u['role']}: {u['uses']}", f"#   MEMSTREAM_REDIS_URL={u['redis_url']}", u["command"]]
    print_result(args, {"users": users}, "\n".join(lines))
    return OK


# -- install-hermes ----------------------------------------------------------------
def cmd_install_hermes(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from memstream.hermes import install

    result = install(Path(args.home).expanduser() if args.home else None, hermes=args.hermes or None)
    text = (
        f"installed the memstream plugin into {result.get('plugin_dir')} and selected it "
        f"(memory.provider: memstream in {result.get('config')}, by {result.get('selected_by') or 'no change'})\n"
        f"{result.get('verdict')}"
    )
    print_result(args, result, text)
    return OK


# -- the parser and main ---------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description="Event-sourced memory for Hermes agents.")
    parser.add_argument("--version", action="version", version=f"memstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.subcommands = sub.choices  # type: ignore[attr-defined]  # main's way to a subcommand's usage

    def add(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)
        return p

    p = add("up", cmd_up, "run the memstream service (embedded Valkey unless MEMSTREAM_REDIS_URL is set)")
    p.add_argument("--detach", action="store_true", help="run it in the background")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.add_argument(
        "--query-replicas",
        type=argtypes.int_between(0, 16),
        default=None,
        metavar="N",
        help="read replicas beside the service's query process, each a process with its own copy of the vector "
        "projections (default MEMSTREAM_QUERY_REPLICAS, 0)",
    )
    add("down", cmd_down, "stop the background memstream service")
    add("doctor", cmd_doctor, "check configuration, Redis, streams, spool and the Hermes plugin")
    add("stats", cmd_stats, "per-stream length, first/last id, events per type, spool size")
    p = add("top", cmd_top, "the dashboard's numbers, live in the terminal (the service's, or a worker's with --url)")
    p.add_argument(
        "--url",
        type=printable("url", 2048),
        metavar="URL",
        help="http://HOST:PORT a service or worker serves its metrics and dashboard on "
        "(default: the running service's, from its run file)",
    )
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p = add("export", cmd_export, "every event in the log as JSON lines, oldest first")
    p.add_argument("--since", type=entry_id, help="only entries after this stream entry id")
    p = add("archive", cmd_archive, "move the log's oldest events into compressed files and out of Redis")
    p.add_argument(
        "--before",
        type=archive_point,
        metavar="DATE|ID",
        help="archive the entries below this entry id, date or time (UTC unless it names a zone; "
        "default: everything every projection group has applied)",
    )
    p.add_argument(
        "--to", metavar="DIR", help="the archive directory (default: MEMSTREAM_ARCHIVE_DIR, else $MEMSTREAM_HOME/archive)"
    )
    p.add_argument(
        "--verify", action="store_true", help="archive nothing: check every segment file against the manifest (size, sha256)"
    )
    p = sub.add_parser(
        "import",
        help="bring history into the log: Hermes's own, or a `memstream export` file",
        description="Bring history into the log. Events already in it (by id) are skipped.",
    )
    p.set_defaults(func=cmd_import)
    sources = p.add_subparsers(dest="source", required=True)
    p = sources.add_parser(
        "hermes",
        help="Hermes's sessions (state.db) and memory files (MEMORY.md, USER.md)",
        description="Import Hermes's sessions and messages (state.db) and its memory files "
        "(memories/MEMORY.md, USER.md) with their original times.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (progress as JSON lines)")
    p.add_argument("--home", default="", help="Hermes home (default: $HERMES_HOME or ~/.hermes)")
    p.add_argument(
        "--agent",
        type=printable("agent"),
        help="agent of every event (default: each session's gateway key or profile, else default)",
    )
    p.add_argument("--tenant", type=printable("tenant"), help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--dry-run", action="store_true", help="read, check and count; append nothing")
    p = sources.add_parser(
        "jsonl",
        help="the events of a `memstream export` file (ids kept)",
        description="Append the events of a `memstream export` file, ids kept, in its order.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (progress as JSON lines)")
    p.add_argument("--dry-run", action="store_true", help="read, check and count; append nothing")
    p.add_argument("file", metavar="FILE", help="a JSON lines file written by `memstream export`")
    p = add("add", cmd_add, "append a memory write by hand")
    p.add_argument("--sync", action="store_true", help="append directly and fail if the log is unreachable")
    p.add_argument("--tenant", type=printable("tenant"), help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", default="default", type=printable("agent"), help="agent identity")
    p.add_argument("--session", type=printable("session"), help="session id")
    p.add_argument("--target", choices=["memory", "user"], default="memory")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("text", nargs="?", help="the memory to add; - reads it from stdin")
    source.add_argument("--file", metavar="PATH", help="read the memory from this UTF-8 file")
    p.add_argument("--timeout", type=argtypes.seconds, default=10.0, help="--sync: seconds to wait for the projections")
    p = add("search", cmd_search, "search the projections (turns, memories, facts)")
    p.add_argument("--tenant", type=printable("tenant"), help="tenant (default: MEMSTREAM_TENANT)")
    p.add_argument("--agent", type=printable("agent"), help="the asking agent (default: the agent `default`)")
    p.add_argument("--scope", default="current", type=printable("scope"), help="current | all | AGENT")
    p.add_argument("-k", type=argtypes.int_between(1, K_MAX), default=10, help=f"results (1 to {K_MAX})")
    p.add_argument("--timeout", type=argtypes.seconds, default=10.0, help="seconds to wait for the answer")
    p.add_argument(
        "--no-rerank",
        action="store_true",
        help="the prefetch's order, without the cross-encoder rerank of the best candidates (faster)",
    )
    p.add_argument("query", type=printable("query", QUERY_MAX))
    p = add("dlq", cmd_dlq, "list (the default), retry or drop dead letters")
    p.add_argument("action", nargs="?", choices=["list", "retry", "drop"], default="list")
    p.add_argument("ids", nargs="*", type=entry_id, help="DLQ ids (retry/drop)")
    p.add_argument("--group", type=printable("group"), help="only this projection group (list)")
    p.add_argument("--count", type=argtypes.int_between(1, COUNT_MAX), default=100, help=f"at most this many (1 to {COUNT_MAX})")
    p = add(
        "forget",
        cmd_forget,
        "remove events and everything made of them from the log, the archive, the "
        "projections, the dead letters, the caches, this host's spool and Redis's files",
    )
    p.add_argument("--event", action="append", type=printable("event"), metavar="ID", help="this event (repeatable)")
    p.add_argument("--session", type=printable("session"), metavar="ID", help="the events of this session")
    p.add_argument("--agent", type=printable("agent"), metavar="NAME", help="the events of this agent")
    p.add_argument("--tenant", type=printable("tenant"), metavar="NAME", help="the events of this tenant")
    p.add_argument(
        "--match", type=printable("match", QUERY_MAX), metavar="TEXT", help="the events holding this text (case-insensitive)"
    )
    p.add_argument(
        "--tombstoned",
        action="store_true",
        help="the items already forgotten by the agents' forget tool or Hermes's memory remove",
    )
    p.add_argument("--dry-run", action="store_true", help="remove nothing: count per place and list the events")
    p.add_argument(
        "--wait",
        type=argtypes.seconds,
        default=30.0,
        help="seconds to wait for the projections to apply the tombstones (default 30)",
    )
    p = add("worker", cmd_worker, "run projection workers against a shared Redis and Qdrant")
    p.add_argument(
        "--embedded-store",
        action="store_true",
        help="no Qdrant server: one worker owning the embedded store under MEMSTREAM_HOME",
    )
    p.add_argument("--name", type=printable("name"), help="stable consumer name (default: host name)")
    p.add_argument(
        "--projections",
        type=printable("projections"),
        metavar="NAME,...",
        help="run only these projections (default: MEMSTREAM_WORKER_PROJECTIONS, else all); facts,sessions need no Qdrant",
    )
    p = add("replay", cmd_replay, "rebuild projections from the log as new versions, beside the live ones")
    p.add_argument("projections", nargs="*", type=printable("projection"), help="turns, memories, facts, sessions or yours")
    p.add_argument("--embedder", type=printable("embedder"), help="the new versions' embedder (default: the active one's)")
    p.add_argument(
        "--activate",
        choices=["auto", "manual"],
        default="auto",
        help="switch readers when caught up (auto) or with `memstream projections activate` (manual)",
    )
    p.add_argument(
        "--option",
        action="append",
        type=printable("option"),
        metavar="NAME=VALUE",
        help="an option of the projection for the new version (repeatable)",
    )
    p.add_argument("--status", action="store_true", help="show (and follow) the running builds")
    p.add_argument("--cancel", metavar="NAME", type=printable("projection"), help="stop NAME's build, drop its version")
    p.add_argument("--detach", action="store_true", help="start (or show) and return at once")
    p = add("projections", cmd_projections, "list projection versions; activate or drop one")
    p.add_argument("action", nargs="?", choices=["list", "activate", "drop"], default="list")
    p.add_argument("name", nargs="?", type=printable("projection"), help="activate/drop: the projection")
    p.add_argument("version", nargs="?", type=argtypes.int_between(1, 1_000_000), help="activate/drop: its version")
    p = add("tenant", cmd_tenant, "register tenants: a Redis user each, limited to its own data")
    p.add_argument("action", choices=["add", "list", "remove", "update"])
    p.add_argument("name", nargs="?", default="", help="tenant name (add, remove)")
    p.add_argument("--rotate", action="store_true", help="add: issue a new password for an existing tenant")
    p = add("acl", cmd_acl, "print the ACL SETUSER commands of least-privilege Redis users (worker, admin)")
    p.add_argument("action", choices=["recipe"])
    p = add("install-hermes", cmd_install_hermes, "install the memstream plugin into a Hermes home and select it")
    p.add_argument("--home", default="", help="Hermes home (default: $HERMES_HOME or ~/.hermes)")
    p.add_argument("--hermes", default="", help="the hermes command to ask (default: the one beside this Python, else on PATH)")
    add_benchmarks(add("bench", cmd_bench, "benchmarks: memstream bench NAME --help for each one's arguments"))
    return parser


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
            parser = build_parser()
            args, extra = parser.parse_known_args(argv)
            if extra:  # the subcommand's own usage, not the top level's
                parser.subcommands[args.command].error(  # type: ignore[attr-defined]  # set by build_parser
                    f"unrecognized arguments: {' '.join(extra)}"
                )
        except SystemExit as exc:  # usage errors (2), --help and --version (0)
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else (OK if exc.code is None else USAGE)
        prog = f"memstream {args.command}"
        take_ready_fd(os.environ)  # `up` started by `up --detach`: where it says ready, or why not
        _logs(args, "WARNING")
        settings = Settings.load()
        if args.command != "doctor":  # doctor reports them as its config check
            for problem in settings.problems:
                print(f"{prog}: warning: {one_line(problem)}", file=sys.stderr)
        code = int(args.func(args, settings) or OK)
        sys.stdout.flush()  # here, not at exit: a closed stdout is handled below
        return code
    except BrokenPipeError:  # stdout closed by the reader (`| head`): nothing left to say
        stdout_to_devnull()
        return FAILED
    except KeyboardInterrupt:
        return INTERRUPTED
    except CommandError as exc:
        return _failed(args, prog, str(exc))
    except redis.RedisError as exc:
        return _failed(args, prog, f"Redis: {type(exc).__name__}: {exc}")
    except Exception as exc:
        if os.environ.get("MEMSTREAM_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()
        return _failed(args, prog, f"unexpected {type(exc).__name__}: {exc} (MEMSTREAM_DEBUG=1 shows the traceback)")


def _failed(args: argparse.Namespace | None, prog: str, message: str) -> int:
    """``fail``, and the same line to the starter of a background service (``up --detach``)."""
    say_ready(f"failed: {prog}: {message}")
    return fail(args, prog, message)
