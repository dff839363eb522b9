"""The shipper thread: moves spooled records into the log, in order, exactly once.

It reads each segment from its checkpoint, appends batches through the door
(``memstream.producers.door``, then ``EventLog.append_batch``: atomic, deduplicated by
segment id and sequence), then
advances the checkpoint. When Redis is unreachable or slow it backs off and the spool
simply grows (jittered, ``memstream.core.backoff``: a fleet's shippers do
not all come back at once when Redis restarts); segments of dead processes are adopted and shipped first. The agent's
threads never wait for it, except ``flush`` / ``stop``, which are bounded.

With a ``reporter`` (``memstream.producers.report``) it also writes the process's fleet
report after a pass when one is due (none while the log is down: the latest is written
once it is back), and a last one when ``stop`` waits for the thread to end; none while it
winds down (its last user left: the process's next writer goes on with the same report).
A report's failure never changes the shipping.

Each record goes through the log's one door (``memstream.producers.door``) on this thread:
its text is redacted and clipped before its batch is appended, so the shared log never
holds a secret that redaction recognises, and the agent's hooks never pay for it. The
spool keeps the raw text.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import redis
import structlog

from memstream.core import backoff_delay, threads
from memstream.producers.door import Admitted, admit, append
from memstream.producers.events import decode
from memstream.producers.report import Reporter
from memstream.producers.spool import Segment, Spool
from memstream.producers.stream import EventLog, NotReplicated

__all__ = ["Shipper"]

log = structlog.get_logger("memstream.shipper")


class Shipper:
    """Ships one ``Spool`` to the log returned by ``connect`` (called on every retry)."""

    ADOPT_EVERY = 5.0
    # The thread shares the interpreter lock with the agent's threads: every time it wakes
    # while the agent runs, the agent stops for a hand-over (tens of µs on a loaded
    # machine, up to the 5 ms switch interval when the thread holds the lock). So:
    # * a hook wakes the thread only when it is parked (nothing appended for POLL s);
    #   otherwise the thread looks for new records every POLL s on its own;
    # * it ships once the hooks pause for a POLL (a burst is not interrupted), but never
    #   later than MAX_DEFER s after the first new record; flush() and stop() skip the wait;
    # * a pass sleeps YIELD s between batches (``ship_batch`` records, one script call), so
    #   a waiting agent thread gets the interpreter within one batch's work (a sleep, not
    #   a bare release: the thread would take the lock straight back).
    POLL = 0.05
    MAX_DEFER = 0.25
    IDLE_WAKE = 1.0  # a parked thread still wakes this often (fsync, adoption of orphans)
    YIELD = 0.0001
    # retries after failures in a row: from RETRY_BASE s, doubling, at most RETRY_CAP s (jittered)
    RETRY_BASE = 0.1
    RETRY_CAP = 5.0

    def __init__(
        self,
        spool: Spool,
        connect: Callable[[], EventLog],
        batch: int = 500,
        fsync_interval: float | None = 1.0,
        name: str = "memstream-shipper",
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
        max_text_bytes: int | None = None,
        tenant: str = "",
    ):
        self.spool = spool
        self.max_text_bytes = max_text_bytes  # each text field's bound (None: the setting's default)
        self.tenant = tenant  # the process's: whose spool-loss counters its losses add to
        self._connect = connect
        self.batch = batch
        # a batch leaves the spool once this many replicas confirmed it (WAIT; 0: once appended)
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.fsync_interval = fsync_interval
        self.name = name
        self._events: EventLog | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._exit_lock = threading.Lock()
        self._exited = True  # no thread running
        self._close_spool_at_exit = False
        self._backoff = 0.0  # the wait before the next pass (0: not backing off)
        self._retry_at = 0.0  # when that pass is due (time.monotonic())
        self._failures_in_row = 0
        self._flushing = 0  # flush() calls in progress (they skip the quiet wait)
        self._flushing_lock = threading.Lock()
        self._parked = False  # waiting for a hook's notify (nothing new for POLL s)
        # winding down (``wind_down``): ship at once, and stop when this returns True
        self._finish: Callable[[], bool] | None = None
        self._wind_down_by = 0.0
        self.on_exit: Callable[[], None] | None = None  # called by the thread as it ends
        self.reporter: Reporter | None = None  # the fleet report (memstream.producers.report)
        self._gave_up = False  # stop() returned before the thread ended: no last report then
        self._last_adopt = float("-inf")  # the first pass adopts what dead processes left
        self._adopt_now = False  # a flush asked the next pass to look for them
        self._passes = 0  # passes ended (``flush`` waits for one that began after its call)
        self._in_pass = False
        self._last_sync = time.monotonic()
        # counters
        self.shipped = 0
        self.duplicates = 0
        self.malformed = 0
        self.unreplicated = 0  # batches appended that fewer than ``replicas`` confirmed (kept, re-sent)
        # segment id -> highest sequence appended but not confirmed by the replicas: the
        # re-send's skipped records up to it are shipped now, not duplicates
        self._unconfirmed: dict[str, int] = {}
        self.redacted = 0  # secrets replaced by a mark before they left the host
        self._reported: dict[str, int] = {}  # losses already added to the shared counters
        # segment id -> tenants of the records shipped from it (whose dedup records to drop)
        self._segment_tenants: dict[str, set[str]] = {}
        self.failures = 0
        self.last_error = ""
        self.connected = False

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> Shipper:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._exited = False
            self._gave_up = False
            self._thread = threads.spawn(self._run, name=self.name)
            self._thread.start()
        return self

    def notify(self) -> None:
        """Tell a parked thread new records are there (cheap; called by hooks).

        A no-op unless the thread is parked: an active thread finds new records on its own
        within ``POLL`` s, and a thread backing off after a failure must not be turned into
        a reconnect per event. ``flush``/``stop`` still wake it at once.
        """
        if self._parked and not self._wake.is_set():
            self._wake.set()

    def wind_down(self, finished: Callable[[], bool], within: float) -> None:
        """Ship what is spooled now, without waiting for a pause of the hooks, then end the
        thread and close the spool once ``finished()`` (called on the thread) says so,
        which it is asked again ``within`` s from now at the latest. The caller does not
        wait. ``keep_on`` undoes it."""
        self._wind_down_by = time.monotonic() + within
        self._finish = finished
        self._wake.set()

    def keep_on(self) -> None:
        """Cancel ``wind_down``: the thread goes on shipping for new hooks."""
        self._finish = None
        self._wake.set()

    def flush(self, timeout: float, wait_while_down: bool = True) -> bool:
        """Wait up to ``timeout`` s until everything spooled so far is shipped: this
        process's records and what dead processes left in the spool directory (the pass
        that ends the wait, begun after the call, adopts their segments first). A spool
        without a running thread is judged by its own and adopted segments.

        With ``wait_while_down`` False, give up as soon as the log is found unreachable.
        A flush does not hasten a retry after a failure: the next pass comes when the
        back-off says (``retry_in``), and a flush whose time ends before then returns False
        at once.
        """
        deadline = time.monotonic() + timeout
        with self._flushing_lock:
            self._flushing += 1
        self._adopt_now = True
        # the pass that can end the wait: the one after any pass under way now
        with self._idle:
            wanted = self._passes + 2 if self._in_pass else self._passes + 1
        try:
            self._wake.set()
            with self._idle:
                while not (self._drained() and (self._passes >= wanted or not self._running())):
                    left = deadline - time.monotonic()
                    if left <= 0 or (not wait_while_down and self._backoff > 0 and not self.connected):
                        return False  # out of time, or the log is unreachable right now
                    if self._backoff > 0 and self._retry_at >= deadline:
                        return False  # no pass before the deadline: the next retry is later
                    self._wake.set()
                    self._idle.wait(min(left, 0.05))
            return True
        finally:
            with self._flushing_lock:
                self._flushing -= 1

    def stop(self, timeout: float, close_spool: bool = False) -> bool:
        """Ship what can be shipped within ``timeout`` s, then stop (writing the last fleet
        report when the thread ends in time). True if drained.

        With ``close_spool``, close the spool once the thread is gone: now, or when a
        call to the log it is stuck in returns (closing the spool under it would let the
        thread read reused descriptors and another writer adopt a segment it ships).
        """
        deadline = time.monotonic() + timeout
        drained = self.flush(timeout, wait_while_down=False) if self._thread and self._thread.is_alive() else self._drained()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            # the whole call within ``timeout`` (a last report takes one round trip)
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
            # the caller goes on (and may close the client the thread uses): a thread still
            # in a call to the log ends without its last report
            self._gave_up = self._thread.is_alive()
        if close_spool:
            with self._exit_lock:
                deferred = not self._exited
                self._close_spool_at_exit = deferred
            if deferred:
                log.warning(
                    "shipper.stop_deferred",
                    action="the thread is inside a call to the log; it closes the spool when that call returns",
                )
            else:
                self.spool.close()
        return drained

    @property
    def retry_in(self) -> float:
        """Seconds the thread waits before its next pass after a failure (0: not backing off)."""
        return self._backoff

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def _drained(self) -> bool:
        return self.spool.drained()  # not limit_of here: the thread may close a segment meanwhile

    # -- the loop -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self._stop.is_set():  # stop(), not the end of a wind-down
                self._report(last=True)  # before the spool closes: its backlog is in it
            with self._exit_lock:
                self._exited = True
                close, self._close_spool_at_exit = self._close_spool_at_exit, False
            if close:
                self.spool.close()
            if self.on_exit is not None:
                try:
                    self.on_exit()
                except Exception:  # the thread is ending anyway
                    pass

    def _loop(self) -> None:
        seen = -1
        while not self._stop.is_set():
            finish = self._finish
            if finish is not None and finish():
                with self._exit_lock:
                    self._close_spool_at_exit = True
                return
            if self._backoff:
                self._wait_out_backoff(finish)
            elif finish is None:
                seen = self._wait_for_work(seen)
            elif self._drained():  # wound down: wait for the end of it (or keep_on, flush, stop)
                self._wake.wait(max(0.0, self._wind_down_by - time.monotonic()) + 0.01)
            self._wake.clear()
            if self._stop.is_set():
                break
            seen = self.spool.appended  # what this pass may ship; later records are new
            with self._idle:
                self._in_pass = True
            try:
                self.ship_once()
            except Exception as exc:  # never let the thread die
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("shipper.unexpected_error")
                self._back_off(1.0)
            self._report()
            with self._idle:
                self._in_pass = False
                self._passes += 1
                self._idle.notify_all()

    def _wait_out_backoff(self, finish: Callable[[], bool] | None) -> None:
        """Wait until the retry after the last failure is due (``_retry_at``). Only ``stop``
        and a change of the wind-down (``wind_down``, ``keep_on``) cut it short, and a
        wind-down's own time: a ``flush`` waits for the retry like everyone else (its
        wake-ups are taken and dropped here), so a failing Redis costs one attempt per
        back-off step however many callers flush."""
        until = self._retry_at
        if finish is not None:  # ask ``finish`` again when the wind-down time is up
            until = min(until, self._wind_down_by + 0.01)
        while not self._stop.is_set() and self._finish is finish:
            left = until - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(left)
            self._wake.clear()

    def _wait_for_work(self, seen: int) -> int:
        """Wait until there is something to ship and the hooks paused for ``POLL`` s (at
        most ``MAX_DEFER`` s after it appeared), or a flush/stop, or a parked thread's
        periodic wake. Returns the append count it saw last."""
        first_new = 0.0
        while not self._stop.is_set():
            if self._flushing or self._wake.is_set() and not self._parked:
                return self.spool.appended
            appended = self.spool.appended
            now = time.monotonic()
            if appended == seen:
                if first_new:  # new records, then a pause of POLL s: ship them
                    return appended
                self._parked = True  # from here on the next hook wakes the thread
                if self.spool.appended != seen:  # a hook appended just before: not woken
                    self._parked = False
                    continue
                woken = self._wake.wait(self.IDLE_WAKE)
                self._parked = False
                if not woken:
                    return self.spool.appended  # periodic pass: fsync, adoption
                self._wake.clear()  # a hook's wake-up: wait for the pause (flush and stop are seen above)
                continue
            if not first_new:
                first_new = now
            elif now - first_new >= self.MAX_DEFER:
                return appended
            seen = appended
            self._wake.wait(self.POLL)
        return self.spool.appended

    def ship_once(self) -> int:
        """One pass: adopt orphans, ship every segment as far as possible. Returns count."""
        now = time.monotonic()
        if self.fsync_interval is not None and now - self._last_sync >= self.fsync_interval:
            self._last_sync = now
            self.spool.sync()
        if self._adopt_now or now - self._last_adopt >= self.ADOPT_EVERY:
            self._adopt_now = False
            self._last_adopt = now
            self.spool.adopt_orphans()
        self.spool.rotate_if_large()
        total = 0
        if self._events is None and not self._drained():
            # connect before reading anything: while the log is down a retry costs one
            # refused connection, not a re-read and re-decode of a batch of the spool
            try:
                self._eventlog()
            except redis.RedisError as exc:
                self._on_failure(exc)
                return total
        for seg in self.spool.ship_order():
            try:
                total += self._ship_segment(seg)
            except redis.RedisError as exc:
                self._on_failure(exc)
                return total
            except NotReplicated as exc:
                self._on_unreplicated(exc)
                return total
        try:
            self._report_losses()
        except redis.RedisError as exc:
            self._on_failure(exc)
            return total
        self._backoff = 0.0
        self._failures_in_row = 0
        return total

    def _report(self, last: bool = False) -> None:
        """The fleet report when one is due (``last``: now, if the log is connected), with
        the log's connection; an idle thread connects for it, unless it is retrying after a
        failure (the log is down: the report waits until it is back). None while winding
        down. Never raises."""
        reporter = self.reporter
        if reporter is None or not (last or (self._finish is None and reporter.due())) or (last and self._gave_up):
            return
        eventlog = self._events
        if eventlog is None:
            if last or self._backoff:
                return
            try:
                eventlog = self._eventlog()
            except Exception:  # noqa: BLE001  down: no report now, and nothing changes for the shipping
                reporter.postpone()
                return
        try:
            key = eventlog.reports_key(reporter.tenant)  # reads the tenants' registry: Redis may be gone since the pass
        except Exception:  # noqa: BLE001  down, or the registry unreadable: the report waits, the shipping goes on
            reporter.postpone()
            return
        reporter.send(eventlog.client, eventlog.prefix, key=key)

    def _report_losses(self) -> None:
        """Add what this process refused or quarantined since the last report to its
        tenant's spool counters in Redis (``EventLog.add_spool_losses``), where ``memstream
        stats`` shows every host's."""
        now = {
            "refused": self.spool.refused,
            "write_errors": self.spool.errors,
            "malformed": self.malformed,
            "corrupt_regions": self.spool.corrupt,
            "unreplicated": self.unreplicated,
        }
        delta = {k: v - self._reported.get(k, 0) for k, v in now.items() if v > self._reported.get(k, 0)}
        if not delta:
            return
        self._eventlog().add_spool_losses(self.tenant, delta)
        self._reported.update({k: now[k] for k in delta})

    def _on_unreplicated(self, exc: NotReplicated) -> None:
        """A batch fewer replicas than asked confirmed: it stays in the spool and the pass
        ends; the next one (after a back-off) sends it again, and the dedup appends only what
        the primary lacks. The connection is kept: the primary answered."""
        self.unreplicated += 1
        msg = f"{type(exc).__name__}: {exc}"
        if msg != self.last_error:
            log.warning(
                "shipper.unreplicated",
                error=msg,
                replicas=self.replicas,
                timeout_ms=self.replica_timeout_ms,
                unshipped_bytes=self.spool.unshipped_bytes,
                action="keeping the batch in the spool; will send it again",
            )
        self.last_error = msg
        self._failures_in_row += 1
        self._back_off(backoff_delay(self._failures_in_row, self.RETRY_BASE, self.RETRY_CAP))
        try:
            self._report_losses()  # the count reaches `memstream stats` while the replicas lag
        except redis.RedisError as err:
            self._on_failure(err)

    def _on_failure(self, exc: Exception) -> None:
        self.failures += 1
        self.connected = False
        self._events = None
        msg = f"{type(exc).__name__}: {exc}"
        if msg != self.last_error:
            log.warning(
                "shipper.redis_unavailable", error=msg, unshipped_bytes=self.spool.unshipped_bytes, action="spooling; will retry"
            )
        self.last_error = msg
        self._failures_in_row += 1
        self._back_off(backoff_delay(self._failures_in_row, self.RETRY_BASE, self.RETRY_CAP))

    def _back_off(self, delay: float) -> None:
        """The next pass waits ``delay`` s from now, whoever asks for one sooner (``flush``)."""
        self._backoff = delay
        self._retry_at = time.monotonic() + delay

    def _eventlog(self) -> EventLog:
        if self._events is None:
            self._events = self._connect()
            self.connected = True
        return self._events

    def _ship_segment(self, seg: Segment) -> int:
        shipped = 0
        while True:
            limit = self.spool.limit_of(seg)
            if seg.offset >= limit:
                break
            records, end = seg.read(limit, self.batch, self.spool.quarantine)
            batch: list[Admitted] = []
            for rec in records:
                try:
                    # through the door: redacted before it leaves the host, re-encoded only when changed
                    admitted = admit(decode(rec.payload), seq=rec.seq, data=rec.payload, max_text_bytes=self.max_text_bytes)
                    batch.append(admitted)
                    self.redacted += admitted.redacted
                except Exception as exc:
                    self.malformed += 1
                    seg._quarantine(self.spool.quarantine, rec.end - len(rec.payload), rec.payload)
                    log.warning("shipper.malformed_record", segment=seg.id, seq=rec.seq, error=str(exc))
            if batch:
                self._segment_tenants.setdefault(seg.id, set()).update(a.record.tenant for a in batch)
                try:
                    ids = append(
                        self._eventlog(),
                        batch,
                        segment=seg.id,
                        replicas=self.replicas,
                        replica_timeout_ms=self.replica_timeout_ms,
                    )
                except NotReplicated as exc:
                    appended = [a.record.seq for a, i in zip(batch, exc.ids) if i]
                    if appended:
                        self._unconfirmed[seg.id] = max(appended + [self._unconfirmed.get(seg.id, -1)])
                    raise
                waited = self._unconfirmed.pop(seg.id, -1)
                added = sum(1 for i in ids if i)
                confirmed = sum(1 for a, i in zip(batch, ids) if not i and a.record.seq <= waited)
                if waited > batch[-1].record.seq:
                    self._unconfirmed[seg.id] = waited  # later records of it are in a later batch
                self.shipped += added + confirmed
                self.duplicates += len(ids) - added - confirmed
                shipped += added + confirmed
            last_seq = records[-1].seq if records else seg.last_seq
            if end == seg.offset:
                break
            self.spool.shipped(seg, end, last_seq)
            time.sleep(self.YIELD)  # hand the interpreter to a waiting agent thread
        if self.spool.finished(seg):
            self._eventlog().forget_segment(seg.id, self._segment_tenants.pop(seg.id, ()))
            self.spool.remove(seg)
        return shipped

    def stats(self) -> dict[str, Any]:
        return {
            "connected": self.connected,
            "shipped": self.shipped,
            "duplicates_skipped": self.duplicates,
            "malformed": self.malformed,
            "redacted": self.redacted,
            "failures": self.failures,
            "unreplicated": self.unreplicated,
            "last_error": self.last_error,
            "spool_appended": self.spool.appended,
            "spool_refused": self.spool.refused,
            "spool_errors": self.spool.errors,
            "spool_unshipped_bytes": self.spool.unshipped_bytes,
            "spool_corrupt": self.spool.corrupt,
            **(
                {
                    "reports_sent": self.reporter.sent,
                    "reports_skipped": self.reporter.skipped,
                    "report_failures": self.reporter.failures,
                }
                if self.reporter is not None
                else {}
            ),
        }
