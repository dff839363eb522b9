"""Queries answered where the models and stores live (the service or a worker).

The protocol, in full (``P`` = the configured prefix):

- A caller pushes one JSON envelope ``{"id": <32 hex>, "deadline": <unix s>, "req": {...}}``
  on a request list and waits on the answer list of that id (BLPOP). The operator's
  channel is ``P:queries`` (answers on ``P:reply:{id}``), and the request names its
  tenant; a registered tenant's hosts use ``P:t:{tenant}:queries`` (answers on
  ``P:t:{tenant}:reply:{id}``), the only channel its Redis user may write, and the server
  answers there in that tenant's name whatever the request says (see memstream.producers.tenants).
- ``req`` is one of the typed requests below (a msgspec tagged union on ``op`` with its
  limits in the types). The server runs only the handler its table holds for that op:
  no name read from Redis chooses code. An envelope that is too big, not JSON, not one
  of these requests, or out of its limits is refused with an error answer (when its id
  can be read) and counted in ``P:counters:queries``; one whose deadline has passed is
  dropped unanswered and counted (nobody waits for it any more).

Guarantees: ``ask`` returns the answer or raises ``QueryTimeout`` within ``timeout``
seconds (plus one Redis round trip); a failing handler answers ``{"error": ...}``, never
kills a server thread; answers expire after ``ANSWER_TTL`` s if nobody takes them.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import time
import uuid
import weakref
from typing import Annotated, Callable, Literal, Union

import msgspec
import redis
import structlog

from memstream.producers.tenants import TenantRegistry, tenant_space

__all__ = [
    "QueryServer", "ask", "QueryTimeout", "QueryRefused", "Request", "OPS", "decode_envelope",
    "operator_channel", "tenant_channel", "MAX_ENVELOPE_BYTES",
]

log = structlog.get_logger("memstream.queries")

Handler = Callable[[dict], dict]

MAX_ENVELOPE_BYTES = 64 * 1024
MAX_QUERY_CHARS = 16 * 1024
ANSWER_TTL = 60

Name = Annotated[str, msgspec.Meta(max_length=256)]
ItemId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
QueryText = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS)]


class _Request(msgspec.Struct, kw_only=True, tag_field="op", forbid_unknown_fields=True):
    tenant: Annotated[str, msgspec.Meta(max_length=128)] = ""
    agent: Name = "default"
    session: Name = ""
    scope: Name = "current"


class RecallRequest(_Request, tag="recall"):
    query: QueryText
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 12


class SearchRequest(_Request, tag="search"):
    query: QueryText
    kind: Literal["all", "turns", "memories", "facts"] = "all"
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    history: bool = False


class ContextRequest(_Request, tag="context"):
    id: ItemId
    before: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3
    after: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3


class RecentRequest(_Request, tag="recent"):
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5


class FactsRequest(_Request, tag="facts"):
    subject: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    kind: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    history: bool = False
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] = 20


class ExistsRequest(_Request, tag="exists"):
    id: ItemId


class CountRequest(_Request, tag="count"):
    pass


Request = Union[RecallRequest, SearchRequest, ContextRequest, RecentRequest, FactsRequest,
                ExistsRequest, CountRequest]
OPS: tuple[str, ...] = tuple(cls.__struct_config__.tag for cls in Request.__args__)  # type: ignore[attr-defined]


class Envelope(msgspec.Struct, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")]
    deadline: float
    req: Request
    asked_at: float = 0.0


class _Loose(msgspec.Struct):
    id: str = ""


_envelope = msgspec.json.Decoder(Envelope)
_loose = msgspec.json.Decoder(_Loose)
_encoder = msgspec.json.Encoder()


_ID_AT_START = re.compile(rb'^\s*\{\s*"id"\s*:\s*"([0-9a-f]{32})"')


class QueryTimeout(Exception):
    """No answer within the caller's timeout."""


class QueryRefused(ValueError):
    """A request the protocol refuses (too big, malformed, out of its limits)."""

    def __init__(self, reason: str, request_id: str = ""):
        super().__init__(reason)
        self.request_id = request_id


def decode_envelope(raw: bytes) -> Envelope:
    """The envelope in ``raw``; raises QueryRefused (with the id when it can be read)."""
    if len(raw) > MAX_ENVELOPE_BYTES:
        found = _ID_AT_START.search(raw[:200])  # not parsed whole: only its id, if it leads
        raise QueryRefused(f"request of {len(raw)} bytes is over the {MAX_ENVELOPE_BYTES}-byte limit",
                           found.group(1).decode() if found else "")
    try:
        env = _envelope.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise QueryRefused(f"bad request: {exc}", _id_of(raw)) from None
    if not math.isfinite(env.deadline):
        raise QueryRefused("bad request: deadline must be a finite number", env.id)
    return env


def _id_of(raw: bytes) -> str:
    try:
        rid = _loose.decode(raw).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ""
    return rid if isinstance(rid, str) and len(rid) == 32 and all(c in "0123456789abcdef" for c in rid) else ""


# -- channels --------------------------------------------------------------------------
def operator_channel(prefix: str) -> str:
    return f"{prefix}:queries"


def tenant_channel(prefix: str, tenant: str) -> str:
    return f"{tenant_space(prefix, tenant)}:queries"


def reply_key(channel: str, request_id: str) -> str:
    """Where the answer to ``request_id`` on ``channel`` goes: beside the channel, in the
    keyspace of whoever may write that channel (never a key the request names)."""
    return f"{channel.rsplit(':', 1)[0]}:reply:{request_id}"


# Per client (connection pool): the channel it asks on. The operator's credentials may
# write P:queries; a tenant's may not (NOPERM) and use their own channel from then on.
_channels: "weakref.WeakKeyDictionary[redis.ConnectionPool, str]" = weakref.WeakKeyDictionary()


# -- the caller's side -------------------------------------------------------------------
def ask(client: redis.Redis, prefix: str, request: dict, timeout: float = 10.0) -> dict:
    """Send ``request`` (a dict with ``op``) and wait for its answer.

    Raises QueryTimeout when nobody answers within ``timeout`` s, QueryRefused when the
    request is not one the protocol accepts (checked here before sending, so a caller
    learns at once), and ``redis.RedisError`` when Redis cannot be reached."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise QueryRefused(f"timeout must be a positive number of seconds, got {timeout!r}")
    body = dict(request)
    if isinstance(body.get("query"), str):
        body["query"] = body["query"][:MAX_QUERY_CHARS]
    try:
        req = msgspec.convert(body, Request)
    except msgspec.ValidationError as exc:
        raise QueryRefused(f"bad request: {exc}") from None
    now = time.time()
    env = Envelope(id=uuid.uuid4().hex, deadline=now + timeout, req=req, asked_at=now)
    raw = _encoder.encode(env)
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise QueryRefused(f"request of {len(raw)} bytes is over the {MAX_ENVELOPE_BYTES}-byte limit")
    tenant = getattr(req, "tenant", "") or ""
    pool = client.connection_pool
    channel = _channels.get(pool, operator_channel(prefix))
    try:
        client.rpush(channel, raw)
    except redis.exceptions.NoPermissionError:
        if not tenant:
            raise
        channel = tenant_channel(prefix, tenant)
        client.rpush(channel, raw)
        _channels[pool] = channel
    key = reply_key(channel, env.id)
    got = client.blpop([key], timeout=max(0.001, timeout))
    if not got:
        try:
            client.delete(key)  # an answer racing the timeout must not linger
        except redis.RedisError:
            pass
        raise QueryTimeout(f"no answer within {timeout:g}s: is the memstream service (or a worker) running?")
    try:
        answer = json.loads(got[1])
    except ValueError:
        return {"error": "the query server sent an answer that is not JSON"}
    return answer if isinstance(answer, dict) else {"error": "the query server sent an answer that is not an object"}


# -- the server's side -------------------------------------------------------------------
class QueryServer:
    """Threads answering the operator's channel and every registered tenant's channel
    with ``handlers`` (op -> callable taking the request as a dict).

    A request on a tenant's channel is answered in that tenant's name: its ``tenant``
    field is replaced by the channel's tenant before any handler sees it."""

    TENANTS_EVERY = 5.0  # seconds between re-reads of the tenant registry

    def __init__(self, client: redis.Redis, prefix: str, handlers: dict[str, Handler], threads: int = 2):
        unknown = set(handlers) - set(OPS)
        if unknown:
            raise ValueError(f"handlers for ops the protocol does not have: {sorted(unknown)}")
        self.client = client
        self.prefix = prefix
        self.handlers = dict(handlers)
        self.threads = threads
        self.counters_key = f"{prefix}:counters:queries"
        self.registry = TenantRegistry(client, prefix)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._channels: dict[str, str] = {operator_channel(prefix): ""}  # channel -> tenant ("" = operator)
        self._channels_at = 0.0
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    # the table of channels to serve
    def channels(self) -> dict[str, str]:
        now = time.monotonic()
        if now - self._channels_at >= self.TENANTS_EVERY:
            self._channels_at = now
            try:
                tenants = self.registry.all()
                self._channels = {operator_channel(self.prefix): "",
                                  **{tenant_channel(self.prefix, t): t for t in tenants}}
            except redis.RedisError as exc:
                log.warning("queries.tenants_unreadable", error=f"{type(exc).__name__}: {exc}")
        return self._channels

    def _count(self, pipe_or_client, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1
        try:
            pipe_or_client.hincrby(self.counters_key, what, 1)
        except redis.RedisError:
            pass

    def handle(self, client: redis.Redis, channel: str, raw: bytes) -> dict | None:
        """Answer one raw envelope from ``channel``; returns the answer sent (None: none)."""
        started = time.perf_counter()
        channels = self.channels()
        tenant = channels.get(channel, "")
        try:
            env = decode_envelope(raw)
        except QueryRefused as exc:
            self._count(client, "refused")
            log.warning("queries.refused", channel=channel, reason=str(exc)[:300])
            if exc.request_id:
                self._reply(client, channel, exc.request_id, {"error": str(exc)[:1000]})
            return None
        if env.deadline < time.time():
            self._count(client, "expired")
            return None
        request = msgspec.to_builtins(env.req)
        if tenant:  # a tenant's channel: its tenant, whatever the request says
            request["tenant"] = tenant
        op = request["op"]
        handler = self.handlers.get(op)
        if handler is None:
            out = {"error": f"this server does not answer {op!r} requests"}
            self._count(client, "unsupported")
        elif tenant and op == "count":  # counts every tenant's items: the operator's only
            out = {"error": "count is answered on the operator's channel only"}
            self._count(client, "refused")
        elif not request.get("tenant") and op != "count":
            out = {"error": "the request has no tenant"}
            self._count(client, "refused")
        else:
            try:
                out = handler(request)
                if not isinstance(out, dict):
                    out = {"error": f"{op} returned no answer"}
            except Exception as exc:
                out = {"error": f"{type(exc).__name__}: {exc}"}
                log.warning("queries.failed", op=op, error=out["error"][:300])
                self._count(client, "failed")
        out["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
        if env.asked_at and math.isfinite(env.asked_at):
            out["queued_ms"] = round(max(0.0, time.time() - env.asked_at) * 1000 - out["took_ms"], 2)
        self._reply(client, channel, env.id, out)
        self._count(client, "answered")
        return out

    def _reply(self, client: redis.Redis, channel: str, request_id: str, answer: dict) -> None:
        key = reply_key(channel, request_id)
        pipe = client.pipeline(transaction=True)
        pipe.rpush(key, json.dumps(answer, default=str))
        pipe.expire(key, ANSWER_TTL)
        pipe.execute()

    def serve_once(self, timeout: float = 0.01) -> bool:
        """Answer the queued requests, then return (tests, tools): whether any ran."""
        ran = False
        while True:
            got = self.client.blpop(list(self.channels()), timeout=timeout)
            if not got:
                return ran
            self.handle(self.client, got[0].decode() if isinstance(got[0], bytes) else got[0], got[1])
            ran = True

    def _loop(self) -> None:
        # its own connection: it blocks on the channels longer than the shared socket timeout
        kwargs = {**self.client.connection_pool.connection_kwargs, "socket_timeout": None}
        conn = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=self.client.connection_pool.connection_class, **kwargs))
        backoff = 0.0
        while not self._stop.is_set():
            try:
                keys = list(self.channels())
                random.shuffle(keys)  # BLPOP serves the first non-empty key: no channel goes first always
                got = conn.blpop(keys, timeout=1)
                backoff = 0.0
                if got:
                    channel = got[0].decode() if isinstance(got[0], bytes) else got[0]
                    self.handle(conn, channel, got[1])
            except Exception as exc:  # Redis gone or refusing: come back, never die
                backoff = min(5.0, max(0.2, backoff * 2))
                log.warning("queries.server_error", error=f"{type(exc).__name__}: {exc}", retry_in=backoff)
                self._stop.wait(backoff * (0.5 + random.random() / 2))
        conn.close()

    def start(self) -> "QueryServer":
        for i in range(self.threads):
            t = threading.Thread(target=self._loop, name=f"memstream-queries-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
