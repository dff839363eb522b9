"""The names the prose gives stay true: every dotted ``memstream.`` name in a docstring of the
package or in ARCHITECTURE.md / README.md / the docs' pages resolves, and every file ARCHITECTURE.md points to
exists and defines the names it is said to hold.

A module renamed, a function moved or removed: the docstrings and the map that named it fail
here instead of sending the next reader to a place that is gone."""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memstream"
DOCS = ("ARCHITECTURE.md", "README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")))

DOTTED = re.compile(r"(?<![\w./-])memstream(?:\.[A-Za-z_]\w*)+")
# memstream.json and the like are files (a config, a Grafana dashboard), not modules
FILE_SUFFIXES = {"json", "toml", "yaml", "yml", "log", "db", "sqlite", "sock", "py", "md"}


def _logger_names() -> set[str]:
    """The literal names passed to ``get_logger``/``getLogger`` in the package: a docstring may
    name a logger (``memstream.provider``), which is a name as real as a module."""
    call = re.compile(r"""(?:get_logger|getLogger)\(\s*["'](memstream(?:\.\w+)*)["']""")
    return {m.group(1) for path in PACKAGE.rglob("*.py") for m in call.finditer(path.read_text())}


def resolve(name: str) -> str | None:
    """None when ``name`` is a module of the package or an attribute of one; else what is wrong.

    An attribute named through a plain module (not a package, whose ``__init__`` is a public
    surface) must be defined there: a class or function imported into that module from its
    home is reachable, but the name sends a reader to the wrong file."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        owner = obj
        for i, part in enumerate(parts[cut:], start=cut):
            if isinstance(obj, types.ModuleType):
                owner = obj
                if not hasattr(obj, part):  # a submodule not imported yet
                    try:
                        obj = importlib.import_module(f"{obj.__name__}.{part}")
                        continue
                    except ModuleNotFoundError:
                        return f"{'.'.join(parts[:i])} has no {part!r}"
            if not hasattr(obj, part):
                return f"{'.'.join(parts[:i])} has no {part!r}"
            obj = getattr(obj, part)
            if (
                owner is not None
                and isinstance(owner, types.ModuleType)
                and not hasattr(owner, "__path__")  # a plain module, not a package
                and isinstance(obj, (type, types.FunctionType))
                and obj.__module__ != owner.__name__
            ):
                return f"{part!r} is defined in {obj.__module__}, not in {owner.__name__}"
            owner = None
        return None
    return "no such module"


def _docstrings() -> list[tuple[str, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    line = getattr(node, "lineno", 1)
                    out.append((f"{path.relative_to(ROOT)}:{line}", doc))
    return out


def stale_names(texts: list[tuple[str, str]]) -> list[str]:
    loggers = _logger_names()
    stale = []
    for where, text in texts:
        for match in DOTTED.finditer(text):
            name = match.group(0)
            if name.rsplit(".", 1)[1] in FILE_SUFFIXES or name in loggers:
                continue
            wrong = resolve(name)
            if wrong:
                stale.append(f"{where}: {name} ({wrong})")
    return stale


def test_every_dotted_name_in_the_package_docstrings_resolves():
    assert not stale_names(_docstrings())


@pytest.mark.parametrize("doc", DOCS)
def test_every_dotted_name_in_the_docs_resolves(doc):
    assert not stale_names([(doc, (ROOT / doc).read_text())])


def test_a_stale_name_is_found():
    planted = [
        ("here", "see ``memstream.projections.turns.NoSuchThing``"),
        ("there", "home: memstream.nosuchpackage"),
        ("moved", "``memstream.workers.consumer.Projection``"),  # lives in projections/base.py
    ]
    found = stale_names(planted)
    assert len(found) == 3, found
    assert stale_names([("fine", "``memstream.query.Asker``, memstream.core.keys.tombstones")]) == []
    assert stale_names([("files", "``$HERMES_HOME/memstream.json``")]) == []


# -- ARCHITECTURE.md's paths and the names beside them -----------------------------------------
PATH = r"[\w./-]+\.(?:py|md|yaml|toml)|[\w/]+/"
IDENT = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


def _file(rel: str) -> Path | None:
    for base in (PACKAGE, ROOT):
        if (base / rel).exists():
            return base / rel
    return None


def paths_and_names(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The backticked paths of ``text`` and the (path, name) pairs it claims: ``path.py``
    (``name``, ``other``; ...), ``path.py`` ``NAME``, and ``name`` in ``path.py``."""
    paths = re.findall(rf"`({PATH})`", text)
    pairs: list[tuple[str, str]] = []
    for m in re.finditer(r"`([\w./-]+\.py)`\s*\(([^()]*)\)", text):
        first = m.group(2).split(";")[0]  # what follows a semicolon may speak of another file
        first = re.sub(r"`[^`]+` in `[^`]+`", "", first)  # and so does "`name` in `other.py`"
        pairs += [(m.group(1), n) for n in re.findall(r"`([^`]+)`", first)]
    pairs += [(m.group(1), m.group(2)) for m in re.finditer(r"`([\w./-]+\.py)` `([^`]+)`", text)]
    pairs += [
        (path, name)
        for m in re.finditer(r"((?:`[^`]+`(?:, | and ))*`[^`]+`) in `([\w./-]+\.py)`", text)
        for path in [m.group(2)]
        for name in re.findall(r"`([^`]+)`", m.group(1))
    ]
    # names only: an environment variable's home is the settings, a key's core/keys.py
    return paths, [(p, n) for p, n in pairs if IDENT.match(n) and not n.startswith("MEMSTREAM_")]


def missing_paths_and_names(text: str) -> list[str]:
    paths, pairs = paths_and_names(text)
    wrong = [f"{p}: no such file" for p in paths if _file(p) is None]
    for rel, name in pairs:
        path = _file(rel)
        if path is None:
            continue  # said above
        source = path.read_text()
        absent = [part for part in name.split(".") if not re.search(rf"\b{re.escape(part)}\b", source)]
        if absent:
            wrong.append(f"{rel} does not name {name}")
    return wrong


def test_architecture_md_paths_exist_and_hold_the_names_it_gives():
    assert not missing_paths_and_names((ROOT / "ARCHITECTURE.md").read_text())


def test_a_missing_path_or_name_is_found():
    planted = (
        "| x | `core/nosuch.py` |\n"
        "| y | `core/keys.py` (`no_such_key_builder`) |\n"
        "| z | `NoSuchClass` in `query/ops.py` |\n"
        "| w | `core/keys.py` (`tombstones`; `MEMSTREAM_X`) |\n"
    )
    assert missing_paths_and_names(planted) == [
        "core/nosuch.py: no such file",
        "core/keys.py does not name no_such_key_builder",
        "query/ops.py does not name NoSuchClass",
    ]


# -- a private name stays private ----------------------------------------------------------------
def private_imports(sources: list[tuple[str, str]]) -> list[str]:
    """Each ``from memstream.X import _name`` of ``sources``: a name one module keeps private
    (a leading underscore) imported by another (a private *module*, ``_base``, may be)."""
    found = []
    for where, source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "memstream":
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        try:
                            importlib.import_module(f"{node.module}.{alias.name}")
                        except ModuleNotFoundError:
                            found.append(f"{where}: {alias.name} from {node.module}")
    return found


def test_no_module_of_the_package_imports_another_modules_private_name():
    sources = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))]
    assert not private_imports(sources)


def test_a_private_import_is_found():
    planted = [("bench", "from memstream.bench.prefetch import question, _append\n")]
    assert private_imports(planted) == ["bench: _append from memstream.bench.prefetch"]
    assert private_imports([("module", "from memstream.provider import _base\n")]) == []
