"""The Redis users of a least-privilege deployment, and the ACL rules of each.

Three roles share one Redis; each gets a user that can do what its programs do and nothing more:

- **agent host** (one per tenant, made by ``memstream tenant add``: ``tenants.acl_rules``):
  every key it may touch is its tenant's own (``P:t:T:*``): append to its log, ship its
  spool, write its fleet report, ask queries on its own channel. It cannot read or write
  the operator's streams, another tenant's log, any projection key or another tenant's
  answers; what it does to its own keys harms only its own tenant.
- **worker** (``worker_rules``): the projection workers and the query server
  (``memstream worker``, ``memstream up`` with a shared Redis). Every memstream key
  (they project every tenant and answer every channel), with the data commands memstream
  sends; no key outside the prefix, no server administration (``CONFIG``, ``FLUSHALL``,
  ``KEYS``, ``SHUTDOWN``, ``MONITOR``, ``DEBUG``, ``CLIENT KILL``), no ``ACL``, no pub/sub.
- **admin** (``admin_rules``): the command line of the operator. The worker's rights, plus
  trimming archived entries (``XTRIM``), the server's version (``INFO``), managing the
  tenants' users (``ACL SETUSER|DELUSER``; ``ACL GETUSER``: doctor checks their rules) and
  what ``memstream forget`` needs to rewrite the append-only file (``CONFIG GET|SET``,
  ``BGREWRITEAOF``; without them it reports the rewrite refused and what to do). A user
  that may run ``ACL SETUSER`` or ``CONFIG SET`` can grant itself anything: keep the
  admin's credentials on the operator's machine, never on hosts.

Redis checks the commands a Lua script runs against the caller's rules, so ``EVAL`` and
``EVALSHA`` widen nothing. Key patterns cannot carve a read-only key out of a wider pattern:
the worker can write the tenant registry it only reads (``P:tenants``).

A command the code starts to send goes into these lists: the tests run the workers, the
command line and an agent host under them on a real Valkey and fail on any refusal.
"""

from __future__ import annotations

from memstream.core import keys
from memstream.producers.tenants import acl_rules

__all__ = ["ROLES", "worker_rules", "admin_rules", "role_user", "role_rules", "CONNECTION"]

# what every memstream client sends to connect (redis-py's handshake, the db of the URL)
CONNECTION = ("+ping", "+hello", "+auth", "+client|setname", "+client|setinfo", "+select")

# the data commands the workers and the query server send, by type
_WORKER_COMMANDS = (
    # streams: the consumer groups, dead letters, the dense stage's backlog, builds' progress
    "+xreadgroup",
    "+xack",
    "+xautoclaim",
    "+xpending",
    "+xrange",
    "+xrevrange",
    "+xlen",
    "+xadd",
    "+xdel",
    "+xgroup|create",
    "+xgroup|destroy",
    "+xinfo|groups",
    "+xinfo|consumers",
    # hashes: positions, health, counters, catalog, facts, sessions, fleet reports, the registry
    "+hget",
    "+hset",
    "+hsetnx",
    "+hdel",
    "+hgetall",
    "+hmget",
    "+hvals",
    "+hlen",
    "+hincrby",
    "+hexists",
    "+hscan",
    "+hstrlen",
    # sets and sorted sets: tombstones, sessions, the read replicas' groups
    "+sadd",
    "+srem",
    "+smembers",
    "+sismember",
    "+smismember",
    "+scard",
    "+zadd",
    "+zrevrange",
    # lists: the query channels (a query server takes what waits in one BLMPOP) and their answers
    "+rpush",
    "+blpop",
    "+blmpop",
    "+llen",
    # keys: a build's lock, cleanup, scans of a version's keys, sizes
    "+set",
    "+del",
    "+unlink",
    "+exists",
    "+expire",
    "+type",
    "+scan",
    "+memory|usage",
    # the server's clock: retention's cutoffs, and the ids of a log ahead of it (doctor, metrics)
    "+time",
    # transactions and scripts (each command inside a script is checked on its own)
    "+multi",
    "+exec",
    "+discard",
    "+watch",
    "+unwatch",
    "+eval",
    "+evalsha",
    "+script|load",
    "+script|exists",
)
# the operator's command line, besides the worker's: archive (trim what is archived),
# doctor (the server's version), tenants (their users), forget (the tombstoned sets; the
# rewrite of the append-only file, so that no forgotten text stays in Redis's files)
_ADMIN_COMMANDS = (
    "+xtrim",
    "+info",
    "+acl|setuser",
    "+acl|deluser",
    "+acl|getuser",
    "+sscan",
    "+config|get",
    "+config|set",
    "+bgrewriteaof",
)


def role_user(prefix: str, role: str) -> str:
    """The Redis user of ``role`` (``worker``, ``admin``). ``+`` cannot be in a tenant's
    name, so no tenant's user (``P-NAME``) can take it."""
    return f"{prefix}+{role}"


def worker_rules(prefix: str, password: str) -> list[str]:
    """ACL SETUSER rules of the workers and the query server."""
    return [
        "reset",
        "on",
        f">{password}",
        "~" + keys.all_pattern(prefix),
        "resetchannels",
        "-@all",
        *CONNECTION,
        *_WORKER_COMMANDS,
    ]


def admin_rules(prefix: str, password: str) -> list[str]:
    """ACL SETUSER rules of the operator's command line."""
    return [*worker_rules(prefix, password), *_ADMIN_COMMANDS]


# each role's user is used by
ROLES: dict[str, str] = {
    "worker": "the projection workers and the query server (`memstream worker`; `memstream up` with MEMSTREAM_REDIS_URL)",
    "admin": "the operator's command line (doctor, stats, export, archive, replay, dlq, tenant, acl)",
}


def role_rules(role: str, prefix: str, password: str) -> list[str]:
    """The rules of ``role``: ``worker``, ``admin`` or ``host:TENANT`` (a tenant's agent hosts)."""
    if role.startswith("host:"):
        return acl_rules(prefix, role.removeprefix("host:"), password)
    if role == "worker":
        return worker_rules(prefix, password)
    if role == "admin":
        return admin_rules(prefix, password)
    raise ValueError(f"no ACL role {role!r}: worker, admin or host:TENANT")
