"""Hooks run on two threads inside Hermes: the agent thread and the mem-sync worker.

Regression (found by the real-Hermes test): ``on_turn_start`` (agent thread) appended to
the turn-start deque while ``sync_turn`` of the previous turn (worker) iterated it, so the
sync failed with "deque mutated during iteration" and the turn was never recorded.
"""

from __future__ import annotations

import sys
import threading

from memstream.core.settings import Settings
from memstream.provider.provider import MemstreamProvider


class _Writer:
    def __init__(self):
        self.events = []

    def emit(self, event) -> bool:
        self.events.append(event)
        return True

    def release(self, timeout=None) -> bool:
        return True

    def stats(self) -> dict:
        return {}


def test_turn_starts_and_syncs_on_two_threads_lose_no_turn(tmp_path):
    p = MemstreamProvider(Settings.load(home=str(tmp_path / "ms"), autostart=False))
    p.writer = _Writer()  # initialize() keeps an existing writer: no spool, no shipper
    p.initialize("s1", platform="cli")
    stop = threading.Event()

    def start_turns():
        i = 0
        while not stop.is_set():
            i += 1
            p.on_turn_start(i, f"message {i}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    starter = threading.Thread(target=start_turns)
    starter.start()
    try:
        for i in range(20000):
            p.sync_turn(f"unmatched {i}", "answer", session_id="s1", messages=[{"role": "user", "content": f"unmatched {i}"}])
    finally:
        stop.set()
        starter.join()
        sys.setswitchinterval(old)
    assert p.stats().get("hook_errors", 0) == 0, p.stats()
    assert len(p.writer.events) == 20000
