"""Tombstones: the ids forgotten in each tenant, shared by every projection.

A ``MemoryForgotten`` is recorded here as well as applied, and nothing named here is
ever projected again: with several shards, or in a replay, the tombstone may be applied
before the event it names (they can sit in different streams).
"""

from __future__ import annotations

from typing import Sequence

import redis

from memstream.core import keys
from memstream.producers import MemoryForgotten
from memstream.projections.base import Delivery


class Tombstones:
    """The ids forgotten in each tenant (a Redis set per tenant, shared by all projections
    and versions: ``memstream.core.keys.tombstones``)."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.prefix = prefix

    def _key(self, tenant: str) -> str:
        return keys.tombstones(self.prefix, tenant)

    def add(self, tenant: str, item_id: str, pipe: redis.client.Pipeline | None = None) -> None:
        """Record that ``item_id`` was forgotten (with ``pipe``: queued there)."""
        (pipe if pipe is not None else self.client).sadd(self._key(tenant), item_id)

    def of_batch(self, batch: Sequence[Delivery], kinds: tuple[type, ...]) -> set[str]:
        """Ids of the batch's events of ``kinds`` that are forgotten: by a stored tombstone,
        or by one in the batch itself (the projections drain concurrently: another may not
        have stored it yet)."""
        here = {(d.event.scope.tenant, d.event.forgotten_id) for d in batch if isinstance(d.event, MemoryForgotten)}
        pairs = [(d.event.scope.tenant, d.event.id) for d in batch if isinstance(d.event, kinds)]
        return {eid for tenant, eid in pairs if (tenant, eid) in here} | self.among(pairs)

    def among(self, pairs: Sequence[tuple[str, str]]) -> set[str]:
        """The ids of ``(tenant, id)`` pairs that were forgotten (one round trip per tenant)."""
        by_tenant: dict[str, list[str]] = {}
        for tenant, item_id in pairs:
            by_tenant.setdefault(tenant, []).append(item_id)
        out: set[str] = set()
        for tenant, ids in by_tenant.items():
            flags = self.client.smismember(self._key(tenant), ids)
            out.update(i for i, flag in zip(ids, flags) if flag)
        return out
