"""Asking a query: push a typed request on a channel, wait for its answer.

Guarantee: ``ask`` returns the answer or raises ``QueryTimeout`` within ``timeout`` seconds
(plus one Redis round trip). Light to import: the provider asks through this module
without loading any store or model.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from typing import Any, get_args

import msgspec
import redis

from memstream.core import TransientError, keys, threads
from memstream.query.protocol import OPS, Envelope, QueryRefused, Request, decode_envelope

_REQUESTS = get_args(Request)

_encoder = msgspec.json.Encoder()

ANSWER_TTL = 60


class QueryTimeout(TransientError):
    """No answer within the caller's timeout: no query server is running or all are busy."""


# -- channels --------------------------------------------------------------------------
def operator_channel(prefix: str) -> str:
    return keys.queries(prefix)


def tenant_channel(prefix: str, tenant: str) -> str:
    return keys.tenant_queries(prefix, tenant)


def reply_key(channel: str, request_id: str) -> str:
    """Where the answer to ``request_id`` on ``channel`` goes: beside the channel, in the
    keyspace of whoever may write that channel (never a key the request names)."""
    return keys.reply(channel, request_id)


# Per client (connection pool): the channel it asks on. The operator's credentials may
# write P:queries; a tenant's may not (NOPERM) and use their own channel from then on.
_channels: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


# -- the caller's side -------------------------------------------------------------------
def ask(client: redis.Redis, prefix: str, request: Request, timeout: float = 10.0) -> dict[str, Any]:
    """Send ``request`` (one of the protocol's typed requests) and wait for its answer.

    Raises QueryTimeout when nobody answers within ``timeout`` s, QueryRefused when the
    request is not one the protocol accepts (checked here before sending, by the server's
    own decoder, so a caller learns at once), and ``redis.RedisError`` when Redis cannot
    be reached."""
    raw, request_id, tenant = _envelope(request, timeout)
    channel = _push(client, prefix, raw, tenant)
    key = reply_key(channel, request_id)
    deadline, step = time.monotonic() + timeout, _longest_block(client)
    while (left := deadline - time.monotonic()) > 0:
        got = client.blpop([key], timeout=max(0.001, min(left, step)))
        if got:
            return _answer(got[1])
    _forget(client, key)
    raise _timeout(timeout)


def _longest_block(client: redis.Redis) -> float:
    """The longest BLPOP ``client``'s connections can wait through: half their socket
    timeout. redis-py does not lengthen a connection's socket timeout for a blocking command,
    so one wait past it is a ``TimeoutError`` while the answer is still coming (a search
    that takes 3 s on a client made with a 2 s timeout); ``ask`` waits in steps below it."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    socket_timeout = kwargs.get("socket_timeout", 1.0)  # a cluster client: its nodes' own pools
    return math.inf if socket_timeout is None else max(0.05, float(socket_timeout) / 2)


def _envelope(request: Request, timeout: float) -> tuple[bytes, str, str]:
    """(the encoded envelope, its request id, the request's tenant); QueryRefused if bad.
    A Struct is not checked when it is made: its limits are checked here, by decoding the
    envelope as the server will (``decode_envelope``)."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):  # type: ignore[redundant-expr]  # for untyped callers
        raise QueryRefused(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not isinstance(request, _REQUESTS):
        raise QueryRefused(f"a request is one of the protocol's Structs ({', '.join(OPS)}), not {type(request).__name__}")
    now = time.time()
    env = Envelope(id=uuid.uuid4().hex, deadline=now + timeout, req=request, asked_at=now)
    raw = _encoder.encode(env)
    decode_envelope(raw)  # QueryRefused: too big, or out of the protocol's limits
    return raw, env.id, request.tenant


def _push(client: redis.Redis, prefix: str, raw: bytes, tenant: str) -> str:
    """Push the envelope on the channel this client may write; returns the channel."""
    pool = getattr(client, "connection_pool", client)  # a cluster client has a pool per node: itself
    channel = _channels.get(pool, operator_channel(prefix))
    try:
        client.rpush(channel, raw)
    except redis.exceptions.NoPermissionError:
        if not tenant:
            raise
        channel = tenant_channel(prefix, tenant)
        client.rpush(channel, raw)
        _channels[pool] = channel
    return channel


def _forget(client: redis.Redis, key: str) -> None:
    try:
        client.delete(key)  # an answer racing the timeout must not linger
    except redis.RedisError:
        pass


def _timeout(timeout: float) -> QueryTimeout:
    return QueryTimeout(f"no answer within {timeout:g}s: is the memstream service (or a worker) running?")


def _answer(raw: bytes | str) -> dict[str, Any]:
    """The answer the query server sent (untrusted: anything but a JSON object is an error)."""
    try:
        answer = json.loads(raw)
    except ValueError:
        return {"error": "the query server sent an answer that is not JSON"}
    return answer if isinstance(answer, dict) else {"error": "the query server sent an answer that is not an object"}


# -- one process, many callers: a bounded number of connections ---------------------------
class _Waiter:
    __slots__ = ("done", "answer", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: bytes | str | None = None
        self.error = ""


class Asker:
    """``ask`` for every caller of a process on one Redis URL, over a bounded number of
    connections whatever the number of callers (a Hermes gateway runs hundreds of
    providers in one process, each with its recall thread and its tool calls).

    Requests go out on a pool of at most ``COMMANDS`` connections, each used for one
    short command at a time. Every answer is awaited by ONE reader thread on ONE
    connection: a ``BLPOP`` over the reply keys of all pending requests (Redis returns the
    key with the value, so the answer goes to its caller). A request added while the reader
    is blocked wakes it with one element pushed on the process's wake key (beside the
    channel, in the same keyspace; it expires), sent in the request's round trip. A caller
    that gives up deletes its reply key, as ``ask`` does (an answer arriving after that
    expires after ``ANSWER_TTL`` s; one the reader took meanwhile is dropped). The reader waits on nothing while no request is
    pending, and re-reads its keys every ``BLOCK_S`` s at the latest.

    ``shared(url)`` returns the process's asker for ``url`` (reference-counted); the last
    ``release`` ends the reader thread (after its current ``BLPOP``, at most ``BLOCK_S``
    s) and closes every connection. Guarantees as ``ask``'s; while Redis is unreachable a
    request fails with ``redis.ConnectionError`` at once, and pending ones when the reader
    finds out."""

    COMMANDS = 4
    ASKS, REPLIES = "memstream-asks", "memstream-replies"  # the connections' names (CLIENT LIST)
    BLOCK_S = 1.0
    RETRY_S = 0.5  # the reader's pause after a failed read, while requests are pending
    WAKE_TTL = 60

    _registry: dict[str, Asker] = {}
    _registry_lock = threading.Lock()

    def __init__(self, url: str, timeout: float = 5.0, tls: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.timeout = timeout
        # tls: redis-py's TLS arguments for a rediss:// URL (``producers.tls_kwargs``)
        self.tls = dict(tls or {})
        self.pool = redis.BlockingConnectionPool.from_url(
            url,
            max_connections=self.COMMANDS,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=min(timeout, 2.0),
            health_check_interval=30,
            client_name=self.ASKS,
            **self.tls,
        )
        self.client = redis.Redis(connection_pool=self.pool)
        self._cv = threading.Condition()
        self._waiting: dict[bytes, _Waiter] = {}
        self._wake_keys: dict[str, bytes] = {}  # channel -> this process's wake key beside it
        self._writable: set[str] = set()  # channels a push has succeeded on
        self._blocking = False  # the reader is in a BLPOP over a snapshot of the keys
        self._woken = False  # a wake element was pushed since that snapshot
        self._reader: threading.Thread | None = None
        self._refs = 0
        self._closed = False
        self._id = uuid.uuid4().hex
        self.counters = {"asked": 0, "answered": 0, "timed_out": 0, "late_answers": 0, "wakes": 0, "read_failures": 0}

    # -- sharing ---------------------------------------------------------------------------
    @classmethod
    def shared(cls, url: str, timeout: float = 5.0, tls: Mapping[str, Any] | None = None) -> Asker:
        """The process's asker for ``url`` (made with ``timeout`` and ``tls`` by its first caller)."""
        with cls._registry_lock:
            asker = cls._registry.get(url)
            if asker is None or asker._closed:
                asker = cls._registry[url] = cls(url, timeout, tls)
            asker._refs += 1
            return asker

    def release(self) -> None:
        """Drop one reference; the last one closes (without waiting for the reader)."""
        with self._registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            if self._registry.get(self.url) is self:
                del self._registry[self.url]
        self.close()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            waiting, self._waiting = self._waiting, {}
            self._cv.notify_all()
        for waiter in waiting.values():
            waiter.error = "the query client was closed"
            waiter.done.set()
        self.pool.disconnect()

    # -- asking ----------------------------------------------------------------------------
    def ping(self) -> bool:
        return bool(self.client.ping())

    def ask(self, prefix: str, request: Request, timeout: float = 10.0) -> dict[str, Any]:
        """As ``ask``, over the process's connections (see the class docstring)."""
        raw, request_id, tenant = _envelope(request, timeout)
        channel = _channels.get(self.pool, operator_channel(prefix))
        waiter = _Waiter()
        if channel in self._writable:  # the usual case: one round trip for request and wake
            key = reply_key(channel, request_id).encode()
            wake = self._register(key, waiter, channel)
            try:
                pipe = self.client.pipeline(transaction=False)
                pipe.rpush(channel, raw)
                self._wake(pipe, wake)
                pipe.execute()
            except BaseException:
                self._unregister(key)
                raise
        else:  # first push on this channel: it may be refused (NOPERM), so nothing is registered before
            channel = _push(self.client, prefix, raw, tenant)
            with self._cv:
                self._writable.add(channel)
            key = reply_key(channel, request_id).encode()
            wake = self._register(key, waiter, channel)
            if wake is not None:
                try:
                    pipe = self.client.pipeline(transaction=False)
                    self._wake(pipe, wake)
                    pipe.execute()
                except BaseException:
                    self._unregister(key)
                    raise
        if not waiter.done.wait(timeout):
            self._unregister(key)
            if not waiter.done.is_set():
                self.counters["timed_out"] += 1
                _forget(self.client, key.decode())
                raise _timeout(timeout)
        if waiter.answer is None:
            raise redis.ConnectionError(waiter.error or "no answer")
        self.counters["answered"] += 1
        return _answer(waiter.answer)

    def _wake(self, pipe: Any, wake: bytes | None) -> None:
        """Queue on ``pipe`` the element that wakes the blocked reader (``wake`` from ``_register``)."""
        if wake is not None:
            pipe.rpush(wake, b"")
            pipe.expire(wake, self.WAKE_TTL)

    def _register(self, key: bytes, waiter: _Waiter, channel: str) -> bytes | None:
        """Add a pending request; returns the wake key to push on if the reader must re-read
        its keys (it is blocked on a snapshot without this one, and nobody woke it yet)."""
        with self._cv:
            if self._closed:
                raise redis.ConnectionError("the query client was closed")
            wake_key = self._wake_keys.get(channel)
            if wake_key is None:
                wake_key = self._wake_keys[channel] = reply_key(channel, f"wake-{self._id}").encode()
            self._waiting[key] = waiter
            self.counters["asked"] += 1
            if self._reader is None or not self._reader.is_alive():
                self._reader = threads.spawn(self._read, name="memstream-replies")
                self._reader.start()
            self._cv.notify()
            if self._blocking and not self._woken:
                self._woken = True
                self.counters["wakes"] += 1
                return wake_key
            return None

    def _unregister(self, key: bytes) -> None:
        with self._cv:
            self._waiting.pop(key, None)

    # -- the reader thread -----------------------------------------------------------------
    def _read(self) -> None:
        conn: redis.Redis | None = None
        try:
            while True:
                with self._cv:
                    while not self._waiting and not self._closed:
                        self._cv.wait()
                    if self._closed:
                        return
                    keys_now = list(self._waiting) + list(self._wake_keys.values())
                    self._blocking, self._woken = True, False
                try:
                    if conn is None:
                        conn = redis.Redis.from_url(
                            self.url,
                            socket_timeout=self.BLOCK_S + self.timeout,
                            socket_connect_timeout=min(self.timeout, 2.0),
                            client_name=self.REPLIES,
                            single_connection_client=True,
                            **self.tls,
                        )
                    got = conn.blpop(keys_now, timeout=self.BLOCK_S)
                except redis.RedisError as exc:
                    _close(conn)
                    conn = None
                    self._fail_pending(f"{type(exc).__name__}: {exc}")
                    continue
                finally:
                    with self._cv:
                        self._blocking = False
                if got:
                    self._deliver(got[0], got[1])
        finally:
            _close(conn)

    def _deliver(self, key: bytes | str, value: bytes | str) -> None:
        key = key if isinstance(key, bytes) else key.encode()
        with self._cv:
            waiter = self._waiting.pop(key, None)
            is_wake = key in self._wake_keys.values()
        if waiter is not None:
            waiter.answer = value
            waiter.done.set()
        elif not is_wake:
            self.counters["late_answers"] += 1

    def _fail_pending(self, error: str) -> None:
        """Redis failed the reader: every pending request fails now (their callers retry)."""
        self.counters["read_failures"] += 1
        with self._cv:
            failed, self._waiting = self._waiting, {}
            if not self._closed:
                self._cv.wait(self.RETRY_S)  # no request pending now: wakes at the next one anyway
        for waiter in failed.values():
            waiter.error = f"Redis unreachable: {error}"
            waiter.done.set()

    def stats(self) -> dict[str, int]:
        return dict(self.counters)


def _close(conn: redis.Redis | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:  # closing a broken connection must not fail the reader
            pass
