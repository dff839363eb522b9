"""``memstream acl recipe``: the ACL SETUSER commands of a least-privilege deployment (the
worker's and the admin's users; each tenant's agent hosts get theirs from ``memstream tenant
add``), with fresh random passwords and the URL each role uses (``memstream.producers.acl``).
Reads nothing from Redis: the operator runs the commands with the server's own admin user."""

from __future__ import annotations

import secrets

from memstream.core import Settings
from memstream.ops.connect import user_url
from memstream.producers import ACL_ROLES, acl_role_rules, acl_role_user

__all__ = ["acl_recipe"]


def acl_recipe(settings: Settings) -> list[dict]:
    """One entry per role: ``{"role", "user", "uses", "command", "redis_url"}``; ``command``
    is the ``ACL SETUSER`` line (with a new password, also in ``redis_url``)."""
    out = []
    for role, uses in ACL_ROLES.items():
        password = secrets.token_urlsafe(32)
        user = acl_role_user(settings.stream_prefix, role)
        rules = acl_role_rules(role, settings.stream_prefix, password)
        out.append(
            {
                "role": role,
                "user": user,
                "uses": uses,
                "command": " ".join(["ACL", "SETUSER", user, *rules]),
                "redis_url": user_url(settings, user, password),
            }
        )
    return out
