"""Helpers of the embedded store's tests: a collection of twelve turns."""

from __future__ import annotations

from typing import Callable

from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.ids import point_id
from memstream.projections.stores.port import Point


def fill_turns(store: EdgeStore, text: Callable[[int], str] = lambda i: f"deploy number {i}") -> str:
    """``turns`` v1 (4 dims, active) with twelve points ``e0``..``e11`` of tenant ``t1``, agents
    ``a0``/``a1`` alternating, each point's text ``text(i)``; the collection's name."""
    collection = store.ensure_collection("turns", 1, 4)
    store.upsert(
        collection,
        [
            Point(
                id=point_id(f"e{i}", 0),
                dense=[0.1, 0.2, 0.3, float(i)],
                sparse=sparse_vector(f"deploy number {i}"),
                payload={"tenant": "t1", "agent": f"a{i % 2}", "text": text(i)},
            )
            for i in range(12)
        ],
    )
    store.set_active_version("turns", 1)
    return collection
