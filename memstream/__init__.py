"""memstream: event-sourced memory for fleets of Hermes agents (CLI and embedded service)."""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from typing import Any, Sequence

__version__ = "0.1.0"
__all__ = ["__version__", "plain_structlog"]

# What structlog's console renderer imports at structlog's import when it is installed, for
# tracebacks and Windows colours; memstream renders JSON, or the console renderer with
# exceptions already formatted as text (core/logs.py), so its processes need none of them.
CONSOLE_EXTRAS = frozenset({"rich", "colorama", "better_exceptions"})


class _Refuse(MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if fullname.partition(".")[0] in CONSOLE_EXTRAS:
            raise ImportError(f"{fullname} is not imported with structlog here")
        return None


def plain_structlog() -> bool:
    """Import structlog without the console extras it would import (rich, pygments,
    colorama: about 12 MB resident in each process), for a process memstream starts itself
    (the service, its children), before anything else is imported. They stay importable
    afterwards: the command line's progress bars and ``top`` import rich when they draw.
    Whether it did (False when structlog or an extra was imported already: nothing changes)."""
    if "structlog" in sys.modules or CONSOLE_EXTRAS & set(sys.modules):
        return False
    finder = _Refuse()
    sys.meta_path.insert(0, finder)
    try:
        import structlog  # noqa: F401  # imported here, without the extras
    finally:
        sys.meta_path.remove(finder)
    return True
