"""The dense stage of a vector projection's version: the loop that gives the points its
``apply`` wrote without a dense vector that vector (``memstream.projections.vector``).

Each version of a vector projection has a backlog, ``P:embed:{group}`` (a stream, one
entry per point), read here through the consumer group ``embed``: one ``EmbedConsumer``
per version and worker process, beside the version's ``Consumer``. The entries are read
oldest first in batches (one embedding call each), own pending entries first; entries
idle too long on a dead consumer are reclaimed with XAUTOCLAIM.

Guarantees: an entry is acknowledged and deleted (in one MULTI) only after the projection
set its vector (``embed_backlog``), or found that its point no longer wants it (deleted,
forgotten or re-indexed since); a crash before that means a redelivery, harmless because
setting a vector is idempotent and conditional on the point's ``dense_key``. So the
stream's length is what waits for the dense stage (``embed_waiting``: its lag in points,
and the age of the oldest); ``embed_readers`` says which dense stages read it lately, as
the server saw them (``memstream doctor``'s ``dense`` check). ``run`` returns only when told to stop: an error is logged,
counted and retried after a jittered backoff, transient ones (the store or a remote
embedder unreachable) without spending a delivery. Once entries of a failing batch were
delivered ``max_deliveries`` times, the batch is applied one entry at a time: an entry
that fails alone then goes to the dead-letter stream (``workers.deadletters``, ``P:dlq``:
its group the version's, its stream the backlog, its stage ``dense``), acknowledged and
deleted from the backlog in the same MULTI, and counted (``dead_lettered``, and
``core.observe.embed_dead_lettered`` for the metrics); the others are applied. A malformed
entry (the backlog is in the shared Redis) is dead-lettered at once. A dead-lettered
entry's point stays findable by its keywords; ``memstream dlq retry`` re-appends the entry
to the backlog, and nothing else is lost.

A building or retired version's dense stage yields to the live versions as its
``Consumer`` does (``workers.priority``); the live version's holds ``live()`` while it
applies a batch.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

import redis

from memstream.core import Settings, as_str, is_transient, keys, observe, shown, threads
from memstream.projections import Projection, backlog_entry, group_name
from memstream.workers.deadletters import DeadLetters
from memstream.workers.health import Waiting, entry_time
from memstream.workers.loop import GroupLoop, Tuning
from memstream.workers.priority import Priority
from memstream.workers.stats import EmbedStats

if TYPE_CHECKING:
    from memstream.projections import BacklogEntry

__all__ = ["EMBED_GROUP", "EMBED_TUNING", "EmbedConsumer", "Embedding", "embed_readers", "embed_waiting"]

EMBED_GROUP = "embed"  # the consumer group on every backlog stream


EMBED_TUNING = Tuning(batch=64)  # one embedding call a batch: smaller than the consumer's


@runtime_checkable
class Embedding(Projection, Protocol):
    """A vector projection's version with a dense stage (``memstream.projections.vector``):
    its backlog stream, the prefix its dead letters go under, and what sets the vectors."""

    backlog: str
    prefix: str

    def embed_backlog(self, entries: Sequence[BacklogEntry]) -> int:
        """Set the dense vectors of ``entries``' points; how many were set."""
        ...


def embed_waiting(client: redis.Redis, prefix: str, group: str) -> Waiting:
    """What waits for ``group``'s dense stage: the points of its backlog (undelivered or
    pending: applied entries are deleted), since when the oldest waits, and whether the
    backlog exists."""
    key = keys.embed_backlog(prefix, group)
    n = int(client.xlen(key))
    if not n:
        return Waiting(entries=0, since=None, exists=bool(client.exists(key)))
    first = client.xrange(key, count=1)
    return Waiting(entries=n, since=entry_time(as_str(first[0][0])) if first else None, exists=True)


def embed_readers(client: redis.Redis, prefix: str, group: str) -> dict[str, dict[str, float]]:
    """The dense stages that read ``group``'s backlog, as the server knows them (its
    consumer group ``embed``): consumer name -> ``pending`` (entries it holds) and
    ``idle_s`` (seconds since it last read; a running stage reads at least every
    ``block_ms``, or after its backoff). Empty when none ever read it or no backlog exists."""
    try:
        rows = client.xinfo_consumers(keys.embed_backlog(prefix, group), EMBED_GROUP)
    except redis.ResponseError:  # no backlog, or no group on it yet
        return {}
    out: dict[str, dict[str, float]] = {}
    for row in rows or []:
        try:
            out[shown(row["name"])] = {
                "pending": int(row.get("pending") or 0),
                "idle_s": round(int(row.get("idle") or 0) / 1000.0, 3),
            }
        except (KeyError, TypeError, ValueError):
            continue
    return out


class EmbedConsumer(GroupLoop[list[tuple[str, Any]]]):
    """Feeds ``projection.embed_backlog`` from its backlog (see the module docstring)."""

    EVENT = "embedding"
    stats: EmbedStats

    def __init__(
        self,
        client: redis.Redis,
        projection: Embedding,
        name: str,
        *,
        tuning: Tuning = EMBED_TUNING,
        priority: Priority | None = None,
        low: bool = False,
        dlq_max_letters: int = Settings().dlq_max_letters,
    ) -> None:
        super().__init__(tuning, priority, low)
        self.client = client
        self.projection = projection
        self.stream: str = projection.backlog
        self.version_group = group_name(projection)  # the version's group: its dead letters are filed under it
        self.group = f"{self.version_group}:{EMBED_GROUP}"  # for logs: the version's stage
        self.name = name
        self.stats = EmbedStats()
        self.dlq = DeadLetters(client, projection.prefix, dlq_max_letters)
        self._ready = False
        self._spared: dict[str, int] = {}  # entry id -> its deliveries that failed transiently

    # The dense stage's thread runs this many nice levels below the process (Linux: a thread's
    # own): its model calls, which keep the cores busy while a backlog lasts, then yield them to
    # the recalls' (a prefetch has 150 ms), and catch up when the cores are free. All of a call
    # runs on this thread with one onnxruntime thread (``MEMSTREAM_EMBED_THREADS=1``).
    NICE = 10

    def run(self, stop: threading.Event) -> None:
        """``GroupLoop.run`` on a thread of lower priority (``NICE``; unchanged where the
        system has no per-thread priority)."""
        threads.lower_priority(self.NICE)
        super().run(stop)

    def ensure_group(self) -> None:
        """The group ``embed`` on the backlog, from its start (idempotent)."""
        try:
            self.client.xgroup_create(self.stream, EMBED_GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._ready = True

    # -- one step (``GroupLoop.step``) -----------------------------------------------------
    def _prepare(self) -> None:
        if not self._ready:
            self.ensure_group()

    def _failed(self, transient: bool, error: str, failures: int) -> None:
        if not transient:
            self._ready = False  # e.g. the backlog was deleted with its version (NOGROUP)
        self._pending_done = False  # re-read what we hold

    # -- internals ------------------------------------------------------------------------
    def _read(self, start: str, block: bool) -> list[tuple[str, Any]]:
        got = self.client.xreadgroup(EMBED_GROUP, self.name, {self.stream: start}, **self._read_options(start, block)) or []
        assert isinstance(got, list)  # RESP2: [stream, entries] pairs
        return [(as_str(i), f) for _, entries in got for i, f in entries]

    def _reclaim(self) -> int:
        handled, cursor = 0, "0-0"
        while True:
            res = self.client.xautoclaim(
                self.stream, EMBED_GROUP, self.name, self.tuning.claim_idle_ms, cursor, count=self.tuning.batch
            )
            cursor = as_str(res[0])
            deleted = res[2] if len(res) > 2 else []
            if deleted:
                self.client.xack(self.stream, EMBED_GROUP, *deleted)
            claimed = [(as_str(i), f) for i, f in res[1] if f]
            if claimed:
                self.stats.reclaimed += len(claimed)
                self.logger.info("embedding.reclaimed", entries=len(claimed))
                handled += self._handle(claimed, pending=True)
            if cursor in ("0-0", "0"):
                return handled

    def _handle(self, read: list[tuple[str, Any]], pending: bool) -> int:
        if not read:
            return 0
        ids = [i for i, _ in read]
        entries: list[tuple[str, BacklogEntry, Any]] = []  # with the fields as read (dead letters keep them)
        malformed: list[tuple[str, Any]] = []
        gone: list[str] = []  # deleted from the backlog while pending: nothing to do
        for entry_id, fields in read:
            entry = backlog_entry(fields) if fields else None
            if not fields:
                gone.append(entry_id)
            elif entry is None:
                malformed.append((entry_id, fields))
            else:
                entries.append((entry_id, entry, fields))
        if malformed:
            self._dead_letter(malformed, "malformed backlog entry: a field missing or empty, or a point id that is no UUID", {})
        done = gone
        embedded = 0
        try:
            embedded = self._apply([e for _, e, _ in entries]) if entries else 0
            done = done + [i for i, _, _ in entries]
        except Exception as exc:
            if is_transient(exc):  # spends no delivery: re-reading counts one, given back here
                for i, _, _ in entries:
                    self._spared[i] = self._spared.get(i, 0) + 1
                raise
            if not pending:
                raise
            deliveries = self._deliveries([i for i, _, _ in entries])
            if not any(n >= self.tuning.max_deliveries for n in deliveries.values()):
                raise  # left pending: read again after the backoff
            ok, embedded, left = self._one_by_one(entries, deliveries)
            done = done + ok
            if left:
                self._commit(done, embedded)
                raise  # the others stay pending: read again after the backoff
        self._commit(done, embedded)
        return len(ids)

    def _commit(self, done: list[str], embedded: int) -> None:
        if done:
            pipe = self.client.pipeline(transaction=True)
            pipe.xack(self.stream, EMBED_GROUP, *done)
            pipe.xdel(self.stream, *done)
            pipe.execute()
        for i in done:
            self._spared.pop(i, None)
        self.stats.applied += len(done)
        self.stats.embedded += embedded
        self.stats.batches += 1

    def _one_by_one(
        self, entries: list[tuple[str, BacklogEntry, Any]], deliveries: dict[str, int]
    ) -> tuple[list[str], int, list[str]]:
        """Apply a failing batch's entries alone: (the ids applied, the vectors set, the ids
        left pending);
        one that fails alone is dead-lettered once delivered ``max_deliveries`` times. A
        transient failure is raised (spending no delivery of the entries not applied)."""
        ok: list[str] = []
        left: list[str] = []
        embedded = 0
        for n, (entry_id, entry, fields) in enumerate(entries):
            try:
                embedded += self._apply([entry])
                ok.append(entry_id)
            except Exception as exc:
                if is_transient(exc):
                    for i, _, _ in entries[n:]:
                        self._spared[i] = self._spared.get(i, 0) + 1
                    self._commit(ok, embedded)
                    raise
                if deliveries.get(entry_id, 1) < self.tuning.max_deliveries:
                    left.append(entry_id)
                    continue
                self._dead_letter([(entry_id, fields)], f"{type(exc).__name__}: {exc}", deliveries)
        return ok, embedded, left

    def _dead_letter(self, entries: list[tuple[str, Any]], error: str, deliveries: dict[str, int]) -> None:
        """File ``entries`` in the dead-letter stream, acknowledged and deleted from the
        backlog in the same MULTI, and count them."""
        self.dlq.add_entries(
            self.version_group,
            self.stream,
            entries,
            error,
            {i: deliveries.get(i, 1) for i, _ in entries},
            ack_group=EMBED_GROUP,
            delete=True,
            stage="dense",
        )
        for i, _ in entries:
            self._spared.pop(i, None)
        self.stats.dead_lettered += len(entries)
        observe.embed_dead_lettered(self.version_group, len(entries))
        self.logger.warning(
            "embedding.dead_lettered",
            entries=len(entries),
            error=error[:300],
            action="their points stay findable by keywords; `memstream dlq retry` re-embeds them",
        )

    def _apply(self, entries: list[BacklogEntry]) -> int:
        with self._turn():
            return int(self.projection.embed_backlog(entries))

    def _deliveries(self, ids: list[str]) -> dict[str, int]:
        """Of ``ids`` (this consumer's pending entries, ascending): entry id -> its
        deliveries, the ones that failed transiently not counted."""
        if not ids:
            return {}
        rows = self.client.xpending_range(
            self.stream, EMBED_GROUP, min=ids[0], max=ids[-1], count=len(ids) + 10, consumername=self.name
        )
        counts = {as_str(r["message_id"]): int(r["times_delivered"]) for r in rows}
        return {i: counts.get(i, 1) - self._spared.get(i, 0) for i in ids}
