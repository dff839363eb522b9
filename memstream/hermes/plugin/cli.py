"""``hermes memstream doctor|stats|add|search|export|probe ...``: the memstream CLI inside Hermes.

Hermes imports this file on its own (without ``__init__.py``), and executes it again
as a sibling module when it loads the provider, so it stays light: argparse only at
import time; ``memstream.cli`` is imported when a command runs. Hermes registers this
subcommand only while ``memory.provider`` is ``memstream``.

``hermes memstream probe`` needs no memstream at all: it runs in the very process and
interpreter that Hermes runs, asks Hermes's own loader for the provider and prints one
line ``MEMSTREAM_PROBE <json>`` (the interpreter, whether memstream imports there, where
Hermes found the plugin, what it loaded, whether that is available). ``memstream doctor``
and ``memstream install-hermes`` read it.
"""

import argparse

SUBCOMMANDS = {
    "doctor": "check configuration, Redis, streams, spool and the Hermes plugin",
    "stats": "per-stream length, first/last id, events per type, spool size",
    "add": "append a memory write by hand",
    "search": "search memories",
    "export": "every event in the log as JSON lines, oldest first",
    "probe": "what Hermes loads as memstream, from inside Hermes (JSON; for memstream doctor)",
}


def register_cli(subparser) -> None:
    """Build ``hermes memstream <command> [args...]``; arguments pass through unparsed."""
    subs = subparser.add_subparsers(dest="memstream_command", metavar="{" + ",".join(SUBCOMMANDS) + "}")
    for name, help_text in SUBCOMMANDS.items():
        p = subs.add_parser(name, help=help_text, description=f"{help_text} (runs `memstream {name}`)",
                            add_help=False, prefix_chars="\0")
        p.add_argument("memstream_args", nargs=argparse.REMAINDER)
    subparser.set_defaults(func=memstream_command)


def memstream_command(args) -> None:
    """Run ``memstream <command> <args>``; Hermes ignores return values, so exit with it."""
    command = getattr(args, "memstream_command", None) or "doctor"
    if command == "probe":
        import json

        print("MEMSTREAM_PROBE " + json.dumps(probe(), default=str), flush=True)
        return
    argv = [command, *(getattr(args, "memstream_args", None) or [])]
    from memstream.cli import main

    code = main(argv)
    if code:
        raise SystemExit(code)


def probe() -> dict:
    """What this Hermes process loads as ``memstream`` (stdlib and Hermes only)."""
    import platform
    import sys

    out = {"python": sys.executable, "python_version": platform.python_version(), "memstream": None}
    try:
        import importlib.metadata

        import memstream

        out["memstream"] = importlib.metadata.version("memstream")
        out["memstream_file"] = memstream.__file__
    except Exception as exc:
        out["import_error"] = f"{type(exc).__name__}: {exc}"
    try:
        from plugins.memory import find_provider_dir, load_memory_provider

        found = find_provider_dir("memstream")
        out["found_at"] = str(found) if found else None
        provider = load_memory_provider("memstream")
    except Exception as exc:
        out["loader_error"] = f"{type(exc).__name__}: {exc}"
        provider = None
    if provider is not None:
        cls = type(provider)
        out["loaded"] = f"{cls.__module__}.{cls.__qualname__}"
        try:
            out["available"] = bool(provider.is_available())
        except Exception as exc:
            out["available"] = False
            out["unavailable_reason"] = f"is_available() raised {type(exc).__name__}: {exc}"
        if not out["available"] and "unavailable_reason" not in out:
            reason = getattr(provider, "unavailable_reason", None)
            try:
                out["unavailable_reason"] = str(reason()) if callable(reason) else ""
            except Exception as exc:
                out["unavailable_reason"] = f"{type(exc).__name__}: {exc}"
    else:
        out["loaded"] = None
    return out
