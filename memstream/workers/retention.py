"""Retention: events older than their kind's retention (``MEMSTREAM_RETENTION_*_DAYS``) are
erased from every place memstream keeps them, through the path ``memstream forget`` takes
(``workers/erasure.py``: a tombstone per event, ``XDEL``, the archive's segments rewritten,
dead letters, dense backlogs, the embedding cache, the append-only file).

Cheap by construction: an event's age is its stream entry id (the milliseconds at which
the log received it, by the Redis server's clock; ids only grow), so what expired is a
range of ids. Each (stream, kind) keeps a cursor (``P:retention``): the id up to which it
was erased. A run reads, per kind, only the entries between that cursor and the kind's
cutoff (now, by the server's clock, minus its retention), archive first, skipping other
kinds by their ``type`` field without decoding them, then moves the cursor to the cutoff.
Every entry is read at most once per kind over its life; nothing is rescanned. Entries
appended later have ids above the server's present time, so above every cutoff reached.

One process at a time runs it across the fleet (``P:retention:lock``, renewed while it
runs). What it erased is counted in ``P:counters:retention`` (per kind, per place,
``runs``, ``last_run``): the metric ``memstream_retention_erased_total``; a job whose runs
fail says so there too (``failures`` in a row, ``last_error``): ``memstream doctor``'s
retention check and the metric ``memstream_retention_failures`` read it.

Guarantees: an entry whose kind has no retention (0: forever), a tombstone, or an entry
younger than its cutoff is never touched; an interrupted run resumes at the cursors (an
entry erased twice is counted once: ``XDEL`` counts what it deleted); an entry that is no
valid event but carries an expired kind's ``type`` is erased from the log too.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable

import msgspec
import redis
import structlog

from memstream.core import Settings, as_str, backoff_delay, keys
from memstream.producers import Archive, ArchiveError, EntryFields, EventLog, decode, parse_entry_id, xrange_entry
from memstream.producers import after as next_after  # ``after`` names a cursor here
from memstream.workers.erasure import Doomed, ErasureError, count_removed, plan, rewrite_append_only_file

__all__ = ["KINDS", "Retention", "RetentionJob", "kind_of_type"]

log = structlog.get_logger("memstream.retention")

# kind -> the event types it covers (a ``type`` field of a stream entry)
KINDS: dict[str, tuple[str, ...]] = {
    "turns": ("turn.recorded",),
    "memories": ("memory.written", "memory.remembered"),
    "delegations": ("delegation.completed",),
    "sessions": ("session.ended", "session.switched"),
}
_KIND_OF = {t: kind for kind, types in KINDS.items() for t in types}
REASON = "retention"
MAX_SEQ = 18446744073709551615
BATCH_EVENTS = 2000  # events erased per erasure (one plan, one wait for the projections)
LOCK_S = 900  # the lock outlives a crashed holder this long
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end return 0"


def kind_of_type(event_type: str) -> str | None:
    """The retention kind of an event type (None: a type no retention covers, e.g. tombstones)."""
    return _KIND_OF.get(event_type)


def _field(fields: EntryFields, name: str) -> bytes | None:
    value = fields.get(name.encode(), fields.get(name))
    if value is None:
        return None
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


class Retention:
    """One run of the retention job over ``events`` and the archive at ``archive_path``."""

    def __init__(self, settings: Settings, events: EventLog, *, name: str = "") -> None:
        self.settings = settings
        self.events = events
        self.client = events.client
        self.prefix = events.prefix
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"

    def server_now_ms(self) -> int:
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def cutoffs(self, now_ms: int | None = None) -> dict[str, int]:
        """Per kind with a retention: the last expired millisecond (entries at or before it go)."""
        now_ms = self.server_now_ms() if now_ms is None else now_ms
        return {kind: now_ms - int(days * 86_400_000) for kind, days in self.settings.retention_days.items() if days > 0}

    def cursors(self) -> dict[str, str]:
        """``STREAM|KIND`` -> the entry id up to which that kind was erased in that stream."""
        return {as_str(k): as_str(v) for k, v in self.client.hgetall(keys.retention_cursors(self.prefix)).items()}

    def next_expiry(self, limit: int = 5000) -> dict[str, float | None]:
        """Per kind with a retention: when (unix seconds) its oldest event not yet erased
        expires, read from the cursors on (at most ``limit`` entries per stream and kind,
        archive first); None when none was found within them."""
        out: dict[str, float | None] = {}
        cursors = self.cursors()
        try:
            archive: Archive | None = Archive(self.settings.archive_path)
            watermark = {k: parse_entry_id(v) for k, v in archive.watermark().items()} if archive else {}
        except ArchiveError:
            archive, watermark = None, {}
        for kind, days in self.settings.retention_days.items():
            if days <= 0:
                continue
            types = {t.encode() for t in KINDS[kind]}
            oldest: int | None = None
            for stream in self.events.stream_keys:
                start = cursors.get(f"{stream}|{kind}", "0-0")
                try:
                    found = self._first_of(archive, watermark.get(stream), stream, types, start, limit)
                except redis.ResponseError:
                    if keys.stream_tenant(self.prefix, stream) is None:
                        raise
                    continue  # a tenant's log its user made another type: its own to mend
                if found is not None and (oldest is None or found < oldest):
                    oldest = found
            out[kind] = None if oldest is None else oldest / 1000 + days * 86_400
        return out

    def _first_of(
        self, archive: Archive | None, archived_to: tuple[int, int] | None, stream: str, types: set[bytes], start: str, limit: int
    ) -> int | None:
        """The milliseconds of the first entry of ``types`` in ``stream`` after ``start``."""
        seen = 0
        if archive is not None and archived_to is not None and parse_entry_id(start) < archived_to:
            for _, entry_id, fields in archive.entries([stream], since=start if start != "0-0" else "-"):
                if _field(fields, "type") in types:
                    return parse_entry_id(entry_id)[0]
                seen += 1
                if seen >= limit:
                    return None
            start = max(start, f"{archived_to[0]}-{archived_to[1]}", key=parse_entry_id)
        cursor = next_after(start) if start != "0-0" else "-"
        while cursor is not None and seen < limit and (page := self.client.xrange(stream, min=cursor, max="+", count=500)):
            for entry in page:
                entry_id, fields = xrange_entry(entry)
                if _field(fields, "type") in types:
                    return parse_entry_id(entry_id)[0]
                seen += 1
            cursor = next_after(entry_id)
        return None

    def run(self, *, now_ms: int | None = None, wait: float = 60.0, rewrite_aof: bool = True) -> dict[str, Any]:
        """Erase what expired (see the module doc). Returns ``erased`` (per kind: events),
        ``removed`` (per place), ``tombstones``, ``aof`` and ``skipped`` (why nothing ran:
        no retention set, or another process holds the lock)."""
        cutoffs = self.cutoffs(now_ms)
        out: dict[str, Any] = {
            "erased": {k: 0 for k in cutoffs},
            "removed": {},
            "tombstones": 0,
            "aof": None,
            "skipped": "",
            "waiting": False,
        }
        if not cutoffs:
            out["skipped"] = "no retention is set (every kind is kept forever)"
            return out
        lock = keys.retention_lock(self.prefix)
        if not self.client.set(lock, self.name, nx=True, ex=LOCK_S):
            out["skipped"] = f"another process runs retention ({as_str(self.client.get(lock) or b'')})"
            return out
        try:
            pending_aof = bool(self.client.hget(keys.retention_counters(self.prefix), "aof_pending"))
            archive = Archive(self.settings.archive_path)
            try:
                watermark = {k: parse_entry_id(v) for k, v in archive.watermark().items()}
            except ArchiveError as exc:
                raise ErasureError(f"the archive cannot be read: {exc}") from exc
            cursors = self.cursors()
            for kind, cutoff in cutoffs.items():
                bound = f"{cutoff}-{MAX_SEQ}"
                for stream in self.events.stream_keys:
                    start = cursors.get(f"{stream}|{kind}", "0-0")
                    if parse_entry_id(start) >= (cutoff, MAX_SEQ):
                        continue
                    try:
                        self._erase_range(archive, watermark.get(stream), stream, kind, start, bound, out, wait)
                    except redis.ResponseError as exc:
                        if keys.stream_tenant(self.prefix, stream) is None:
                            raise
                        # a tenant's log its user made another type: the others' retention goes on
                        out.setdefault("unreadable", []).append(stream)
                        log.warning("retention.log_unreadable", stream=stream, error=f"{type(exc).__name__}: {exc}"[:200])
                        continue
                    self.client.hset(keys.retention_cursors(self.prefix), f"{stream}|{kind}", bound)
            if out["tombstones"] or sum(out["erased"].values()) or pending_aof:
                # pending until a rewrite after every projection applied the tombstones succeeds
                # (a rewrite that fails or times out is tried again by the next run)
                self.client.hset(keys.retention_counters(self.prefix), "aof_pending", "1")
                out["aof"] = rewrite_append_only_file(self.client) if rewrite_aof else {"state": "skipped"}
            counters = keys.retention_counters(self.prefix)
            pipe = self.client.pipeline(transaction=False)
            pipe.hincrby(counters, "runs", 1)
            pipe.hset(counters, "last_run", str(self.server_now_ms() / 1000))
            if out["aof"] is not None:
                # projections that had not applied every tombstone held the text at the rewrite:
                # the next run rewrites again
                if not (out["waiting"] and out["aof"]["state"] == "rewritten"):
                    pipe.hdel(counters, "aof_pending")  # done, or a server that cannot rewrite
            pipe.execute()
        finally:
            self.client.eval(_RELEASE, 1, lock, self.name)
        return out

    def _erase_range(
        self,
        archive: Archive,
        archived_to: tuple[int, int] | None,
        stream: str,
        kind: str,
        start: str,
        bound: str,
        out: dict[str, Any],
        wait: float,
    ) -> None:
        """Erase ``kind``'s entries of ``stream`` after ``start`` up to ``bound``, in batches."""
        types = {t.encode() for t in KINDS[kind]}
        batch = [Doomed()]  # the batch being gathered
        high = parse_entry_id(bound)

        def take(entry_id: str, fields: EntryFields, in_archive: bool) -> None:
            if _field(fields, "type") not in types:
                return
            doomed = batch[0]
            data = _field(fields, "data")
            try:
                event = decode(data) if data is not None else None
            except (msgspec.DecodeError, msgspec.ValidationError):
                event = None
            doomed.add(stream, entry_id, event, in_archive)
            if len(doomed.entries[stream]) >= BATCH_EVENTS:
                self._erase(doomed, kind, out, wait)
                batch[0] = Doomed()
                self.client.hset(keys.retention_cursors(self.prefix), f"{stream}|{kind}", entry_id)
                self.client.eval(_RENEW, 1, keys.retention_lock(self.prefix), self.name, LOCK_S)

        after = start
        if archived_to is not None and parse_entry_id(start) < archived_to:
            for _, entry_id, fields in archive.entries([stream], since=start if start != "0-0" else "-"):
                if parse_entry_id(entry_id) > high:
                    break
                take(entry_id, fields, True)
                after = entry_id
            after = max(after, f"{archived_to[0]}-{archived_to[1]}", key=parse_entry_id)
        cursor = next_after(after) if after != "0-0" else "-"
        while cursor is not None and (page := self.client.xrange(stream, min=cursor, max=bound, count=500)):
            for entry in page:
                entry_id, fields = xrange_entry(entry)
                take(entry_id, fields, False)
            cursor = next_after(entry_id)
        if batch[0]:
            self._erase(batch[0], kind, out, wait)

    def _erase(self, doomed: Doomed, kind: str, out: dict[str, Any], wait: float) -> None:
        ids = set(doomed.events)

        def payload_doomed(data: bytes) -> bool:
            try:
                return decode(data).id in ids
            except (msgspec.DecodeError, msgspec.ValidationError):
                return False

        erasure = plan(self.events, doomed, payload_doomed=payload_doomed, match=None, spool=None)
        done = erasure.apply(self.events, Archive(self.settings.archive_path), self.settings.data_dir, reason=REASON, wait=wait)
        erased = sum(len(v) for v in doomed.entries.values())
        out["erased"][kind] += erased
        out["tombstones"] += done["tombstones"]
        out["waiting"] = out["waiting"] or not done["projections"]["applied"]
        for place, n in done["removed"].items():
            out["removed"][place] = out["removed"].get(place, 0) + int(n)
        count_removed(
            self.client,
            keys.retention_counters(self.prefix),  # each batch, as it is done
            {kind: erased, **{f"place:{p}": n for p, n in done["removed"].items()}},
            done["tombstones"],
        )


class RetentionJob:
    """The periodic thread (``memstream-retention``) that runs ``Retention`` every
    ``retention_every_s`` seconds (the first run at once), in ``memstream up`` and in
    ``memstream worker``. A failed run is logged and retried after a jittered back-off;
    it never stops the process. Started only when some kind has a retention."""

    def __init__(self, settings: Settings, connect: Callable[[], EventLog]) -> None:
        self.settings = settings
        self._connect = connect
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last: dict[str, Any] | None = None
        self.failures = 0
        self.recorded_failure = True  # a failure recorded by an earlier process is cleared by the first success
        self._events: EventLog | None = None  # the last log connected to: where a run's outcome is recorded

    @property
    def enabled(self) -> bool:
        return any(d > 0 for d in self.settings.retention_days.values())

    def start(self) -> RetentionJob:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="memstream-retention", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        retention: Retention | None = None
        while not self._stop.is_set():
            delay = self.settings.retention_every_s
            try:
                if retention is None:
                    retention = Retention(self.settings, self._connect())
                    self._events = retention.events
                self.last = retention.run()
                self.failures = 0
                self._record(None)
                if sum(self.last["erased"].values()):
                    log.info("retention.erased", erased=self.last["erased"], tombstones=self.last["tombstones"])
            except Exception as exc:  # noqa: BLE001  the job never stops the process: it tries again later
                self.failures += 1
                retention = None
                delay = min(delay, backoff_delay(self.failures, base=5.0, cap=300.0))
                self._record(exc)
                log.warning(
                    "retention.failed",
                    error=type(exc).__name__,  # the message may quote what an entry holds
                    failures=self.failures,
                    action="retrying later; what was erased stays erased",
                )
            self._stop.wait(delay)

    def _record(self, exc: Exception | None) -> None:
        """Say in ``P:counters:retention`` how the last run went, for every process to read
        (``memstream doctor``, the metric ``memstream_retention_failures``): ``failures`` (runs
        failed in a row), ``last_error`` and ``last_failed_at``; a run that succeeds clears
        them. Through the last log connected to (none yet: nothing to record); never raises
        (Redis may be what failed)."""
        eventlog = self._events
        if eventlog is None or (exc is None and not self.recorded_failure):
            return  # never connected: the log's own failure, which doctor's redis check reports
        try:
            key = keys.retention_counters(eventlog.prefix)
            if exc is None:
                eventlog.client.hdel(key, "failures", "last_error", "last_failed_at")
                self.recorded_failure = False
                return
            eventlog.client.hset(
                key,
                mapping={
                    "failures": str(self.failures),
                    "last_error": f"{type(exc).__name__}: {exc}"[:300],
                    "last_failed_at": repr(time.time()),
                },
            )
            self.recorded_failure = True
        except Exception:  # noqa: BLE001  the next run records again
            pass

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
