"""The workers' side of the tenant boundary: is this event really its tenant's?

The streams are shared by every tenant's hosts (each may append, none may read), so an
entry's ``scope.tenant`` is only a claim. Once any tenant is registered
(``memstream tenant add``), an event counts only if its tenant is registered and its
``sig`` field is that tenant's signature of its payload (``memstream.producers.tenants``); with no
tenant registered nothing is checked (a single-user log).
"""

from __future__ import annotations

import redis

from memstream.producers import EntryFields, Event, TenantRegistry, verify

__all__ = ["TenantGate"]


class TenantGate:
    """``refusal(event, fields)``: why the entry is not its tenant's (None: it is).
    Raises ``redis.RedisError`` when the registry cannot be read (a transient failure)."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.registry = TenantRegistry(client, prefix)

    def refusal(self, event: Event, fields: EntryFields) -> str | None:
        tenants = self.registry.all()
        if not tenants:
            return None
        tenant = event.scope.tenant
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
