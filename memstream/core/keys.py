"""Every Redis key memstream uses, built here and nowhere else.

``P`` is the configured prefix (``MEMSTREAM_STREAM_PREFIX``), ``T`` a tenant. Every key
starts with ``P:``. A projection's own keys carry its version (``P:facts:v1:T``), as its
consumer group does (``facts.v1``): a new version builds beside the live one and never
writes into it. Tenant-level data shared by every projection and version (tombstones)
carries none. A tenant's Redis user may touch only the keys under ``tenant_space``
(``P:t:T:*``, ``memstream.producers.tenants.acl_rules``): everything its hosts write is
there, its own log (``tenant_events``), its dedup record, its counters (``tenant_types``,
``tenant_spool_counters``), its fleet reports (``tenant_agent_reports``), its query channel
and answers. Whatever it does to those keys reaches no other tenant's; the readers sum a
tenant's counters with the operator's (``types``, ``spool_counters``, ``agent_reports``)
and trust none of them.

On a Redis Cluster (``redis+cluster://``) the prefix is a hash tag, ``{P}``
(``memstream.core.cluster_url.cluster_prefix``): every key above lives in the one slot of
``P``, so the projections' transactions, scripts and pipelines, the query channels and the
reports work unchanged, on one primary. The log's shards are what spreads: shard S's stream
and the state the append script touches with it (its dedup records and type counters) carry
the tag ``{P:events:S}``, a slot of their own (``shard_shipped``, ``shard_types``). An untagged
prefix (a single server, Sentinel) keeps the layout above unchanged.
"""

from __future__ import annotations

__all__ = [
    "events",
    "events_pattern",
    "tenant_events",
    "tenant_types",
    "tenant_spool_counters",
    "tenant_agent_reports",
    "archived",
    "types",
    "shipped",
    "legacy_shipped",
    "spool_counters",
    "forget_counters",
    "retention_counters",
    "retention_cursors",
    "retention_lock",
    "agent_reports",
    "agent_reports_retired",
    "tenant_space",
    "tenant_pattern",
    "tenants",
    "queries",
    "tenant_queries",
    "reply",
    "query_counters",
    "counters",
    "positions",
    "applied_at",
    "health",
    "dlq",
    "dlq_entries",
    "dlq_counters",
    "embed_backlog",
    "embed_backlog_pattern",
    "replica_groups",
    "replica_beat",
    "tombstones",
    "tombstones_pattern",
    "facts",
    "facts_current",
    "facts_index",
    "facts_indexed",
    "facts_pattern",
    "fact_sources",
    "turn_context",
    "sessions",
    "session",
    "session_bookends",
    "version_pattern",
    "catalog",
    "catalog_pattern",
    "backfill_lock",
    "own",
    "own_pattern",
    "all_pattern",
    "failover_probe",
    "shard_shipped",
    "shard_types",
]


def all_pattern(prefix: str) -> str:
    """``P:*``: glob pattern of every key memstream uses (the worker's and the admin's ACL rules)."""
    return f"{prefix}:*"


def clustered(prefix: str) -> bool:
    """Whether ``prefix`` is a hash tag (``{P}``): the cluster layout (see the module doc)."""
    return len(prefix) > 2 and prefix.startswith("{") and prefix.endswith("}") and "}" not in prefix[1:-1]


def _shard_tag(prefix: str, shard: int | str) -> str:
    return "{" + f"{prefix[1:-1]}:events:{shard}" + "}"


# -- the log -----------------------------------------------------------------------------
def events(prefix: str, shard: int) -> str:
    """``P:events:{shard}``: stream, one shard's events (trimmed only of archived ones); ``{P:events:S}`` on a cluster."""
    return _shard_tag(prefix, shard) if clustered(prefix) else f"{prefix}:events:{shard}"


def events_pattern(prefix: str) -> str:
    """``P:events:*``: glob pattern of every event stream (ACL rules, scans); ``{P:events:*}`` on a cluster."""
    return _shard_tag(prefix, "*") if clustered(prefix) else f"{prefix}:events:*"


def shard_shipped(prefix: str, tenant: str, shard: int) -> str:
    """``{P:events:S}:t:T:shipped``: on a cluster, hash, spool segment id -> last sequence in shard S (T's dedup record)."""
    if not clustered(prefix):
        raise ValueError(f"per-shard dedup records are the cluster layout's; {prefix!r} is no hash tag")
    return f"{_shard_tag(prefix, shard)}:t:{tenant}:shipped"


def shard_types(prefix: str, shard: int) -> str:
    """``{P:events:S}:types``: on a cluster, hash, event type -> number of events appended to shard S."""
    if not clustered(prefix):
        raise ValueError(f"per-shard type counters are the cluster layout's; {prefix!r} is no hash tag")
    return f"{_shard_tag(prefix, shard)}:types"


def tenant_events(prefix: str, tenant: str) -> str:
    """``P:t:T:events``: stream, tenant T's own log (appended to by T's hosts and the operator only)."""
    return f"{tenant_space(prefix, tenant)}:events"


def stream_tenant(prefix: str, stream: str) -> str | None:
    """The tenant whose own log ``stream`` is (``tenant_events``), or None: not a key, a parser of stream keys."""
    head, tail = f"{prefix}:t:", ":events"
    if not (stream.startswith(head) and stream.endswith(tail)):
        return None
    tenant = stream[len(head) : -len(tail)]
    return tenant if tenant and ":" not in tenant else None


def archived(prefix: str) -> str:
    """``P:archived``: hash, stream key -> last entry id written to the archive (the stream may be trimmed up to it)."""
    return f"{prefix}:archived"


def types(prefix: str) -> str:
    """``P:types``: hash, event type -> number of events appended to the operator's streams."""
    return f"{prefix}:types"


def tenant_types(prefix: str, tenant: str) -> str:
    """``P:t:T:types``: hash, event type -> number of events appended to T's own log (T may write anything here)."""
    return f"{tenant_space(prefix, tenant)}:types"


def shipped(prefix: str, tenant: str) -> str:
    """``P:t:T:shipped``: hash, spool segment id -> last sequence number in the log (T's dedup record)."""
    return f"{tenant_space(prefix, tenant)}:shipped"


def legacy_shipped(prefix: str) -> str:
    """``P:shipped``: hash, spool segment id -> last sequence, of every tenant alike (read as a fallback only)."""
    return f"{prefix}:shipped"


def forget_counters(prefix: str) -> str:
    """``P:counters:forget``: hash, place (stream_entries, archive_entries, ...) -> items ``memstream forget`` removed."""
    return counters(prefix, "forget")


def retention_counters(prefix: str) -> str:
    """``P:counters:retention``: hash, kind -> events the retention job erased; place:PLACE, runs, last_run."""
    return counters(prefix, "retention")


def retention_cursors(prefix: str) -> str:
    """``P:retention``: hash, ``STREAM|KIND`` -> entry id up to which retention erased that kind there."""
    return f"{prefix}:retention"


def retention_lock(prefix: str) -> str:
    """``P:retention:lock``: string, the process running the retention job (expires unless renewed)."""
    return f"{prefix}:retention:lock"


def spool_counters(prefix: str) -> str:
    """``P:counters:spool``: hash, loss (refused, write_errors, ...; unreplicated: kept) -> count, the operator's shippers'."""
    return counters(prefix, "spool")


def tenant_spool_counters(prefix: str, tenant: str) -> str:
    """``P:t:T:counters:spool``: hash, loss -> count, from the shippers of tenant T's hosts."""
    return f"{tenant_space(prefix, tenant)}:counters:spool"


# -- the fleet's reports -----------------------------------------------------------------
def agent_reports(prefix: str) -> str:
    """``P:agents``: hash, reporting process (``HOST:PID:NONCE``) -> its latest msgpack report (expires a day after the last)."""
    return f"{prefix}:agents"


def tenant_agent_reports(prefix: str, tenant: str) -> str:
    """``P:t:T:agents``: hash, reporting process of tenant T -> its latest msgpack report (as ``agent_reports``)."""
    return f"{tenant_space(prefix, tenant)}:agents"


def agent_reports_retired(prefix: str) -> str:
    """``P:agents:retired``: hash, figure (``refusals``, ``prefetch:OUTCOME``, ``hook:HOOK:BUCKET``) -> sum of removed reports."""
    return f"{prefix}:agents:retired"


# -- tenants -----------------------------------------------------------------------------
def tenant_space(prefix: str, tenant: str) -> str:
    """``P:t:T``: not a key itself: the prefix of every key tenant T's Redis user owns."""
    return f"{prefix}:t:{tenant}"


def tenant_pattern(prefix: str, tenant: str) -> str:
    """``P:t:T:*``: glob pattern of every key tenant T's Redis user owns (its ACL rule)."""
    return f"{tenant_space(prefix, tenant)}:*"


def tenants(prefix: str) -> str:
    """``P:tenants``: hash, tenant -> JSON of its ACL user and signing key (the operator's only)."""
    return f"{prefix}:tenants"


# -- queries -----------------------------------------------------------------------------
def queries(prefix: str) -> str:
    """``P:queries``: list, the operator's query requests (JSON envelopes)."""
    return f"{prefix}:queries"


def tenant_queries(prefix: str, tenant: str) -> str:
    """``P:t:T:queries``: list, tenant T's query requests (the only channel its user may write)."""
    return f"{tenant_space(prefix, tenant)}:queries"


def reply(channel: str, request_id: str) -> str:
    """``P:reply:{id}`` (``P:t:T:reply:{id}``): list, the answer to one request, beside its channel."""
    return f"{channel.rsplit(':', 1)[0]}:reply:{request_id}"


def query_counters(prefix: str) -> str:
    """``P:counters:queries``: hash, outcome (answered, refused, expired, failed, ...) -> number of requests."""
    return counters(prefix, "queries")


# -- the workers -------------------------------------------------------------------------
def counters(prefix: str, group: str) -> str:
    """``P:counters:{group}``: hash, counter -> count, of one projection group (``memstream stats``)."""
    return f"{prefix}:counters:{group}"


def positions(prefix: str, group: str) -> str:
    """``P:positions:{group}``: hash, stream key -> highest entry id the group applied."""
    return f"{prefix}:positions:{group}"


def applied_at(prefix: str, group: str) -> str:
    """``P:applied_at:{group}``: hash, stream key -> unix time its position was recorded."""
    return f"{prefix}:applied_at:{group}"


def health(prefix: str, group: str) -> str:
    """``P:health:{group}``: hash, consumer name -> JSON health record (expires a week after the last write)."""
    return f"{prefix}:health:{group}"


def dlq(prefix: str) -> str:
    """``P:dlq``: stream, entries no projection could apply, with their group, error and raw fields."""
    return f"{prefix}:dlq"


def dlq_entries(prefix: str) -> str:
    """``P:dlq:entries``: hash, ``STREAM ENTRY_ID`` -> the shared dead letter of an entry admission refused."""
    return f"{prefix}:dlq:entries"


def dlq_counters(prefix: str) -> str:
    """``P:counters:dlq``: hash, ``dropped`` -> dead letters not kept (the stream held ``MEMSTREAM_DLQ_MAX_LETTERS``)."""
    return counters(prefix, "dlq")


def embed_backlog(prefix: str, group: str) -> str:
    """``P:embed:{group}``: stream, one entry per point the version wrote without its dense vector yet (deleted once set)."""
    return f"{prefix}:embed:{group}"


def embed_backlog_pattern(prefix: str) -> str:
    """``P:embed:*``: glob pattern of every version's dense backlog (``memstream forget`` scans them)."""
    return f"{prefix}:embed:*"


def replica_groups(prefix: str) -> str:
    """``P:replicas:groups``: set of the consumer groups the read replicas run (``turns.v1~r1``), each of them."""
    return f"{prefix}:replicas:groups"


def replica_beat(prefix: str, replica: int) -> str:
    """``P:replicas:beat:N``: string, replica N's heartbeat (unix time; expires when the replica stops beating)."""
    return f"{prefix}:replicas:beat:{replica}"


# -- the projections ---------------------------------------------------------------------
def tombstones(prefix: str, tenant: str) -> str:
    """``P:tombstones:T``: set of ids forgotten in T; unversioned: tenant-level data shared by every projection and version."""
    return f"{prefix}:tombstones:{tenant}"


def tombstones_pattern(prefix: str) -> str:
    """``P:tombstones:*``: glob pattern of every tenant's tombstones (``memstream forget --tombstoned``)."""
    return f"{prefix}:tombstones:*"


def facts(prefix: str, version: int, tenant: str) -> str:
    """``P:facts:v{version}:T``: hash, fact id -> JSON fact (current and history) of the facts projection."""
    return f"{prefix}:facts:v{version}:{tenant}"


def facts_current(prefix: str, version: int, tenant: str) -> str:
    """``P:facts:v{version}:T:current``: hash, slot (agent, subject, key[, value]) -> id of its current fact."""
    return f"{facts(prefix, version, tenant)}:current"


def facts_events(prefix: str, version: int, tenant: str) -> str:
    """``P:facts:v{version}:T:events``: hash, event id -> facts it gave, above 12 (older releases'; read once, deleted)."""
    return f"{facts(prefix, version, tenant)}:events"


def facts_index(prefix: str, version: int, tenant: str) -> str:
    """``P:facts:v{version}:T:by_event``: hash, event id -> the ids (space-separated) of the facts from it the table holds."""
    return f"{facts(prefix, version, tenant)}:by_event"


def facts_indexed(prefix: str, version: int, tenant: str) -> str:
    """``P:facts:v{version}:T:indexed``: string, set once ``facts_index`` covers the tenant's whole table."""
    return f"{facts(prefix, version, tenant)}:indexed"


def facts_pattern(prefix: str, version: int) -> str:
    """``P:facts:v{version}:*``: glob pattern of every facts-table key of one version (``facts`` and its neighbours)."""
    return f"{prefix}:facts:v{version}:*"


def fact_sources(prefix: str, version: int, tenant: str, agent: str, target: str) -> str:
    """``P:fact_sources:v{version}:T:{agent}:{target}``: hash, memory entry's event id -> JSON [text, time]."""
    return f"{prefix}:fact_sources:v{version}:{tenant}:{agent}:{target}"


def turn_context(prefix: str, version: int, tenant: str, session: str) -> str:
    """``P:turn_context:v{version}:T:{session}``: hash, turn index -> its event id and first characters (expires)."""
    return f"{prefix}:turn_context:v{version}:{tenant}:{session}"


def sessions(prefix: str, version: int, tenant: str, agent: str | None = None) -> str:
    """``P:sessions:v{version}:T[:agent:{agent}]``: sorted set, session id -> time of its last turn (every agent, or one)."""
    base = f"{prefix}:sessions:v{version}:{tenant}"
    return base if agent is None else f"{base}:agent:{agent}"


def session(prefix: str, version: int, tenant: str, session: str) -> str:
    """``P:session:v{version}:T:{session}``: hash, the session's agent, first and last user turns, turn count."""
    return f"{prefix}:session:v{version}:{tenant}:{session}"


def session_bookends(prefix: str, version: int, tenant: str) -> str:
    """``P:session_bookends:v{version}:T``: hash, event id of a current first or last turn -> its session."""
    return f"{prefix}:session_bookends:v{version}:{tenant}"


# Every family of keys that carries a projection's version (``P:{family}:v{N}:...``): what
# dropping a version deletes, with the projection's vector collection and group records.
VERSIONED_FAMILIES = ("facts", "fact_sources", "turn_context", "sessions", "session", "session_bookends")


def version_pattern(prefix: str, family: str, version: int) -> str:
    """``P:{family}:v{version}:*``: glob pattern of one versioned family's keys (``VERSIONED_FAMILIES``)."""
    if family not in VERSIONED_FAMILIES:
        raise ValueError(f"{family!r} is no versioned key family (known: {', '.join(VERSIONED_FAMILIES)})")
    return f"{prefix}:{family}:v{version}:*"


# -- projection versions -----------------------------------------------------------------
def catalog(prefix: str, name: str) -> str:
    """``P:projections:{name}``: hash, ``v{N}`` -> JSON record of version N, ``active`` -> the version readers use."""
    return f"{prefix}:projections:{name}"


def catalog_pattern(prefix: str) -> str:
    """``P:projections:*``: glob pattern of every projection's catalog."""
    return f"{prefix}:projections:*"


def backfill_lock(prefix: str, group: str) -> str:
    """``P:backfill:{group}``: string, the worker reading the archive into a build (expires unless renewed)."""
    return f"{prefix}:backfill:{group}"


# -- projections of your own ---------------------------------------------------------------
def own(prefix: str, name: str, version: int, *parts: str) -> str:
    """``P:own:{name}:v{version}[:part...]``: not a key itself but names one of your projection (any type; dropped with it)."""
    return ":".join((f"{prefix}:own:{name}:v{version}", *parts))


def own_pattern(prefix: str, name: str, version: int) -> str:
    """``P:own:{name}:v{version}:*``: glob pattern of every key of one version of your own projection."""
    return f"{prefix}:own:{name}:v{version}:*"


# -- benchmarks ----------------------------------------------------------------------------------
def failover_probe(prefix: str) -> str:
    """``P:bench:probe``: string, the time `memstream bench failover` last wrote, to see writes reach the new primary."""
    return f"{prefix}:bench:probe"
