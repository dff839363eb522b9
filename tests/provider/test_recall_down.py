"""The recall thread while Redis cannot be reached: it backs off instead of trying once
per turn (each failed attempt held the interpreter for about a millisecond, taken from
the agent's hooks), and it never waits on the network for ``close``."""

from __future__ import annotations

import threading

import msgspec
from writepath import wait_for

from memstream.provider.recall import Recall
from memstream.query import Asker
from memstream.service.valkey import free_port


def _down_recall(settings) -> tuple[Recall, list[int]]:
    down = msgspec.structs.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    recall = Recall(down, lambda: ("t1", "a1"))
    attempts: list[int] = []
    real_ask = recall.ask
    recall.ask = lambda request, timeout: attempts.append(1) or real_ask(request, timeout)  # type: ignore[method-assign]
    return recall, attempts


def test_while_redis_is_down_the_turns_recalls_fail_at_once_without_an_attempt_each(settings):
    recall, attempts = _down_recall(settings)
    recall.start()
    try:
        first = recall.submit("first turn", "s1")
        assert first.done.wait(10) and first.error
        queries = [recall.submit(f"turn {i}", "s1") for i in range(50)]
        assert all(q.done.wait(10) for q in queries)
        assert all(q.error and q.items is None for q in queries)
        assert len(attempts) <= 2  # the first query, perhaps one retry after the back-off
        assert recall.stats()["recall_errors"] == 51
    finally:
        recall.close()


def test_close_returns_without_waiting_for_the_thread_which_then_ends_closing_its_connection(settings):
    recall, _ = _down_recall(settings)
    gate = threading.Event()
    recall.ask = lambda request, timeout: recall._connection() and gate.wait(30) and {"items": []}  # type: ignore[method-assign]
    recall.start()
    recall.submit("a query that hangs", "s1")
    wait_for(lambda: not recall._pending, what="the thread took the query")
    recall.close()  # the thread is inside ask: close must not wait for it
    assert recall._thread is not None and recall._thread.is_alive()
    gate.set()
    wait_for(lambda: not recall._thread.is_alive(), what="the recall thread ended")
    # its share of the process's query client released: a gateway's providers leave no connection behind
    assert recall._asker is None
    assert Asker._registry.get(recall._locator.url() or "") is None
