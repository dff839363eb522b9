"""Which version of each projection a query reads, and the embedder it queries with.

``ActiveVersions`` resolves the active version of a projection from its catalog
(``projections.catalog``), re-read at most every ``ttl`` seconds: a query names the
physical collection of that version (``turns_v2``) and embeds with the embedder that
version was built with, so a switch is atomic for every query (one pointer, read once
per query) and a model change never mixes the vectors of two models. The facts table and
the sessions index of the active version come from here too.

``FixedVersions`` is the same surface over one store's own pointer and one embedder (a
process that keeps no catalog: the benchmarks, tests of one version).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol

import redis

from memstream.projections import (
    Catalog,
    CollectionNotFound,
    Embedder,
    FactsTable,
    SessionsIndex,
    VectorStore,
    Version,
    physical_name,
)

__all__ = ["ActiveVersions", "FixedVersions", "Versions"]


class Versions(Protocol):
    def collection(self, name: str) -> str:
        """The physical collection readers of ``name`` use (``CollectionNotFound``: none)."""

    def embedder(self, name: str) -> Embedder:
        """The embedder to query ``name``'s collection with."""

    def reader(self, name: str) -> tuple[str, Embedder]:
        """``collection(name)`` and ``embedder(name)`` of one and the same version (read
        once: a switch between two reads cannot pair one version's collection with the
        other's model)."""

    def facts(self) -> FactsTable:
        """The facts table of the active facts version."""

    def sessions(self) -> SessionsIndex:
        """The sessions index of the active sessions version."""


class FixedVersions:
    def __init__(self, store: VectorStore, embedder: Embedder, facts: FactsTable, sessions: SessionsIndex | None = None) -> None:
        self.store = store
        self._embedder = embedder
        self._facts = facts
        self._sessions = sessions

    def collection(self, name: str) -> str:
        return self.store.collection_for_read(name)

    def embedder(self, name: str) -> Embedder:
        return self._embedder

    def reader(self, name: str) -> tuple[str, Embedder]:
        return self.collection(name), self._embedder

    def facts(self) -> FactsTable:
        return self._facts

    def sessions(self) -> SessionsIndex:
        if self._sessions is None:
            raise CollectionNotFound("no sessions index here")
        return self._sessions


class ActiveVersions:
    """The active versions from the catalog under ``prefix``. ``embedder_for(version)`` gives
    the embedder a version was built with (it raises when that embedder is missing here).
    ``pick(name, active)``, when given, chooses the version to read instead of the catalog's
    active one (a read replica's: the version it served until its own copy of the active
    one has caught up, ``workers.pipeline``)."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        embedder_for: Callable[[Version], Embedder],
        *,
        ttl: float = 1.0,
        pick: Callable[[str, Version | None], Version | None] | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.catalog = Catalog(client, prefix)
        self.embedder_for = embedder_for
        self.pick = pick
        self.ttl = ttl
        self._cache: dict[str, tuple[float, Version | None]] = {}
        self._tables: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()

    def version(self, name: str) -> Version | None:
        now = time.monotonic()
        hit = self._cache.get(name)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        v = self.catalog.active(name)
        if self.pick is not None:
            v = self.pick(name, v)
        self._cache[name] = (now, v)
        return v

    def refresh(self) -> None:
        """Forget what was read: the next query reads the catalog (after an activation here)."""
        self._cache.clear()

    def _active(self, name: str) -> Version:
        v = self.version(name)
        if v is None:
            raise CollectionNotFound(f"no active version of {name!r} yet")
        return v

    def collection(self, name: str) -> str:
        return physical_name(name, self._active(name).version)

    def embedder(self, name: str) -> Embedder:
        return self.embedder_for(self._active(name))

    def reader(self, name: str) -> tuple[str, Embedder]:
        v = self._active(name)
        return physical_name(name, v.version), self.embedder_for(v)

    def _table(self, name: str, cls: Any) -> Any:
        v = self.version(name)
        n = v.version if v is not None else int(cls.version)
        with self._lock:
            table = self._tables.get((name, n))
            if table is None:
                table = self._tables[(name, n)] = cls(self.client, self.prefix, version=n)
        return table

    def facts(self) -> FactsTable:
        table: FactsTable = self._table("facts", FactsTable)
        return table

    def sessions(self) -> SessionsIndex:
        index: SessionsIndex = self._table("sessions", SessionsIndex)
        return index
