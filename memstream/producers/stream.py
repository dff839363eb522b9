"""The append side of the Redis Streams log.

Keys (``P`` = the configured prefix; built by ``memstream.core.keys``):
  ``P:events:{shard}``      the event streams; never trimmed by length
  ``P:t:{tenant}:shipped``  hash: spool segment id -> last sequence number in the log
                            (per tenant: a tenant's Redis user owns it, see tenants.py)
  ``P:types``               hash: event type -> number of events appended

Guarantees: ``EventLog.append_batch`` is atomic (one server-side script: the whole
batch lands or none of it) and, for records carrying a spool segment id and sequence
number, exactly-once: a record at or below the segment's recorded sequence is skipped,
so a batch re-sent after a lost reply or a crash never duplicates an event. Events of
one (tenant, agent) always go to the same stream, in the order given. With a ``signer``
each entry carries ``sig``, the signature of its payload by its tenant's key.

On a Redis Cluster (a hash-tagged prefix, ``keys.clustered``) a script may touch one slot
only: a batch is appended by one script call per shard, each with its shard's dedup records
(``keys.shard_shipped``) and type counters (``keys.shard_types``) in its stream's slot. Each
shard's part is atomic and exactly-once on its own (a record is skipped at or below the
segment's sequence recorded in its shard), so a batch cut short by a failure between two
shards is re-sent whole and lands once.
"""

from __future__ import annotations

import heapq
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import redis

from memstream.core import PermanentError, TransientError, keys
from memstream.producers.events import Event, decode, encode

if TYPE_CHECKING:
    from redis.typing import StreamEntry

__all__ = ["EventLog", "Record", "shard_of", "parse_entry_id", "EntryDecodeError", "EntryFields", "xrange_entry", "NotReplicated"]

# A stream entry's fields as redis-py reads them: bytes (text from a client that decodes).
EntryFields = dict[bytes | str, bytes | str]

_SHIP_SCRIPT = """
-- KEYS: the tenant's dedup hash, the type counters. ARGV: segment id, record count, then
-- per record: seq, stream index, event id, type, payload, signature ('' for none); then
-- the former shared dedup hash, then the streams. The streams are not declared keys:
-- EVAL checks declared keys for read and write, and a tenant's Redis user may only
-- write the streams (each command inside is still checked against its ACL). The former
-- dedup hash is read only, as a fallback, and may be refused: pcall.
local n = tonumber(ARGV[2])
local streams = {}
for k = 4 + 6 * n, #ARGV do streams[#streams + 1] = ARGV[k] end
-- Check every key we write before the first write: a script that fails half-way keeps
-- its earlier XADDs, and the shipper's re-send would then duplicate them.
local function check(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE memstream key ' .. key .. ' holds a ' .. t ..
      ', not a ' .. want .. ': rename or delete it')
  end
end
for k = 1, 2 do
  local err = check(KEYS[k], 'hash')
  if err then return err end
end
for k = 1, #streams do
  local err = check(streams[k], 'stream')
  if err then return err end
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
  last = tonumber(got or '-1')
end
local added = 0
local i = 3
local ids = {}
for r = 1, n do
  local seq = tonumber(ARGV[i])
  if ARGV[1] == '' or seq > last then
    local key = streams[1 + tonumber(ARGV[i + 1])]
    local sid
    if ARGV[i + 5] ~= '' then
      sid = redis.call('XADD', key, '*', 'id', ARGV[i + 2], 'type', ARGV[i + 3],
        'data', ARGV[i + 4], 'sig', ARGV[i + 5])
    else
      sid = redis.call('XADD', key, '*', 'id', ARGV[i + 2], 'type', ARGV[i + 3], 'data', ARGV[i + 4])
    end
    redis.call('HINCRBY', KEYS[2], ARGV[i + 3], 1)
    ids[#ids + 1] = sid
    if seq > last then last = seq end
    added = added + 1
  else
    ids[#ids + 1] = ''
  end
  i = i + 6
end
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], last)
end
return ids
"""


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


@dataclass(frozen=True, slots=True)
class Record:
    """One event ready to ship: its encoded payload and where it goes."""

    seq: int
    event_id: str
    type: str
    tenant: str
    agent: str
    data: bytes

    @classmethod
    def of(cls, event: Event, seq: int = 0, data: bytes | None = None) -> Record:
        """The record of ``event``; ``data`` is its encoding when already at hand."""
        return cls(
            seq=seq,
            event_id=event.id,
            type=str(type(event).__struct_config__.tag),  # every event's tag is a str
            tenant=event.scope.tenant,
            agent=event.scope.agent,
            data=encode(event) if data is None else data,
        )


class EventLog:
    """The event streams under one prefix. Thread-safe (redis-py clients are)."""

    def __init__(
        self, client: redis.Redis, prefix: str = "memstream", shards: int = 1, signer: Callable[[str, bytes], str] | None = None
    ):
        self.client = client
        self.prefix = prefix
        self.shards = max(1, int(shards))
        self.signer = signer
        self._script = client.register_script(_SHIP_SCRIPT)
        self.clustered = keys.clustered(prefix)

    # keys
    def stream_key(self, shard: int) -> str:
        return keys.events(self.prefix, shard)

    @property
    def stream_keys(self) -> list[str]:
        return [self.stream_key(i) for i in range(self.shards)]

    def shipped_key(self, tenant: str) -> str:
        return keys.shipped(self.prefix, tenant)

    @property
    def legacy_shipped_key(self) -> str:
        """Where dedup records were kept for every tenant alike, read as a fallback."""
        return keys.legacy_shipped(self.prefix)

    @property
    def types_key(self) -> str:
        return keys.types(self.prefix)

    def stream_for(self, tenant: str, agent: str) -> str:
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
        declared = [self.shipped_key(tenant), self.types_key]
        index: dict[str, int] = {}
        argv: list[bytes | str | int] = [segment, len(records)]
        for rec in records:
            key = self.stream_for(rec.tenant, rec.agent)
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
        """The highest sequence of ``segment`` known to be in the log (-1: none)."""
        if self.clustered:
            found = [self.client.hget(keys.shard_shipped(self.prefix, tenant, s), segment) for s in range(self.shards)]
            return max((int(v) for v in found if v is not None), default=-1)
        value = self.client.hget(self.shipped_key(tenant), segment)
        return int(value) if value is not None else -1

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
        start = "-" if since in ("-", "0", "") else f"({since}"

        def stream(key: str) -> Iterator[tuple[str, str, EntryFields]]:
            cursor = start
            while batch := self.client.xrange(key, min=cursor, max="+", count=count):
                for entry in batch:
                    entry_id, fields = xrange_entry(entry)
                    yield key, entry_id, fields
                cursor = "(" + entry_id

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
        """Per stream: key, length, first and last entry ids (None when empty)."""
        out: list[dict[str, Any]] = []
        for key in self.stream_keys:
            length = self.client.xlen(key)
            first = self.client.xrange(key, count=1)
            last = self.client.xrevrange(key, count=1)
            out.append(
                {
                    "stream": key,
                    "length": length,
                    "first_id": xrange_entry(first[0])[0] if first else None,
                    "last_id": xrange_entry(last[0])[0] if last else None,
                }
            )
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
        if not self.clustered:
            raw = self.client.hgetall(self.types_key)
            return {_id(k): int(v) for k, v in sorted(raw.items())}
        total: dict[str, int] = {}
        for s in range(self.shards):
            for k, v in self.client.hgetall(keys.shard_types(self.prefix, s)).items():
                total[_id(k)] = total.get(_id(k), 0) + int(v)
        return dict(sorted(total.items()))


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
