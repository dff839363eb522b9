"""The storage port of the projections: points, scope filters and the ``VectorStore``.

Backends: ``QdrantStore`` (qdrant-client: a Qdrant server in production, local mode in
tests) and ``EdgeStore`` (qdrant-edge: Qdrant's engine in-process, the embedded
default). One contract test suite runs against every backend.

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

import hashlib
import json
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

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
    "point_id",
    "item_point_id",
    "physical_name",
    "split_physical",
    "INDEXED_FIELDS",
    "DENSE",
    "SPARSE",
    "DENSE_KEY",
    "dense_key",
    "open_store",
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

# Never change: point ids of every projection derive from it.
POINT_NAMESPACE = uuid.UUID("5b0f4d0e-7c1a-5e8a-9d36-6d656d737472")
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


class CollectionNotFound(StoreError):
    """No such collection, or the logical name has no active version yet."""


class DimensionMismatch(StoreError):
    """The collection exists with another dense dimension: build a new version instead."""


def point_id(*parts: str | int) -> str:
    """A deterministic point id: uuid5 of a fixed namespace and the parts (typed, ordered).

    ``point_id(event_id)`` and ``point_id("fact", tenant, key)`` are stable across
    processes and releases; ``point_id(1)`` differs from ``point_id("1")``.
    """
    if not parts:
        raise ValueError("point_id needs at least one part")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, (str, int)):
            raise ValueError(f"point_id parts are str or int, got {type(part).__name__}")
    key = json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))
    return named_uuid(key)


def item_point_id(tenant: str, event_id: str, chunk: int, *, scoped: bool) -> str:
    """The point of chunk ``chunk`` of the item (a turn, a memory) an event is: with
    ``scoped``, of its tenant too (``point_id("item", tenant, event_id, chunk)``): one
    tenant's event can never name another tenant's point, whatever id it carries; without,
    as versions built before (their option ``tenant_ids`` False) keep computing it:
    ``point_id(event_id, chunk)``."""
    return point_id("item", tenant, event_id, chunk) if scoped else point_id(event_id, chunk)


_NAMESPACE_BYTES = POINT_NAMESPACE.bytes


def dense_key(pid: str, text: str) -> str:
    """What names the dense vector a point should carry: a digest of the point's id and
    the text embedded for it (``set_dense`` sets a vector only on a point whose payload
    ``DENSE_KEY`` still equals it). Two points never share a key."""
    return hashlib.sha1(f"{pid}\x1f{text}".encode(), usedforsecurity=False).hexdigest()[:24]


def named_uuid(name: str) -> str:
    """``str(uuid.uuid5(POINT_NAMESPACE, name))``, without the UUID objects: a search
    computes a dozen fact ids for each of its hits, and the objects were most of it."""
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode("utf-8"), usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the point id, its score (cosine, IDF dot or fused) and payload.
    The payload is read-only (a mapping): a store may hand out a view of the same dict to
    every search that finds the point (the embedded store's payload cache)."""

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


def open_store(*, url: str | None = None, path: str | None = None) -> VectorStore:
    """A Qdrant server store if ``url`` is set (MEMSTREAM_QDRANT_URL), else the embedded
    qdrant-edge store under ``path``. Backends are imported here, on first use:
    qdrant-client alone takes about a second to import."""
    if url:
        from memstream.projections.stores.qdrant import QdrantStore

        return QdrantStore(url)
    if path:
        from memstream.projections.stores.edge import EdgeStore

        return EdgeStore(path)
    raise ValueError("open_store needs a Qdrant url or an embedded store path")


# --- helpers shared by the backends -------------------------------------------------


def dense_list(dense: Sequence[float] | Any) -> list[float]:
    """A plain list of floats from a list or a 1-d numpy array (ValueError if not finite)."""
    if isinstance(dense, np.ndarray):
        if dense.size == 0 or not np.isfinite(dense).all():
            raise ValueError("dense vector must be non-empty and finite")
        listed: list[float] = dense.tolist()
        return listed
    values = [float(x) for x in dense]
    if not values or not all(math.isfinite(x) for x in values):
        raise ValueError("dense vector must be non-empty and finite")
    return values


def sparse_lists(sparse: SparseVector) -> tuple[list[int], list[float]]:
    indices, values = sparse
    indices = indices.tolist() if hasattr(indices, "tolist") else [int(i) for i in indices]
    values = values.tolist() if hasattr(values, "tolist") else [float(v) for v in values]
    if len(indices) != len(values):
        raise ValueError("sparse vector: indices and values differ in length")
    if len(set(indices)) != len(indices):
        raise ValueError("sparse vector: duplicate indices")
    if any(i < 0 or i >= 1 << 32 for i in indices):
        raise ValueError("sparse vector: indices must be uint32")
    return indices, values


def check_point(point: Point, dim: int | None = None) -> None:
    """ValueError unless the point has a UUID id, a tenant and (if given) the right dim."""
    try:
        uuid.UUID(point.id)
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"point id {point.id!r} is not a UUID: use point_id(...)") from None
    tenant = point.payload.get("tenant")
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"point {point.id}: payload['tenant'] is required (a non-empty str)")
    if point.dense is not None and dim is not None and len(point.dense) != dim:
        raise ValueError(f"point {point.id}: dense has {len(point.dense)} dims, expected {dim}")


def uuid_ids(ids: Sequence[str]) -> list[str]:
    """Canonical UUID strings of ``ids`` (ValueError naming the first that is not one)."""
    out = []
    for i in ids:
        try:
            out.append(str(uuid.UUID(str(i))))
        except ValueError:
            raise ValueError(f"point id {i!r} is not a UUID: use point_id(...)") from None
    return out


def dense_matches(points: Sequence[Point], vectors: Sequence[tuple[str, Any, str]]) -> list[tuple[str, Any, str]]:
    """The ``(id, dense, key)`` of ``vectors`` whose point is among ``points`` (retrieved
    with payload) with that ``DENSE_KEY``: at most one per point, whatever the order."""
    current = {p.id: p.payload.get(DENSE_KEY) for p in points}
    chosen: dict[str, tuple[str, Any, str]] = {}
    for pid, dense, key in vectors:
        canonical = str(uuid.UUID(pid))
        if current.get(canonical) == key:
            chosen[canonical] = (pid, dense, key)
    return list(chosen.values())


SET_DENSE_ATTEMPTS = 5  # a point deleted between the look and the write: look again


class PointGone(StoreError):
    """A point named by a conditional update was deleted meanwhile (``set_dense_looking``
    looks again)."""


DenseWrite = Callable[[list[tuple[str, list[float], str]]], None]


def set_dense_looking(
    retrieve: Callable[[list[str]], Sequence[Point]],
    vectors: Sequence[tuple[str, Any, str]],
    write: DenseWrite,
    *,
    dim: int | None,
) -> int:
    """``VectorStore.set_dense`` for every backend: look the points up (``retrieve``: the
    points among the ids, with payload), keep the ``(id, dense, key)`` whose point holds
    ``key`` now (``dense_matches``; the dense as a list of ``dim`` floats, ValueError
    otherwise) and ``write`` them: the backend's one conditional update, which checks each
    ``DENSE_KEY`` again as it writes and raises ``PointGone`` when a point was deleted
    since the look. Then look again, up to ``SET_DENSE_ATTEMPTS`` times (the last
    ``PointGone`` is raised). Returns how many points matched."""
    if not vectors:
        return 0
    for attempt in range(SET_DENSE_ATTEMPTS):
        matched = dense_matches(retrieve([v[0] for v in vectors]), vectors)
        if not matched:
            return 0
        listed = []
        for pid, dense, key in matched:
            values = dense_list(dense)
            if dim is not None and len(values) != dim:
                raise ValueError(f"point {pid}: dense has {len(values)} dims, expected {dim}")
            listed.append((pid, values, key))
        try:
            write(listed)
            return len(listed)
        except PointGone:
            if attempt == SET_DENSE_ATTEMPTS - 1:
                raise
    return 0  # pragma: no cover - the loop returns or raises


def check_search(dense: Sequence[float] | Any | None, sparse: SparseVector | None, limit: int, fusion: str) -> None:
    if dense is None and sparse is None:
        raise ValueError("search needs a dense or a sparse query vector (or both)")
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if fusion not in ("rrf", "dbsf"):
        raise ValueError(f"fusion must be 'rrf' or 'dbsf', got {fusion!r}")


def prefetch_limit(limit: int) -> int:
    """Candidates each side contributes to a fused search."""
    return max(4 * limit, 40)


RRF_K = 60  # the constant of Cormack et al.; set explicitly so every backend agrees
