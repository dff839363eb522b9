"""``hermes memstream doctor|stats|add|search|export ...``: the memstream CLI inside Hermes.

Hermes imports this file on its own (without ``__init__.py``), and executes it again
as a sibling module when it loads the provider, so it stays light: argparse only at
import time; ``memstream.cli`` is imported when a command runs. Hermes registers this
subcommand only while ``memory.provider`` is ``memstream``.
"""

import argparse

SUBCOMMANDS = {
    "doctor": "check configuration, Redis, streams, spool and the Hermes plugin",
    "stats": "per-stream length, first/last id, events per type, spool size",
    "add": "append a memory write by hand",
    "search": "search memories",
    "export": "every event in the log as JSON lines, oldest first",
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
    argv = [command, *(getattr(args, "memstream_args", None) or [])]
    from memstream.cli import main

    code = main(argv)
    if code:
        raise SystemExit(code)
