"""Live versions first: a replay's consumer starts no batch while a live batch is applied,
and yields further while the live versions are busy."""

from __future__ import annotations

import threading
import time

from memstream.workers.priority import Priority


def test_a_low_consumer_waits_for_the_live_batch_in_progress():
    priority = Priority(patience=5.0)
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def live() -> None:
        with priority.live():
            entered.set()
            release.wait(5)
            order.append("live done")

    t = threading.Thread(target=live)
    t.start()
    entered.wait(5)
    waiter = threading.Thread(target=lambda: (priority.wait_turn(), order.append("low starts")))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and order == []  # still waiting for the live batch
    release.set()
    t.join(5)
    waiter.join(5)
    assert order == ["live done", "low starts"]


def test_a_low_consumer_gives_up_waiting_after_its_patience_so_a_replay_always_progresses():
    priority = Priority(patience=0.05)
    with priority.live():
        assert priority.wait_turn() is False


def test_while_live_versions_are_busy_low_batches_take_one_lane():
    priority = Priority()
    with priority.live():
        pass  # a live batch just now
    assert priority.live_recently()
    inside = 0
    most = 0
    lock = threading.Lock()

    def low() -> None:
        nonlocal inside, most
        with priority.low():
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.02)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=low) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most == 1


def test_with_nothing_live_low_batches_run_side_by_side():
    priority = Priority()
    assert not priority.live_recently()
    barrier = threading.Barrier(2, timeout=5)

    def low() -> None:
        with priority.low():
            barrier.wait()  # both inside at once, or this times out

    threads = [threading.Thread(target=low) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not barrier.broken
