"""Queries answered where the models and stores live (the service or a worker), as rq jobs.

A caller (the provider inside Hermes, the CLI, a benchmark) enqueues a job on the rq
queue ``P:queries`` whose function is ``workers.queries.answer`` and whose argument is a
JSON request ``{"op": ..., ...}``; it then blocks on the job's result stream. A
``QueryServer`` runs rq ``SimpleWorker`` threads in the process that holds the store and
the embedder (``memstream up``, ``memstream worker``), with that process's handlers.
Callers never open the store or load the embedder themselves, and need only ``redis``
and ``rq``.

Guarantees: ``ask`` returns the answer or raises ``QueryTimeout`` within ``timeout``
seconds (plus one Redis round trip); a job nobody picked up within its ``ttl`` is
discarded by rq, so a backlog of stale queries never builds up while the servers are
down; a failing query comes back as ``{"error": ...}``, never as a dead server. Jobs use
rq's JSON serializer: nothing from Redis is unpickled.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

import redis
import structlog
from rq import Queue, SimpleWorker, get_current_job
from rq.exceptions import StopRequested
from rq.job import Job
from rq.results import Result
from rq.serializers import JSONSerializer
from rq.timeouts import TimerDeathPenalty

__all__ = ["QueryServer", "ask", "enqueue", "wait", "QueryTimeout", "queue_name"]

log = structlog.get_logger("memstream.queries")

Handler = Callable[[dict], dict]

# queue name -> handlers of the QueryServer serving it in this process
_HANDLERS: dict[str, dict[str, Handler]] = {}


class QueryTimeout(Exception):
    pass


def queue_name(prefix: str) -> str:
    return f"{prefix}:queries"


def _queue(client: redis.Redis, prefix: str) -> Queue:
    return Queue(queue_name(prefix), connection=client, serializer=JSONSerializer)


def enqueue(client: redis.Redis, prefix: str, request: dict, timeout: float = 10.0) -> Job:
    """Enqueue one query; it is dropped if no server starts it within ``timeout``."""
    ttl = max(1, math.ceil(timeout))
    return _queue(client, prefix).enqueue(
        "workers.queries.answer", {**request, "asked_at": time.time()},
        ttl=ttl, result_ttl=60, failure_ttl=300, job_timeout=30,
        description=f"memstream query {request.get('op', '')!s:.20}")


def wait(job: Job, timeout: float) -> dict:
    """The answer of ``job``, blocking at most ``timeout`` seconds (QueryTimeout)."""
    block_ms = max(1, int(timeout * 1000))
    got = job.connection.xread({Result.get_key(job.id): "0-0"}, block=block_ms)
    if not got:
        raise QueryTimeout(f"no answer within {timeout}s: is the memstream service (or a worker) running?")
    result_id, payload = got[0][1][-1]
    result = Result.restore(job.id, result_id.decode(), payload, connection=job.connection,
                            serializer=JSONSerializer)
    if result.type == Result.Type.SUCCESSFUL and isinstance(result.return_value, dict):
        return result.return_value
    return {"error": f"query failed: {(result.exc_string or '').strip().splitlines()[-1:] or result.type}"}


def ask(client: redis.Redis, prefix: str, request: dict, timeout: float = 10.0) -> dict:
    """Enqueue ``request`` and wait for its answer (QueryTimeout after ``timeout`` s)."""
    return wait(enqueue(client, prefix, request, timeout), timeout)


def answer(request: dict) -> dict:
    """The rq job function: run ``request`` with the handlers of this process's server."""
    started = time.perf_counter()
    job = get_current_job()
    handlers = _HANDLERS.get(job.origin if job is not None else "", {})
    op = request.get("op", "") if isinstance(request, dict) else ""
    handler = handlers.get(op)
    if handler is None:
        out = {"error": f"unknown query op {op!r}"}
    else:
        try:
            out = handler(request)
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
            log.warning("queries.failed", op=op, error=out["error"])
    out["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
    asked_at = request.get("asked_at") if isinstance(request, dict) else None
    if isinstance(asked_at, (int, float)):
        out["queued_ms"] = round(max(0.0, time.time() - asked_at) * 1000 - out["took_ms"], 2)
    return out


class _ThreadWorker(SimpleWorker):
    """An rq worker that runs in a thread of the serving process (no signals, no fork)."""

    death_penalty_class = TimerDeathPenalty

    def _install_signal_handlers(self) -> None:  # only the main thread may set them
        pass

    def heartbeat(self, *args, **kwargs):
        # rq retries a lost Redis forever inside its dequeue loop, which calls this first:
        # the way out when the server is stopping
        if self._stop_requested:
            raise StopRequested()
        return super().heartbeat(*args, **kwargs)


class QueryServer:
    """rq worker threads answering ``P:queries`` with ``handlers`` (op -> callable)."""

    def __init__(self, client: redis.Redis, prefix: str, handlers: dict[str, Handler], threads: int = 2):
        self.url_kwargs = client.connection_pool.connection_kwargs
        self.client = client
        self.name = queue_name(prefix)
        self.prefix = prefix
        self.handlers = handlers
        self.threads = threads
        self._stop = threading.Event()
        self._workers: list[_ThreadWorker] = []
        self._threads: list[threading.Thread] = []

    def _worker(self) -> _ThreadWorker:
        # its own connection: the worker blocks on the queue longer than our socket timeout
        conn = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=self.client.connection_pool.connection_class,
            **{**self.url_kwargs, "socket_timeout": None}))
        return _ThreadWorker([Queue(self.name, connection=conn, serializer=JSONSerializer)],
                             connection=conn, serializer=JSONSerializer, worker_ttl=16)

    def serve_once(self) -> bool:
        """Answer the queued queries, then return (tests, tools): whether any ran."""
        _HANDLERS[self.name] = self.handlers
        return self._worker().work(burst=True, logging_level="WARNING")

    def start(self) -> "QueryServer":
        _HANDLERS[self.name] = self.handlers

        def loop() -> None:
            while not self._stop.is_set():
                worker = self._worker()
                self._workers.append(worker)
                try:
                    worker.work(logging_level="WARNING")
                except Exception as exc:  # Redis gone: rq gives up; come back when it returns
                    log.warning("queries.worker_exited", error=f"{type(exc).__name__}: {exc}")
                finally:
                    self._workers.remove(worker)
                self._stop.wait(1.0)

        for i in range(self.threads):
            t = threading.Thread(target=loop, name=f"memstream-queries-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for worker in list(self._workers):
            worker._stop_requested = True  # checked between jobs (dequeue blocks at most 1 s)
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        if _HANDLERS.get(self.name) is self.handlers:
            del _HANDLERS[self.name]
