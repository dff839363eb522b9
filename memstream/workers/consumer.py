"""The consumer-group loop that feeds one projection from the event streams.

One group per projection and version (``turns.v1``); consumers have stable names, read
their own pending entries first, then new ones, in batches; entries idle too long on a
dead consumer are reclaimed with XAUTOCLAIM; an entry that keeps failing goes to the
dead-letter stream after ``max_deliveries``; an unknown (newer) event type is skipped
with a warning; a malformed entry is dead-lettered at once.

Every entry is untrusted input. ``admit`` checks it once, the same way for every
projection, before any projection sees it: a retry meant for another group
(``only_group``, compared as bytes) is skipped; every field name and the text fields
(``type``, ``id``, ``retry_of``) must be UTF-8, ``data`` must decode to an
event whose tag equals the ``type`` field (and whose id equals the ``id`` field, when
present), and the fields every projection keys its data by must be usable: a non-empty
event id and ``scope.tenant``, and the event id and scope identifiers at most
``MAX_ID_BYTES`` UTF-8 bytes. Such entries are dead-lettered with the reason (their raw
fields kept); text fields over ``max_text_bytes`` are clipped as the producers clip them
(``producers.clean_text``) and named in the event's ``clipped``.

Guarantees: an entry is acked only after the projection applied it and its position was
recorded, so a crash at any point means a redelivery, which projections must (and do)
treat as harmless: the event id is the idempotency key. ``Consumer.run`` returns only
when told to stop: any error of a step is logged, counted and retried after a jittered
exponential backoff (the entries in hand stay pending); failures of a dependency or of
the server's state (``is_transient``) spend no delivery of the event.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import msgspec
import redis
import structlog

from memstream.producers.events import EVENT_TYPES, Event
from memstream.producers.stream import EventLog
from memstream.core.settings import Settings
from memstream.text.clean import clean_text
from memstream.producers.events import decode
from memstream.producers.stream import parse_entry_id
from memstream.projections.embedders.base import EmbedderUnavailable
from memstream.projections.stores.port import StoreUnavailable

from memstream.workers.health import Health
from memstream.workers.tenancy import TenantGate

__all__ = [
    "Delivery", "Projection", "Consumer", "TransientError", "PermanentError", "TRANSIENT",
    "Positions", "DeadLetters", "is_applied", "is_transient", "admit", "Admission", "backoff_delay",
    "MAX_ID_BYTES",
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

# Replies of a server that cannot take writes now (full, a replica after a failover,
# loading, a busy script): the server's state, not the event's fault.
_SERVER_STATE = (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError,
                 redis.exceptions.BusyLoadingError, redis.exceptions.MasterDownError,
                 redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError)
_SERVER_STATE_CODES = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "MISCONF", "NOREPLICAS",
                       "TRYAGAIN", "CLUSTERDOWN")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of what the projection depends on (``TRANSIENT``) or
    of the server's state (OOM, READONLY, LOADING, BUSY, MISCONF...), which no event causes:
    retry later without counting a delivery against the event."""
    if isinstance(exc, TRANSIENT) or isinstance(exc, _SERVER_STATE):
        return True
    if isinstance(exc, redis.ResponseError):
        message = str(exc)
        # a MULTI reply names the command first: "Command # 1 (...) of pipeline caused error: OOM ..."
        message = message.rsplit("caused error: ", 1)[-1]
        return message.split(" ", 1)[0].upper() in _SERVER_STATE_CODES
    return False


def backoff_delay(failures: int, base: float = 0.2, cap: float = 30.0) -> float:
    """Seconds to wait after ``failures`` failures in a row: uniform between ``base`` and
    ``base * 2**(failures - 1)``, capped at ``cap`` (full jitter: workers that failed
    together do not retry together)."""
    top = min(cap, base * (2 ** min(max(failures, 1) - 1, 30)))
    return random.uniform(base, max(base, top))


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
    """The dead-letter stream ``{prefix}:dlq``: failed entries with their error.

    Each record keeps the entry's fields byte for byte as ``f:<name>`` (names and values
    need not be UTF-8). Guarantee: ``list``, ``take`` and ``retry`` never raise on what a
    record holds: ``list`` shows undecodable bytes as backslash escapes, ``take`` keeps
    field names lossless (undecodable bytes as surrogate escapes) and ``retry`` re-appends
    the original bytes.
    """

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
            record[b"f:" + k if isinstance(k, bytes) else f"f:{k}"] = v
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(self.key, record)
        pipe.xack(stream, group, entry_id)
        pipe.execute()

    def list(self, count: int = 100, group: str | None = None) -> list[dict]:
        out = []
        for dlq_id, record in self.client.xrange(self.key, count=count):
            item = {"dlq_id": _shown(dlq_id)}
            for k, v in record.items():
                key = _shown(k)
                if key.startswith("f:"):
                    if key == "f:type" or key == "f:id":
                        item[key[2:]] = _shown(v)
                    continue
                item[key] = _shown(v)
            if group is None or item.get("group") == group:
                out.append(item)
        return out

    def take(self, dlq_id: str) -> dict | None:
        got = self.client.xrange(self.key, min=dlq_id, max=dlq_id)
        return {_lossless(k): v for k, v in got[0][1].items()} if got else None

    def retry(self, dlq_id: str) -> str | None:
        """Re-append a dead letter to its stream for its group only; drop it from the DLQ."""
        record = self.take(dlq_id)
        if record is None:
            return None
        fields = {k[2:].encode("utf-8", "surrogateescape"): v for k, v in record.items()
                  if k.startswith("f:") and k not in ("f:only_group", "f:retry_of")}
        fields[b"only_group"] = record.get("group", b"")
        fields[b"retry_of"] = record.get("entry_id", b"")
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(_shown(record.get("stream", b"")), fields)
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


def _shown(value) -> str:
    """Text for people and JSON: undecodable bytes as backslash escapes."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _lossless(value) -> str:
    """Text that encodes back to the same bytes (``surrogateescape``)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


# -- admission: one check of every entry, for every projection alike ------------------------
MAX_ID_BYTES = 1024  # event id and scope identifiers: they become keys and filters
_TEXT_FIELDS = ("type", "id", "retry_of")
_SCOPE_IDS = ("tenant", "app", "agent", "user_id", "session_id", "run_id", "platform")


@dataclass(slots=True)
class Admission:
    """What to do with one stream entry: ``apply`` its ``event`` (``clipped``: the text
    fields clipped here), ``skip`` it (a newer event type, or a retry for another group:
    ``reason`` says which) or ``dead``-letter it (``reason``)."""

    action: str
    reason: str = ""
    event: Event | None = None
    clipped: tuple[str, ...] = ()


def _dead(reason: str) -> Admission:
    return Admission("dead", reason)


def admit(fields: dict, group: str, max_text_bytes: int) -> Admission:
    """Check one entry's raw fields (names and values bytes or str). Never raises."""
    try:
        return _admit(fields, group, max_text_bytes)
    except Exception as exc:  # a bug here must not stop the projection: dead-letter, keep going
        return _dead(f"malformed: the entry could not be checked ({type(exc).__name__}: {exc})"[:2000])


def _admit(fields: dict, group: str, max_text_bytes: int) -> Admission:
    # first: a dead-letter retry meant for another group is none of this group's business,
    # however malformed the rest (each group dead-letters its own copy once)
    only = fields.get(b"only_group", fields.get("only_group"))
    if only is not None:
        if isinstance(only, bytes):
            only = only.decode("utf-8", "surrogateescape")
        if str(only) != group:
            return Admission("skip", "a dead-letter retry for another group")
    values: dict[str, object] = {}
    for k, v in fields.items():
        if isinstance(k, bytes):
            try:
                k = k.decode("utf-8")
            except UnicodeDecodeError:
                return _dead(f"malformed: field name {k[:60]!r} is not UTF-8")
        values[str(k)] = v
    text: dict[str, str] = {}
    for name in _TEXT_FIELDS:
        v = values.get(name)
        if v is None:
            continue
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError:
                return _dead(f"malformed: field {name!r} is not UTF-8")
        text[name] = str(v)
    etype = text.get("type", "")
    if not etype:
        return _dead("malformed: entry has no 'type' field")
    if etype not in EVENT_TYPES:
        return Admission("skip", "unknown event type")
    data = values.get("data")
    if data is None:
        return _dead("malformed: entry has no 'data' field")
    if not isinstance(data, bytes):
        data = str(data).encode("utf-8", "surrogateescape")
    try:
        event = decode(data)
    except Exception as exc:  # msgspec.DecodeError / ValidationError
        return _dead(f"malformed: {exc}"[:2000])
    tag = type(event).__struct_config__.tag  # type: ignore[attr-defined]
    if tag != etype:
        return _dead(f"rejected: type field {etype[:60]!r} does not match the event body {tag!r}")
    if "id" in text and text["id"] != event.id:
        return _dead(f"rejected: id field {text['id'][:60]!r} does not match the event body's id "
                     f"{event.id[:60]!r}")
    if not event.id.strip():
        return _dead("rejected: the event id is empty (every projection keys its data by it)")
    if len(event.id.encode("utf-8")) > MAX_ID_BYTES:
        return _dead(f"rejected: the event id is over {MAX_ID_BYTES} bytes")
    if not event.scope.tenant.strip():
        return _dead("rejected: scope.tenant is empty (every projection keys its data by tenant)")
    for name in _SCOPE_IDS:
        if len(getattr(event.scope, name).encode("utf-8")) > MAX_ID_BYTES:
            return _dead(f"rejected: scope.{name} is over {MAX_ID_BYTES} bytes")
    event, clipped = _clip(event, max_text_bytes)
    return Admission("apply", event=event, clipped=clipped)


def _clip_text(value: str, max_bytes: int) -> str | None:
    """``value`` clipped as the producers clip it, or None when it is within the bound."""
    if len(value) * 4 <= max_bytes:  # at most 4 UTF-8 bytes a character: certainly within
        return None
    text, problems = clean_text(value, max_bytes)
    return text if "clipped" in problems else None


def _clip(event: Event, max_bytes: int) -> tuple[Event, tuple[str, ...]]:
    """Every text field of ``event`` (tool calls' included) within ``max_bytes``; the
    names of those clipped are added to ``event.clipped``."""
    changes: dict[str, object] = {}
    for name in event.__struct_fields__:
        if name in ("id", "scope", "clipped"):
            continue
        value = getattr(event, name)
        if isinstance(value, str):
            clipped = _clip_text(value, max_bytes)
            if clipped is not None:
                changes[name] = clipped
        elif name == "tool_calls" and value:
            calls, any_clipped = [], False
            for call in value:
                parts = {f: _clip_text(getattr(call, f), max_bytes) for f in call.__struct_fields__}
                parts = {f: v for f, v in parts.items() if v is not None}
                any_clipped |= bool(parts)
                calls.append(msgspec.structs.replace(call, **parts) if parts else call)
            if any_clipped:
                changes[name] = calls
    if not changes:
        return event, ()
    names = tuple(changes)
    flagged = list(event.clipped) + [n for n in names if n not in event.clipped]
    return msgspec.structs.replace(event, clipped=flagged, **changes), names


@dataclass
class ConsumerStats:
    applied: int = 0
    skipped_unknown: int = 0
    dead_lettered: int = 0
    retried: int = 0
    reclaimed: int = 0
    batches: int = 0
    transient_failures: int = 0
    errors: int = 0  # steps that failed otherwise (logged, backed off, retried)
    restarts: int = 0  # threads restarted by the pipeline's supervisor
    clipped: int = 0  # events with a text field clipped here
    last_error: str = ""
    extra: dict = field(default_factory=dict)


class Consumer:
    """Feeds ``projection`` from every stream of ``eventlog`` through its group, and
    records its health in ``P:health:{group}`` (``memstream.workers.health``)."""

    def __init__(self, eventlog: EventLog, projection: Projection, name: str, *,
                 batch: int = 128, block_ms: int = 500, claim_idle_ms: int = 60_000,
                 claim_every: float = 5.0, max_deliveries: int = 5,
                 max_text_bytes: int = Settings.max_text_bytes, backoff_base: float = 0.2,
                 backoff_cap: float = 30.0, transient_cap: float = 5.0):
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
        self.max_text_bytes = max_text_bytes
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.transient_cap = transient_cap
        self.health = Health(self.client, eventlog.prefix, self.group, name)
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
                return self._stepped(handled + self._handle(got, pending=True))
        got = self._read(">", block=block)
        return self._stepped(handled + self._handle(got, pending=False))

    def _stepped(self, handled: int) -> int:
        self.health.step(handled)
        self.health.beat(self.stats)
        return handled

    def run(self, stop) -> None:
        """Loop until ``stop`` (a threading.Event) is set; finishes the batch in hand.

        Never returns otherwise: an error of a step is logged and counted (transient:
        ``transient_failures``; any other: ``errors``), then the step is retried after
        ``backoff_delay`` (capped at ``transient_cap`` or ``backoff_cap``), re-reading the
        entries this consumer holds."""
        failures = 0
        while not stop.is_set():
            try:
                self.step(block=True)
                failures = 0
            except Exception as exc:
                failures += 1
                error = f"{type(exc).__name__}: {exc}"
                self.stats.last_error = error
                transient = is_transient(exc)
                delay = backoff_delay(failures, self.backoff_base,
                                      self.transient_cap if transient else self.backoff_cap)
                if transient:
                    self.stats.transient_failures += 1
                    log.warning("consumer.transient_failure", group=self.group, error=error[:500],
                                retry_in=round(delay, 2))
                else:
                    self.stats.errors += 1
                    log.error("consumer.step_failed", group=self.group, error=error[:500],
                              failures=failures, retry_in=round(delay, 2), exc_info=True)
                    self._groups_ready = False  # e.g. the stream or group was deleted (NOGROUP)
                self._pending_done = False  # re-read what we hold
                self.health.error(error)
                self.health.beat(self.stats, force=failures == 1)
                stop.wait(delay)
        self.health.state = "stopped"
        self.health.beat(self.stats, force=True)

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
                verdict = admit(fields, self.group, self.max_text_bytes)
                if verdict.action == "skip":
                    if verdict.reason == "unknown event type":
                        self.stats.skipped_unknown += 1
                        etype = fields.get(b"type", fields.get("type", b""))
                        log.warning("consumer.unknown_event_type", group=self.group, stream=stream,
                                    entry=entry_id, event_type=_shown(etype)[:60],
                                    action="skipped: a newer producer is ahead of this worker")
                    skip.append(entry_id)
                    continue
                if verdict.action == "dead":
                    self.dlq.add(self.group, stream, entry_id, fields, verdict.reason,
                                 counts.get(entry_id, 1))
                    self.stats.dead_lettered += 1
                    log.warning("consumer.dead_lettered", group=self.group, stream=stream,
                                entry=entry_id, reason=verdict.reason[:200])
                    continue
                event = verdict.event
                if verdict.clipped:
                    self.stats.clipped += 1
                    log.warning("consumer.clipped", group=self.group, stream=stream, entry=entry_id,
                                fields=list(verdict.clipped), max_bytes=self.max_text_bytes)
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
        except Exception as exc:
            if is_transient(exc):
                raise
            # isolate the poison: apply one by one
            log.warning("consumer.batch_failed", group=self.group, stream=stream, entries=len(batch),
                        error=f"{type(exc).__name__}: {exc}", action="retrying one by one")
            ok = []
            for d in batch:
                try:
                    self.projection.apply([d])
                    ok.append(d)
                except Exception as one_exc:
                    if is_transient(one_exc):
                        raise
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
