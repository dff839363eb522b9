"""The documentation's reference pages, generated from the code that defines what they list.

Three pages hold tables that must never disagree with the code, so they are written from it:

- ``docs/reference/cli.md`` from the argparse parser (``memstream.cli.commands.build_parser``),
  every subcommand and sub-subcommand with its usage and arguments;
- ``docs/reference/configuration.md`` from the Settings type (``memstream.core.settings.OPTIONS``,
  and ``OTHER_VARIABLES`` for the ``MEMSTREAM_*`` names that are not settings);
- ``docs/reference/metrics.md`` from the metric families (``memstream.service.metrics.FAMILIES``)
  and the process collector prometheus_client adds to every registry.

Each page keeps its prose by hand; only the text between ``<!-- BEGIN GENERATED: NAME -->``
and ``<!-- END GENERATED: NAME -->`` is written here. ``python docs/gen/reference.py``
rewrites the pages (``make docs``); ``--check`` writes nothing and exits 1 naming the pages
out of date, which the mkdocs hook (``docs/gen/hooks.py``) does at every build, so
``mkdocs build --strict`` (in ``make lint``) fails on a stale page. Not part of memstream's
runtime: nothing in the package imports this.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
USAGE_WIDTH = 100  # usage lines are wrapped at this width whatever the terminal's

# prometheus_client's ProcessCollector, which every registry of memstream includes (Linux):
# not memstream's families, so not in FAMILIES, but on every /metrics all the same
PROCESS_COLLECTOR = (
    ("process_cpu_seconds_total", "counter", "seconds", "CPU seconds the process spent, user and system"),
    ("process_resident_memory_bytes", "gauge", "bytes", "Resident memory of the process"),
    ("process_virtual_memory_bytes", "gauge", "bytes", "Virtual memory of the process"),
    ("process_start_time_seconds", "gauge", "seconds", "When the process started (unix time)"),
    ("process_open_fds", "gauge", "descriptors", "Open file descriptors"),
    ("process_max_fds", "gauge", "descriptors", "The process's limit of open file descriptors"),
)


def cell(text: object) -> str:
    """``text`` as one cell of a Markdown table: no newline, no bare pipe."""
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def linked(text: str, page: str) -> str:
    """``text`` with each ``docs/PAGE.md`` it names made a link from ``page`` (the code names
    pages by their path, which reads the same in a terminal)."""

    def link(m: re.Match[str]) -> str:
        target = Path(m.group(1))
        up = "../" * (len(Path(page).parts) - 1)
        return f"[docs/{target}]({up}{target})"

    return re.sub(r"(?<![\w/])docs/([\w/-]+\.md)", link, text)


# -- the command line ----------------------------------------------------------------------
def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, as ``memstream -h`` lists it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _argument_rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(f"`{o}`" for o in action.option_strings)
            if action.nargs != 0:
                name += f" `{action.metavar or action.dest.upper()}`"
        else:
            name = f"`{action.metavar or action.dest}`"
        meaning = formatter._expand_help(action) if action.help else ""
        if action.choices is not None:
            meaning = (meaning + " " if meaning else "") + "one of " + ", ".join(f"`{c}`" for c in action.choices)
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
        if isinstance(default, list):
            shown = ""
        yield f"| {cell(name)} | {cell(shown)} | {linked(cell(meaning), 'reference/cli.md')} |"


def _command_sections(parser: argparse.ArgumentParser, depth: int) -> Iterator[str]:
    for sub in _subcommands(parser).values():
        yield f"{'#' * depth} `{sub.prog}`"
        yield ""
        if sub.description:
            yield cell(sub.description)
            yield ""
        yield "```text"
        yield _usage(sub)
        yield "```"
        yield ""
        rows = list(_argument_rows(sub))
        if rows:
            yield "| argument | default | meaning |"
            yield "|---|---|---|"
            yield from rows
            yield ""
        yield from _command_sections(sub, depth + 1)


def cli_reference() -> str:
    from memstream.cli.commands import build_parser

    parser = build_parser()
    lines = [
        "```text",
        _usage(parser),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    helps = _helps(parser)
    for name, sub in _subcommands(parser).items():
        anchor = re.sub(r"[^a-z0-9]+", "-", sub.prog.lower()).strip("-")
        lines.append(f"| [`{sub.prog}`](#{anchor}) | {cell(helps.get(name) or sub.description or '')} |")
    lines.append("")
    lines += list(_command_sections(parser, 2))
    return "\n".join(lines).rstrip() + "\n"


# -- the settings --------------------------------------------------------------------------
def settings_table() -> str:
    from memstream.core.settings import OPTIONS

    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for option in OPTIONS:
        default = option.default
        default = ("true" if default else "false") if isinstance(default, bool) else default
        lines.append(f"| `{option.env}` | `{default}` | {linked(cell(option.meaning), 'reference/configuration.md')} |")
    return "\n".join(lines) + "\n"


def other_variables_table() -> str:
    from memstream.core.settings import OTHER_VARIABLES

    lines = ["| variable | read by |", "|---|---|"]
    lines += [f"| `{name}` | {cell(what)} |" for name, what in OTHER_VARIABLES.items()]
    return "\n".join(lines) + "\n"


# -- the metrics ---------------------------------------------------------------------------
def metrics_table() -> str:
    from memstream.service.metrics import FAMILIES

    lines = ["| metric | type | labels | unit | from | meaning |", "|---|---|---|---|---|---|"]
    for f in FAMILIES:
        labels = ", ".join(f"`{label}`" for label in f.labels) or "none"
        source = {"redis": "Redis", "process": "process"}[f.source]
        meaning = linked(cell(f.help), "reference/metrics.md")
        lines.append(f"| `{f.name}` | {f.type} | {labels} | {f.unit or 'none'} | {source} | {meaning}. |")
    for name, kind, unit, meaning in PROCESS_COLLECTOR:
        lines.append(
            f"| `{name}` | {kind} | none | {unit} | process | {meaning} (prometheus_client's process collector, Linux). |"
        )
    return "\n".join(lines) + "\n"


# -- the pages -----------------------------------------------------------------------------
PAGES: dict[str, dict[str, Callable[[], str]]] = {
    "reference/cli.md": {"cli": cli_reference},
    "reference/configuration.md": {"settings": settings_table, "other-variables": other_variables_table},
    "reference/metrics.md": {"metrics": metrics_table},
}


def block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- BEGIN GENERATED: {re.escape(name)} -->\n)(.*?)(<!-- END GENERATED: {re.escape(name)} -->)", re.DOTALL
    )


def render(page: str, text: str) -> str:
    """``text`` (the page as it is) with every generated block of it written from the code."""
    for name, make in PAGES[page].items():
        pattern = block(name)
        if not pattern.search(text):
            raise SystemExit(f"docs/{page} has no block {name!r}: keep its BEGIN and END GENERATED markers")
        generated = make()
        text = pattern.sub(lambda m, generated=generated: m.group(1) + "\n" + generated + "\n" + m.group(3), text)
    return text


def stale(docs: Path = DOCS) -> list[str]:
    """The generated pages whose text differs from what the code makes of them."""
    return [page for page in PAGES if (docs / page).read_text() != render(page, (docs / page).read_text())]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    out_of_date = stale()
    if check:
        for page in out_of_date:
            print(f"docs/{page} is out of date: run `make docs` (python docs/gen/reference.py)", file=sys.stderr)
        return 1 if out_of_date else 0
    for page in out_of_date:
        path = DOCS / page
        path.write_text(render(page, path.read_text()))
        print(f"wrote docs/{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
