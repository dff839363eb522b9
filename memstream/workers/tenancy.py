"""The workers' side of the tenant boundary: is this event really its tenant's?

An entry's ``scope.tenant`` is only a claim. In a tenant's own log (``P:t:T:events``) Redis
has checked who appended it: only T's hosts and the operator may, so an event there counts
as T's only if it claims T (an event claiming another tenant is forged) and T is registered.
In the operator's streams (where tenants' hosts appended before they had logs of their own),
once any tenant is registered (``memstream tenant add``), an event counts only if its
tenant is registered and its ``sig`` field is that tenant's signature of its payload
(``memstream.producers.tenants``); with no tenant registered nothing is checked (a
single-user log).
"""

from __future__ import annotations

import redis

from memstream.core import keys
from memstream.producers import EntryFields, Event, TenantRegistry, verify

__all__ = ["TenantGate"]


class TenantGate:
    """``refusal(event, fields)``: why the entry is not its tenant's (None: it is).
    Raises ``redis.RedisError`` when the registry cannot be read (a transient failure)."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.prefix = prefix
        self.registry = TenantRegistry(client, prefix)

    def refusal(self, event: Event, fields: EntryFields, stream: str = "") -> str | None:
        tenants = self.registry.all()
        tenant = event.scope.tenant
        owner = keys.stream_tenant(self.prefix, stream) if stream else None
        if owner is not None:
            if tenant != owner:
                return (
                    f"forged: the log of tenant {owner[:80]!r} holds an event of tenant {tenant[:80]!r} "
                    "(a tenant's hosts append their own tenant's events only)"
                )
            if tenants and owner not in tenants:
                return f"forged: tenant {owner[:80]!r} is not registered (removed: its log is kept, not projected again)"
            return None  # Redis checked the writer: only the tenant's hosts and the operator append here
        if not tenants:
            return None
        found = tenants.get(tenant)
        if found is None:
            return (
                f"forged: tenant {tenant[:80]!r} is not registered (memstream tenant add), "
                "and only registered tenants may append once any is"
            )
        sig = fields.get(b"sig", fields.get("sig"))
        data = fields.get(b"data", fields.get("data"))
        if isinstance(sig, bytes):
            try:
                sig = sig.decode("ascii")
            except UnicodeDecodeError:
                sig = None
        if isinstance(data, str):
            data = data.encode("latin-1", "replace")
        if not isinstance(sig, str) or not isinstance(data, bytes) or not verify(found.sign_key, data, sig):
            return (
                f"forged: the entry is not signed by tenant {tenant[:80]!r} "
                "(appended with another tenant's credentials, or tampered with)"
            )
        return None
