"""Queries answered where the models and stores live (the service or a worker).

A caller pushes a JSON request on ``P:queries`` with a reply key; a ``QueryServer``
thread pops it, runs it and pushes the JSON answer on the reply key (expiring after a
minute). Callers never open the store or load the embedder themselves.

Guarantee: ``ask`` returns the answer or raises ``QueryTimeout`` within ``timeout``
seconds; a failing query comes back as ``{"error": ...}``, never as a dead server.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import redis
import structlog

__all__ = ["QueryServer", "ask", "QueryTimeout"]

log = structlog.get_logger("memstream.queries")


class QueryTimeout(Exception):
    pass


def ask(client: redis.Redis, prefix: str, request: dict, timeout: float = 10.0) -> dict:
    reply = f"{prefix}:reply:{uuid.uuid4().hex}"
    client.rpush(f"{prefix}:queries", json.dumps({**request, "reply": reply, "asked_at": time.time()}))
    got = client.blpop([reply], timeout=max(1, int(round(timeout))))
    if got is None:
        raise QueryTimeout(f"no answer within {timeout}s: is the memstream service (or a worker) running?")
    return json.loads(got[1])


class QueryServer:
    def __init__(self, client: redis.Redis, prefix: str, handlers: dict):
        self.client = client
        self.key = f"{prefix}:queries"
        self.handlers = handlers
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def handle(self, raw: bytes | str) -> None:
        try:
            request = json.loads(raw)
        except ValueError:
            log.warning("queries.malformed_request")
            return
        reply = request.get("reply")
        if not isinstance(reply, str):
            return
        started = time.perf_counter()
        try:
            handler = self.handlers[request.get("op", "")]
            answer = handler(request)
        except KeyError:
            answer = {"error": f"unknown query op {request.get('op')!r}"}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
            log.warning("queries.failed", op=request.get("op"), error=answer["error"])
        answer["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(reply, json.dumps(answer, default=str))
        pipe.expire(reply, 60)
        pipe.execute()

    def serve_once(self, timeout: float = 1.0) -> bool:
        got = self.client.blpop([self.key], timeout=max(1, int(timeout)))
        if got is None:
            return False
        self.handle(got[1])
        return True

    def start(self) -> "QueryServer":
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.serve_once()
                except (redis.ConnectionError, redis.TimeoutError):
                    self._stop.wait(1.0)
        self._thread = threading.Thread(target=loop, name="memstream-queries", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(3)
