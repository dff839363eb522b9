"""The README and the documentation site keep their promises.

The README is what a newcomer reads first: short (at most 250 lines), the two commands CI and
a fresh machine run, a first session whose every command the CLI accepts, and links that land
on the site's pages. The site (docs/, mkdocs.yml) is built strictly by `make lint`; its
reference pages are generated from the code (docs/gen/reference.py), and a page out of date
is found here too, with the page named."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")


def _reference():
    spec = importlib.util.spec_from_file_location("memstream_docs_reference", DOCS / "gen" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages() -> set[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def walk(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [page for item in node for page in walk(item)]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        return []

    return set(walk(config["nav"]))


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


# -- the README ----------------------------------------------------------------------------
def test_the_readme_is_short_enough_to_finish_in_ten_minutes():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move reference material into docs/"


def test_the_readme_gives_the_two_commands_and_ci_runs_the_test_command():
    blocks = _code_blocks(README.read_text())
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    assert "make run" in commands and "make test" in commands
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.MULTILINE), ".ci/run no longer runs the README's `make test`"


def _readme_memstream_commands() -> list[list[str]]:
    out = []
    for block in _code_blocks(README.read_text()):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if re.match(r"(\S*/)?memstream ", line):
                out.append(shlex.split(line)[1:])
    return out


def test_every_memstream_command_the_readme_shows_is_one_the_cli_accepts():
    from memstream.cli.commands import build_parser

    commands = _readme_memstream_commands()
    shown = {words[0] for words in commands}
    assert {"add", "search", "doctor", "top", "forget", "replay", "projections", "install-hermes"} <= shown
    parser = build_parser()
    for words in commands:
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"the README shows `memstream {shlex.join(words)}`, which the CLI refuses")


def test_a_command_the_cli_refuses_is_found():
    from memstream.cli.commands import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--no-such-flag", "x"])


def test_every_link_of_the_readme_resolves_and_its_docs_links_land_on_pages_of_the_site():
    text = README.read_text()
    nav = _nav_pages()
    docs_links = 0
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.is_file(), f"README.md links {target}, which does not exist"
        if path.is_relative_to(DOCS):
            docs_links += 1
            assert path.relative_to(DOCS).as_posix() in nav, f"README.md links {target}, which is not in mkdocs.yml's nav"
    assert docs_links >= 10, "the README should lead into the documentation site"


# -- the site ------------------------------------------------------------------------------
def test_every_page_of_docs_is_in_the_nav_and_every_nav_entry_is_a_page():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "gen" not in p.relative_to(DOCS).parts}
    assert pages == _nav_pages()


def test_the_site_builds_offline():
    """No web fonts (Material fetches Google Fonts unless font is false) and no plugin but the
    built-in search, which fetches nothing."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False
    assert config.get("plugins", []) == ["search"]


def test_the_generated_reference_pages_are_up_to_date():
    assert _reference().stale() == [], "run `make docs` (python docs/gen/reference.py) and commit the pages"


def test_a_stale_reference_page_is_found(tmp_path):
    reference = _reference()
    copy = tmp_path / "docs"
    shutil.copytree(DOCS / "reference", copy / "reference")
    assert reference.stale(copy) == []
    page = copy / "reference" / "configuration.md"
    page.write_text(page.read_text().replace("| `MEMSTREAM_TENANT` | `default` |", "| `MEMSTREAM_TENANT` | `acme` |"))
    cli = copy / "reference" / "cli.md"
    cli.write_text(re.sub(r"^\| `--detach` .*\n", "", cli.read_text(), count=1, flags=re.MULTILINE))
    assert reference.stale(copy) == ["reference/cli.md", "reference/configuration.md"]


def test_the_cli_reference_has_every_subcommand_and_option_of_the_parser():
    from memstream.cli.commands import build_parser

    page = (DOCS / "reference" / "cli.md").read_text()
    sections = dict(re.findall(r"^#+ `([^`]+)`\n(.*?)(?=^#+ |\Z)", page, re.MULTILINE | re.DOTALL))

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    assert sub.prog in sections, f"docs/reference/cli.md has no section for {sub.prog}"
                    walk(sub)
            elif parser.prog != "memstream":
                for option in action.option_strings:
                    if option not in ("-h", "--help"):
                        assert f"`{option}`" in sections[parser.prog], f"docs/reference/cli.md: {parser.prog} {option}"

    walk(build_parser())


def test_every_command_has_a_section_in_the_commands_guide():
    from memstream.cli.commands import build_parser

    guide = (DOCS / "commands.md").read_text()
    names = build_parser().subcommands  # type: ignore[attr-defined]
    missing = [n for n in names if not re.search(rf"^## `memstream {re.escape(n)}\b", guide, re.MULTILINE)]
    assert not missing, f"docs/commands.md does not say what these do: {missing}"
