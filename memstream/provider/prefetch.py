"""The prefetch policy: which recalled block a turn gets, and how long it may wait.

``on_turn_start`` hands the turn's message to the recall thread (no network on the
agent's thread); ``block`` waits for that answer at most the budget (less
``WAKEUP_SLACK_S``), else takes the freshest answer already computed for the session,
else gives nothing. Within a session an item is injected once (Hermes replays earlier
blocks on every later turn), and the session's own turns are left out while its
transcript still holds them (until a compression rewrites it).

Guarantee: ``block`` returns within the budget plus the wake-up lateness of one timed
wait, whatever Redis or the service do; it never raises on a missing answer.
"""

from __future__ import annotations

import time
from typing import Callable

from memstream.core import Settings
from memstream.provider.block import format_block
from memstream.provider.recall import Query, Recall

__all__ = ["Prefetcher", "WAKEUP_SLACK_S"]

WAKEUP_SLACK_S = 0.002  # prefetch stops waiting this long before its budget ends


class Prefetcher:
    """One provider's prefetch state: the fresh recall of this turn, what each session
    was shown, which sessions were compressed, the longest prefetch so far."""

    def __init__(self, count: Callable[[str], None]):
        self._count = count
        self.fresh: Query | None = None  # the recall started by on_turn_start
        self.injected: dict[str, set[str]] = {}  # session -> ids already in a block
        self.compressed: set[str] = set()  # sessions whose transcript lost earlier turns
        self.longest_ms = 0.0
        self.last: tuple[str, int] = ("none", 0)  # the last prefetch: outcome, items injected

    def skipped(self) -> None:
        """A turn whose prompt needs no recall (Hermes's trivial-prompt gate)."""
        self.fresh = None
        self.last = ("skipped", 0)

    def turn_started(self, recall: Recall, message: str, session: str) -> None:
        """Start the recall of the turn's message (handed to the recall thread)."""
        self.fresh = recall.submit(message, session)

    def warm(self, recall: Recall, query: str, session: str) -> None:
        """After a turn: recall for it in the background (the next block's fallback)."""
        recall.submit(query, session, warm=True)

    def session_switched(self, session: str, reason: str) -> None:
        """The transcript was replaced or rewritten: earlier blocks are gone from it, and
        after a compression so are the session's earlier turns (recall may bring them back)."""
        self.fresh = None
        self.injected.pop(session, None)
        if reason == "compression":
            self.compressed.add(session)

    def forgotten(self, item_id: str) -> None:
        """A forgotten item may be shown again if it comes back (it will not)."""
        for seen in self.injected.values():
            seen.discard(item_id)

    def hide(self, session: str, ids: list[str]) -> None:
        """Keep these items out of the session's next blocks (an item of a session is injected
        once): forgotten at the user's request, before the workers apply the tombstones."""
        self.injected.setdefault(session, set()).update(ids)

    def block(self, recall: Recall, settings: Settings, query: str, session: str) -> str:
        """The recalled block for this turn (see the module docstring)."""
        started = time.monotonic()
        fresh = self.fresh
        if fresh is None or fresh.text != query or fresh.session != session:
            fresh = recall.submit(query, session)
        # stop waiting WAKEUP_SLACK_S early: a timed wait wakes up late on a loaded machine
        # (p99 about 2.8 ms past its timeout here, BENCHMARKS.md); that lateness now falls
        # inside the budget instead of after it
        wait = settings.prefetch_budget_ms / 1000 - WAKEUP_SLACK_S - (time.monotonic() - started)
        fresh.done.wait(max(0.0, wait))
        answered = fresh if fresh.items is not None else recall.latest(session)
        if answered is None or answered.items is None:
            self._count("prefetch_empty")
            self.longest_ms = max(self.longest_ms, (time.monotonic() - started) * 1000)
            self.last = ("empty", 0)
            return ""
        self._count("prefetch_fresh" if answered is fresh else "prefetch_stale")
        seen = self.injected.setdefault(session, set())
        items = answered.items
        if session not in self.compressed:  # the session's own turns are in the transcript
            items = [i for i in items if not (isinstance(i, dict) and i.get("kind") == "turn" and i.get("session") == session)]
        block, ids = format_block(items, settings.prefetch_tokens, seen)
        seen.update(ids)
        self.last = ("fresh" if answered is fresh else "cached", len(ids))
        self.longest_ms = max(self.longest_ms, (time.monotonic() - started) * 1000)
        return block
