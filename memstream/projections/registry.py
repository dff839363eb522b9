"""The projections, in the order the workers run them: one table.

Each row names a projection class and what it needs: the vector store and the embedder,
or Redis alone. Its name, version and consumer group (``{name}.v{version}``) are read from
the class, never written down again: the pipeline builds its projections from this table,
and the command line and the benchmarks ask it for group names. A new projection is a row
here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from memstream.projections.base import group_name
from memstream.projections.facts import FactsProjection
from memstream.projections.memories import MemoriesProjection
from memstream.projections.sessions import SessionsProjection
from memstream.projections.turns import TurnsProjection

__all__ = [
    "PROJECTIONS",
    "Registered",
    "build_projections",
    "group_names",
    "group_of",
    "memory_write_groups",
    "registered",
]


@dataclass(frozen=True)
class Registered:
    """One projection of the table.

    ``vectors``: it is built on the vector store and the embedder (``cls(store, embedder,
    client, prefix)``); otherwise on Redis alone (``cls(client, prefix)``).
    ``memory_writes``: it applies memory writes, and search finds what it applied: a memory
    write is searchable once every such projection applied it (``memstream add --sync``)."""

    cls: type[Any]
    vectors: bool = False
    memory_writes: bool = False

    @property
    def name(self) -> str:
        return str(self.cls.name)

    @property
    def version(self) -> int:
        return int(self.cls.version)

    @property
    def group(self) -> str:
        """The consumer group: ``{name}.v{version}``."""
        return group_name(self.cls)

    def build(self, store: Any, embedder: Any, client: redis.Redis, prefix: str) -> Any:
        """The projection, on ``client`` under ``prefix`` (and on ``store`` and ``embedder`` when it needs them)."""
        if self.vectors:
            return self.cls(store, embedder, client, prefix)
        return self.cls(client, prefix)


PROJECTIONS: tuple[Registered, ...] = (
    Registered(TurnsProjection, vectors=True),
    Registered(MemoriesProjection, vectors=True, memory_writes=True),
    Registered(FactsProjection, memory_writes=True),
    Registered(SessionsProjection),
)


def registered(name: str) -> Registered:
    """The row of the projection called ``name``; ``KeyError`` naming the known ones otherwise."""
    for row in PROJECTIONS:
        if row.name == name:
            return row
    raise KeyError(f"no projection {name!r} (known: {', '.join(r.name for r in PROJECTIONS)})")


def group_names() -> tuple[str, ...]:
    """Every projection's consumer group, in the table's order."""
    return tuple(row.group for row in PROJECTIONS)


def group_of(name: str) -> str:
    """The consumer group of the projection called ``name`` (``KeyError`` for none)."""
    return registered(name).group


def memory_write_groups() -> tuple[str, ...]:
    """The groups that must apply a memory write before search finds it."""
    return tuple(row.group for row in PROJECTIONS if row.memory_writes)


def build_projections(store: Any, embedder: Any, client: redis.Redis, prefix: str) -> list[Any]:
    """One of each projection, in the table's order."""
    return [row.build(store, embedder, client, prefix) for row in PROJECTIONS]
