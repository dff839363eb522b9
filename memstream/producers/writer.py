"""The append path as producers use it: encode, spool with one write, wake the shipper.

One ``Writer`` per spool directory per process, shared by every caller (the Hermes
gateway builds many provider instances in one process) and reference-counted: the last
``release`` ships what it can within ``shutdown_timeout``, writes the last fleet report and
leaves the rest spooled (the provider's ``shutdown`` in Hermes's CLI, whose process exits
right after it: ``hermes -z`` through ``os._exit``, past ``atexit``).
``detach`` (the provider's ``shutdown`` elsewhere) drops a reference without waiting: after the
last one the shipper thread goes on shipping in the background for ``shutdown_timeout``
s, then ends and closes the spool; what it leaves there (the log was unreachable) is
shipped by the next writer of the process, another process that adopts the segment, or
``memstream up``. A ``shared`` call meanwhile takes the same writer back (a gateway
builds a provider per message: one thread and one segment for all of them).

Guarantee: ``emit`` never raises and never touches the network; it returns True once
the event is in the kernel (safe from a crash of this process), False if it was
refused (counted and logged).

With ``MEMSTREAM_REPORT_EVERY_S`` above 0 the writer holds the process's ``tally`` (what
its providers' hooks record) and its shipper writes the process's fleet report
(``memstream.producers.report``) once a provider has used it (``attach_agent``).
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import Any

import structlog

from memstream.core import Settings
from memstream.producers.connect import LogLocator
from memstream.producers.events import Event, encode
from memstream.producers.report import Figures, Reporter, Tally
from memstream.producers.shipper import Shipper
from memstream.producers.spool import Spool

__all__ = ["Writer"]

log = structlog.get_logger("memstream.writer")

_registry: dict[str, Writer] = {}
_registry_lock = threading.Lock()
# spool key -> the process's tally and reporter, kept from one shared writer to the next: a
# gateway's writer ends when no provider used it for shutdown_timeout s, and the next one
# reports under the same name with the same cumulative counts
_reports: dict[str, tuple[Tally, Reporter]] = {}


class Writer:
    def __init__(self, settings: Settings, locator: LogLocator | None = None):
        self.settings = settings
        self.spool = Spool(settings.spool_dir, max_bytes=settings.spool_max_bytes, fsync=settings.spool_fsync)
        self.locator = locator or LogLocator(settings)
        self.shipper = Shipper(
            self.spool,
            self.locator,
            batch=settings.ship_batch,
            fsync_interval=settings.fsync_interval,
            replicas=settings.ship_replicas,
            replica_timeout_ms=settings.ship_replica_timeout_ms,
            max_text_bytes=settings.max_text_bytes,
            tenant=settings.tenant,
        )
        self.shipper.on_exit = getattr(self.locator, "close", None)  # its Redis client
        self.encode_errors = 0
        self._agents: dict[str, int] = {}  # scope agent -> providers of it using this writer
        self._agents_lock = threading.Lock()
        self._served = False
        self.tally: Tally | None = None  # what the hooks record for the fleet report (None: reports off)
        if settings.report_every_s > 0:
            self.tally = Tally()
            self.shipper.reporter = Reporter(settings, self.tally, self._figures)
        self._refs = 0
        self._closed = False
        self._key = ""
        self._detached_at: float | None = None  # the last reference was detached then

    @classmethod
    def shared(cls, settings: Settings) -> Writer:
        """The process-wide writer for these settings' spool; call ``release`` when done."""
        # resolve() whether or not the directory exists yet: the first call creates it,
        # and a symlinked or relative home must map to the same key on every call
        key = str(settings.spool_dir.resolve())
        with _registry_lock:
            writer = _registry.get(key)
            if writer is None or writer._closed:
                writer = cls(settings)
                writer._key = key
                writer._keep_reports(key)
                writer.shipper.start()
                _registry[key] = writer
            writer._refs += 1
            if writer._detached_at is not None:  # winding down: it goes on instead
                writer._detached_at = None
                writer.shipper.keep_on()
            return writer

    def _keep_reports(self, key: str) -> None:
        """Report with the tally and reporter of the process's earlier writer of this spool
        (under ``_registry_lock``, before the shipper starts)."""
        reporter = self.shipper.reporter
        if self.tally is None or reporter is None:
            return
        kept = _reports.get(key)
        if kept is None:
            _reports[key] = (self.tally, reporter)
            return
        self.tally, reporter = kept
        reporter.figures = self._figures
        self.shipper.reporter = reporter

    def attach_agent(self, agent: str) -> None:
        """A provider of scope agent ``agent`` uses this writer (its report lists the agents)."""
        with self._agents_lock:
            self._agents[agent] = self._agents.get(agent, 0) + 1
            self._served = True

    def detach_agent(self, agent: str) -> None:
        """That provider no longer does."""
        with self._agents_lock:
            left = self._agents.get(agent, 0) - 1
            if left > 0:
                self._agents[agent] = left
            else:
                self._agents.pop(agent, None)

    def _figures(self) -> Figures:
        """This writer's figures for its report (on the shipper thread)."""
        with self._agents_lock:
            agents, served = sorted(self._agents), self._served
        spool = self.spool
        return Figures(
            backlog=spool.unshipped_events,
            backlog_bytes=spool.unshipped_bytes,
            refused=spool.refused,
            invalid=self.encode_errors,
            agents=agents,
            served=served,
        )

    def emit(self, event: Event) -> bool:
        """Spool one event (one write) and wake the shipper. Never raises."""
        try:
            data = encode(event)
        except Exception as exc:
            self.encode_errors += 1
            log.error("writer.encode_failed", event_type=type(event).__name__, error=str(exc))
            return False
        ok = self.spool.append(data)
        self.shipper.notify()
        return ok

    def flush(self, timeout: float) -> bool:
        """Wait (bounded) until everything spooled so far is in the log."""
        return self.shipper.flush(timeout)

    def release(self, timeout: float | None = None) -> bool:
        """Drop one reference; the last one stops the shipper (bounded) and closes."""
        with _registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return True
            for key, value in list(_registry.items()):
                if value is self:
                    del _registry[key]
        return self.close(timeout)

    def detach(self) -> None:
        """Drop one reference without waiting (see the module docstring). Never touches
        the network and never blocks on the shipper."""
        with _registry_lock:
            self._refs -= 1
            if self._refs > 0 or self._closed:
                return
            self._detached_at = time.monotonic()
        self.shipper.wind_down(self._finished, self.settings.shutdown_timeout)

    def _finished(self) -> bool:
        """On the shipper thread while winding down: True (and out of the registry) once
        ``shutdown_timeout`` s have passed since the last ``detach``; False if a ``shared``
        call took the writer back meanwhile."""
        with _registry_lock:
            detached = self._detached_at
            if detached is None or self._refs > 0:
                return False
            if time.monotonic() - detached < self.settings.shutdown_timeout:
                return False
            if _registry.get(self._key) is self:
                del _registry[self._key]
            self._closed = True
        if not self.spool.drained():
            log.warning(
                "writer.closed_with_backlog",
                unshipped_bytes=self.spool.unshipped_bytes,
                action="left in the spool; the next writer, another process or `memstream up` ships it",
            )
        return True

    def close(self, timeout: float | None = None) -> bool:
        if self._closed:
            return True
        self._closed = True
        drained = self.shipper.stop(self.settings.shutdown_timeout if timeout is None else timeout, close_spool=True)
        if not drained:
            log.warning(
                "writer.closed_with_backlog",
                unshipped_bytes=self.spool.unshipped_bytes,
                action="left in the spool; the next process or `memstream up` ships it",
            )
        return drained

    def backlog(self) -> int:
        """Events in the spool not yet shipped (no I/O)."""
        return self.spool.unshipped_events

    def stats(self) -> dict[str, Any]:
        return {**self.shipper.stats(), "encode_errors": self.encode_errors}


@atexit.register
def _close_all() -> None:
    for writer in list(_registry.values()):
        try:
            writer.close()
        except Exception:
            pass
