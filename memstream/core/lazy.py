"""Names a package exports but imports on first use: the agent's process and the command
line do not pay for what they never touch (qdrant-client, the text stages' patterns, the
query server's stores).

A package writes ``__getattr__ = lazy_exports(__name__, {"Name": "its.module"})`` (``memstream.projections``:
``{"EdgeStore": "memstream.projections.stores.edge"}``)
and imports the same names under ``if TYPE_CHECKING:`` for the type checker. Guarantee:
the first access imports the module and returns its attribute; a name not in the table
is an ``AttributeError`` as for any module.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``table`` from its
    module on first use."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
