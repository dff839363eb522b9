"""Point ids: deterministic (uuid5 of a fixed namespace), so a redelivered event writes the
same point again; and the key naming the text a point's dense vector is made from."""

from __future__ import annotations

import hashlib
import json
import uuid

__all__ = ["POINT_NAMESPACE", "dense_key", "item_point_id", "named_uuid", "point_id"]

# Never change: point ids of every projection derive from it.
POINT_NAMESPACE = uuid.UUID("5b0f4d0e-7c1a-5e8a-9d36-6d656d737472")


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
