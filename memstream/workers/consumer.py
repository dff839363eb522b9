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
the server's state (``memstream.core.is_transient``: any ``TransientError``, Redis
connection and timeout errors, a server that refuses writes for now) spend no delivery of
the event. Any other failure of an entry counts a delivery; after ``max_deliveries`` it is
dead-lettered. Each committed batch is reported to the process's observer
(``memstream.core.observe``: the seconds of its stages and the entries applied), which
never fails the batch.

A tenant's own log (``P:t:T:events``) is that tenant's to break: its user may delete it
(with the groups on it), expire it, or put another type there. A Redis error on such a log
(``NOGROUP``, ``WRONGTYPE``) never fails a step: the group is created again where it can be,
the streams are read one by one for that step, and the log that fails is left out until it
is a stream again (``EventLog.broken``), so every other log is read on. The consumer creates
its group on a tenant's log as soon as the log is listed (``EventLog.stream_keys``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
from redis.typing import KeyT, StreamIdT, StreamRangeResponse

from memstream.core import Settings, as_str, is_transient, keys, observe, shown
from memstream.producers import EntryFields, EventLog, parse_entry_id
from memstream.projections import Delivery, Projection, group_name
from memstream.workers.admission import admit
from memstream.workers.deadletters import DeadLetters
from memstream.workers.health import Health
from memstream.workers.loop import DEFAULT_TUNING, GroupLoop, Tuning
from memstream.workers.positions import Positions
from memstream.workers.priority import Priority
from memstream.workers.stats import ConsumerStats
from memstream.workers.tenancy import TenantGate

# per stream read: its key and its entries (fields None or empty: deleted while pending)
Read = list[tuple[str, StreamRangeResponse]]

__all__ = ["Consumer"]


class Consumer(GroupLoop[Read]):
    """Feeds ``projection`` from every stream of ``events`` through its group, and
    records its health in ``P:health:{group}`` (``memstream.workers.health``)."""

    EVENT = "consumer"
    stats: ConsumerStats

    def __init__(
        self,
        events: EventLog,
        projection: Projection,
        name: str,
        *,
        tuning: Tuning = DEFAULT_TUNING,
        max_text_bytes: int = Settings().max_text_bytes,
        priority: Priority | None = None,
        low: bool = False,
        start_at: dict[str, str] | None = None,
        dlq_max_letters: int = Settings().dlq_max_letters,
    ) -> None:
        super().__init__(tuning, priority, low)
        self.events = events
        self._cluster_turn = -1  # on a cluster: the stream the last blocking read waited on
        self.client = events.client
        self.projection = projection
        self.group = group_name(projection)
        self.name = name
        self.max_text_bytes = max_text_bytes
        self.health = Health(self.client, events.prefix, self.group, name)
        self.positions = Positions(self.client, events.prefix)
        self.dlq = DeadLetters(self.client, events.prefix, dlq_max_letters)
        self.gate = TenantGate(self.client, events.prefix)
        self.stats = ConsumerStats()
        self.start_at = dict(start_at or {})  # stream -> id its group starts after ("0": the start)
        self._groups_ready = False
        self._ensured: set[str] = set()  # streams this consumer created (or found) its group on
        self._faults: dict[str, float] = {}  # tenant's log -> when its last failure was logged

    # -- set-up ---------------------------------------------------------------------
    def ensure_groups(self, streams: list[str] | None = None) -> None:
        """Create the group on every stream (or on ``streams``), from the start of the log or
        after ``start_at[stream]`` (what a replay read from the archive), idempotently. A
        tenant's log where it cannot be made (another type) is left out: its tenant's to mend."""
        for key in self.events.stream_keys if streams is None else streams:
            try:
                self.client.xgroup_create(key, self.group, id=self.start_at.get(key, "0"), mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    if not self._tenants_fault(key, exc):
                        raise
                    continue
            self._ensured.add(key)
        if streams is None:
            self._groups_ready = True

    def _tenants_fault(self, stream: str, exc: Exception) -> bool:
        """Whether ``exc`` is a Redis error on a tenant's own log (its tenant's doing: logged,
        never a failure of the step)."""
        if isinstance(exc, redis.exceptions.NoPermissionError) or not isinstance(exc, redis.ResponseError):
            return False
        if keys.stream_tenant(self.events.prefix, stream) is None:
            return False
        now = time.monotonic()
        if now - self._faults.get(stream, -60.0) < 60.0:
            return True  # said within the minute
        self._faults[stream] = now
        self.logger.warning(
            "consumer.tenant_log_unreadable",
            stream=stream,
            error=f"{type(exc).__name__}: {exc}"[:300],
            action="left out of this step; the other logs are read on",
        )
        return True

    # -- one step (``GroupLoop.step``) ---------------------------------------------------
    def _prepare(self) -> None:
        if not self._groups_ready:
            self.ensure_groups()
        else:
            new = [key for key in self.events.stream_keys if key not in self._ensured]
            if new:  # a tenant registered since: its log
                self.ensure_groups(new)

    def _has(self, got: Read) -> bool:
        return any(entries for _, entries in got)

    def _stepped(self, handled: int) -> int:
        self.health.step(handled)
        self.health.beat(self.stats)
        return handled

    def _failed(self, transient: bool, error: str, failures: int) -> None:
        if not transient:
            self._groups_ready = False  # e.g. the stream or group was deleted (NOGROUP)
        self._pending_done = False  # re-read what we hold
        self.health.error(error)
        self.health.beat(self.stats, force=failures == 1)

    def run(self, stop: threading.Event) -> None:
        """``GroupLoop.run``, then the health record says ``stopped``."""
        super().run(stop)
        self.health.state = "stopped"
        self.health.beat(self.stats, force=True)

    # -- internals ------------------------------------------------------------------
    def _read(self, start: str, block: bool) -> Read:
        streams: dict[KeyT, StreamIdT] = {key: start for key in self.events.stream_keys if key in self._ensured}
        kwargs = self._read_options(start, block)
        if self.events.clustered and len(streams) > 1:
            return self._read_each(streams, kwargs)
        try:
            got = self.client.xreadgroup(self.group, self.name, streams, **kwargs) or []
        except redis.ResponseError as exc:
            tenants = [k for k in streams if keys.stream_tenant(self.events.prefix, as_str(k)) is not None]
            if isinstance(exc, redis.exceptions.NoPermissionError) or not tenants:
                raise
            # a tenant's log deleted (its groups with it) or made another type: the groups
            # again, then each stream on its own for this step
            self.ensure_groups([as_str(k) for k in tenants])
            return self._read_each({k: v for k, v in streams.items() if as_str(k) in self._ensured}, kwargs)
        assert isinstance(got, list)  # RESP2, as memstream's clients speak: [stream, entries] pairs
        return [(as_str(stream), entries) for stream, entries in got]

    def _read_one(self, key: KeyT, start: StreamIdT, **kwargs: Any) -> list[Any]:
        """XREADGROUP of one stream; nothing for a tenant's log that fails (``_tenants_fault``)."""
        try:
            got = self.client.xreadgroup(self.group, self.name, {key: start}, **kwargs) or []
        except redis.ResponseError as exc:
            if not self._tenants_fault(as_str(key), exc):
                raise
            self._ensured.discard(as_str(key))  # made again at the next step, where it can be
            return []
        assert isinstance(got, list)
        return got

    def _read_each(self, streams: dict[KeyT, StreamIdT], kwargs: dict[str, Any]) -> Read:
        """``_read`` on a cluster, where each shard's stream has a slot of its own and one
        XREADGROUP may name one slot only: each stream in turn, without blocking, up to the
        batch; when none had anything, a blocking read of one stream, a different one each
        time, for the block time shared among them."""
        block = kwargs.pop("block", None)
        count = int(kwargs["count"])
        out: Read = []
        for key, start in streams.items():
            got = self._read_one(key, start, count=count)
            out += [(as_str(stream), entries) for stream, entries in got if entries]
            count -= sum(len(entries) for _, entries in got)
            if count <= 0:
                break
        if out or block is None:
            return out
        keys_ = list(streams)
        if not keys_:
            return out
        self._cluster_turn = (self._cluster_turn + 1) % len(keys_)
        key = keys_[self._cluster_turn]
        got = self._read_one(key, streams[key], count=int(kwargs["count"]), block=max(1, int(block) // len(keys_)))
        return [(as_str(stream), entries) for stream, entries in got if entries]

    def _reclaim(self) -> int:
        handled = 0
        for key in self.events.stream_keys:
            try:
                handled += self._reclaim_stream(key)
            except redis.ResponseError as exc:
                if not self._tenants_fault(key, exc):
                    raise
        return handled

    def _reclaim_stream(self, key: str) -> int:
        handled = 0
        cursor = "0-0"
        while True:
            res = self.client.xautoclaim(key, self.group, self.name, self.tuning.claim_idle_ms, cursor, count=self.tuning.batch)
            cursor, claimed = as_str(res[0]), res[1]
            deleted = res[2] if len(res) > 2 else []
            if deleted:  # entries removed from the stream: nothing to apply
                self.client.xack(key, self.group, *deleted)
            claimed = [c for c in claimed if c and c[1] is not None]
            if claimed:
                self.stats.reclaimed += len(claimed)
                self.logger.info("consumer.reclaimed", stream=key, entries=len(claimed))
                handled += self._handle([(key, claimed)], pending=True)
            if cursor in ("0-0", "0"):
                break
        return handled

    def _delivery_counts(self, stream: str, ids: list[str]) -> dict[str, int]:
        if not ids:
            return {}
        # this consumer's own pending entries (re-read or just reclaimed): other consumers'
        # entries in the same id range must not crowd them out of the reply
        try:
            rows = self.client.xpending_range(
                stream, self.group, min=ids[0], max=ids[-1], count=len(ids) + 10, consumername=self.name
            )
        except redis.ResponseError as exc:
            if not self._tenants_fault(stream, exc):
                raise
            return {}
        return {as_str(r["message_id"]): int(r["times_delivered"]) for r in rows}

    def _handle(self, got: Read, pending: bool) -> int:
        handled = 0
        for stream, read in got:
            if not read:
                continue
            try:
                handled += self._handle_stream(stream, read, pending)
            except redis.ResponseError as exc:
                if not self._tenants_fault(stream, exc):
                    raise
        self.stats.batches += 1
        return handled

    def _handle_stream(self, stream: str, read: Any, pending: bool) -> int:
        """Admit, apply and commit the entries ``read`` of one stream; how many were handled."""
        handled = 0
        started = time.perf_counter()
        entries = [(as_str(i), f) for i, f in read if f]  # deleted entries come back empty
        gone = [as_str(i) for i, f in read if not f]  # deleted while pending (a trim of a tenant's own log)
        counts = self._delivery_counts(stream, [i for i, _ in entries]) if pending else {}
        batch, skip = self._admitted(stream, entries, counts)
        if skip or gone:
            self.client.xack(stream, self.group, *skip, *gone)
        if not entries:
            return 0
        handled += len(entries)
        admitted = time.perf_counter()
        ok = self._apply(stream, batch) if batch else []
        applied = time.perf_counter()
        last = max((i for i, _ in entries), key=parse_entry_id)
        # the position and the acks commit together (MULTI), after the projection
        # applied the batch: a crash before this point means a harmless redelivery
        if self.events.clustered:
            # the position (the prefix's slot) and the stream (its shard's) are in two
            # slots: the position first, so a crash between leaves the entries pending,
            # redelivered and applied again (idempotent), never acked behind the position
            self.positions.record(self.group, stream, last)
            if ok:
                self.client.xack(stream, self.group, *ok)
        else:
            pipe = self.client.pipeline(transaction=True)
            self.positions.record(self.group, stream, last, pipe=pipe)
            if ok:
                pipe.xack(stream, self.group, *ok)
            for reply in pipe.execute(raise_on_error=False):
                # an ack refused on a tenant's log its user broke meanwhile: its tenant's
                # entries stay pending there; the position is recorded all the same
                if isinstance(reply, Exception) and not self._tenants_fault(stream, reply):
                    raise reply
        self.stats.applied += len(ok)
        if pending:  # entries read again: re-read after a failure, or reclaimed
            self.stats.redelivered += len(entries)
        stages = {"admit": admitted - started, "apply": applied - admitted, "commit": time.perf_counter() - applied}
        observe.batch(self.group, stages, ok, time.time())
        return handled

    def backfill(self, entries: list[tuple[str, str, EntryFields]]) -> int:
        """Apply entries read elsewhere (the archive, for a replay) as if this group had
        read them: the same admission, dead letters and apply, without acks (they are in no
        group). An entry that keeps failing is dead-lettered at once. Returns entries applied."""
        applied = 0
        by_stream: dict[str, list[tuple[str, EntryFields]]] = {}
        for stream, entry_id, fields in entries:
            by_stream.setdefault(stream, []).append((entry_id, fields))
        for stream, items in by_stream.items():
            batch, _ = self._admitted(stream, items, {i: self.tuning.max_deliveries for i, _ in items})
            ok = self._apply(stream, batch) if batch else []
            applied += len(ok)
            self.stats.applied += len(ok)
        return applied

    def _admitted(
        self, stream: str, entries: list[tuple[str, EntryFields]], counts: dict[str, int]
    ) -> tuple[list[Delivery], list[str]]:
        """What of ``entries`` to apply and what to skip; the rest is dead-lettered here."""
        batch: list[Delivery] = []
        skip: list[str] = []
        for entry_id, fields in entries:
            verdict = admit(fields, self.group, self.max_text_bytes)
            if verdict.action == "skip":
                if verdict.reason == "unknown event type":
                    self.stats.skipped_unknown += 1
                    etype = fields.get(b"type", fields.get("type", b""))
                    self.logger.warning(
                        "consumer.unknown_event_type",
                        stream=stream,
                        entry=entry_id,
                        event_type=shown(etype)[:60],
                        action="skipped: a newer producer is ahead of this worker",
                    )
                skip.append(entry_id)
                continue
            if verdict.action == "dead":
                # admission's verdict is every group's: one letter for the entry, shared
                kept = self.dlq.add(
                    self.group, stream, entry_id, fields, verdict.reason, counts.get(entry_id, 1), every_group=True
                )
                self.stats.dead_lettered += 1
                # the reason's kind, never its text: it may quote what the entry holds (the letter keeps it)
                self.logger.warning(
                    "consumer.dead_lettered",
                    stream=stream,
                    entry=entry_id,
                    reason=verdict.reason.split(":", 1)[0][:40],
                    letter=kept,
                )
                continue
            event = verdict.event
            assert event is not None  # an "apply" verdict carries its event
            if verdict.clipped:
                self.stats.clipped += 1
                self.logger.warning(
                    "consumer.clipped",
                    stream=stream,
                    entry=entry_id,
                    fields=list(verdict.clipped),
                    max_bytes=self.max_text_bytes,
                )
            refusal = self.gate.refusal(event, fields, stream)
            if refusal is not None:
                self.dlq.add(self.group, stream, entry_id, fields, refusal, counts.get(entry_id, 1))
                self.stats.dead_lettered += 1
                self.logger.warning("consumer.dead_lettered", stream=stream, entry=entry_id, reason="forged")
                continue
            batch.append(Delivery(stream, entry_id, fields, event, counts.get(entry_id, 1)))
        return batch, skip

    def _apply(self, stream: str, batch: list[Delivery]) -> list[str]:
        """Apply ``batch`` (a poison entry isolated one by one); the entry ids to ack. A live
        consumer holds its priority meanwhile (a replay starts no batch then)."""
        with self._turn():
            return self._apply_batch(stream, batch)

    def _apply_batch(self, stream: str, batch: list[Delivery]) -> list[str]:
        started = time.perf_counter()
        try:
            self.projection.apply(batch)
            ok = batch
        except Exception as exc:
            if is_transient(exc):
                raise
            # isolate the poison: apply one by one
            self.logger.warning(
                "consumer.batch_failed",
                stream=stream,
                entries=len(batch),
                error=f"{type(exc).__name__}: {exc}",
                action="retrying one by one",
            )
            ok = []
            for d in batch:
                try:
                    self.projection.apply([d])
                    ok.append(d)
                except Exception as one_exc:
                    if is_transient(one_exc):
                        raise
                    self._entry_failed(d, one_exc)
        self.logger.debug(
            "consumer.batch",
            stream=stream,
            entries=len(batch),
            applied=len(ok),
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return [d.entry_id for d in ok]

    def _entry_failed(self, d: Delivery, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.stats.last_error = error
        # every error counts a delivery, a PermanentError too: a store or embedder
        # misconfigured for a moment must not empty the backlog into the dead letters
        if d.deliveries >= self.tuning.max_deliveries:
            self.dlq.add(self.group, d.stream, d.entry_id, d.fields, error, d.deliveries)
            self.stats.dead_lettered += 1
            self.logger.warning(
                "consumer.dead_lettered",
                stream=d.stream,
                entry=d.entry_id,
                deliveries=d.deliveries,
                error=type(exc).__name__,  # the letter keeps the message, which may quote the event
            )
        else:
            self.stats.retried += 1
            self._pending_done = False  # it stays pending: read it again
            self.logger.warning(
                "consumer.apply_failed",
                stream=d.stream,
                entry=d.entry_id,
                deliveries=d.deliveries,
                error=type(exc).__name__,
                action="left pending for redelivery",
            )
