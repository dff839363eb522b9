"""Tenants of a shared Redis: their names, their own keys, their credentials, signatures.

A fleet shares one Redis that every agent host can write. The boundary between tenants
is made by Redis itself (an ACL user per tenant):

- ``memstream tenant add NAME`` (run with the operator's credentials) creates the ACL
  user ``memstream-NAME`` with a random password and records the tenant in the registry
  ``P:tenants`` (readable by the operator only). The user owns the keys ``P:t:NAME:*`` and
  no other key: its own log (``P:t:NAME:events``, the stream its hosts append to), its
  spool's dedup record, its counters, its hosts' fleet reports, its query channel and the
  answers to its queries. It cannot read or write any other key: no other tenant's log,
  the operator's streams, a projection's keys or another tenant's answers; nor ask in
  another's name: the query server takes the tenant of a request from the channel it
  arrived on.
- Whatever the user does to its own keys (trim or delete its log, append with an explicit
  or the largest id, put a hash where its log was, garbage in its counters or reports)
  reaches no other tenant's: the workers read each tenant's log apart
  (``memstream.producers.stream``), and the readers trust nothing read from it. Redis
  cannot refuse ``MAXLEN``, ``MINID`` or an explicit id of an ``XADD`` to a key a user may
  write, so no user but the operator's and the workers' may write a key another tenant's
  events are in.
- An event in a tenant's own log counts only as that tenant's (the workers dead-letter one
  of another tenant). Events in the operator's streams (appended before tenants had a log of
  their own, or by the operator) are signed (HMAC-SHA256 of the payload) with a key derived
  from the password of the tenant's Redis user: once any tenant is registered, the workers
  dead-letter an event there whose tenant is not registered or whose signature is not that
  tenant's.

A tenant removed (``memstream tenant remove``) loses its Redis user; its log stays listed
in the registry (``logs``) so that ``forget``, retention and ``export`` still reach what it
holds. A user made by an older release (with rules that let it append to the operator's
streams) gets the current rules, keeping its password, with ``memstream tenant update``
(``TenantRegistry.update``); ``memstream doctor`` fails until then (``stale``).

With no tenant registered (one user, or a fleet that has not turned tenants on), nothing
is checked and events carry no signature, as before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import redis

from memstream.core import PermanentError, keys

__all__ = [
    "TENANT_NAME",
    "TenantError",
    "TenantRegistry",
    "Signer",
    "tenant_space",
    "acl_user",
    "acl_rules",
    "acl_grants",
    "sign_key_of",
    "sign",
    "verify",
    "check_name",
    "password_of",
]

# Registered tenant names appear in key patterns and ACL rules: no glob characters, no
# spaces, no separators that could widen a pattern.
TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
SIG_BYTES = 16  # HMAC-SHA256 truncated to 128 bits, hex in the entry's ``sig`` field


class TenantError(PermanentError, ValueError):
    """A tenant name or registry operation that cannot be done as asked."""


def check_name(tenant: object) -> str:
    if not isinstance(tenant, str) or not TENANT_NAME.match(tenant):
        raise TenantError(
            f"tenant name {tenant!r} is not allowed: 1-64 characters of "
            "letters, digits, '_', '.', '-', starting with a letter or digit"
        )
    return tenant


# The key prefix a tenant owns: ``P:t:{tenant}`` (its user may read and write it).
tenant_space = keys.tenant_space


def acl_user(prefix: str, tenant: str) -> str:
    return f"{prefix}-{tenant}"


def acl_grants(prefix: str, tenant: str) -> list[str]:
    """What a tenant's user may do (``acl_rules`` without its password): its own keys, the
    commands of the ship script, the fleet report and the queries; nothing else."""
    return [
        # every key its hosts write, and only those: its log, dedup record, counters, reports,
        # query channel and answers (the tenant's own to break)
        "~" + keys.tenant_pattern(prefix, tenant),
        "resetchannels",
        "-@all",
        "+ping",
        "+hello",
        "+auth",
        "+client|setname",
        "+client|setinfo",
        "+select",
        # the ship script (its commands are checked against these rules one by one)
        "+evalsha",
        "+eval",
        "+script|load",
        "+script|exists",
        "+xadd",
        "+type",
        "+hget",
        "+hset",
        "+hdel",
        "+hincrby",
        # queries: push the request, wait for the answer, clean up; the report's expiry
        "+rpush",
        "+blpop",
        "+lpop",
        "+expire",
        "+del",
    ]


def acl_rules(prefix: str, tenant: str, password: str) -> list[str]:
    """ACL SETUSER rules of a tenant's agent hosts: append to its own log, ship the spool,
    write their fleet reports, ask queries on its own channel; nothing else."""
    return ["reset", "on", f">{password}", *acl_grants(prefix, tenant)]


def sign_key_of(password: str) -> bytes:
    """The signing key of a tenant, derived from its Redis password."""
    return hashlib.sha256(b"memstream-event-signature\x00" + password.encode("utf-8", "surrogatepass")).digest()


def sign(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()[: SIG_BYTES * 2]


def verify(key: bytes, data: bytes, sig: str) -> bool:
    return hmac.compare_digest(sign(key, data), sig)


@dataclass(frozen=True)
class Tenant:
    name: str
    user: str
    sign_key: bytes
    created_at: float


class TenantRegistry:
    """``P:tenants``: tenant -> its ACL user and signing key (the operator's key only); a
    removed tenant's entry keeps only its user's name and ``removed_at`` (its log stays)."""

    CACHE_SECONDS = 5.0

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.prefix = prefix
        self.key = keys.tenants(prefix)
        self._cache: tuple[dict[str, Tenant], list[str]] | None = None
        self._cached_at = 0.0
        self._lock = threading.Lock()

    def add(self, tenant: str, rotate: bool = False) -> tuple[Tenant, str]:
        """Create (or, with ``rotate``, re-key) the tenant's ACL user; returns the tenant
        and the new password. Raises TenantError if it exists and ``rotate`` is False (a
        removed tenant is added again)."""
        check_name(tenant)
        if tenant in self.all(fresh=True) and not rotate:
            raise TenantError(f"tenant {tenant!r} exists; use --rotate to issue a new password")
        password = secrets.token_urlsafe(32)
        user = acl_user(self.prefix, tenant)
        if keys.clustered(self.prefix):
            # ACL users live on each node apart, and the shards' dedup records are outside P:t:T:*
            raise TenantError(
                "tenants' Redis users are not supported on a Redis Cluster: run one "
                "cluster (or one prefix) per tenant, with the operator's credentials"
            )
        self.client.execute_command("ACL", "SETUSER", user, *acl_rules(self.prefix, tenant, password))
        record = Tenant(tenant, user, sign_key_of(password), time.time())
        self.client.hset(
            self.key,
            tenant,
            json.dumps({"user": record.user, "sign_key": record.sign_key.hex(), "created_at": record.created_at}),
        )
        self._cache = None
        return record, password

    def remove(self, tenant: str) -> bool:
        """Delete the tenant's ACL user; its registry entry keeps its name and when it was
        removed (its data stays, and its log is still read: ``logs``). Whether it was registered."""
        check_name(tenant)
        existed = tenant in self.all(fresh=True)
        if existed:
            self.client.hset(self.key, tenant, json.dumps({"user": acl_user(self.prefix, tenant), "removed_at": time.time()}))
        try:
            self.client.execute_command("ACL", "DELUSER", acl_user(self.prefix, tenant))
        except redis.ResponseError:
            pass
        self._cache = None
        return existed

    def all(self, fresh: bool = False) -> dict[str, Tenant]:
        """Every registered tenant (cached for CACHE_SECONDS unless ``fresh``). Raises
        ``redis.exceptions.NoPermissionError`` with a tenant's credentials."""
        return self._read(fresh)[0]

    def logs(self, fresh: bool = False) -> list[str]:
        """Every tenant with a log of its own, registered or removed since, sorted."""
        return self._read(fresh)[1]

    def _read(self, fresh: bool) -> tuple[dict[str, Tenant], list[str]]:
        with self._lock:
            now = time.monotonic()
            if not fresh and self._cache is not None and now - self._cached_at < self.CACHE_SECONDS:
                return self._cache
            out: dict[str, Tenant] = {}
            names: list[str] = []
            for name, raw in self.client.hgetall(self.key).items():
                try:
                    name = name.decode() if isinstance(name, bytes) else name
                    check_name(name)
                except (UnicodeDecodeError, TenantError):
                    continue  # a name no tenant may have names no log
                names.append(name)
                try:
                    info = json.loads(raw)
                    out[name] = Tenant(name, str(info["user"]), bytes.fromhex(info["sign_key"]), float(info.get("created_at", 0)))
                except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
                    continue  # removed, or a damaged entry: registers nothing (and signs nothing)
            self._cache, self._cached_at = (out, sorted(names)), now
            return self._cache

    def update(self) -> list[str]:
        """Give every registered tenant's user the current rules (``acl_grants``), keeping
        its password; the tenants updated."""
        done = []
        for name, tenant in sorted(self.all(fresh=True).items()):
            self.client.execute_command("ACL", "SETUSER", tenant.user, "resetkeys", *acl_grants(self.prefix, name))
            done.append(name)
        return done

    def stale(self) -> dict[str, str]:
        """Registered tenants whose user's key patterns are not the current rules' (made by
        an older release, or changed by hand): tenant -> the patterns it has. A user that is
        gone is named too. Needs ``ACL GETUSER`` (the admin's)."""
        out: dict[str, str] = {}
        for name, tenant in sorted(self.all(fresh=True).items()):
            want = " ".join(r for r in acl_grants(self.prefix, name) if r.startswith(("~", "%")))
            got = self.client.execute_command("ACL", "GETUSER", tenant.user)
            if not got:
                out[name] = "no such user"
                continue
            info = dict(zip(got[::2], got[1::2])) if isinstance(got, list) else dict(got)
            patterns = info.get(b"keys", info.get("keys", b""))
            have = patterns.decode() if isinstance(patterns, bytes) else str(patterns)
            if have != want:
                out[name] = have
        return out


class Signer:
    """Signs the records an ``EventLog`` appends.

    With the operator's credentials (the registry is readable) a record is signed with
    its tenant's registered key; with a tenant's credentials (the registry is refused)
    with the key derived from the connection's own password. No password and no
    registry: no signature (a single-user log)."""

    def __init__(self, client: redis.Redis, prefix: str, password: str | None):
        self.registry = TenantRegistry(client, prefix)
        self.own_key = sign_key_of(password) if password else None
        self._operator: bool | None = None

    def __call__(self, tenant: str, data: bytes) -> str:
        if self._operator is not False:
            try:
                tenants = self.registry.all()
                self._operator = True
                found = tenants.get(tenant)
                # an unregistered tenant gets no signature: the workers refuse its
                # events once any tenant is registered, and check nothing before
                return sign(found.sign_key, data) if found is not None else ""
            except redis.exceptions.NoPermissionError:
                self._operator = False
        return sign(self.own_key, data) if self.own_key else ""


def password_of(url: str) -> str | None:
    """The password in a redis URL (percent-decoded), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return unquote(parts.password) if parts.password else None
