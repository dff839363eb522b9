"""What a module exports is there: every name in a memstream module's ``__all__`` can be
taken from it (``from module import *`` and ``from module import name`` never fail on a
name the module only claims)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import memstream


def _modules_with_all() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(memstream.__path__, "memstream."):
        if info.name.endswith("__main__"):  # runs the command line when imported
            continue
        if hasattr(importlib.import_module(info.name), "__all__"):
            found.append(info.name)
    return found


MODULES = _modules_with_all()


def test_the_walk_finds_the_packages_and_their_modules():
    assert {
        "memstream.core",
        "memstream.producers",
        "memstream.projections",
        "memstream.query",
        "memstream.workers.consumer",
        "memstream.query.server",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_name_a_module_exports_is_defined_in_it(name):
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
