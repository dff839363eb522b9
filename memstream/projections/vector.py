"""What the projections into the vector store share: their collection, the points of a
batch (embedded in one call, a forgotten event's left out) and forgetting an item.

Every point's payload records ``sparse_version``: the ``memstream.projections.sparse``
``VERSION`` that made its keyword vector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis

from memstream.producers import Event, MemoryForgotten
from memstream.projections.base import group_name
from memstream.projections.counters import Counters
from memstream.projections.sparse import VERSION as SPARSE_VERSION
from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.port import Point, VectorStore, point_id
from memstream.projections.tombstones import Tombstones

if TYPE_CHECKING:
    from memstream.projections.embedders.port import Embedder


def item_payload(event: Event, kind: str, text: str, **extra: Any) -> dict[str, Any]:
    scope = event.scope
    return {
        "tenant": scope.tenant, "agent": scope.agent, "session_id": scope.session_id,
        "kind": kind, "event_id": event.id, "occurred_at_ts": event.occurred_at.timestamp(),
        "occurred_at": event.occurred_at.isoformat(), "platform": scope.platform,
        "text": text, **extra,
    }


class VectorProjection:
    name = ""
    version = 1

    def __init__(self, store: VectorStore, embedder: Embedder, client: redis.Redis, prefix: str, *,
                 version: int | None = None) -> None:
        if version is not None:
            self.version = version  # a replayed version: its collection and keys carry it
        self.store = store
        self.embedder = embedder
        self.client = client
        self.prefix = prefix
        self.collection = store.ensure_collection(self.name, self.version, embedder.dim)
        if store.active_version(self.name) is None:
            store.set_active_version(self.name, self.version)
        self.counters = Counters(client, prefix, group_name(self))
        self.tombstones = Tombstones(client, prefix)

    def _points(self, docs: list[tuple[str, str, dict[str, Any]]],
                keywords: dict[str, str] | None = None) -> list[Point]:
        """(point id, text, payload) -> points, embedded in one batch; a forgotten event's
        documents are left out. The keyword (sparse) vector is made from the same text,
        or from ``keywords[point id]`` when given."""
        if not docs:
            return []
        gone = self.tombstones.among([(d[2]["tenant"], d[2]["event_id"]) for d in docs])
        if gone:
            docs = [d for d in docs if d[2]["event_id"] not in gone]
            self.counters.add(tombstoned=len(gone))
            if not docs:
                return []
        vectors = self.embedder.embed([text for _, text, _ in docs])
        keywords = keywords or {}
        return [Point(id=pid, dense=vectors[i], sparse=sparse_vector(keywords.get(pid, text)),
                      payload={**payload, "sparse_version": SPARSE_VERSION})
                for i, (pid, text, payload) in enumerate(docs)]

    def _forget(self, event: MemoryForgotten) -> dict[str, Any] | None:
        """Record the tombstone and delete the item's points; returns the payload of the
        item's first point when this projection held it (None otherwise)."""
        self.tombstones.add(event.scope.tenant, event.forgotten_id)
        head = self.store.retrieve(self.collection, [point_id(event.forgotten_id, 0)])
        n = int(head[0].payload.get("chunks", 1)) if head else 1
        ids = [point_id(event.forgotten_id, i) for i in range(n)]
        if head and head[0].payload.get("tenant") != event.scope.tenant:
            return None  # never across tenants
        self.store.delete(self.collection, ids)
        self.counters.add(forgotten=1 if head else 0)
        return dict(head[0].payload) if head else None
