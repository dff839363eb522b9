"""Hermes's ``MemoryProvider`` base class, or a stand-in outside Hermes; and the optional
members of Hermes 0.2x's ``agent.memory_provider`` where that Hermes has them.

Inside Hermes ``agent.memory_provider`` is importable and the provider subclasses the
real ABC; in memstream's own environment (tests, tools) the stand-in declares the same
abstract members so the provider can be built and exercised without Hermes.

Hermes 0.2x adds, beside the ABC: ``spawn_context_thread`` (background threads of a
provider carry the profile's context variables), ``is_trivial_prompt`` (the prefetch
gate) and ``RecallStatus`` (what ``recall_status()`` returns). Each is None here when the
Hermes running (0.19) has no such member; ``RecallStatus`` then is a stand-in of the same
shape, never shown to that Hermes (it never asks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

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


_hermes: Any = None
if IN_HERMES:  # pragma: no cover - depends on the interpreter
    import agent.memory_provider as _hermes  # type: ignore[import-not-found, no-redef]  # only inside Hermes

spawn_context_thread: Callable[..., Any] | None = getattr(_hermes, "spawn_context_thread", None)
is_trivial_prompt: Callable[[str], bool] | None = getattr(_hermes, "is_trivial_prompt", None)


@dataclass(frozen=True)
class _RecallStatus:
    """Stand-in of Hermes 0.2x's ``RecallStatus`` (same fields) where Hermes has none."""

    provider_label: str
    count: int
    glyph: str = "\U0001f9e0"


RecallStatus: Any = getattr(_hermes, "RecallStatus", None) or _RecallStatus

__all__ = ["MemoryProvider", "IN_HERMES", "RecallStatus", "is_trivial_prompt", "spawn_context_thread"]
