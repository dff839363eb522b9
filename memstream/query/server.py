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
kills a server thread; whatever a request holds (deep nesting included) is answered or
refused and counted, never a backoff of the serving thread (only a Redis failure is); the
log keeps a refusal's kind and size, never the request's text; answers expire after ``ANSWER_TTL`` s if nobody takes them. The
seconds each handler took are reported to the process's observer (``memstream.core.observe``).
"""

from __future__ import annotations

import math
import queue
import random
import threading
import time
from typing import Any

import msgspec
import redis
import structlog

from memstream.core import as_str, backoff_delay, keys, observe, threads
from memstream.producers import TenantRegistry
from memstream.query.client import (
    ANSWER_TTL,
    operator_channel,
    reply_key,
    tenant_channel,
)
from memstream.query.protocol import (
    LATE_SHED,
    OP_OF,
    OPS,
    RERANK_SHED,
    Answer,
    BatchHandler,
    Envelope,
    Handlers,
    QueryRefused,
    Refusal,
    Request,
    SearchAnswer,
    SearchRequest,
    decode_envelope,
)

__all__ = ["QueryServer"]

log = structlog.get_logger("memstream.queries")

# an answer as JSON; a value of a stored payload JSON has no type for becomes its text
_encode = msgspec.json.Encoder(enc_hook=str).encode


# -- the server's side -------------------------------------------------------------------
class QueryServer:
    """Threads answering the operator's channel and every registered tenant's channel
    with ``handlers`` (``Handlers``: per op, a callable taking its typed request).

    A request on a tenant's channel is answered in that tenant's name: its ``tenant``
    field is replaced by the channel's tenant before any handler sees it."""

    TENANTS_EVERY = 5.0  # seconds between re-reads of the tenant registry

    # Requests taken from a channel in one round trip and answered together. Small enough that
    # the server's threads share a burst (one thread's native search overlaps another's Python):
    # with 32, one thread took all 16 waiting callers' requests and the other idled (bench reads,
    # bge-small: recalls/s x0.79 of one at a time despite x0.77 the CPU); a model call of 8
    # questions already costs about half of 8 single calls a question.
    BATCH_MAX = 8

    # Reranked searches (the cross-encoder: a few hundred ms of two cores each) are answered by
    # a lane of their own, ``SLOW_LANES`` threads beside the serving ones: a serving thread hands
    # one over and goes on, so a recall (prefetch's budget is 150 ms) never waits behind one. Past
    # ``SLOW_WAITING`` handed over and not yet started, a reranked search is answered at once
    # without the rerank (the prefetch's order; ``reranked`` false, ``rerank_error`` says why):
    # with every search waiting its turn, 500 agents asking 10 a second kept both serving threads
    # in the cross-encoder, tool searches at their 5 s timeout and prefetch fresh in 47% of
    # turns (BENCHMARKS.md, "Fleet": "The rerank's lane").
    SLOW_LANES = 1
    SLOW_WAITING = 1
    # The lane's thread (and the cross-encoder's helper threads it starts, which take its nice
    # value) runs LANE_NICE levels below the serving threads, as low as the dense stage
    # (``EmbedConsumer.NICE``): where the cores are short, a prefetch (150 ms) goes first and a
    # tool search (a second or so) waits; more of them are answered in the prefetch's order
    # (``rerank_shed``). Measured with the default model at 300 agents on two CPUs, the lane at
    # the serving threads' priority beside it: prefetch fresh in budget 98.6 and 98.7 % against
    # 96.9 and 97.7 % (BENCHMARKS.md, "The rerank's lane below the prefetch").
    LANE_NICE = 10
    BUSY = "the reranker was busy: the prefetch's order"

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        handlers: Handlers,
        threads: int = 2,
        batched: dict[str, BatchHandler] | None = None,
        batch_max: int = BATCH_MAX,
        hurried: dict[str, BatchHandler] | None = None,
        hurry_after_s: float = 0.0,
    ) -> None:
        """``hurried``: per op, the batch handler for a take in which a request waited on the
        list longer than ``hurry_after_s`` (read from its ``asked_at``; 0: never): the same
        answers without their optional costly step (recalls without the late interaction),
        each counted ``late_shed``. The whole take's, since its answers leave together."""
        if not isinstance(handlers, Handlers):  # a table keyed by names read from elsewhere: refused
            raise TypeError(f"handlers must be a Handlers table, got {type(handlers).__name__}")
        unknown = (set(batched or ()) | set(hurried or ())) - set(OPS)
        if unknown:
            raise ValueError(f"batch handlers for ops the protocol does not have: {sorted(unknown)}")
        self.client = client
        self.prefix = prefix
        self.handlers = handlers
        self.batched = {op: fn for op, fn in (batched or {}).items() if handlers.of(op) is not None}
        self.batch_max = max(1, int(batch_max))
        self.hurry_after_s = max(0.0, float(hurry_after_s))
        self.hurried = {op: fn for op, fn in (hurried or {}).items() if handlers.of(op) is not None} if self.hurry_after_s else {}
        self.threads = threads
        self.counters_key = keys.query_counters(prefix)
        self.registry = TenantRegistry(client, prefix)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._channels: dict[str, str] = {operator_channel(prefix): ""}  # channel -> tenant ("" = operator)
        self._channels_at = 0.0
        self.counts: dict[str, int] = {}
        self.backoffs = 0  # times a serving thread backed off (a Redis failure), never for a request
        self._lock = threading.Lock()
        # reranked searches handed to the lane: (channel, envelope, request); only while it runs
        self._slow: queue.Queue[tuple[str, Envelope, SearchRequest]] = queue.Queue()
        self._lanes: list[threading.Thread] = []
        self._lanes_stop = threading.Event()  # set once the serving threads stopped handing over

    # the table of channels to serve
    def channels(self) -> dict[str, str]:
        now = time.monotonic()
        if now - self._channels_at >= self.TENANTS_EVERY:
            self._channels_at = now
            try:
                tenants = self.registry.all()
                channels = {tenant_channel(self.prefix, t): t for t in tenants}
                if channels:  # a tenant's channel its user made another type would fail every BLPOP: left out
                    pipe = self.client.pipeline(transaction=False)
                    for channel in channels:
                        pipe.type(channel)
                    for channel, kind in zip(list(channels), pipe.execute()):
                        if as_str(kind) not in ("list", "none"):
                            del channels[channel]
                self._channels = {operator_channel(self.prefix): "", **channels}
            except redis.RedisError as exc:
                log.warning("queries.tenants_unreadable", error=f"{type(exc).__name__}: {exc}")
        return self._channels

    def _count(self, pipe_or_client: redis.Redis, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + n
        try:
            pipe_or_client.hincrby(self.counters_key, what, n)
        except redis.RedisError:
            pass

    def handle(self, client: redis.Redis, channel: str, raw: bytes) -> Answer | None:
        """Answer one raw envelope from ``channel``; returns the answer sent (None: none)."""
        return self.handle_batch(client, channel, [raw])[0]

    def handle_batch(self, client: redis.Redis, channel: str, raws: list[bytes]) -> list[Answer | None]:
        """Answer the raw envelopes taken together from ``channel``, each as ``handle`` would
        (refused, expired, failed: that one alone), and return the answers sent in order
        (None: none). The requests of an op with a batch handler go to it in one call (one
        model call, one facts lookup); the answers leave in one transaction. While the lane
        runs (``start``), a reranked search is handed to it (its answer then leaves from there,
        None here) or, with the lane's queue full, answered without the rerank."""
        started = time.perf_counter()
        tenant = self.channels().get(channel, "")
        answers: list[Answer | None] = [None] * len(raws)
        envelopes: list[Envelope | None] = [None] * len(raws)
        waiting: dict[str, list[tuple[int, Request]]] = {}  # op -> (position, request) to run
        shed: list[int] = []  # reranked searches answered without the rerank (the lane was full)
        late_by = time.time() - self.hurry_after_s  # asked before this: waited too long
        behind: set[str] = set()  # ops with a request in the take that waited too long
        for i, raw in enumerate(raws):
            admitted = self._admit(client, channel, tenant, raw)
            if admitted is None:
                continue
            env, request, refusal = admitted
            if refusal is not None:
                envelopes[i], answers[i] = env, refusal
                continue
            if isinstance(request, SearchRequest) and request.rerank and self._lanes:
                if self._slow.qsize() < self.SLOW_WAITING:
                    self._slow.put((channel, env, request))  # answered by the lane
                    continue
                request = msgspec.structs.replace(request, rerank=False)
                shed.append(i)
            envelopes[i] = env
            op = OP_OF[type(request)]
            if op in self.hurried and 0 < env.asked_at < late_by:
                behind.add(op)
            waiting.setdefault(op, []).append((i, request))
        # the answers of a take leave together: one request that waited too long hurries them all
        for op, group in waiting.items():
            for i, out in zip((i for i, _ in group), self._run(client, op, [r for _, r in group], op in behind)):
                answers[i] = out
        for i in shed:
            answer = answers[i]
            if isinstance(answer, SearchAnswer):
                answer.reranked, answer.rerank_error = False, self.BUSY
        took = round((time.perf_counter() - started) * 1000, 2)
        sent = [(env.id, _timed(answer, env, took)) for env, answer in zip(envelopes, answers) if env and answer]
        if sent:
            self._reply_many(client, channel, sent, counted="answered")
        if shed:  # counted with the server's others (P:counters:queries)
            self._count(client, RERANK_SHED, len(shed))
        if behind:
            self._count(client, LATE_SHED, sum(len(waiting[op]) for op in behind))
        return answers

    def _lane(self) -> None:
        """Answer the reranked searches handed over, one at a time, until the server stops
        and none is left (a search handed over is answered, not dropped with the lane). A
        request whose deadline passed while it waited is dropped and counted, as on the list.
        Runs ``LANE_NICE`` levels below the process (where a thread has its own priority)."""
        threads.lower_priority(self.LANE_NICE)
        while not (self._lanes_stop.is_set() and self._slow.empty()):
            try:
                channel, env, request = self._slow.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                if env.deadline < time.time():
                    self._count(self.client, "expired")
                    continue
                started = time.perf_counter()
                answer = self._run_one(self.client, "search", request)
                took = round((time.perf_counter() - started) * 1000, 2)
                self._reply(self.client, channel, env.id, _timed(answer, env, took), counted="answered")
            except Exception as exc:  # noqa: BLE001  Redis gone: that answer is lost (its caller times out)
                self._count(self.client, "failed")
                log.warning("queries.lane_failed", error=type(exc).__name__)

    def _admit(
        self, client: redis.Redis, channel: str, tenant: str, raw: bytes
    ) -> tuple[Envelope, Request, Refusal | None] | None:
        """The envelope, its request (in the channel's tenant's name) and, when the request
        is not to run, the error answer it gets; None for one refused or expired (counted,
        and a refusal answered when its id can be read)."""
        try:
            env = decode_envelope(raw)
        except QueryRefused as exc:
            self._count(client, "refused")
            # the refusal's kind and size, never its message: it may quote the request's values
            log.warning("queries.refused", channel=channel, kind=exc.kind, bytes=len(raw))
            if exc.request_id:
                self._reply(client, channel, exc.request_id, Refusal(error=str(exc)[:1000]))
            return None
        if env.deadline < time.time():
            self._count(client, "expired")
            return None
        request = env.req
        if tenant:  # a tenant's channel: its tenant, whatever the request says
            request.tenant = tenant
        op = OP_OF[type(request)]
        if self.handlers.of(op) is None:
            self._count(client, "unsupported")
            return env, request, Refusal(error=f"this server does not answer {op!r} requests")
        if tenant and op == "count":  # counts every tenant's items: the operator's only
            self._count(client, "refused")
            return env, request, Refusal(error="count is answered on the operator's channel only")
        if not request.tenant and op != "count":
            self._count(client, "refused")
            return env, request, Refusal(error="the request has no tenant")
        return env, request, None

    def _run(self, client: redis.Redis, op: str, requests: list[Request], hurry: bool = False) -> list[Answer]:
        """The answers of ``op``'s handler to ``requests``, in order: through its batch
        handler when it has one and there are several, else one by one (``hurry``: through
        its hurried handler, one request or several). A batch that fails as a whole is
        answered again one by one, so a request that breaks a handler fails alone."""
        batch = self.hurried.get(op) if hurry else self.batched.get(op)
        if batch is not None and (hurry or len(requests) > 1):
            handling = time.perf_counter()
            try:
                outs = list(batch(requests))
            except Exception as exc:  # noqa: BLE001  answered one by one below: the bad one fails alone
                log.warning("queries.batch_failed", op=op, size=len(requests), error=type(exc).__name__)
            else:
                if len(outs) == len(requests):
                    each = (time.perf_counter() - handling) / len(requests)
                    answers = []
                    for out in outs:
                        if not isinstance(out, Answer):
                            out = Refusal(error=f"{op} returned no answer")
                        observe.answered(op, each)
                        answers.append(out)
                    return answers
        return [self._run_one(client, op, request, hurry) for request in requests]

    def _run_one(self, client: redis.Redis, op: str, request: Request, hurry: bool = False) -> Answer:
        handler = self.handlers.of(op)
        assert handler is not None  # _admit refused the ops without one
        hurried = self.hurried.get(op) if hurry else None
        handling = time.perf_counter()
        out: Answer
        try:
            out = hurried([request])[0] if hurried is not None else handler(request)
            if not isinstance(out, Answer):
                out = Refusal(error=f"{op} returned no answer")
        except Exception as exc:
            out = Refusal(error=f"{type(exc).__name__}: {exc}")
            log.warning("queries.failed", op=op, error=type(exc).__name__)  # the message may quote the request
            self._count(client, "failed")
        observe.answered(op, time.perf_counter() - handling)
        return out

    def _reply(self, client: redis.Redis, channel: str, request_id: str, answer: Answer, counted: str = "") -> None:
        """Send ``answer``; with ``counted``, count it in the same round trip."""
        self._reply_many(client, channel, [(request_id, answer)], counted)

    def _reply_many(self, client: redis.Redis, channel: str, answers: list[tuple[str, Answer]], counted: str = "") -> None:
        """Send each ``(request id, answer)`` in one transaction; with ``counted``, count them
        in it. An answer key a tenant's user made another type gets no answer (its own to break)."""
        pipe = client.pipeline(transaction=True)
        for request_id, answer in answers:
            key = reply_key(channel, request_id)
            pipe.rpush(key, _encode(answer))
            pipe.expire(key, ANSWER_TTL)
        if counted:
            pipe.hincrby(self.counters_key, counted, len(answers))
        for reply in pipe.execute(raise_on_error=False):
            if isinstance(reply, redis.ResponseError) and not isinstance(reply, redis.exceptions.NoPermissionError):
                if channel != operator_channel(self.prefix):
                    continue
            if isinstance(reply, Exception):
                raise reply
        if counted:
            with self._lock:
                self.counts[counted] = self.counts.get(counted, 0) + len(answers)

    def serve_once(self, timeout: float = 0.01) -> bool:
        """Answer the queued requests, then return (tests, tools): whether any ran."""
        ran = False
        while True:
            got = self._take(self.client, list(self.channels()), timeout)
            if not got:
                return ran
            self.handle_batch(self.client, *got)
            ran = True

    def _loop(self) -> None:
        # its own connection: it blocks on the channels longer than the shared socket timeout;
        # the same class and arguments (credentials, TLS: producers.connect built them)
        conn = self._blocking_connection()
        failures = 0
        while not self._stop.is_set():
            try:
                channels = list(self.channels())
                random.shuffle(channels)  # BLPOP serves the first non-empty key: no channel goes first always
                got = self._take(conn, channels, 1)
                failures = 0
                if got:
                    self._handle_taken(conn, *got)
            except Exception as exc:  # Redis gone or refusing: come back, never die
                if _wrong_type(exc):
                    # a tenant's channel its user made another type since the channels were
                    # read: looked at again, and the others served on at once
                    self._channels_at = 0.0
                    log.debug("queries.tenant_channel_unusable", error=str(exc)[:200])
                    continue
                failures += 1
                self.backoffs += 1
                delay = backoff_delay(failures, 0.2, 5.0)
                log.warning("queries.server_error", error=f"{type(exc).__name__}: {exc}", retry_in=round(delay, 2))
                self._stop.wait(delay)
                conn = self._reconnected(conn)
        conn.close()

    def _take(self, conn: redis.Redis, channels: list[str], timeout: float) -> tuple[str, list[bytes]] | None:
        """Every request waiting on the first of ``channels`` that has one, up to
        ``batch_max``, in one round trip (BLMPOP): it returns as soon as one is there, so a
        lone request never waits for company. None after ``timeout`` seconds without any."""
        got = conn.blmpop(timeout, len(channels), *channels, direction="LEFT", count=self.batch_max)
        return _popped(got) if got else None

    def _handle_taken(self, conn: redis.Redis, channel: str, raws: list[bytes]) -> None:
        """Answer the requests taken together. Only a Redis failure gets out (the loop backs
        off for it); anything else a request causes is counted ``failed`` and the loop goes on."""
        try:
            self.handle_batch(conn, channel, raws)
        except redis.RedisError:
            raise
        except Exception as exc:  # noqa: BLE001  a request never backs the server off
            self._count(conn, "failed")
            log.warning("queries.failed", error=type(exc).__name__)

    def _reconnected(self, conn: redis.Redis) -> redis.Redis:
        """After a failure, on a Redis Cluster: a connection to the channels' primary as the
        slot map now says (a failover may have moved it); elsewhere ``conn`` (it reconnects)."""
        from redis.cluster import RedisCluster

        if not isinstance(self.client, RedisCluster):
            return conn
        try:
            self.client.nodes_manager.initialize()
            fresh = self._blocking_connection()
        except Exception:  # noqa: BLE001  the cluster is still down: try again after the next failure
            return conn
        conn.close()
        return fresh

    def _blocking_connection(self) -> redis.Redis:
        """A connection of its own without a socket timeout; on a Redis Cluster, to the primary
        of the channels' slot (every channel carries the prefix's hash tag: one slot)."""
        from redis.cluster import RedisCluster

        if isinstance(self.client, RedisCluster):
            node = self.client.get_node_from_key(next(iter(self.channels())))
            kwargs = {**self.client.nodes_manager.connection_kwargs, "socket_timeout": None}
            kwargs.pop("host", None), kwargs.pop("port", None)
            return redis.Redis(host=node.host, port=node.port, **kwargs)
        kwargs = {**self.client.connection_pool.connection_kwargs, "socket_timeout": None}
        # from_pool: the client owns its pool, so closing it closes the socket (a client given
        # ``connection_pool=`` leaves the pool's connection open: one socket a thread a stop)
        return redis.Redis.from_pool(
            redis.ConnectionPool(connection_class=self.client.connection_pool.connection_class, **kwargs)
        )

    def start(self) -> QueryServer:
        if self.handlers.search is not None:  # the reranked searches' lane, started first
            for i in range(self.SLOW_LANES):
                t = threading.Thread(target=self._lane, name=f"memstream-queries-rerank-{i}", daemon=True)
                t.start()
                self._lanes.append(t)
        for i in range(self.threads):
            t = threading.Thread(target=self._loop, name=f"memstream-queries-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._lanes_stop.set()  # the lane answers what it was handed, then stops
        for t in self._lanes:
            t.join(timeout)
        self._threads.clear()
        self._lanes.clear()


def _timed(answer: Answer, env: Envelope, took_ms: float) -> Answer:
    """``answer`` with its times: ``took_ms`` once taken, and how long it waited before."""
    answer.took_ms = took_ms
    if env.asked_at and math.isfinite(env.asked_at):
        answer.queued_ms = round(max(0.0, time.time() - env.asked_at) * 1000 - took_ms, 2)
    return answer


def _popped(got: Any) -> tuple[str, list[bytes]]:
    """The (channel, envelopes) BLMPOP returned. memstream's clients read bytes; redis-py
    types either, and a client that decodes gives text (the envelope is UTF-8 JSON)."""
    channel, raws = got[0], got[1]
    return (
        channel.decode() if isinstance(channel, bytes) else channel,
        [raw.encode() if isinstance(raw, str) else raw for raw in raws],
    )


def _wrong_type(exc: Exception) -> bool:
    return (
        isinstance(exc, redis.ResponseError)
        and not isinstance(exc, redis.exceptions.NoPermissionError)
        and "WRONGTYPE" in str(exc)
    )
