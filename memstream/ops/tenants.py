"""``memstream tenant``: register tenants, an ACL user each, whose credentials an agent
host of that tenant uses (``memstream.producers.tenants``). Needs the operator's credentials."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import redis

from memstream.core import Settings
from memstream.ops.connect import connect, user_url
from memstream.ops.errors import CommandError
from memstream.producers import TenantError, TenantRegistry

__all__ = ["add_tenant", "remove_tenant", "tenants", "update_tenants"]


@contextmanager
def _registry(settings: Settings, action: str, name: str | None = None) -> Iterator[TenantRegistry]:
    """The tenant registry of the log; its refusals as ``CommandError``."""
    eventlog = connect(settings)
    registry = TenantRegistry(eventlog.client, eventlog.prefix)
    try:
        if name is not None and not name:
            raise CommandError(f"tenant {action} needs a tenant name")
        yield registry
    except TenantError as exc:
        raise CommandError(str(exc)) from exc
    except redis.exceptions.NoPermissionError as exc:
        raise CommandError(f"these credentials may not manage tenants ({exc}): use the operator's") from exc


def tenants(settings: Settings) -> list[dict]:
    """Every registered tenant: ``{"tenant", "user", "created_at"}``."""
    with _registry(settings, "list") as registry:
        found = registry.all(fresh=True)
    return [{"tenant": t.name, "user": t.user, "created_at": t.created_at} for t in found.values()]


def remove_tenant(settings: Settings, name: str) -> bool:
    """Remove tenant ``name`` and its Redis user; whether it was registered."""
    with _registry(settings, "remove", name) as registry:
        return registry.remove(name)


def add_tenant(settings: Settings, name: str, rotate: bool = False) -> dict:
    """Register tenant ``name`` (``rotate``: issue a new password for an existing one):
    ``{"tenant", "user", "redis_url"}``, the URL its agent hosts use, with the password
    (shown this once: Redis keeps only its hash)."""
    with _registry(settings, "add", name) as registry:
        tenant, password = registry.add(name, rotate=rotate)
    return {"tenant": tenant.name, "user": tenant.user, "redis_url": user_url(settings, tenant.user, password)}


def update_tenants(settings: Settings) -> list[str]:
    """Give every registered tenant's Redis user the current rules, keeping its password (a
    user made by an older release may append to the operator's streams): the tenants updated."""
    with _registry(settings, "update") as registry:
        return registry.update()
