"""What the recall thread asks of the service when a fleet loads it: a warm-up that would
repeat the turn's own recall is not sent, and a recall's deadline follows the prefetch
budget, so the server drops stale requests instead of answering them late."""

from __future__ import annotations

import threading

import msgspec
from writepath import wait_for

from memstream.provider.recall import Recall
from memstream.query import RecallRequest


def _recording_recall(settings, **overrides) -> tuple[Recall, list[tuple[RecallRequest, float]]]:
    recall = Recall(msgspec.structs.replace(settings, **overrides), lambda: ("t1", "a1"))
    asked: list[tuple[RecallRequest, float]] = []
    lock = threading.Lock()

    def ask(request, timeout):
        with lock:
            asked.append((request, timeout))
        return {"items": [{"id": request.query}]}

    recall.ask = ask  # type: ignore[method-assign]
    return recall, asked


def test_a_warm_up_of_the_text_the_turn_just_recalled_is_not_sent(settings):
    recall, asked = _recording_recall(settings)
    recall.start()
    try:
        turn = recall.submit("what do I drink", "s1")
        assert turn.done.wait(10) and turn.items is not None
        warm = recall.submit("what do I drink", "s1", warm=True)
        assert warm.done.is_set() and warm.items is None
        assert recall.latest("s1") is turn  # the fallback stays the turn's own answer
        assert recall.submit("what do I drink", "s2", warm=True).done.wait(10)  # another session's
        assert recall.submit("something else", "s1", warm=True).done.wait(10)  # another text
        assert [r.query for r, _ in asked] == ["what do I drink", "what do I drink", "something else"]
        assert [r.session for r, _ in asked] == ["s1", "s2", "s1"]
        assert recall.stats()["warm_skipped"] == 1
    finally:
        recall.close()


def test_a_warm_up_is_sent_once_the_turns_recall_is_old_or_failed(settings):
    recall, asked = _recording_recall(settings)
    recall.WARM_REUSE_S = 0.0  # every turn query is old at once
    recall.start()
    try:
        assert recall.submit("tea", "s1").done.wait(10)
        assert recall.submit("tea", "s1", warm=True).done.wait(10)
        assert len(asked) == 2
    finally:
        recall.close()
    failing, asked = _recording_recall(settings)
    failing.ask = lambda request, timeout: {"error": "the service failed"}  # type: ignore[method-assign]
    failing.start()
    try:
        turn = failing.submit("tea", "s1")
        assert turn.done.wait(10) and turn.error
        warm = failing.submit("tea", "s1", warm=True)
        wait_for(lambda: warm.done.is_set(), what="the warm-up was asked")
        assert warm.error == "the service failed"  # asked, not skipped
        assert "warm_skipped" not in failing.stats()
    finally:
        failing.close()


def test_a_recall_waits_four_prefetch_budgets_between_one_and_five_seconds(settings):
    for budget_ms, deadline in ((150, 1.0), (0, 1.0), (500, 2.0), (2000, 5.0), (60_000, 5.0)):
        recall, asked = _recording_recall(settings, prefetch_budget_ms=budget_ms)
        assert recall.deadline_s == deadline
        recall.start()
        try:
            assert recall.submit("tea", "s1").done.wait(10)
            assert recall.submit("coffee", "s1", warm=True).done.wait(10)
            assert [timeout for _, timeout in asked] == [deadline, deadline]
        finally:
            recall.close()
