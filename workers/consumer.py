"""The consumer-group loop that feeds one projection from the event streams.

One group per projection and version (``turns.v1``); consumers have stable names, read
their own pending entries first, then new ones, in batches; entries idle too long on a
dead consumer are reclaimed with XAUTOCLAIM; an entry that keeps failing goes to the
dead-letter stream after ``max_deliveries``; an unknown (newer) event type is skipped
with a warning; a malformed entry is dead-lettered at once.

Guarantee: an entry is acked only after the projection applied it and its position was
recorded, so a crash at any point means a redelivery, which projections must (and do)
treat as harmless: the event id is the idempotency key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import redis
import structlog

from producers import EVENT_TYPES, Event, EventLog
from producers.stream import EntryDecodeError, parse_entry_id
from projections._embedding import EmbedderUnavailable
from projections.store import StoreUnavailable

from .tenancy import TenantGate

__all__ = [
    "Delivery", "Projection", "Consumer", "TransientError", "PermanentError", "TRANSIENT",
    "Positions", "DeadLetters", "is_applied",
]

log = structlog.get_logger("memstream.consumer")


class TransientError(Exception):
    """The projection's store is unavailable: retry the whole batch later (no ack)."""


class PermanentError(Exception):
    """This event can never be applied (rejected by the projection): dead-letter it."""


# Failures of what a projection depends on, not of the event: the batch stays pending and
# the consumer backs off; no delivery is counted against the event's dead-letter limit.
TRANSIENT = (TransientError, redis.ConnectionError, redis.TimeoutError, StoreUnavailable,
             EmbedderUnavailable)


@dataclass(slots=True)
class Delivery:
    stream: str
    entry_id: str
    fields: dict
    event: Event
    deliveries: int = 1


class Projection(Protocol):
    name: str
    version: int

    def apply(self, batch: Sequence[Delivery]) -> None:
        """Apply events idempotently (event id = idempotency key), in order."""


_SET_MAX = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
if cur then
  local cm, cs = parse(cur)
  local nm, ns = parse(ARGV[2])
  if nm < cm or (nm == cm and ns <= cs) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""


class Positions:
    """Per projection group and stream: the highest applied entry id and when.

    Guarantee: ``record`` only ever moves a position forward (compared as (ms, seq)).
    """

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.prefix = prefix
        self._script = client.register_script(_SET_MAX)

    def _keys(self, group: str) -> list[str]:
        return [f"{self.prefix}:positions:{group}", f"{self.prefix}:applied_at:{group}"]

    def record(self, group: str, stream: str, entry_id: str, at: float | None = None,
               pipe: redis.client.Pipeline | None = None) -> None:
        """Record now, or as part of ``pipe`` (a transaction that also acks)."""
        self._script(keys=self._keys(group), args=[stream, entry_id, repr(at or time.time())],
                     client=pipe)

    def get(self, group: str) -> dict[str, dict]:
        pos_key, at_key = self._keys(group)
        positions = self.client.hgetall(pos_key)
        applied = self.client.hgetall(at_key)
        out = {}
        for stream, entry in positions.items():
            s = stream.decode() if isinstance(stream, bytes) else stream
            out[s] = {"position": entry.decode() if isinstance(entry, bytes) else entry,
                      "applied_at": float(applied.get(stream, 0) or 0)}
        return out

    def reset(self, group: str) -> None:
        self.client.delete(*self._keys(group))


class DeadLetters:
    """The dead-letter stream ``{prefix}:dlq``: failed entries with their error."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.key = f"{prefix}:dlq"

    def add(self, group: str, stream: str, entry_id: str, fields: dict, error: str,
            deliveries: int) -> None:
        """Dead-letter one entry and ack it in its group, atomically (MULTI)."""
        record = {
            "group": group, "stream": stream, "entry_id": entry_id, "error": error[:2000],
            "deliveries": deliveries, "dead_at": repr(time.time()),
        }
        for k, v in fields.items():
            key = k.decode() if isinstance(k, bytes) else k
            record[f"f:{key}"] = v
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(self.key, record)
        pipe.xack(stream, group, entry_id)
        pipe.execute()

    def list(self, count: int = 100, group: str | None = None) -> list[dict]:
        out = []
        for dlq_id, record in self.client.xrange(self.key, count=count):
            item = {"dlq_id": _s(dlq_id)}
            for k, v in record.items():
                key = _s(k)
                if key.startswith("f:"):
                    if key == "f:type" or key == "f:id":
                        item[key[2:]] = _s(v)
                    continue
                item[key] = _s(v)
            if group is None or item.get("group") == group:
                out.append(item)
        return out

    def take(self, dlq_id: str) -> dict | None:
        got = self.client.xrange(self.key, min=dlq_id, max=dlq_id)
        return {_s(k): v for k, v in got[0][1].items()} if got else None

    def retry(self, dlq_id: str) -> str | None:
        """Re-append a dead letter to its stream for its group only; drop it from the DLQ."""
        record = self.take(dlq_id)
        if record is None:
            return None
        fields = {k[2:]: v for k, v in record.items() if k.startswith("f:") and k not in ("f:only_group",)}
        fields["only_group"] = record["group"]
        fields["retry_of"] = record["entry_id"]
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(_s(record["stream"]), fields)
        pipe.xdel(self.key, dlq_id)
        new_id, _ = pipe.execute()
        return _s(new_id)

    def drop(self, dlq_id: str) -> bool:
        return bool(self.client.xdel(self.key, dlq_id))

    def count(self, group: str | None = None) -> int:
        if group is None:
            return int(self.client.xlen(self.key))
        return len(self.list(count=100000, group=group))


def is_applied(client: redis.Redis, stream: str, group: str, entry_id: str) -> bool:
    """True once ``group`` has read ``entry_id`` and holds it no longer pending
    (applied, skipped or dead-lettered): read-your-writes for ``add --sync``."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:
        return False
    for g in groups:
        if _s(g["name"]) != group:
            continue
        if parse_entry_id(_s(g["last-delivered-id"])) < parse_entry_id(entry_id):
            return False
        return not client.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    return False


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class ConsumerStats:
    applied: int = 0
    skipped_unknown: int = 0
    dead_lettered: int = 0
    retried: int = 0
    reclaimed: int = 0
    batches: int = 0
    transient_failures: int = 0
    last_error: str = ""
    extra: dict = field(default_factory=dict)


class Consumer:
    """Feeds ``projection`` from every stream of ``eventlog`` through its group."""

    def __init__(self, eventlog: EventLog, projection: Projection, name: str, *,
                 batch: int = 128, block_ms: int = 500, claim_idle_ms: int = 60_000,
                 claim_every: float = 5.0, max_deliveries: int = 5):
        self.log = eventlog
        self.client = eventlog.client
        self.projection = projection
        self.group = f"{projection.name}.v{projection.version}"
        self.name = name
        self.batch = batch
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        self.claim_every = claim_every
        self.max_deliveries = max_deliveries
        self.positions = Positions(self.client, eventlog.prefix)
        self.dlq = DeadLetters(self.client, eventlog.prefix)
        self.gate = TenantGate(self.client, eventlog.prefix)
        self.stats = ConsumerStats()
        self._pending_done = False
        self._last_claim = 0.0
        self._groups_ready = False

    # -- set-up ---------------------------------------------------------------------
    def ensure_groups(self) -> None:
        """Create the group on every stream (from the start of the log), idempotently."""
        for key in self.log.stream_keys:
            try:
                self.client.xgroup_create(key, self.group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_ready = True

    # -- one step -------------------------------------------------------------------
    def step(self, block: bool = True) -> int:
        """Read one batch (own pending first, then new), apply, ack. Returns entries handled."""
        if not self._groups_ready:
            self.ensure_groups()
        handled = 0
        now = time.monotonic()
        if now - self._last_claim >= self.claim_every:
            self._last_claim = now
            handled += self._reclaim()
        if not self._pending_done:
            got = self._read("0", block=False)
            if not any(entries for _, entries in got):
                self._pending_done = True
            else:
                return handled + self._handle(got, pending=True)
        got = self._read(">", block=block)
        return handled + self._handle(got, pending=False)

    def run(self, stop) -> None:
        """Loop until ``stop`` (a threading.Event) is set; finishes the batch in hand."""
        backoff = 0.0
        while not stop.is_set():
            try:
                self.step(block=True)
                backoff = 0.0
            except TRANSIENT as exc:
                self.stats.transient_failures += 1
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                backoff = min(5.0, max(0.2, backoff * 2))
                log.warning("consumer.transient_failure", group=self.group, error=self.stats.last_error,
                            retry_in=backoff)
                self._pending_done = False  # re-read what we hold
                stop.wait(backoff)

    def drain(self, max_steps: int = 10_000) -> int:
        """Burst mode (tests, replays): step without blocking until nothing is left."""
        total = 0
        for _ in range(max_steps):
            n = self.step(block=False)
            total += n
            if n == 0 and self._pending_done:
                break
        return total

    # -- internals ------------------------------------------------------------------
    def _read(self, start: str, block: bool) -> list:
        streams = {key: start for key in self.log.stream_keys}
        kwargs = {"count": self.batch}
        if block and start == ">":
            kwargs["block"] = self.block_ms
        got = self.client.xreadgroup(self.group, self.name, streams, **kwargs) or []
        return [(_s(stream), entries) for stream, entries in got]

    def _reclaim(self) -> int:
        handled = 0
        for key in self.log.stream_keys:
            cursor = "0-0"
            while True:
                res = self.client.xautoclaim(key, self.group, self.name, self.claim_idle_ms,
                                             cursor, count=self.batch)
                cursor, claimed = _s(res[0]), res[1]
                deleted = res[2] if len(res) > 2 else []
                if deleted:  # entries removed from the stream: nothing to apply
                    self.client.xack(key, self.group, *deleted)
                claimed = [c for c in claimed if c and c[1] is not None]
                if claimed:
                    self.stats.reclaimed += len(claimed)
                    log.info("consumer.reclaimed", group=self.group, stream=key, entries=len(claimed))
                    handled += self._handle([(key, claimed)], pending=True)
                if cursor in ("0-0", "0"):
                    break
        return handled

    def _delivery_counts(self, stream: str, ids: list[str]) -> dict[str, int]:
        if not ids:
            return {}
        # this consumer's own pending entries (re-read or just reclaimed): other consumers'
        # entries in the same id range must not crowd them out of the reply
        rows = self.client.xpending_range(stream, self.group, min=ids[0], max=ids[-1],
                                          count=len(ids) + 10, consumername=self.name)
        return {_s(r["message_id"]): int(r["times_delivered"]) for r in rows}

    def _handle(self, got: list, pending: bool) -> int:
        handled = 0
        for stream, entries in got:
            if not entries:
                continue
            entries = [(_s(i), f) for i, f in entries if f]  # deleted entries come back empty
            counts = self._delivery_counts(stream, [i for i, _ in entries]) if pending else {}
            batch: list[Delivery] = []
            skip: list[str] = []
            for entry_id, fields in entries:
                only = fields.get(b"only_group", fields.get("only_group"))
                if only is not None and _s(only) != self.group:
                    skip.append(entry_id)  # a dead-letter retry meant for another group
                    continue
                etype = _s(fields.get(b"type", fields.get("type", b"")))
                # no type at all is malformed (dead-lettered below), not a newer producer's
                if etype and etype not in EVENT_TYPES:
                    self.stats.skipped_unknown += 1
                    log.warning("consumer.unknown_event_type", group=self.group, stream=stream,
                                entry=entry_id, event_type=etype[:60],
                                action="skipped: a newer producer is ahead of this worker")
                    skip.append(entry_id)
                    continue
                try:
                    event = self.log.decode_entry(fields)
                except EntryDecodeError as exc:
                    self.dlq.add(self.group, stream, entry_id, fields, f"malformed: {exc}",
                                 counts.get(entry_id, 1))
                    self.stats.dead_lettered += 1
                    log.warning("consumer.dead_lettered", group=self.group, stream=stream,
                                entry=entry_id, reason="malformed")
                    continue
                refusal = self.gate.refusal(event, fields)
                if refusal is not None:
                    self.dlq.add(self.group, stream, entry_id, fields, refusal, counts.get(entry_id, 1))
                    self.stats.dead_lettered += 1
                    log.warning("consumer.dead_lettered", group=self.group, stream=stream,
                                entry=entry_id, reason="forged")
                    continue
                batch.append(Delivery(stream, entry_id, fields, event, counts.get(entry_id, 1)))
            if skip:
                self.client.xack(stream, self.group, *skip)
            handled += len(entries)
            ok = self._apply(stream, batch) if batch else []
            last = max((i for i, _ in entries), key=parse_entry_id)
            # the position and the acks commit together (MULTI), after the projection
            # applied the batch: a crash before this point means a harmless redelivery
            pipe = self.client.pipeline(transaction=True)
            self.positions.record(self.group, stream, last, pipe=pipe)
            if ok:
                pipe.xack(stream, self.group, *ok)
            pipe.execute()
            self.stats.applied += len(ok)
        self.stats.batches += 1
        return handled

    def _apply(self, stream: str, batch: list[Delivery]) -> list[str]:
        """Apply ``batch`` (a poison entry isolated one by one); the entry ids to ack."""
        started = time.perf_counter()
        try:
            self.projection.apply(batch)
            ok = batch
        except TRANSIENT:
            raise
        except Exception as exc:
            # isolate the poison: apply one by one
            log.warning("consumer.batch_failed", group=self.group, stream=stream, entries=len(batch),
                        error=f"{type(exc).__name__}: {exc}", action="retrying one by one")
            ok = []
            for d in batch:
                try:
                    self.projection.apply([d])
                    ok.append(d)
                except TRANSIENT:
                    raise
                except Exception as one_exc:
                    self._failed(d, one_exc)
        log.debug("consumer.batch", group=self.group, stream=stream, entries=len(batch),
                  applied=len(ok), ms=round((time.perf_counter() - started) * 1000, 2))
        return [d.entry_id for d in ok]

    def _failed(self, d: Delivery, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.stats.last_error = error
        if isinstance(exc, PermanentError) or d.deliveries >= self.max_deliveries:
            self.dlq.add(self.group, d.stream, d.entry_id, d.fields, error, d.deliveries)
            self.stats.dead_lettered += 1
            log.warning("consumer.dead_lettered", group=self.group, stream=d.stream, entry=d.entry_id,
                        deliveries=d.deliveries, error=error)
        else:
            self.stats.retried += 1
            self._pending_done = False  # it stays pending: read it again
            log.warning("consumer.apply_failed", group=self.group, stream=d.stream, entry=d.entry_id,
                        deliveries=d.deliveries, error=error, action="left pending for redelivery")
