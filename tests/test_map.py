"""The map stays true: every package is a room in ARCHITECTURE.md and in the docs' Layout page, and in the
import-layer contract that CI checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memstream"


def _packages() -> list[str]:
    return sorted(d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists() and d.name != "__pycache__")


def test_every_package_is_a_room_of_architecture_md_and_of_the_docs_layout():
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    layout = (ROOT / "docs" / "layout.md").read_text()
    for name in _packages():
        assert f"  {name}/" in architecture, f"ARCHITECTURE.md's tree does not name memstream/{name}/"
        assert f"`memstream/{name}/`" in layout, f"docs/layout.md does not name memstream/{name}/"


def test_every_package_has_its_layer_in_the_import_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    layered = {part.strip().removeprefix("memstream.") for layer in layers for part in layer.split("|")}
    assert set(_packages()) == layered


def test_tests_mirror_the_packages():
    for name in _packages():
        assert (ROOT / "tests" / name).is_dir(), f"no tests/{name}/ beside memstream/{name}/"


def test_across_packages_imports_go_through_the_package():
    """``from memstream.projections import X``, never ``from memstream.projections.turns import X``
    from another package: a package's __init__ is its public surface."""
    import ast

    deep = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).parts
        if "plugin" in rel:  # copied into a Hermes home: it imports what Hermes loads
            continue
        own = rel[0] if len(rel) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                parts = name.split(".")
                if parts[0] == "memstream" and len(parts) > 2 and parts[1] != own:
                    deep.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not deep, deep
