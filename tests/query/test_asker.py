"""``Asker``: every caller of a process asks over a bounded number of Redis connections (a
few for the requests, one reader for every answer), each caller gets its own answer, and
nothing lingers: a late answer is dropped, the last ``release`` leaves no connection.
Connections are counted with ``CLIENT LIST`` on a real Valkey, never timed."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest
import redis
from writepath import wait_for

from memstream.provider.recall import Recall
from memstream.query import ANSWER_TTL, Asker, Handlers, QueryTimeout, RecallAnswer, RecallRequest
from memstream.query.server import QueryServer
from memstream.service.valkey import free_port

PREFIX = "ms"
CALLERS = 40


def _connections(client: redis.Redis) -> int:
    """The askers' connections (they name themselves; a new connection is unnamed for the
    moment of its handshake, so ``_unnamed`` checks at rest that no other one was opened)."""
    return sum(1 for c in client.client_list() if c.get("name") in (Asker.ASKS, Asker.REPLIES))


def _unnamed(client: redis.Redis) -> int:
    return sum(1 for c in client.client_list() if not c.get("name"))


def _echo(request: RecallRequest) -> RecallAnswer:
    return RecallAnswer(items=[request.query])


@pytest.fixture
def served(valkey_server):
    """A real query server (2 threads) answering every recall with its own query text."""
    client = redis.Redis.from_url(valkey_server.url, client_name="counter")
    client.flushall()
    server_client = redis.Redis.from_url(valkey_server.url, client_name="query-server")
    server = QueryServer(server_client, PREFIX, Handlers(recall=_echo), threads=2).start()
    yield client
    server.stop()
    server_client.close()
    client.close()


def _request(text: str) -> RecallRequest:
    return RecallRequest(tenant="t1", agent="a1", session="s1", query=text)


@pytest.mark.valkey
def test_forty_concurrent_callers_get_their_own_answers_over_at_most_five_connections(valkey_server, served):
    before, unnamed = _connections(served), _unnamed(served)
    asker = Asker.shared(valkey_server.url)
    answers: dict[str, list[object]] = {}
    errors: list[BaseException] = []
    most = [0]
    start = threading.Barrier(CALLERS + 1)

    def caller(i: int) -> None:
        start.wait()
        try:
            for j in range(5):
                text = f"caller {i} question {j}"
                answers[text] = asker.ask(PREFIX, _request(text), timeout=10.0)["items"]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    start.wait()
    while any(t.is_alive() for t in threads):
        most[0] = max(most[0], _connections(served) - before)
        time.sleep(0.005)
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert len(answers) == CALLERS * 5
        assert all(items == [text] for text, items in answers.items())  # nobody got another's answer
        assert most[0] <= Asker.COMMANDS + 1, most[0]
        assert _connections(served) - before <= Asker.COMMANDS + 1
        assert _unnamed(served) <= unnamed  # none but the named ones (earlier tests' may close)
        assert asker.stats()["answered"] == CALLERS * 5
    finally:
        asker.release()
    wait_for(lambda: _connections(served) <= before, what="every connection closed after the last release")


@pytest.mark.valkey
def test_recalls_of_many_providers_in_one_process_share_the_connections(valkey_server, served, settings):
    """A gateway: 30 providers' recall threads, each with a turn's query, and a tool call
    beside each recall, on one process's connections."""
    before, unnamed = _connections(served), _unnamed(served)
    shared = msgspec.structs.replace(
        settings, redis_url=valkey_server.url, stream_prefix=PREFIX, prefetch_budget_ms=2000
    )  # recalls wait 5 s
    recalls = [Recall(shared, lambda: ("t1", "a1")) for _ in range(30)]
    for r in recalls:
        r.start()
    try:
        queries = [r.submit(f"turn of provider {i}", "s1") for i, r in enumerate(recalls)]
        tools: list[dict] = []
        tool_threads = [
            threading.Thread(target=lambda r=r, i=i: tools.append(r.ask(_request(f"tool call {i}"), timeout=10.0)))
            for i, r in enumerate(recalls)
        ]
        for t in tool_threads:
            t.start()
        for t in tool_threads:
            t.join()
        assert all(q.done.wait(10) for q in queries)
        assert [q.items for q in queries] == [[f"turn of provider {i}"] for i in range(30)]
        assert sorted(a["items"][0] for a in tools) == sorted(f"tool call {i}" for i in range(30))
        assert _connections(served) - before <= Asker.COMMANDS + 1  # was 2 per provider
        assert _unnamed(served) <= unnamed  # none but the named ones (earlier tests' may close)
    finally:
        for r in recalls:
            r.close()
    wait_for(lambda: _connections(served) <= before, timeout=30, what="no connection left by the providers")


@pytest.mark.valkey
def test_an_answer_after_its_caller_gave_up_goes_to_nobody_else_and_expires(valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    gate, started = threading.Event(), threading.Event()

    def slow(request: RecallRequest) -> RecallAnswer:
        if request.query == "too slow":
            started.set()
            gate.wait(30)
        return _echo(request)

    server = QueryServer(client, PREFIX, Handlers(recall=slow), threads=2).start()
    asker = Asker.shared(valkey_server.url)
    outcome: list[BaseException] = []

    def gives_up() -> None:
        try:
            asker.ask(PREFIX, _request("too slow"), timeout=3.0)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=gives_up)
    try:
        caller.start()
        wait_for(started.is_set, what="the server took the request")
        caller.join()  # gave up while the server still handles it
        assert len(outcome) == 1 and isinstance(outcome[0], QueryTimeout)
        gate.set()
        # the reader took it (its BLPOP still named the key) and dropped it, or it waits to expire
        wait_for(lambda: asker.stats()["late_answers"] or client.keys(f"{PREFIX}:reply:[0-9a-f]*"), what="the late answer")
        assert asker.ask(PREFIX, _request("on time"), timeout=10.0)["items"] == ["on time"]
        assert all(0 < client.ttl(k) <= ANSWER_TTL for k in client.keys(f"{PREFIX}:reply:*"))
        assert asker.stats()["timed_out"] == 1 and asker.stats()["answered"] == 1
    finally:
        gate.set()
        asker.release()
        server.stop()
        client.close()


def test_while_redis_is_down_an_ask_fails_at_once_with_a_connection_error():
    asker = Asker.shared(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(redis.ConnectionError):
            asker.ask(PREFIX, _request("anyone?"), timeout=5.0)
    finally:
        asker.release()
    assert asker._closed


@pytest.mark.valkey
def test_an_answer_slower_than_the_clients_socket_timeout_is_still_received(valkey_server):
    """``ask`` on a client whose socket timeout (0.3 s) is shorter than the answer's wait
    (an answer after the handler has been held): a single BLPOP for the whole timeout would
    end in redis-py's TimeoutError; the answer comes, within the ask's own timeout."""
    from memstream.query import ask

    client = redis.Redis.from_url(valkey_server.url, socket_timeout=0.3)
    client.flushall()
    server_client = redis.Redis.from_url(valkey_server.url)
    asked, gate = threading.Event(), threading.Event()

    def held(request: RecallRequest) -> RecallAnswer:
        asked.set()
        gate.wait(30)
        return _echo(request)

    server = QueryServer(server_client, PREFIX, Handlers(recall=held), threads=1).start()
    try:
        answers: list[dict] = []
        caller = threading.Thread(target=lambda: answers.append(ask(client, PREFIX, _request("held"), timeout=20.0)))
        caller.start()
        assert asked.wait(30)
        caller.join(1.0)  # three of the client's socket timeouts go by while the answer is held
        assert caller.is_alive() and not answers
        gate.set()
        caller.join(30)
        assert answers and answers[0]["items"] == ["held"]
    finally:
        gate.set()
        server.stop()
        server_client.close()
        client.close()
