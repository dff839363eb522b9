"""Recall for the provider: queries run in the service, answers are read from Redis.

The provider never opens the store or loads a model. A query is a typed request
(``memstream.query.protocol``) on a Redis list (``P:queries``, a tenant's ``P:t:T:queries``:
``memstream.core.keys``) answered by the process that holds the store (``memstream up`` or
``memstream worker``). Prefetch queries are sent and awaited by one background thread
(``memstream-recall``): the agent thread only hands over the text and, in ``prefetch``,
waits on an in-process event for at most its budget. Tool calls ask synchronously with
a bounded timeout (they are part of the agent's tool loop anyway). Both ask through the
process's ``Asker`` for the URL (``memstream.query.client.Asker``): every provider of a gateway process
shares its few request connections and its one reader of answers, so the connections a
process holds do not grow with its agents.

While Redis cannot be reached the thread retries on a jittered back-off
(``memstream.core.backoff``) and fails the queries submitted meanwhile at once, without
touching the network: a connection attempt per turn would take the interpreter from the
agent's thread for about a millisecond each time.

Guarantees: ``submit`` never touches the network and never blocks; a ``Query``'s ``done``
event is set once its answer or its error is in (``deadline_s`` bounds how long a prefetch
recall waits for it). The recalled items become the injected text in
``memstream.provider.block``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import redis

from memstream.core import Settings, TransientError, backoff_delay, is_cluster_url, keys, threads
from memstream.producers import LogLocator, slot_primary_url, tls_kwargs
from memstream.query import MAX_QUERY_CHARS, Asker, RecallRequest, Request

__all__ = ["Recall", "Query", "RecallUnavailable"]


class RecallUnavailable(TransientError):
    """No service to ask: none is running, or Redis cannot be reached. Retry later."""


@dataclass
class Query:
    text: str
    session: str
    submitted: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    items: list[object] | None = None  # as the service sent them (JSON objects, unless malformed)
    error: str = ""
    warm: bool = False  # a warm-up for the next turn (queue_prefetch), not a turn's own query


class Recall:
    """The provider's way to the query servers: a background thread for prefetch, a bounded
    synchronous call for tools. ``asking_as`` gives the (tenant, agent) a recall asks in:
    the tenant always comes from configuration, never from a tool's arguments."""

    MAX_PENDING = 4
    # A warm-up of the text this session's turn query recalled less than WARM_REUSE_S ago is
    # not sent (unless that query failed): Hermes warms with the turn's own message, which
    # on_turn_start has just recalled, so the answer would differ only by what the turn
    # itself wrote, and the next turn's own recall finds that. Those warm-ups were half the
    # queries a fleet sent (BENCHMARKS.md, fleet).
    WARM_REUSE_S = 30.0
    # while Redis is unreachable: retry after RETRY_BASE s, doubling, at most RETRY_CAP s (jittered)
    RETRY_BASE = 0.5
    RETRY_CAP = 10.0

    def __init__(self, settings: Settings, asking_as: Callable[[], tuple[str, str]]) -> None:
        self.settings = settings
        self.asking_as = asking_as
        self._locator = LogLocator(settings, autostart=False)
        self._cv = threading.Condition()
        self._pending: deque[tuple[Query, RecallRequest]] = deque()
        self._latest: dict[str, Query] = {}  # session -> newest answered prefetch query
        self._turns: dict[str, Query] = {}  # session -> newest turn query submitted (not a warm-up)
        self._thread: threading.Thread | None = None
        self._stop = False
        self._asker: Asker | None = None  # the process's query client for the URL (shared)
        self._node_urls: dict[str, str] = {}  # cluster URL -> the URL of its query keys' primary
        self._asker_lock = threading.Lock()
        self._down_until = 0.0  # monotonic time before which the thread does not try Redis
        self._failures_in_row = 0
        self._down_reason = ""
        self.counters: dict[str, int] = {}

    # -- the agent thread's side (no network) ----------------------------------------
    def submit(self, text: str, session: str, k: int = 12, *, warm: bool = False) -> Query:
        """Queue a recall of ``text``; returns at once.

        A turn's own query (``warm=False``, from ``on_turn_start``/``prefetch``) supersedes
        older pending ones. A warm-up (``warm=True``, from ``queue_prefetch`` after a turn)
        only refreshes the fallback: it runs when no turn's query is waiting and never
        supersedes one, and it is not sent at all when the session's turn query of the
        same text was submitted less than ``WARM_REUSE_S`` ago and has not failed. Hermes
        may deliver a turn's ``queue_prefetch`` after the next turn's ``on_turn_start``;
        that late warm-up must not cancel the fresh query."""
        query = Query(text=text, session=session, warm=warm)
        if time.monotonic() < self._down_until:  # Redis unreachable: fail now, wake nobody
            query.error = self._down_reason
            query.done.set()
            self._count("recall_errors")
            return query
        tenant, agent = self.asking_as()
        request = RecallRequest(tenant=tenant, agent=agent, session=session, query=text[:MAX_QUERY_CHARS], k=k)
        with self._cv:
            if warm:
                turn = self._turns.get(session)
                if (
                    turn is not None
                    and turn.text == text
                    and not turn.error
                    and query.submitted - turn.submitted < self.WARM_REUSE_S
                ):
                    query.error = "the turn's own recall of this text stands"
                    query.done.set()
                    self._count("warm_skipped")
                    return query
            else:
                self._turns[session] = query
                if len(self._turns) > 64:
                    self._turns.pop(next(iter(self._turns)))
            self._pending.append((query, request))
            while len(self._pending) > self.MAX_PENDING:
                # drop the oldest warm-up first, else the oldest query
                victim = next((i for i, (q, _) in enumerate(self._pending) if q.warm), 0)
                old, _ = self._pending[victim]
                del self._pending[victim]
                self._supersede(old)
            self._cv.notify()
            self._ensure_thread()
        return query

    def _supersede(self, query: Query) -> None:  # under self._cv
        query.error = "superseded"
        query.done.set()
        self._count("superseded")

    def _next(self) -> tuple[Query, RecallRequest]:  # under self._cv, with something pending
        """The newest turn query if any (older queries of either kind are stale then),
        else the newest warm-up (older warm-ups are stale)."""
        pending = list(self._pending)
        turns = [i for i, (q, _) in enumerate(pending) if not q.warm]
        chosen = turns[-1] if turns else len(pending) - 1
        for old, _ in pending[:chosen]:
            self._supersede(old)
        self._pending.clear()
        self._pending.extend(pending[chosen + 1 :])  # only warm-ups submitted after the chosen query
        return pending[chosen]

    def start(self) -> None:
        """Start the thread now: it connects before the first turn needs it."""
        with self._cv:
            self._ensure_thread()

    def _ensure_thread(self) -> None:  # under self._cv
        if self._thread is None or not self._thread.is_alive():
            self._stop = False
            self._thread = threads.spawn(self._run, name="memstream-recall")
            self._thread.start()

    def latest(self, session: str) -> Query | None:
        with self._cv:
            return self._latest.get(session)

    # -- the background thread -------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._thread_loop()
        finally:
            self._release_asker()

    def _thread_loop(self) -> None:
        try:
            self._connection().ping()  # connect here, not in a turn
        except Exception:  # no service yet: the first query says so (and starts the back-off)
            pass
        while True:
            with self._cv:
                while not self._pending and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                query, request = self._next()
            try:
                if time.monotonic() < self._down_until:  # backing off: no connection attempt
                    raise RecallUnavailable(self._down_reason)
                try:
                    answer = self.ask(request, timeout=self.deadline_s)
                except RecallUnavailable as exc:
                    self._unreachable(exc)
                    raise
                self._reachable()
                if "error" in answer:
                    query.error = str(answer["error"])
                    self._count("recall_errors")
                else:
                    query.items = list(answer.get("items") or [])
                    with self._cv:
                        self._latest[query.session] = query
                        if len(self._latest) > 64:
                            self._latest.pop(next(iter(self._latest)))
                    self._count("recalls")
            except Exception as exc:
                query.error = f"{type(exc).__name__}: {exc}"
                self._count("recall_errors")
            finally:
                query.done.set()

    @property
    def deadline_s(self) -> float:
        """How long a prefetch recall may wait for its answer: four prefetch budgets, at
        least 1 s (an answer past the budget still serves as the next turn's fallback) and
        at most 5 s. The server drops a request whose deadline has passed without running
        it, so when queries come faster than the service answers, stale ones cost nothing
        and the queue stays short (BENCHMARKS.md, fleet)."""
        return min(5.0, max(1.0, 4 * self.settings.prefetch_budget_ms / 1000))

    def _unreachable(self, exc: Exception) -> None:
        self._failures_in_row += 1
        self._down_until = time.monotonic() + backoff_delay(self._failures_in_row, self.RETRY_BASE, self.RETRY_CAP)
        self._down_reason = str(exc) if isinstance(exc, RecallUnavailable) else f"{type(exc).__name__}: {exc}"

    def _reachable(self) -> None:
        self._failures_in_row = 0
        self._down_until = 0.0

    def unreachable(self) -> str:
        """Why Redis cannot be reached, while the thread backs off from it (else "")."""
        return self._down_reason if time.monotonic() < self._down_until else ""

    def close(self) -> None:
        """Stop the thread without waiting for it (it may be inside a call to Redis for
        seconds): it ends, closing its connection, as soon as that call returns."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()

    def _release_asker(self) -> None:
        with self._asker_lock:
            asker, self._asker = self._asker, None
        if asker is not None:
            asker.release()

    # -- asking ------------------------------------------------------------------------------
    def _connection(self) -> Asker:
        """The process's query client for the current URL (``memstream.query.client.Asker``:
        every provider of the process asks over the same few connections and one reader),
        held until this recall's thread ends."""
        url = self._locator.url()
        if not url:
            raise RecallUnavailable("no memstream service is running (`memstream up`) and no MEMSTREAM_REDIS_URL")
        if is_cluster_url(url):  # the query keys' primary (one slot: the prefix's hash tag)
            node = self._node_urls.get(url)
            if node is None:
                node = self._node_urls[url] = slot_primary_url(url, keys.queries(self.settings.stream_prefix))
            url = node
        with self._asker_lock:
            asker = self._asker
            if asker is None or asker.url != url:
                self._asker = Asker.shared(url, tls=tls_kwargs(url, self.settings))
                if asker is not None:
                    asker.release()
                asker = self._asker
            return asker

    def ask(self, request: Request, timeout: float) -> dict[str, Any]:
        """One query (the client checks it), answered or failed within ``timeout`` s (plus
        a Redis round trip)."""
        try:
            return self._connection().ask(self.settings.stream_prefix, request, timeout=timeout)
        except redis.RedisError as exc:  # the client is kept: its pool reconnects on the next call
            self._node_urls.clear()  # on a cluster: ask for the slot's primary again (a failover)
            raise RecallUnavailable(f"Redis unreachable: {type(exc).__name__}: {exc}") from exc

    def _count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def stats(self) -> dict[str, Any]:
        return dict(self.counters)
