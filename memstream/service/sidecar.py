"""The projections that need no vector store (facts, sessions, yours without ``VECTORS``:
``Registered.vectors`` is false), in a child process of their own beside the process that
owns the store (``memstream up``; ``MEMSTREAM_PROJECTION_PROCESS``).

Why: a batch's Python work is most of its cost, and one interpreter runs one thread at a
time; the embedded store admits one process, but facts and sessions write only Redis, so
they can use the second CPU (BENCHMARKS.md, ingest).

The parent (``Sidecar``) starts ``python -c 'from memstream.service.sidecar import main;
main()'`` with two pipes. On the child's stdin it writes one JSON line (the log's URL, the
projections to run, the consumer name) and then nothing: the child runs a
``workers.Pipeline`` of those projections until that pipe ends, which it does when the
parent closes it (a clean stop: each consumer finishes its batch) or when the parent is
gone for any reason, SIGKILL included (the kernel closes the write end). On its stdout
the child writes JSON lines: ``ready``, then every ``REPORT_EVERY`` seconds what the
metrics of the parent need (its consumers' counters; the batches and embedding calls its
consumers reported through ``core.observe``, which the parent passes on to its own
observer). Everything else the child says goes to stderr (the service's log).

The same supervision runs the read replicas of ``memstream up --query-replicas N``
(``Sidecar(..., replica=N)``): the child then runs a replica's pipeline (``workers.pipeline``,
``PipelineConfig.replica``: the vector projections over a store of its own, through groups
of its own, and a query server on the same request lists), and its reports carry the
queries it answered too (``answered``, passed on to the parent's observer).

Guarantees: the child uses the consumer name the service's pipeline uses, so a new child
takes over the entries an earlier one held (nothing is lost; ``apply`` is idempotent, so
an entry applied before a kill and redelivered changes nothing). A child that exits
while the service runs is started again after a jittered backoff that grows when it dies
soon after its start (``core.backoff``). The counters the parent shows never go down: a
child's last figures are kept when it exits. A child whose parent is gone stops within
``ORPHAN_EXIT_S`` at most, however its stop goes. The parent never blocks on the child:
reports it cannot keep up with are dropped in the child, and counted there
(``dropped``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec
import structlog

from memstream.core import Settings, backoff_delay, logs_json, observe, stop_process
from memstream.service.rest import AtRest

if TYPE_CHECKING:
    from memstream.workers import Pipeline

__all__ = ["Sidecar", "SidecarDrain", "RemoteConsumer", "main"]

log = structlog.get_logger("memstream.sidecar")

# A Ctrl-C in a terminal reaches the whole process group: the child ignores it from its first
# statement (before its imports, which take a second), and stops when the parent closes its stdin.
# It runs with -P (as the service does): a working directory holding another memstream checkout
# is not put before this one on its path.
CHILD = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import memstream; memstream.plain_structlog(); "
    "from memstream.service.sidecar import main; main()"
)
REPORT_EVERY = 0.25  # seconds between the child's reports
MAX_QUEUED = 20_000  # reports the child keeps while its parent does not read (then drops)
ORPHAN_EXIT_S = 15.0  # the child exits at once this long after its stop began, whatever remains
QUICK_DEATH_S = 30.0  # a child that dies sooner after its start backs its restart off further


@dataclass
class RemoteStats:
    """A child's consumer counters, as the metrics read a ``Consumer``'s ``stats``."""

    applied: int = 0
    dead_lettered: int = 0
    redelivered: int = 0


@dataclass
class RemoteConsumer:
    """A consumer of the child, for the parent's metrics: its group and its counters (those
    of every child so far, summed)."""

    group: str
    stats: RemoteStats = field(default_factory=RemoteStats)
    base: RemoteStats = field(default_factory=RemoteStats)  # the children that exited

    def update(self, applied: int, dead_lettered: int, redelivered: int) -> None:
        self.stats = RemoteStats(
            self.base.applied + applied, self.base.dead_lettered + dead_lettered, self.base.redelivered + redelivered
        )

    def fold(self) -> None:
        """The child exited: what it counted stays."""
        self.base = RemoteStats(self.stats.applied, self.stats.dead_lettered, self.stats.redelivered)


def _counter(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class Sidecar:
    """The supervised child of ``names`` (projections without vectors) on the log at ``url``.
    ``start()`` returns at once; ``stop()`` stops the child cleanly and waits for it."""

    def __init__(
        self,
        settings: Settings,
        url: str,
        names: tuple[str, ...],
        consumer: str = "",
        python: str = sys.executable,
        log_level: str = "INFO",
        replica: int = 0,
    ) -> None:
        self.settings = settings
        self.url = url
        self.names = names
        self.consumer = consumer
        self.replica = replica  # 1 or more: the child is that read replica
        self.python = python
        self.log_level = log_level
        self.restarts = 0  # children started again after one exited
        self.last_exit: int | None = None
        self._consumers: dict[str, RemoteConsumer] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        """The running child's pid (None between children)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def consumers(self) -> list[RemoteConsumer]:
        """The child's consumers (of every version it runs), for the metrics."""
        with self._lock:
            return list(self._consumers.values())

    def wait_ready(self, timeout: float) -> bool:
        """Whether a child said it runs within ``timeout`` seconds (the current one, or one
        started since the last exit)."""
        return self._ready.wait(timeout)

    def start(self) -> Sidecar:
        name = f"memstream-replica-{self.replica}" if self.replica else "memstream-sidecar"
        self._thread = threading.Thread(target=self._supervise, name=name, daemon=True)
        self._thread.start()
        return self

    def _spawn(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([self.python, "-P", "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        assert proc.stdin is not None
        config = {
            "url": self.url,
            "projections": list(self.names),
            "consumer": self.consumer,
            "replica": self.replica,
            "settings": settings_of(self.settings),
            "log_level": self.log_level,
            "log_json": logs_json(),
        }  # the child's lines look like the parent's
        try:
            proc.stdin.write((json.dumps(config) + "\n").encode())
            proc.stdin.flush()
        except OSError:  # it died at once: the supervisor sees it exit
            pass
        return proc

    def _supervise(self) -> None:
        quick = 0
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self._proc = proc = self._spawn()
                except OSError as exc:
                    log.error("sidecar.not_started", error=f"{type(exc).__name__}: {exc}"[:300])
                    proc = None
            if proc is not None:
                log.info("sidecar.started", pid=proc.pid, projections=list(self.names), replica=self.replica)
                self._read(proc)
                code = proc.wait()
                self._close_pipes(proc)
                self.last_exit = code
                self._ready.clear()
                with self._lock:
                    for c in self._consumers.values():
                        c.fold()
                if self._stop.is_set():
                    return
            quick = quick + 1 if time.monotonic() - started < QUICK_DEATH_S else 1
            delay = backoff_delay(quick, 0.2, 30.0)
            log.error(
                "sidecar.exited",
                code=self.last_exit,
                projections=list(self.names),
                replica=self.replica,
                action=f"starting it again in {delay:.1f} s",
            )
            if self._stop.wait(delay):
                return
            self.restarts += 1

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        """The child's reports until its stdout ends."""
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict):
                self._take(report)

    def _close_pipes(self, proc: subprocess.Popen[bytes]) -> None:
        """The pipes of a child that ended: its stdout, read to its end on this thread, and its
        stdin, unless ``stop`` is closing it (a child started again after each exit must not
        leave two open pipes behind each time)."""
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.close()
        with self._lock:
            if not self._stop.is_set():
                with contextlib.suppress(OSError):  # what it did not read is dropped with it
                    proc.stdin.close()

    def _take(self, report: dict[str, Any]) -> None:
        if report.get("ready"):
            self._ready.set()
        stats = report.get("stats")
        if isinstance(stats, dict):
            with self._lock:
                for group, row in stats.items():
                    if not isinstance(group, str) or not isinstance(row, list) or len(row) != 3:
                        continue
                    c = self._consumers.get(group)
                    if c is None:
                        c = self._consumers[group] = RemoteConsumer(group)
                    c.update(*(_counter(v) for v in row))
        for item in report.get("batches") or ():
            if isinstance(item, list) and len(item) == 4:
                group, stages, applied, at = item
                if (
                    isinstance(group, str)
                    and isinstance(stages, dict)
                    and isinstance(applied, list)
                    and isinstance(at, (int, float))
                ):
                    observe.batch(group, stages, applied, float(at))
        for item in report.get("embedded") or ():
            if isinstance(item, list) and len(item) == 3:
                observe.embedded(str(item[0]), _counter(item[1]), float(item[2]))
        for item in report.get("answered") or ():
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], (int, float)):
                observe.answered(str(item[0]), float(item[1]))
        for item in report.get("embed_dead_lettered") or ():
            if isinstance(item, list) and len(item) == 2:
                observe.embed_dead_lettered(str(item[0]), _counter(item[1]))

    def stop(self, timeout: float = 15.0) -> None:
        """Close the child's pipe (it stops: each consumer finishes its batch), wait for it,
        then end it if it has not; no child is left."""
        with self._lock:
            self._stop.set()
            proc = self._proc
        if proc is not None and stop_process(proc, timeout, by_stdin=True) == -signal.SIGKILL:
            log.warning("sidecar.stop_slow", pid=proc.pid, action=f"killed: it did not stop within {timeout}s")
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()


class SidecarDrain:
    """The child in burst mode (``memstream bench ingest``): it drains ``names`` once, on
    ``go()``; ready (imports done, groups made) when built, so the caller times the drain
    only. ``done()`` is the child's figures: entries handled, seconds, CPU seconds, applied."""

    def __init__(
        self, settings: Settings, url: str, names: tuple[str, ...], python: str = sys.executable, log_level: str = "INFO"
    ) -> None:
        self.proc = subprocess.Popen([python, "-P", "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None
        config = {
            "url": url,
            "projections": list(names),
            "settings": settings_of(settings),
            "mode": "drain",
            "log_level": log_level,
            "log_json": logs_json(),
        }
        try:
            self.proc.stdin.write((json.dumps(config) + "\n").encode())
            self.proc.stdin.flush()
            self._until("ready")
        except BaseException:  # a child that did not start is stopped and its pipes closed
            self.close()
            raise

    def _until(self, key: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            report = json.loads(line)
            if key in report:
                return dict(report)
        raise RuntimeError(f"the drain's child process exited ({self.proc.wait()}) before it said {key!r}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def done(self) -> dict[str, Any]:
        return self._until("drained")

    def close(self) -> None:
        stop_process(self.proc, 30, by_stdin=True)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def settings_of(settings: Settings) -> dict[str, Any]:
    """``settings`` as the child's config line carries them (JSON values; it has the parent's
    settings, whatever the environment holds; the pipe is private to the two processes)."""
    out: dict[str, Any] = {}
    for name in msgspec.structs.fields(Settings):
        if name.name in ("problems", "sources"):
            continue
        value = getattr(settings, name.name)
        out[name.name] = str(value) if isinstance(value, Path) else value
    return out


def settings_from(fields: dict[str, Any], url: str) -> Settings:
    """The settings of the child: the parent's (``settings_of``), on the log at ``url``, serving no metrics."""
    base = Settings()
    known = {f.name for f in msgspec.structs.fields(Settings)} - {"problems", "sources"}
    given = {k: (Path(v) if isinstance(getattr(base, k), Path) else v) for k, v in fields.items() if k in known}
    return msgspec.structs.replace(base, **{**given, "redis_url": url, "metrics_addr": ""})


# -- the child ---------------------------------------------------------------------------------
class _Reports:
    """The child's ``core.observe`` observer: it queues what its consumers report, and a
    thread writes it to the parent with the counters every ``REPORT_EVERY`` seconds."""

    def __init__(self, out: IO[bytes], pipeline: Pipeline) -> None:
        self.out = out
        self.pipeline = pipeline
        self.lock = threading.Lock()
        self.batches: list[list[Any]] = []
        self.embeds: list[list[Any]] = []
        self.answers: list[list[Any]] = []
        self.embed_letters: list[list[Any]] = []
        self.dropped = 0
        self.gone = threading.Event()  # the parent stopped reading

    def _queue(self, name: str, item: list[Any]) -> None:
        """``item`` kept in the list called ``name`` for the next report (read under the lock:
        ``flush`` swaps the lists), or dropped and counted past ``MAX_QUEUED``."""
        with self.lock:
            items: list[list[Any]] = getattr(self, name)
            if len(items) >= MAX_QUEUED:
                self.dropped += 1
                return
            items.append(item)

    def batch(self, group: str, stages: dict[str, float], applied: list[str], at: float) -> None:
        self._queue("batches", [group, stages, applied, at])

    def embedded(self, group: str, texts: int, seconds: float) -> None:
        self._queue("embeds", [group, texts, seconds])

    def answered(self, op: str, seconds: float) -> None:
        self._queue("answers", [op, seconds])  # a read replica's query server

    def embed_dead_lettered(self, group: str, entries: int) -> None:
        with self.lock:  # a read replica's dense stage
            self.embed_letters.append([group, entries])

    def write(self, report: dict[str, Any]) -> None:
        if self.gone.is_set():
            return
        try:
            self.out.write(json.dumps(report, separators=(",", ":")).encode() + b"\n")
            self.out.flush()
        except (OSError, ValueError):  # the parent is gone
            self.gone.set()

    def flush(self) -> None:
        with self.lock:
            batches, self.batches = self.batches, []
            embeds, self.embeds = self.embeds, []
            answers, self.answers = self.answers, []
            letters, self.embed_letters = self.embed_letters, []
            dropped = self.dropped
        stats = {c.group: [c.stats.applied, c.stats.dead_lettered, c.stats.redelivered] for c in self.pipeline.consumers}
        self.write(
            {
                "stats": stats,
                "batches": batches,
                "embedded": embeds,
                "answered": answers,
                "embed_dead_lettered": letters,
                "dropped": dropped,
            }
        )

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(REPORT_EVERY):
            self.flush()


def _exit_soon(seconds: float) -> None:
    """However the stop goes, the process is gone ``seconds`` from now."""
    timer = threading.Timer(seconds, lambda: os._exit(3))
    timer.daemon = True
    timer.start()


def main() -> None:  # pragma: no cover - runs in the child (tests/service/test_sidecar.py drives it)
    """The child: read the config line, run the pipeline until stdin ends."""
    import signal

    from memstream.core import configure
    from memstream.producers import event_log, redis_client
    from memstream.workers import Pipeline, PipelineConfig

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the parent, which stops this
    out = os.fdopen(os.dup(1), "wb")  # the reports' channel; anything printed goes to stderr
    os.dup2(2, 1)
    line = sys.stdin.buffer.readline()
    if not line:
        return
    config = json.loads(line)
    json_lines = config.get("log_json")
    configure(str(config.get("log_level") or "INFO"), json=json_lines if isinstance(json_lines, bool) else None)
    settings = settings_from(config.get("settings") or {}, str(config["url"]))
    client = redis_client(settings.redis_url, settings=settings)
    eventlog = event_log(client, settings.redis_url, settings)
    names = tuple(str(n) for n in config.get("projections") or ())
    replica = config.get("replica")
    pipeline = Pipeline(
        settings,
        eventlog,
        PipelineConfig.of(
            settings,
            projections=names,
            consumer=str(config.get("consumer") or ""),
            replica=replica if isinstance(replica, int) and not isinstance(replica, bool) and replica > 0 else 0,
        ),
    )
    reports = _Reports(out, pipeline)
    observe.install(reports)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if config.get("mode") == "drain":
        _drain(pipeline, reports, stop)
        return
    pipeline.start()
    writer = threading.Thread(target=reports.run, args=(stop,), name="memstream-sidecar-reports", daemon=True)
    writer.start()
    reports.write({"ready": True, "pid": os.getpid(), "groups": [c.group for c in pipeline.consumers]})
    log.info("sidecar.running", pid=os.getpid(), groups=[c.group for c in pipeline.consumers])

    def watch() -> None:
        sys.stdin.buffer.read()  # until the parent closes the pipe, or is gone
        stop.set()

    threading.Thread(target=watch, name="memstream-sidecar-parent", daemon=True).start()
    rest = AtRest()
    while not stop.wait(1.0):
        rest.tick()  # what a burst of work freed, given back once the child is quiet
        if reports.gone.is_set():  # nobody reads the reports any more: the parent is gone
            stop.set()
    _exit_soon(ORPHAN_EXIT_S)
    pipeline.stop()
    reports.flush()
    log.info("sidecar.stopped", pid=os.getpid())


def _drain(pipeline: Pipeline, reports: _Reports, stop: threading.Event) -> None:  # pragma: no cover
    """Burst mode (``memstream bench ingest``): say ready, drain on ``go``, say how long it took."""
    for c in pipeline.consumers:
        c.ensure_groups()
    reports.write({"ready": True, "pid": os.getpid()})
    if sys.stdin.buffer.readline().strip() == b"go":
        started, cpu = time.perf_counter(), time.process_time()
        handled = pipeline.drain()
        reports.write(
            {
                "drained": handled,
                "seconds": time.perf_counter() - started,
                "cpu_seconds": time.process_time() - cpu,
                "applied": {c.group: c.stats.applied for c in pipeline.consumers},
            }
        )
    sys.stdin.buffer.read()
    _exit_soon(ORPHAN_EXIT_S)
    pipeline.stop()
