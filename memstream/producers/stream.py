"""The append side of the Redis Streams log.

Keys (``P`` = the configured prefix; built by ``memstream.core.keys``):
  ``P:events:{shard}``      the operator's event streams; never trimmed by length
  ``P:t:{tenant}:events``   a registered tenant's own log (``keys.tenant_events``)
  ``P:t:{tenant}:shipped``  hash: spool segment id -> last sequence number in the log
                            (per tenant: a tenant's Redis user owns it, see tenants.py)
  ``P:types``               hash: event type -> number of events appended to the
                            operator's streams (``P:t:{tenant}:types``: to a tenant's log)

The log is partitioned by tenant. A registered tenant's events go to its own log, the
only stream its hosts' Redis user may append to (``memstream.producers.tenants``); the
operator's untenanted events go to the shard streams, as before tenants had logs (where
events of every tenant appended by older releases stay and are read). ``owns_log`` decides:
with the operator's credentials, whether the tenant is registered; with a tenant's (the
registry is refused), always. The workers read every stream of ``stream_keys``: the shards
and each tenant's log; a tenant's log its user turned into another type is left out and
named by ``broken``, so that nothing a tenant does to its own keys stops a reader of the
others'. The counters a tenant's shippers add to (types, spool losses) and its hosts'
fleet reports live beside its log (``types_key``, ``spool_counters_key``, ``reports_key``);
``counters`` sums them with the operator's, every value parsed leniently.

Guarantees: ``EventLog.append_batch`` is atomic for one stream while nothing fails (one
server-side script) and, for records carrying a spool segment id and sequence number,
exactly-once: a record at or below the segment's recorded sequence is skipped, so a batch
re-sent after a lost reply or a crash never duplicates an event. The script checks the
types of its dedup record and streams before the first append, writes the dedup record
right after the appends (before the counters, which never fail it), and stops at an
append the server refuses (a log at the largest id) with the records before it recorded:
a re-sent batch appends exactly what is missing. Events of one (tenant, agent) always go
to the same stream, in the order given. With a ``signer`` each entry carries ``sig``, the
signature of its payload by its tenant's key.

On a Redis Cluster (a hash-tagged prefix, ``keys.clustered``) a script may touch one slot
only: a batch is appended by one script call per shard, each with its shard's dedup records
(``keys.shard_shipped``) and type counters (``keys.shard_types``) in its stream's slot. Each
shard's part is atomic and exactly-once on its own (a record is skipped at or below the
segment's sequence recorded in its shard), so a batch cut short by a failure between two
shards is re-sent whole and lands once. Tenants' users are refused on a cluster
(``TenantRegistry.add``): no tenant has a log of its own there.
"""

from __future__ import annotations

import heapq
import threading
import time
import zlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import redis
import structlog

from memstream.core import PermanentError, TransientError, count, counts, keys
from memstream.producers.events import Event, decode
from memstream.producers.record import Record
from memstream.producers.tenants import Tenant, TenantRegistry

if TYPE_CHECKING:
    from redis.typing import StreamEntry

__all__ = [
    "EventLog",
    "shard_of",
    "parse_entry_id",
    "after",
    "MAX_ENTRY_ID",
    "EntryDecodeError",
    "EntryFields",
    "xrange_entry",
    "NotReplicated",
]

log = structlog.get_logger("memstream.stream")

# A stream entry's fields as redis-py reads them: bytes (text from a client that decodes).
EntryFields = dict[bytes | str, bytes | str]

_SHIP_SCRIPT = """
-- KEYS: the tenant's dedup hash, the type counters. ARGV: segment id, record count, then
-- per record: seq, stream index, event id, type, payload, signature ('' for none); then
-- the former shared dedup hash, then the streams. The streams are not declared keys:
-- EVAL checks declared keys for read and write, and a tenant's Redis user may write its
-- own log only (each command inside is still checked against its ACL). The former
-- dedup hash is read only, as a fallback, and may be refused: pcall.
local n = tonumber(ARGV[2])
local streams = {}
for k = 4 + 6 * n, #ARGV do streams[#streams + 1] = ARGV[k] end
-- Check every key whose failure could stop the script after its first append: a script
-- that fails half-way keeps its earlier XADDs. The type counters are not checked: what
-- they hold (anyone who may write them may put anything there) never fails the append.
local function check(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE memstream key ' .. key .. ' holds a ' .. t ..
      ', not a ' .. want .. ': rename or delete it')
  end
end
local err = check(KEYS[1], 'hash')
if err then return err end
for k = 1, #streams do
  err = check(streams[k], 'stream')
  if err then return err end
end
-- a sequence read back is a whole number or nothing (-1: everything is appended again)
local function seq_of(v)
  local x = tonumber(v)
  if x == nil or x ~= x or x < -1 or x > 9007199254740991 or x ~= math.floor(x) then return -1 end
  return x
end
local last = -1
if ARGV[1] ~= '' then
  local got = redis.call('HGET', KEYS[1], ARGV[1])
  if not got then
    -- a segment partly shipped before dedup records were kept per tenant; a tenant's
    -- user may not read the former hash: then there is nothing of its there
    local old = redis.pcall('HGET', ARGV[3 + 6 * n], ARGV[1])
    if type(old) == 'string' then got = old end
  end
  last = seq_of(got)
end
local ids = {}
local counted, order = {}, {}
local failed = nil
local i = 3
for r = 1, n do
  local seq = tonumber(ARGV[i])
  if failed == nil and (ARGV[1] == '' or seq > last) then
    local key = streams[1 + tonumber(ARGV[i + 1])]
    local sid
    if ARGV[i + 5] ~= '' then
      sid = redis.pcall('XADD', key, '*', 'id', ARGV[i + 2], 'type', ARGV[i + 3],
        'data', ARGV[i + 4], 'sig', ARGV[i + 5])
    else
      sid = redis.pcall('XADD', key, '*', 'id', ARGV[i + 2], 'type', ARGV[i + 3], 'data', ARGV[i + 4])
    end
    if type(sid) == 'table' and sid['err'] then
      -- e.g. a log at the largest id: nothing more is appended; what was is recorded below
      failed = sid['err']
      ids[#ids + 1] = ''
    else
      ids[#ids + 1] = sid
      if seq > last then last = seq end
      local t = ARGV[i + 3]
      if counted[t] == nil then counted[t] = 0; order[#order + 1] = t end
      counted[t] = counted[t] + 1
    end
  else
    ids[#ids + 1] = ''
  end
  i = i + 6
end
-- the dedup record right after the appends, before anything that may fail: a re-sent
-- batch appends exactly what is not in the log
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], last)
end
for k = 1, #order do
  redis.pcall('HINCRBY', KEYS[2], order[k], counted[order[k]])
end
if failed then return redis.error_reply(failed) end
return ids
"""

MAX_ID = (1 << 64) - 1, (1 << 64) - 1  # the largest entry id: nothing can follow it
MAX_ENTRY_ID = f"{MAX_ID[0]}-{MAX_ID[1]}"


def shard_of(tenant: str, agent: str, shards: int) -> int:
    """The stream index of an agent: stable across processes, hosts and versions."""
    if shards <= 1:
        return 0
    return zlib.crc32(f"{tenant}\x00{agent}".encode("utf-8", "surrogatepass")) % shards


def parse_entry_id(entry_id: str | bytes) -> tuple[int, int]:
    """A stream entry id as an integer pair (ms, seq), for comparisons."""
    if isinstance(entry_id, bytes):
        entry_id = entry_id.decode()
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def after(entry_id: str | bytes) -> str | None:
    """The XRANGE bound just after ``entry_id`` (``(ID``), or None when no entry can follow
    it (the largest id, ``MAX_ENTRY_ID``: Redis refuses the bound). Every reader that pages
    through a stream stops there instead of failing."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return None if parse_entry_id(text) == MAX_ID else "(" + text


class NotReplicated(TransientError):
    """A batch the primary appended but fewer replicas than asked confirmed within the
    timeout (``WAIT``): it may be lost in a failover, so its records stay in the spool and
    are sent again later (the dedup appends them once)."""

    def __init__(self, confirmed: int, wanted: int, ids: list[str | None]):
        super().__init__(f"{confirmed} of {wanted} replicas confirmed the batch in time")
        self.confirmed = confirmed
        self.wanted = wanted
        self.ids = ids


class EntryDecodeError(PermanentError, ValueError):
    """A stream entry whose payload is not a valid event of this schema."""


class EventLog:
    """The event streams under one prefix. Thread-safe (redis-py clients are)."""

    LOGS_EVERY = 1.0  # seconds between looks at the tenants' logs (which exist, their types)

    def __init__(
        self, client: redis.Redis, prefix: str = "memstream", shards: int = 1, signer: Callable[[str, bytes], str] | None = None
    ):
        self.client = client
        self.prefix = prefix
        self.shards = max(1, int(shards))
        self.signer = signer
        self._script = client.register_script(_SHIP_SCRIPT)
        self.clustered = keys.clustered(prefix)
        self.registry = TenantRegistry(client, prefix)
        self._tenant_credentials = False  # the registry was refused: a tenant's user
        self._logs_lock = threading.Lock()
        self._logs: tuple[float, list[str], dict[str, str]] = (-1.0, [], {})

    # keys
    def stream_key(self, shard: int) -> str:
        return keys.events(self.prefix, shard)

    @property
    def shard_keys(self) -> list[str]:
        """The operator's streams (``P:events:S``)."""
        return [self.stream_key(i) for i in range(self.shards)]

    @property
    def stream_keys(self) -> list[str]:
        """Every stream the workers read: the shards, then each tenant's own log (registered
        or removed since) that holds a stream or nothing yet (one its user made another type
        is in ``broken`` instead). Looked up at most every ``LOGS_EVERY`` s."""
        return self.shard_keys + self._tenant_logs()[0]

    def broken(self) -> dict[str, str]:
        """Tenants' logs the workers cannot read: key -> ``wrong_type`` (its user put
        something else there; its hosts' appends fail until it is deleted)."""
        return dict(self._tenant_logs()[1])

    def _tenant_logs(self) -> tuple[list[str], dict[str, str]]:
        with self._logs_lock:
            at, found, broken = self._logs
            now = time.monotonic()
            if at >= 0 and now - at < self.LOGS_EVERY:
                return found, broken
            names = [] if self.clustered or self._tenant_credentials else self._log_names()
            found, broken = [], {}
            if names:
                logs = [keys.tenant_events(self.prefix, name) for name in names]
                pipe = self.client.pipeline(transaction=False)
                for key in logs:
                    pipe.type(key)
                for key, kind in zip(logs, pipe.execute()):
                    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
                    if kind in ("stream", "none"):
                        found.append(key)
                    else:
                        broken[key] = "wrong_type"
            self._logs = (now, found, broken)
            return found, broken

    def _log_names(self) -> list[str]:
        try:
            return self.registry.logs()
        except redis.exceptions.NoPermissionError:
            self._tenant_credentials = True
            return []

    def _registered(self) -> dict[str, Tenant] | None:
        """The registered tenants; None with a tenant's credentials (the registry is refused)."""
        if self._tenant_credentials:
            return None
        try:
            return self.registry.all()
        except redis.exceptions.NoPermissionError:
            self._tenant_credentials = True
            return None

    def owns_log(self, tenant: str) -> bool:
        """Whether ``tenant``'s events, counters and hosts' reports go to keys of its own
        (``P:t:T:*``): a registered tenant's with the operator's credentials, any with a
        tenant's (they may write nothing else); never on a cluster."""
        if self.clustered:
            return False
        registered = self._registered()
        return True if registered is None else tenant in registered

    def shipped_key(self, tenant: str) -> str:
        return keys.shipped(self.prefix, tenant)

    @property
    def legacy_shipped_key(self) -> str:
        """Where dedup records were kept for every tenant alike, read as a fallback."""
        return keys.legacy_shipped(self.prefix)

    @property
    def types_key(self) -> str:
        """The operator's type counters (``P:types``)."""
        return keys.types(self.prefix)

    def types_key_of(self, tenant: str, own: bool | None = None) -> str:
        """The type counters ``tenant``'s appends add to (``own``: ``owns_log(tenant)``)."""
        return keys.tenant_types(self.prefix, tenant) if (self.owns_log(tenant) if own is None else own) else self.types_key

    def spool_counters_key(self, tenant: str) -> str:
        """The spool-loss counters ``tenant``'s shippers add to."""
        return keys.tenant_spool_counters(self.prefix, tenant) if self.owns_log(tenant) else keys.spool_counters(self.prefix)

    def reports_key(self, tenant: str) -> str:
        """The fleet reports ``tenant``'s hosts write (``memstream.producers.report``)."""
        return keys.tenant_agent_reports(self.prefix, tenant) if self.owns_log(tenant) else keys.agent_reports(self.prefix)

    def stream_for(self, tenant: str, agent: str, own: bool | None = None) -> str:
        """The stream an agent's events go to (``own``: ``owns_log(tenant)``, when known)."""
        if self.owns_log(tenant) if own is None else own:
            return keys.tenant_events(self.prefix, tenant)
        return self.stream_key(shard_of(tenant, agent, self.shards))

    # append
    def append_batch(
        self, records: list[Record], segment: str = "", replicas: int = 0, replica_timeout_ms: int = 1000
    ) -> list[str | None]:
        """Append records atomically; return each one's entry id (None: already there).

        With ``segment`` set, records whose ``seq`` is at or below the segment's last
        shipped sequence are skipped (exactly-once for spool replays). Records of one
        tenant are appended by one script call (a segment holds one tenant's records,
        its process's configuration). Raises ``redis.RedisError`` (connection, timeout,
        script, permission) and appends nothing of the failing tenant's records then.

        With ``replicas``, the script calls and a ``WAIT replicas replica_timeout_ms`` go
        down one connection in one round trip (WAIT counts the replicas that have every
        write of its own connection); fewer confirmations raise ``NotReplicated``. The
        dedup record is written by the same script as the entries, so a replica that has
        an entry has its dedup record too: a batch re-sent to a promoted replica appends
        exactly what it lacks.
        """
        if not records:
            return []
        if self.clustered:  # one script call per shard (its slot); WAIT is refused on a cluster (Settings)
            return [got for run in _by_tenant(records) for got in self._append_sharded(run, segment)]
        runs = [self._run_args(run, segment) for run in _by_tenant(records)]
        if replicas > 0:
            return self._append_replicated(runs, replicas, replica_timeout_ms)
        out: list[str | None] = []
        for declared, argv in runs:
            out += self._ids(self._script(keys=declared, args=argv))
        return out

    def _append_replicated(
        self, runs: list[tuple[list[str], list[bytes | str | int]]], replicas: int, timeout_ms: int
    ) -> list[str | None]:
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            for declared, argv in runs:
                pipe.evalsha(self._script.sha, len(declared), *declared, *argv)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            replies = pipe.execute(raise_on_error=False)
            if attempt == 1 and any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
                # a server that has not seen the script: a new primary after a failover (the
                # script cache is not replicated) or a restart; a call that failed so appended nothing
                self.client.script_load(_SHIP_SCRIPT)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            break
        out: list[str | None] = []
        for reply in replies[:-1]:
            out += self._ids(reply)
        confirmed = int(replies[-1])
        if confirmed < replicas:
            raise NotReplicated(confirmed, replicas, out)
        return out

    @staticmethod
    def _ids(reply: Any) -> list[str | None]:
        return [(i.decode() if isinstance(i, bytes) else i) or None for i in reply]

    def _run_args(self, records: list[Record], segment: str) -> tuple[list[str], list[bytes | str | int]]:
        """The script's keys and arguments for records of one tenant."""
        tenant = records[0].tenant
        own = self.owns_log(tenant)
        declared = [self.shipped_key(tenant), self.types_key_of(tenant, own)]
        index: dict[str, int] = {}
        argv: list[bytes | str | int] = [segment, len(records)]
        for rec in records:
            key = self.stream_for(rec.tenant, rec.agent, own)
            if key not in index:
                index[key] = len(index)
            sig = self.signer(rec.tenant, rec.data) if self.signer is not None else ""
            argv += [rec.seq, index[key], rec.event_id, rec.type, rec.data, sig]
        argv.append(self.legacy_shipped_key)
        argv += list(index)
        return declared, argv

    def _append_sharded(self, records: list[Record], segment: str) -> list[str | None]:
        """``append_batch`` on a cluster, for one tenant's records: one script call per shard, in its stream's slot (the
        stream is declared too: the cluster client routes by the declared keys)."""
        tenant = records[0].tenant
        by_shard: dict[int, list[int]] = {}
        for i, rec in enumerate(records):
            by_shard.setdefault(shard_of(rec.tenant, rec.agent, self.shards), []).append(i)
        out: list[str | None] = [None] * len(records)
        for shard, positions in by_shard.items():
            stream, dedup = self.stream_key(shard), keys.shard_shipped(self.prefix, tenant, shard)
            argv: list[bytes | str | int] = [segment, len(positions)]
            for i in positions:
                rec = records[i]
                sig = self.signer(rec.tenant, rec.data) if self.signer is not None else ""
                argv += [rec.seq, 0, rec.event_id, rec.type, rec.data, sig]
            argv += [dedup, stream]  # no former shared hash on a cluster: the dedup hash stands in
            ids = self._script(keys=[dedup, keys.shard_types(self.prefix, shard), stream], args=argv)
            for i, got in zip(positions, ids):
                out[i] = (got.decode() if isinstance(got, bytes) else got) or None
        return out

    def append(self, events: Iterable[Event]) -> list[str]:
        """Append events directly (no spool), in order, through the log's door
        (``memstream.producers.door``: redacted and clipped); returns their entry ids."""
        from memstream.producers.door import append

        return [i or "" for i in append(self, list(events))]

    def last_shipped(self, segment: str, tenant: str) -> int:
        """The highest sequence of ``segment`` known to be in the log (-1: none, or a record
        that holds no sequence)."""
        if self.clustered:
            found = [self.client.hget(keys.shard_shipped(self.prefix, tenant, s), segment) for s in range(self.shards)]
        else:
            found = [self.client.hget(self.shipped_key(tenant), segment)]
        return max((n for n in map(count, found) if n is not None), default=-1)

    def add_spool_losses(self, tenant: str, delta: dict[str, int]) -> None:
        """Add a shipper's losses to ``tenant``'s spool counters (``spool_counters_key``). A
        counter that holds no number is left as it is (its readers skip it); raises only
        what Redis raises for the connection."""
        if not delta:
            return
        key = self.spool_counters_key(tenant)
        pipe = self.client.pipeline(transaction=False)
        for k, v in delta.items():
            pipe.hincrby(key, k, v)
        for reply in pipe.execute(raise_on_error=False):
            if isinstance(reply, redis.ResponseError) and not isinstance(reply, redis.exceptions.NoPermissionError):
                continue  # a counter that holds no number: left as it is
            if isinstance(reply, Exception):
                raise reply

    def forget_segment(self, segment: str, tenants: Iterable[str]) -> None:
        """Drop the dedup records of a segment whose file is gone, for ``tenants`` (the
        tenants of its records)."""
        for tenant in tenants:
            if self.clustered:
                for s in range(self.shards):
                    self.client.hdel(keys.shard_shipped(self.prefix, tenant, s), segment)
                continue
            self.client.hdel(self.shipped_key(tenant), segment)
        if self.clustered:
            return
        try:
            self.client.hdel(self.legacy_shipped_key, segment)
        except redis.exceptions.NoPermissionError:
            pass  # a tenant's user: the former shared hash is not its to clean

    # read
    def entries(self, since: str = "-", count: int = 1000) -> Iterator[tuple[str, str, EntryFields]]:
        """Every entry of every stream after ``since`` (exclusive; "-" for all), merged
        oldest first by entry id (equal ids in stream order). Yields (stream key, entry
        id, raw fields); reads each stream ``count`` entries at a time, as the merge needs."""
        start = "-" if since in ("-", "0", "") else after(since)

        def stream(key: str) -> Iterator[tuple[str, str, EntryFields]]:
            cursor = start
            while cursor is not None:
                try:
                    batch = self.client.xrange(key, min=cursor, max="+", count=count)
                except redis.ResponseError:
                    if keys.stream_tenant(self.prefix, key) is None:
                        raise
                    log.warning("stream.unreadable_log", stream=key, action="left out: its tenant's user changed it")
                    return
                if not batch:
                    return
                for entry in batch:
                    entry_id, fields = xrange_entry(entry)
                    yield key, entry_id, fields
                cursor = after(entry_id)

        return heapq.merge(*map(stream, self.stream_keys), key=lambda entry: parse_entry_id(entry[1]))

    @staticmethod
    def decode_entry(fields: EntryFields) -> Event:
        """The event of one stream entry; raises ``EntryDecodeError`` if malformed."""
        data = fields.get(b"data", fields.get("data"))
        if data is None:
            raise EntryDecodeError("entry has no 'data' field")
        try:
            return decode(data if isinstance(data, bytes) else data.encode("latin-1"))
        except Exception as exc:  # msgspec.DecodeError / ValidationError
            raise EntryDecodeError(str(exc)) from exc

    def stream_info(self) -> list[dict[str, Any]]:
        """Per stream: key, length, first and last entry ids (None when empty). A tenant's
        log its user made another type since it was listed is left out."""
        streams = self.stream_keys
        if self.clustered:  # each shard's stream in a slot of its own
            replies: list[Any] = []
            for key in streams:
                replies += [self.client.xlen(key), self.client.xrange(key, count=1), self.client.xrevrange(key, count=1)]
        else:
            pipe = self.client.pipeline(transaction=False)
            for key in streams:
                pipe.xlen(key)
                pipe.xrange(key, count=1)
                pipe.xrevrange(key, count=1)
            replies = pipe.execute(raise_on_error=False)
        out: list[dict[str, Any]] = []
        for i, key in enumerate(streams):
            length, first, last = replies[3 * i : 3 * i + 3]
            failed = next((r for r in (length, first, last) if isinstance(r, Exception)), None)
            if failed is not None:
                if isinstance(failed, redis.ResponseError) and not isinstance(failed, redis.exceptions.NoPermissionError):
                    if keys.stream_tenant(self.prefix, key) is not None:
                        continue
                raise failed
            out.append(
                {
                    "stream": key,
                    "length": length,
                    "first_id": xrange_entry(first[0])[0] if first else None,
                    "last_id": xrange_entry(last[0])[0] if last else None,
                }
            )
        return out

    AHEAD_MS = 86_400_000  # a last id further ahead of the server's clock is ``ahead``

    def damaged(self) -> dict[str, str]:
        """Streams whose appends fail or whose ids are not the server's: key -> ``wrong_type``
        (a tenant's log its user made another type), ``exhausted`` (its last id is the largest:
        every append to it fails) or ``ahead`` (its last id is more than a day past the
        server's clock: appended with explicit ids; appends go on). Only a tenant can do this
        to its own log; the operator's streams are named too, should it ever happen there."""
        out = self.broken()
        streams = [k for k in self.stream_keys if k not in out]
        now: Any = self.client.time()
        if isinstance(now, dict):  # a cluster client's reply: node -> its clock
            now = next(iter(now.values()))
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        if self.clustered:  # each shard's stream in a slot of its own
            replies: list[Any] = [self.client.xrevrange(key, count=1) for key in streams]
        else:
            pipe = self.client.pipeline(transaction=False)
            for key in streams:
                pipe.xrevrange(key, count=1)
            replies = pipe.execute(raise_on_error=False)
        for key, last in zip(streams, replies):
            if isinstance(last, redis.exceptions.NoPermissionError):
                raise last
            if isinstance(last, redis.ResponseError):
                out[key] = "wrong_type"  # made another type since it was listed
                continue
            if isinstance(last, Exception):
                raise last
            if not last:
                continue
            entry = parse_entry_id(xrange_entry(last[0])[0])
            if entry == MAX_ID:
                out[key] = "exhausted"
            elif entry[0] > now_ms + self.AHEAD_MS:
                out[key] = "ahead"
        return out

    def memory_bytes(self, key: str, samples: int = 0) -> int | None:
        """What ``key`` takes of Redis's memory (``MEMORY USAGE``: every node counted with
        ``samples`` 0, an estimate from that many otherwise), or None when the server does
        not say."""
        try:
            used = self.client.memory_usage(key, samples=samples)
        except redis.ResponseError:
            return None
        return None if used is None else int(used)

    def type_counts(self) -> dict[str, int]:
        """Events appended per type, over the operator's streams and every tenant's log."""
        return self.counters("types")[0]

    def counters(self, family: str) -> tuple[dict[str, int], int]:
        """The ``types`` or ``spool`` (losses) counters summed over the operator's hash and
        every tenant's: (name -> sum, fields left out because they hold no count). Never
        trusts what it reads: a field that is no number is counted, not summed."""
        if family == "types":
            shared = [keys.shard_types(self.prefix, s) for s in range(self.shards)] if self.clustered else [self.types_key]
            own = keys.tenant_types
        elif family == "spool":
            shared, own = [keys.spool_counters(self.prefix)], keys.tenant_spool_counters
        else:
            raise ValueError(f"no counters {family!r}: types or spool")
        names = [] if self.clustered or self._tenant_credentials else self._log_names()
        hashes = [*shared, *(own(self.prefix, name) for name in names)]
        if self.clustered:  # each shard's hash in a slot of its own
            replies = [self.client.hgetall(key) for key in hashes]
        else:
            pipe = self.client.pipeline(transaction=False)
            for key in hashes:
                pipe.hgetall(key)
            replies = pipe.execute(raise_on_error=False)
        total: dict[str, int] = {}
        garbage = 0
        for reply in replies:
            if isinstance(reply, redis.exceptions.NoPermissionError):
                raise reply
            if isinstance(reply, redis.ResponseError):
                garbage += 1  # a tenant's counters key of another type
                continue
            if isinstance(reply, Exception):
                raise reply
            found, bad = counts(reply)
            garbage += bad
            for name, n in found.items():
                total[name] = total.get(name, 0) + n
        return dict(sorted(total.items())), garbage


def _id(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def xrange_entry(entry: StreamEntry) -> tuple[str, EntryFields]:
    """An entry XRANGE or XREVRANGE returned, as (id, fields). redis-py types both as
    optional for every stream reply (XREADGROUP and XAUTOCLAIM give no fields for an entry
    deleted while pending); these two commands always give both."""
    entry_id, fields = entry
    assert entry_id is not None and fields is not None
    return _id(entry_id), fields


def _by_tenant(records: list[Record]) -> Iterator[list[Record]]:
    """``records`` cut into runs of one tenant each, in order."""
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].tenant != records[start].tenant:
            yield records[start:i]
            start = i
