"""The storage port of the projections: points, scope filters and the ``VectorStore``.

Backends: ``QdrantStore`` (qdrant-client: a Qdrant server in production, local mode in
tests) and ``EdgeStore`` (qdrant-edge: Qdrant's engine in-process, the embedded
default), opened by ``memstream.projections.stores.factory.open_store``; what they share is
in ``memstream.projections.stores.backend``, point ids in ``memstream.projections.stores.ids``.
One contract test suite runs against every backend.

Collections are versioned: ``ensure_collection("turns", 2, dim)`` creates ``turns_v2``
beside ``turns_v1``; ``set_active_version("turns", 2)`` switches readers atomically.
Every method taking a ``collection`` accepts a physical name (``turns_v2``) or a
logical one (``turns``), which reads or writes the active version at the time of the
call. To pin a multi-call read (scroll pagination) to one version, resolve it once with
``collection_for_read``.

Every point carries ``payload["tenant"]``, and every filtered call requires a tenant:
nothing crosses tenants by accident.

Errors: ``StoreUnavailable`` (and ``StoreLocked``) are transient (``TransientError``),
retry later; ``CollectionNotFound``, ``DimensionMismatch`` and other ``StoreError`` are
permanent (``PermanentError``);
a malformed point or filter raises ``ValueError`` before the store is touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

from memstream.core import PermanentError, TransientError

__all__ = [
    "VectorStore",
    "Point",
    "Hit",
    "Search",
    "Filter",
    "SparseVector",
    "Fusion",
    "StoreError",
    "StoreUnavailable",
    "StoreLocked",
    "CollectionNotFound",
    "DimensionMismatch",
    "PointGone",
    "physical_name",
    "split_physical",
    "INDEXED_FIELDS",
    "DENSE",
    "SPARSE",
    "DENSE_KEY",
]

DENSE = "dense"  # name of the dense vector (cosine)
SPARSE = "sparse"  # name of the sparse vector (IDF modifier)
# Payload field naming the text a point's dense vector is (to be) made from: ``dense_key``.
DENSE_KEY = "dense_key"

# Payload fields every collection indexes; ``tenant`` is the tenant key.
INDEXED_FIELDS: Mapping[str, Literal["keyword", "float"]] = {
    "tenant": "keyword",
    "agent": "keyword",
    "session_id": "keyword",
    "kind": "keyword",
    "event_id": "keyword",
    "occurred_at_ts": "float",
}

SparseVector = tuple[Sequence[int], Sequence[float]]
Fusion = Literal["rrf", "dbsf"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_PHYSICAL = re.compile(r"^(?P<name>[a-z][a-z0-9_]*?)_v(?P<version>[0-9]+)$")


class StoreError(PermanentError):
    """A permanent store error: retrying the same call will fail the same way."""


class StoreUnavailable(TransientError):
    """Transient: the store cannot be reached or is busy; retry the call later.

    Not a ``StoreError`` (that one is permanent): catch both to catch every store error."""


class StoreLocked(StoreUnavailable):
    """The embedded store's directory is open in another process (single-process engine).

    Run the projector and the queries in one process (``memstream up``), or use a Qdrant
    server (``MEMSTREAM_QDRANT_URL``) when several processes need the store.
    """


class PointGone(StoreError):
    """A point named by a conditional update was deleted meanwhile (``set_dense_looking``
    looks again)."""


class CollectionNotFound(StoreError):
    """No such collection, or the logical name has no active version yet."""


class DimensionMismatch(StoreError):
    """The collection exists with another dense dimension: build a new version instead."""


def physical_name(name: str, version: int) -> str:
    """``{name}_v{version}``; validates both (ValueError)."""
    if not _NAME.match(name) or _PHYSICAL.match(name):
        raise ValueError(f"collection name {name!r}: use [a-z][a-z0-9_]*, not ending in _v<number>")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:  # type: ignore[redundant-expr]  # for untyped callers
        raise ValueError(f"collection version must be an int >= 1, got {version!r}")
    return f"{name}_v{version}"


def split_physical(collection: str) -> tuple[str, int] | None:
    """``("turns", 2)`` for ``"turns_v2"``; ``None`` for a logical name."""
    m = _PHYSICAL.match(collection)
    return (m.group("name"), int(m.group("version"))) if m else None


@dataclass(frozen=True, slots=True)
class Point:
    """One point: a UUID id, an optional dense vector, an optional sparse vector and a payload.

    A point may be written without its dense vector (keyword search finds it at once) and
    be given one later with ``set_dense``; a dense search does not see it until then.

    ``payload["tenant"]`` (a non-empty str) is required on upsert. Search and scroll
    results come back as ``Point``/``Hit`` without vectors unless asked for.
    """

    id: str
    dense: Sequence[float] | Any | None = None  # list[float] or a 1-d numpy array
    sparse: SparseVector | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)


class Hit(NamedTuple):
    """A search result: the point id, its score (cosine, IDF dot or fused) and payload.
    The payload is read-only (a mapping): a store may hand out a view of the same dict to
    every search that finds the point (the embedded store's payload cache). A named tuple:
    immutable as a frozen dataclass, and cheaper to make (a search makes a hundred)."""

    id: str
    score: float
    payload: Mapping[str, Any]


Values = str | Sequence[str] | None


@dataclass(frozen=True, slots=True)
class Filter:
    """The scope of a read or a delete. ``tenant`` is required; other fields narrow it.

    ``agent``, ``session_id`` and ``kind`` take one value or a sequence (any of them);
    ``since_ts <= occurred_at_ts < until_ts`` (unix seconds); ``exclude_ids`` are
    point ids left out of the result.
    """

    tenant: str
    agent: Values = None
    session_id: Values = None
    kind: Values = None
    since_ts: float | None = None
    until_ts: float | None = None
    exclude_ids: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not self.tenant or not isinstance(self.tenant, str):
            raise ValueError("Filter.tenant is required (a non-empty str)")
        for name in ("agent", "session_id", "kind"):
            value = getattr(self, name)
            if value is None or isinstance(value, str):
                continue
            values = tuple(value)
            if not values or not all(isinstance(v, str) for v in values):
                raise ValueError(f"Filter.{name}: a str or a non-empty sequence of str")
            object.__setattr__(self, name, values)
        object.__setattr__(self, "exclude_ids", tuple(self.exclude_ids))

    def matches(self) -> list[tuple[str, str | tuple[str, ...]]]:
        """``(field, value-or-values)`` pairs that must all match, tenant first."""
        out: list[tuple[str, str | tuple[str, ...]]] = [("tenant", self.tenant)]
        for name in ("agent", "session_id", "kind"):
            value = getattr(self, name)
            if value is not None:
                out.append((name, value))
        return out


@dataclass(frozen=True, slots=True)
class Search:
    """One search of ``VectorStore.search_many``: the arguments ``search`` takes."""

    filter: Filter
    dense: Sequence[float] | Any | None = None
    sparse: SparseVector | None = None
    limit: int = 10
    fusion: Fusion = "rrf"


@runtime_checkable
class VectorStore(Protocol):
    """The port every projection and query uses; see the module docstring for naming."""

    def ensure_collection(self, name: str, version: int, dim: int) -> str:
        """Create ``{name}_v{version}`` (dense cosine ``dim`` + sparse IDF + payload indexes)
        if absent and return its name. Idempotent; DimensionMismatch if it exists with
        another dim. Does not activate it."""
        ...

    def drop_collection(self, name: str, version: int) -> None:
        """Delete ``{name}_v{version}``; idempotent. StoreError if it is the active one."""
        ...

    def versions(self, name: str) -> list[int]:
        """Versions of ``name`` that exist, ascending."""
        ...

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Insert or replace whole points (vectors and payload), applied when it returns.
        Idempotent: the same points twice leave the same state."""
        ...

    def set_dense(self, collection: str, vectors: Sequence[tuple[str, Sequence[float] | Any, str]]) -> int:
        """For each ``(id, dense, key)``: set the point's dense vector, if the point exists
        and its payload ``DENSE_KEY`` equals ``key`` (keys name their point: ``dense_key``);
        else nothing (a point deleted or re-indexed since is left as it is). The check and
        the write are one conditional update in the engine, so a concurrent delete or
        re-index is never undone. Never creates a point; payload and sparse vector are
        kept. Idempotent. Returns how many points matched."""
        ...

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id; idempotent (unknown ids are ignored)."""
        ...

    def delete_where(self, collection: str, filter: Filter) -> None:
        """Delete every point in the filter's scope; idempotent."""
        ...

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        """Merge ``payload`` keys into existing points (others kept); idempotent."""
        ...

    def search(
        self,
        collection: str,
        *,
        dense: Sequence[float] | Any | None = None,
        sparse: SparseVector | None = None,
        filter: Filter,
        limit: int = 10,
        fusion: Fusion = "rrf",
    ) -> list[Hit]:
        """Top ``limit`` points in scope, best first: by cosine (dense only), IDF dot
        (sparse only) or, with both, fused in the engine (prefetch each + RRF/DBSF)."""
        ...

    def search_many(self, collection: str, searches: Sequence[Search]) -> list[list[Hit]]:
        """What ``search`` answers to each of ``searches``, in order, in one engine call where
        the engine plans a batch (the embedded store: a dense search of 10k points costs about
        half as much in a batch of 8)."""
        ...

    def scroll(
        self, collection: str, filter: Filter, *, limit: int = 100, offset: str | None = None
    ) -> tuple[list[Point], str | None]:
        """A page of points in scope ordered by id (no vectors) and the next offset (None
        at the end). Pin ``collection`` with ``collection_for_read`` across pages."""
        ...

    def count(self, collection: str, filter: Filter | None = None) -> int:
        """Exact number of points in scope (all points without a filter)."""
        ...

    def retrieve(self, collection: str, ids: Sequence[str], *, with_vectors: bool = False) -> list[Point]:
        """The points that exist among ``ids`` (order not guaranteed)."""
        ...

    def active_version(self, name: str) -> int | None:
        """The version readers of ``name`` see, or None if none was activated."""
        ...

    def set_active_version(self, name: str, version: int) -> None:
        """Atomically switch readers of ``name`` to an existing version."""
        ...

    def collection_for_read(self, name: str) -> str:
        """The physical collection readers of ``name`` see now; CollectionNotFound if none."""
        ...

    def close(self) -> None:
        """Release the store (flushes the embedded engine); idempotent."""
        ...
