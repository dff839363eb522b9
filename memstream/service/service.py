"""The memstream service: the embedded Valkey (when no Redis URL is set) plus the
background services, in one process, but for the projections that need no vector store:
with ``MEMSTREAM_PROJECTION_PROCESS`` (the default on 2 CPUs or more) they run in a
supervised child process (``service.sidecar``), whose figures the service's metrics show;
with ``MEMSTREAM_QUERY_REPLICAS`` (``memstream up --query-replicas N``) N read replicas, each
a child supervised the same way with a copy of the vector projections of its own and a
query server on the same request lists (``workers.pipeline``, docs/scaling.md).
``memstream up`` runs it; ``--detach`` runs it in the background; ``memstream down`` stops it.

Guarantees: at most one service per ``MEMSTREAM_HOME`` (an flock held for its lifetime);
the run file (``$MEMSTREAM_HOME/run/service.json``) exists only while it serves and
names its URL (and where its metrics are served: ``metrics``, None when they are not);
the embedded Valkey keeps an append-only file under
``$MEMSTREAM_HOME/data/valkey`` and dies with the service. The service adopts and ships
spool segments left by dead agent processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memstream import __version__
from memstream.core import (
    PRIVATE_UMASK,
    STARTING,
    PermanentError,
    Settings,
    mask_url,
    open_private,
    pid_alive,
    private_dir,
    process_start,
    read_run_file,
    say_ready,
    start_service,
    starting_service,
    tighten,
    write_private,
)
from memstream.producers import ArchiveError, EventLog, Shipper, Spool, event_log, redis_client, shipping_timeout
from memstream.service.rest import AtRest
from memstream.service.sidecar import Sidecar
from memstream.service.valkey import ValkeyProcess

if TYPE_CHECKING:
    from memstream.service.metrics import Metrics
    from memstream.workers import Pipeline, RetentionJob

__all__ = ["Service", "AlreadyRunning", "Stopped", "detach", "stop_service"]

log = structlog.get_logger("memstream.service")


class AlreadyRunning(PermanentError, RuntimeError):
    """Another memstream service holds this ``MEMSTREAM_HOME`` (``info``: its run file)."""

    def __init__(self, info: dict[str, Any] | None) -> None:
        super().__init__("a memstream service is already running for this MEMSTREAM_HOME")
        self.info = info or {}


class Service:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.valkey: ValkeyProcess | None = None
        self.url = settings.redis_url
        self._lock_fd = -1
        self._stop = threading.Event()
        self.shipper: Shipper | None = None
        self.spool: Spool | None = None
        self.pipeline: Pipeline | None = None
        self.sidecar: Sidecar | None = None
        self.replicas: list[Sidecar] = []
        self.pipeline_error = ""
        self.metrics: Metrics | None = None
        self.retention: RetentionJob | None = None
        self._info: dict[str, Any] = {}  # what the run file says

    @property
    def lock_path(self) -> Path:
        return self.settings.run_file.parent / "service.lock"

    def start(self) -> dict[str, Any]:
        """Take the lock, start Valkey if embedded, write the run file. Raises AlreadyRunning.

        Everything under ``MEMSTREAM_HOME`` is owner-only: the process runs under umask 077
        (Valkey's AOF, the vector store, the embedding cache are created 0600/0700) and
        looser modes left from before are tightened. The embedded Valkey requires a random
        password, kept only in its 0600 config file and the 0600 run file."""
        os.umask(PRIVATE_UMASK)
        private_dir(self.settings.home)
        loosened = tighten(self.settings.home)
        if loosened:
            log.warning(
                "service.home_tightened",
                home=str(self.settings.home),
                modes_changed=loosened,
                action="group and other permissions removed from MEMSTREAM_HOME",
            )
        private_dir(self.settings.run_file.parent)
        fd = open_private(self.lock_path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise AlreadyRunning(read_run_file(self.settings.run_file)) from exc
        self._lock_fd = fd
        if not self.settings.redis_url:
            private_dir(self.settings.data_dir)
            self.valkey = ValkeyProcess(self.settings.data_dir / "valkey", password=secrets.token_urlsafe(32)).start()
            self.url = self.valkey.url
        info = {
            "pid": os.getpid(),
            "pid_start": process_start(os.getpid()),  # with the pid: this process, not a later one
            "url": self.url,
            "embedded": self.valkey is not None,
            "valkey_pid": self.valkey.pid if self.valkey else None,
            "started_at": time.time(),
            "version": __version__,
            "home": str(self.settings.home),
        }
        url = self.url

        def connect() -> EventLog:
            client = redis_client(url, timeout=shipping_timeout(self.settings), settings=self.settings)
            client.ping()
            return event_log(client, url, self.settings)

        self._start_metrics(connect())
        info["metrics"] = self.metrics.url if self.metrics is not None else None
        write_private(self.settings.run_file, json.dumps(info, indent=2) + "\n")
        self._info = info
        marker = self.settings.run_file.parent / STARTING
        if (read_run_file(marker) or {}).get("pid") == os.getpid():  # the run file now says it
            marker.unlink(missing_ok=True)
        # ship spool segments that dead agent processes left behind
        self.spool = Spool(self.settings.spool_dir, max_bytes=self.settings.spool_max_bytes)
        self.shipper = Shipper(
            self.spool,
            connect,
            batch=self.settings.ship_batch,
            name="memstream-adopter",
            replicas=self.settings.ship_replicas,
            replica_timeout_ms=self.settings.ship_replica_timeout_ms,
            max_text_bytes=self.settings.max_text_bytes,
            tenant=self.settings.tenant,
        ).start()
        self._start_pipeline(connect())
        if self.pipeline is not None:  # retention erases through the projections' tombstones
            from memstream.workers import RetentionJob

            self.retention = RetentionJob(self.settings, connect).start()
        log.info("service.started", url=mask_url(self.url), embedded=info["embedded"], home=str(self.settings.home))
        threading.Thread(target=self._announce, name="memstream-ready", daemon=True).start()
        return info

    READY_WAIT_S = 300.0  # how long the ready pipe waits for the first health records at most

    def _announce(self) -> None:
        """Say ready (``say_ready``, for ``memstream up --detach``) once every consumer of the
        pipeline wrote its first health record; until then, each new last error of theirs.
        A pipeline that failed to start: a warning, then ready (the log serves)."""
        if self.pipeline is None:
            if self.pipeline_error:
                say_ready(f"warning: the projections did not start ({self.pipeline_error}); the log serves")
            say_ready("ready")
            return
        said = ""
        deadline = time.monotonic() + self.READY_WAIT_S
        pipeline = self.pipeline  # close() may drop it meanwhile
        while not self._stop.is_set() and time.monotonic() < deadline:
            consumers = [c.health for c in pipeline.consumers]
            if all(h.written_at for h in consumers):
                say_ready("ready")
                return
            errors = [h.last_error for h in consumers if h.last_error]
            if errors and errors[-1] != said:
                said = errors[-1]
                say_ready(f"error: {said}")
            self._stop.wait(0.1)

    def _start_pipeline(self, eventlog: EventLog) -> None:
        """The projection workers and the query server live in this process (the
        embedded store admits one process), those without vectors in the sidecar when it
        is on. A failure here leaves the log serving."""
        try:
            from memstream.projections import all_registered
            from memstream.workers import Pipeline, PipelineConfig

            config = PipelineConfig.of(self.settings)
            if self.settings.projections_apart:
                rows = all_registered(self.settings.projections)
                apart = tuple(r.name for r in rows if not r.vectors)
                if apart and len(apart) < len(rows):
                    self.sidecar = Sidecar(self.settings, self.url, apart).start()
                    config = PipelineConfig.of(self.settings, projections=tuple(r.name for r in rows if r.vectors))
            self.pipeline = Pipeline(self.settings, eventlog, config).start()
            self._start_replicas(self.pipeline, eventlog)
        except Exception as exc:
            self.pipeline_error = f"{type(exc).__name__}: {exc}"
            log.error(
                "service.pipeline_failed",
                error=self.pipeline_error,
                action="the log keeps serving; fix the error and restart `memstream up`",
            )

    def _start_replicas(self, pipeline: Pipeline, eventlog: EventLog) -> None:
        """The read replicas (``query_replicas``), once the catalog holds the versions they
        copy; the groups of replicas numbered above them that are gone for good are removed
        first (no forget waits for a group nobody reads)."""
        from memstream.projections import PROJECTIONS, Replicas

        wanted = self.settings.query_replicas
        self._retire_replicas()
        if not wanted:
            return
        if self.settings.qdrant_url:
            log.warning(
                "service.replicas_ignored",
                action="with a Qdrant server every `memstream worker` answers queries; MEMSTREAM_QUERY_REPLICAS is ignored",
            )
            return
        try:
            archived = pipeline.archive() is not None
        except ArchiveError:
            archived = True
        listed = Replicas(eventlog.client, eventlog.prefix).groups()
        names = tuple(row.name for row in PROJECTIONS if row.vectors)
        for n in range(1, wanted + 1):
            if archived and n not in listed:  # it would start from the streams, missing what was archived
                log.error(
                    "service.replica_not_started",
                    replica=n,
                    reason="the log has an archive, which a new read replica does not replay",
                    action="the other query processes answer",
                )
                continue
            self.replicas.append(Sidecar(self.settings, self.url, names, replica=n).start())

    def _start_metrics(self, eventlog: EventLog) -> None:
        """``/metrics`` on ``MEMSTREAM_METRICS_ADDR`` (service/metrics.py), its own Redis
        connection; the pipeline's consumers once it runs. A failure leaves the service
        serving without metrics."""
        from memstream.service.metrics import start_metrics

        try:
            self.metrics = start_metrics(self.settings, eventlog, role="service", consumers=self._consumers)
        except Exception as exc:  # noqa: BLE001  metrics never stop the service
            log.error(
                "service.metrics_failed", error=f"{type(exc).__name__}: {exc}"[:500], action="the service runs without metrics"
            )

    def _consumers(self) -> list[Any]:
        """The consumers whose counters the metrics show: the pipeline's and the sidecar's."""
        out: list[Any] = list(self.pipeline.consumers) if self.pipeline is not None else []
        if self.sidecar is not None:
            out += self.sidecar.consumers
        for replica in self.replicas:
            out += replica.consumers
        return out

    def handle_signals(self) -> None:
        """SIGTERM and SIGINT stop the service (from the main thread only)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                signal.signal(sig, lambda *_: self._stop.set())
            except ValueError:  # not the main thread
                pass

    def serve(self) -> None:
        """Block until SIGTERM/SIGINT or ``stop()``; then shut down cleanly."""
        self.handle_signals()
        retired = time.monotonic()
        rest = AtRest()
        try:
            while not self._stop.wait(1.0):
                rest.tick()  # what a burst of work freed, given back once the process is quiet
                if self.valkey is not None and (self.valkey.proc is None or self.valkey.proc.poll() is not None):
                    log.error(
                        "service.valkey_exited",
                        code=self.valkey.proc.returncode if self.valkey.proc is not None else None,
                        action="restarting it on the same data directory",
                    )
                    self.valkey.proc = None
                    try:
                        self.valkey.start()
                    except Exception as exc:  # noqa: BLE001  e.g. a full disk: the next look tries again
                        log.error("service.valkey_restart_failed", error=f"{type(exc).__name__}: {exc}"[:500])
                        continue
                    # the run file names the live server's pid, never the dead one's
                    self._info["valkey_pid"] = self.valkey.pid
                    try:
                        write_private(self.settings.run_file, json.dumps(self._info, indent=2) + "\n")
                    except OSError as exc:
                        log.error("service.run_file_unwritten", error=f"{type(exc).__name__}: {exc}"[:300])
                if self.shipper is not None:
                    self.shipper.notify()
                if time.monotonic() - retired >= self.RETIRE_EVERY_S:
                    retired = time.monotonic()
                    self._retire_replicas()
        finally:
            self.close()

    RETIRE_EVERY_S = 60.0  # how often the service removes the groups of replicas gone for good

    def _retire_replicas(self) -> None:
        """The groups of replicas numbered above ``query_replicas`` whose beat is gone (a
        service run with more of them, stopped less than a beat's life before this one started)."""
        pipeline = self.pipeline
        if pipeline is None:
            return
        from memstream.projections import Replicas

        try:
            removed = Replicas(pipeline.events.client, pipeline.events.prefix).retire(
                self.settings.query_replicas, pipeline.events.stream_keys
            )
        except Exception as exc:  # noqa: BLE001  e.g. Redis down: the next look tries again
            log.warning("service.replicas_retire_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        if removed:
            log.info("service.replicas_retired", groups=removed)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self.retention is not None:
            self.retention.stop()
            self.retention = None
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        if self.pipeline is not None:
            self.pipeline.stop()
            self.pipeline = None
        if self.sidecar is not None:  # before Valkey: its consumers finish their batches
            self.sidecar.stop()
            self.sidecar = None
        for replica in self.replicas:
            replica.stop()
        self.replicas = []
        if self.shipper is not None:
            # the spool closes when the shipper thread is gone, never under its feet
            self.shipper.stop(2.0, close_spool=True)
            self.shipper = None
            self.spool = None
        try:
            info = json.loads(self.settings.run_file.read_text())
            if info.get("pid") == os.getpid():
                self.settings.run_file.unlink()
        except (OSError, ValueError):
            pass
        if self.valkey is not None:
            self.valkey.stop()
            self.valkey = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
        log.info("service.stopped")


def detach(settings: Settings, timeout: float = 20.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the service in the background (``env``: variables of its environment over this
    process's); return its run-file info once it serves (``already_running`` when one served
    already). See ``memstream.core.start_service``."""
    return start_service(settings, wait=timeout, env=env)


@dataclass(frozen=True)
class Stopped:
    """What ``stop_service`` found: the service ``stopped``; or none was running
    (``none_running``); or it was still running after the timeout (``reason`` says so)."""

    stopped: bool
    none_running: bool = False
    pid: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether no service runs now: it stopped, or none was running."""
        return self.stopped or self.none_running

    def as_dict(self) -> dict[str, Any]:
        """What ``memstream down`` prints: ``stopped``, and the ``pid`` and ``reason`` when known."""
        out: dict[str, Any] = {"stopped": self.stopped}
        if self.pid is not None:
            out["pid"] = self.pid
        if self.reason:
            out["reason"] = self.reason
        return out


def stop_service(settings: Settings, timeout: float = 15.0) -> Stopped:
    """SIGTERM the running service and wait for it to exit; a service started in the
    background that has not yet written its run file is waited for first (up to
    ``timeout``), then stopped."""
    info = starting_service(settings, timeout)
    if not info:
        if read_run_file(settings.run_file.parent / STARTING):
            return Stopped(stopped=False, reason=f"still starting after {timeout}s (its run file not written)")
        return Stopped(stopped=False, none_running=True, reason="no memstream service is running")
    pid = int(info["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        return Stopped(stopped=False, pid=pid, reason=f"still running after {timeout}s")
    return Stopped(stopped=True, pid=pid)
