"""The projections, in the order the workers run them: one table.

Each row names a projection class and what it needs: the vector store and the embedder,
or Redis alone. Its name, first version and consumer group (``{name}.v{version}``) are
read from the class, never written down again: the pipeline builds its projections from
this table, and the command line and the benchmarks ask it for group names. A new
projection of memstream's own is a row here; one of yours is a class registered through
the ``memstream.projections`` entry point or the ``MEMSTREAM_PROJECTIONS`` setting
(``plugins``). Which versions of each exist, and which one readers use, is the catalog's
(``projections.catalog``): ``active_group`` asks it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import redis

from memstream.core import PermanentError, keys
from memstream.projections.base import group_name
from memstream.projections.catalog import Catalog
from memstream.projections.facts import FactsProjection
from memstream.projections.memories import MemoriesProjection
from memstream.projections.replicas import Replicas, destroy_group
from memstream.projections.sessions import SessionsProjection
from memstream.projections.turns import TurnsProjection

__all__ = [
    "PROJECTIONS",
    "PluginError",
    "Registered",
    "active_group",
    "all_registered",
    "drop_version",
    "plugins",
    "running_versions",
    "group_names",
    "group_of",
    "memory_write_groups",
    "registered",
    "select",
]


@dataclass(frozen=True)
class Registered:
    """One projection of the table.

    ``vectors``: it is built on the vector store and the embedder (``cls(store, embedder,
    client, prefix)``); otherwise on Redis alone (``cls(client, prefix)``), and so it may run
    in any process, the embedded store's owner or not (``memstream up`` runs those in a
    process of their own: ``service.sidecar``). A projection of your own says which with
    ``VECTORS``.
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

    @property
    def new_options(self) -> dict[str, Any]:
        """The options every version built from now on records (the class's ``NEW_OPTIONS``):
        a version recorded before an option existed keeps the behaviour of its default."""
        return dict(getattr(self.cls, "NEW_OPTIONS", {}) or {})

    def build(
        self,
        store: Any,
        embedder: Any,
        client: redis.Redis,
        prefix: str,
        *,
        version: int | None = None,
        options: dict[str, Any] | None = None,
        replica: int = 0,
    ) -> Any:
        """The projection, on ``client`` under ``prefix`` (and on ``store`` and ``embedder`` when
        it needs them), as ``version`` (default: the class's) with ``options`` (its own); with
        ``replica``, a read replica's (its own consumer group: ``projections.replicas``; memstream's
        vector projections only)."""
        extra: dict[str, Any] = {"version": version}
        if options:
            extra["options"] = options
        if replica:
            if not (self.vectors and self in PROJECTIONS):
                raise ValueError(f"a read replica runs memstream's vector projections only, not {self.name!r}")
            extra["replica"] = replica
        if self.vectors:
            return self.cls(store, embedder, client, prefix, **extra)
        return self.cls(client, prefix, **extra)


PROJECTIONS: tuple[Registered, ...] = (
    Registered(TurnsProjection, vectors=True),
    Registered(MemoriesProjection, vectors=True, memory_writes=True),
    Registered(FactsProjection, memory_writes=True),
    Registered(SessionsProjection),
)


class PluginError(PermanentError, ValueError):
    """A projection of your own that cannot be loaded (the message names it and why)."""


def plugins(spec: str = "") -> tuple[Registered, ...]:
    """The projections of the ``memstream.projections`` entry point and of ``spec`` (the
    ``MEMSTREAM_PROJECTIONS`` setting: comma-separated ``module:Class``). Each class needs
    ``name`` (not one of memstream's own), ``version`` and ``apply(batch)``, and is built as
    ``cls(client, prefix, version=N)`` (with ``VECTORS = True``: ``cls(store, embedder,
    client, prefix, version=N)``) and keeps its Redis data under ``core.keys.own(prefix,
    name, version, ...)``, which dropping a version deletes."""
    found: list[tuple[str, Any]] = []
    for ep in entry_points(group="memstream.projections"):
        try:
            found.append((f"entry point {ep.name}", ep.load()))
        except Exception as exc:  # an installed package that is broken: say which
            raise PluginError(
                f"projection entry point {ep.name!r} ({ep.value}) cannot be loaded: {type(exc).__name__}: {exc}"
            ) from exc
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        module, _, attr = item.partition(":")
        if not module or not attr:
            raise PluginError(f"MEMSTREAM_PROJECTIONS: {item!r} is not module:Class")
        try:
            found.append((item, getattr(importlib.import_module(module), attr)))
        except Exception as exc:
            raise PluginError(f"MEMSTREAM_PROJECTIONS: {item!r} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    rows: list[Registered] = []
    own = {r.name for r in PROJECTIONS}
    for source, cls in found:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name.isidentifier() or not name.islower():
            raise PluginError(f"{source}: a projection needs a lower-case identifier as its name, not {name!r}")
        if not isinstance(getattr(cls, "version", None), int) or not callable(getattr(cls, "apply", None)):
            raise PluginError(f"{source}: projection {name!r} needs an int version and apply(batch)")
        if name in own or any(r.name == name for r in rows):
            raise PluginError(f"{source}: a projection called {name!r} exists already")
        rows.append(Registered(cls, vectors=bool(getattr(cls, "VECTORS", False))))
    return tuple(rows)


def all_registered(spec: str = "") -> tuple[Registered, ...]:
    """memstream's projections, then yours (``plugins``)."""
    return PROJECTIONS + plugins(spec)


def select(rows: tuple[Registered, ...], names: str | tuple[str, ...] = "") -> tuple[Registered, ...]:
    """The rows of ``rows`` named in ``names`` (comma-separated, or a tuple; empty: all), in
    the table's order. ``PluginError`` naming the known ones for a name that is none of them."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    if not wanted:
        return rows
    known = {r.name for r in rows}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise PluginError(f"no projection {', '.join(map(repr, unknown))} (known: {', '.join(r.name for r in rows)})")
    return tuple(r for r in rows if r.name in wanted)


def registered(name: str, spec: str = "") -> Registered:
    """The row of the projection called ``name``; ``KeyError`` naming the known ones otherwise."""
    rows = PROJECTIONS if any(r.name == name for r in PROJECTIONS) else all_registered(spec)
    for row in rows:
        if row.name == name:
            return row
    raise KeyError(f"no projection {name!r} (known: {', '.join(r.name for r in rows)})")


def active_group(client: redis.Redis, prefix: str, name: str) -> str:
    """The consumer group of the version of ``name`` readers use (the class's first version
    before the catalog records one)."""
    v = Catalog(client, prefix).active(name)
    return v.group if v is not None else group_of(name)


def running_versions(client: redis.Redis, prefix: str, spec: str = "") -> list[tuple[Registered, int, str]]:
    """Every version the workers run, projection by projection in the table's order:
    (row, version, group). A projection whose catalog is empty (no worker started since
    versions were recorded) runs its class's first version."""
    catalog = Catalog(client, prefix)
    out: list[tuple[Registered, int, str]] = []
    for row in all_registered(spec):
        versions = [v for v in catalog.versions(row.name) if v.state not in ("dropping", "failed")]
        if not versions:
            out.append((row, row.version, row.group))
        out += [(row, v.version, v.group) for v in versions]
    return out


def drop_version(row: Registered, store: Any, client: redis.Redis, prefix: str, version: int, streams: list[str]) -> None:
    """Remove everything version ``version`` of ``row`` wrote: its collection (vectors),
    its versioned keys (the class's ``FAMILIES``), its group on every stream and the group's
    own records (its dense stage's backlog too), and the read replicas' groups of it. The dead
    letters stay: they are the log's history."""
    group = f"{row.name}.v{version}"
    if row.vectors and store is not None:
        store.drop_collection(row.name, version)
    patterns = [keys.version_pattern(prefix, family, version) for family in getattr(row.cls, "FAMILIES", ())]
    patterns.append(keys.own_pattern(prefix, row.name, version))
    for pattern in patterns:
        batch: list[Any] = []
        for key in client.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch = []
        if batch:
            client.delete(*batch)
    destroy_group(client, prefix, group, streams)
    replicas = Replicas(client, prefix)  # the read replicas' groups of the version go with it
    for replica_group in replicas.of_version(group):
        replicas.drop(replica_group, streams)


def group_names() -> tuple[str, ...]:
    """Every projection's consumer group, in the table's order."""
    return tuple(row.group for row in PROJECTIONS)


def group_of(name: str) -> str:
    """The consumer group of the projection called ``name`` (``KeyError`` for none)."""
    return registered(name).group


def memory_write_groups(client: redis.Redis, prefix: str) -> tuple[str, ...]:
    """The groups that must apply a memory write before search finds it: those of the
    versions readers use (a build is not searched until it is active), and the groups every
    live read replica answers from (``projections.replicas``; its own group of the version it
    serves), so that searchable means searchable in every query process."""
    rows = [row for row in PROJECTIONS if row.memory_writes]
    groups = tuple(active_group(client, prefix, row.name) for row in rows)
    return groups + tuple(Replicas(client, prefix).serving(row.name for row in rows))
