"""One home for the configuration: the README's table is the Settings type's, and below the
entry points nothing reads the environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memstream.core.settings import OPTIONS, OTHER_VARIABLES, Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memstream"
# the settings themselves and the entry points, which read the environment and pass values on
MAY_READ = ("core/settings.py", "cli/", "service/", "bench/", "hermes/")
ROW = re.compile(r"^\| `(MEMSTREAM_[A-Z0-9_]+)` \| `([^`]*)` \| (.*) \|$")


def _readme_rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return [m.groups() for m in map(ROW.match, section.splitlines()) if m]


def _expected_row(option) -> str:
    default = option.default
    default = ("true" if default else "false") if isinstance(default, bool) else default
    return f"| `{option.env}` | `{default}` | {option.meaning} |"


def test_the_readme_table_lists_every_setting_in_order_with_its_meaning():
    rows = _readme_rows()
    expected = "\n".join(_expected_row(o) for o in OPTIONS)
    assert [(env, meaning) for env, _, meaning in rows] == [(o.env, o.meaning) for o in OPTIONS], (
        "README.md's configuration table should read:\n" + expected
    )


def test_the_readme_defaults_read_as_the_environment_are_the_defaults(monkeypatch):
    for env, default, _ in _readme_rows():
        monkeypatch.setenv(env, default)
    loaded = Settings.load()
    assert loaded.problems == ()
    for option in OPTIONS:
        value = getattr(loaded, option.attribute)
        expected = Path(option.default).expanduser() if option.attribute == "home" else option.default
        assert value == expected and type(value) is type(expected), option.env


def _reads_environment(tree: ast.AST) -> list[int]:
    """Lines that read ``os.environ`` / ``os.getenv`` (``dict(os.environ, ...)``, handing
    the environment to a child process, is no read)."""
    handed = {
        id(call.args[0])
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "dict" and call.args
    }
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in ("environ", "environb", "getenv", "getenvb")
            and id(node) not in handed
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "environb", "getenv", "getenvb") for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_settings_and_the_entry_points_read_the_environment():
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_READ):
            continue
        lines = _reads_environment(ast.parse(path.read_text(), str(path)))
        if lines:
            readers[rel] = lines
    assert readers == {}, f"read the setting in memstream/core/settings.py and pass it down: {readers}"


def test_the_check_sees_a_read_and_lets_a_child_process_have_the_environment():
    assert _reads_environment(ast.parse("import os\nx = os.environ.get('MEMSTREAM_X')")) == [2]
    assert _reads_environment(ast.parse("import os\nx = os.getenv('A')")) == [2]
    assert _reads_environment(ast.parse("from os import environ")) == [1]
    assert _reads_environment(ast.parse("import os\nenv = dict(os.environ, MEMSTREAM_HOME='h')")) == []


def test_every_memstream_variable_the_code_names_is_a_setting_or_a_known_other():
    known = {o.env for o in OPTIONS} | set(OTHER_VARIABLES)
    named = set()
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "tests" / "support").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"MEMSTREAM_[A-Z0-9_]+", node.value)
            ):
                named.add(node.value)
            elif isinstance(node, ast.keyword) and node.arg and node.arg.startswith("MEMSTREAM_"):
                named.add(node.arg)
    assert named - known == set()
