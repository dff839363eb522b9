"""What every backend of the store port shares: vectors as plain lists, the checks on points
and searches, the conditional dense update (``set_dense_looking``) and the fusion's constants."""

from __future__ import annotations

import math
import uuid
from typing import Any, Callable, Sequence

import numpy as np

from memstream.projections.stores.port import DENSE_KEY, Point, PointGone, SparseVector

__all__ = [
    "RRF_K",
    "check_point",
    "check_search",
    "dense_list",
    "dense_matches",
    "prefetch_limit",
    "set_dense_looking",
    "sparse_lists",
    "uuid_ids",
]


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
