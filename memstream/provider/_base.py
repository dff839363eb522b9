"""Hermes's ``MemoryProvider`` base class, or a stand-in outside Hermes.

Inside Hermes ``agent.memory_provider`` is importable and the provider subclasses the
real ABC; in memstream's own environment (tests, tools) the stand-in declares the same
abstract members so the provider can be built and exercised without Hermes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

try:  # pragma: no cover - depends on the interpreter
    from agent.memory_provider import MemoryProvider  # type: ignore[import-not-found]  # only inside Hermes

    IN_HERMES = True
except Exception:  # ImportError, or a broken Hermes install
    IN_HERMES = False

    class MemoryProvider(ABC):  # type: ignore[no-redef]  # the stand-in outside Hermes
        """Stand-in with the abstract members of Hermes 0.19's MemoryProvider."""

        @property
        @abstractmethod
        def name(self) -> str: ...

        @abstractmethod
        def is_available(self) -> bool: ...

        @abstractmethod
        def initialize(self, session_id: str, **kwargs: Any) -> None: ...

        @abstractmethod
        def get_tool_schemas(self) -> list[dict[str, Any]]: ...


__all__ = ["MemoryProvider", "IN_HERMES"]
