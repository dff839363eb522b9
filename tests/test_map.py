"""The map stays true: every package is a room in ARCHITECTURE.md and README.md, and in the
import-layer contract that CI checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memstream"


def _packages() -> list[str]:
    return sorted(d.name for d in PACKAGE.iterdir()
                  if (d / "__init__.py").exists() and d.name != "__pycache__")


def test_every_package_is_a_room_of_architecture_md_and_of_the_readme_layout():
    architecture = (ROOT / "ARCHITECTURE.md").read_text()
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    for name in _packages():
        assert f"  {name}/" in architecture, f"ARCHITECTURE.md's tree does not name memstream/{name}/"
        assert f"`memstream/{name}/`" in layout, f"README's layout does not name memstream/{name}/"


def test_every_package_has_its_layer_in_the_import_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    layered = {part.strip().removeprefix("memstream.") for layer in layers for part in layer.split("|")}
    assert set(_packages()) == layered


def test_tests_mirror_the_packages():
    for name in _packages():
        assert (ROOT / "tests" / name).is_dir(), f"no tests/{name}/ beside memstream/{name}/"
