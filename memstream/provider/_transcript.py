"""This turn's slice of the whole transcript Hermes passes to ``sync_turn``.

Hermes passes every message so far (after compaction: the compacted transcript), and a
turn's sync may run after the next turn started. The slice is found from a watermark
(reset on session switch) and the user text, never by assuming the tail is this turn.
A message's text and the brief of its tool calls come from ``memstream.producers``
(``transcript``), which the import of Hermes's history shares.
"""

from __future__ import annotations

from typing import Any

from memstream.producers import message_text

__all__ = ["find_turn"]


def find_turn(messages: list[Any], watermark: int, user_text: str) -> tuple[int, int] | None:
    """(start, end) of the turn whose user message is ``user_text``.

    With a known ``watermark`` (the end of the previous turn), the turn is the first
    user message at or after it, preferring an exact text match: this is right when a
    turn's sync arrives after the next turn started. With ``watermark < 0`` (just after
    a session switch or compaction rewrote the transcript) it is the last user message
    with that text. ``end`` is the next user message or the end of the list; None if
    no user message is found.
    """
    n = len(messages)

    def is_user(i: int) -> bool:
        m = messages[i]
        return isinstance(m, dict) and m.get("role") == "user"

    idx = None
    if 0 <= watermark <= n:
        first = None
        for i in range(watermark, n):
            if is_user(i):
                if first is None:
                    first = i
                if message_text(messages[i]) == user_text:
                    idx = i
                    break
        if idx is None:
            idx = first
    if idx is None:
        for i in range(n - 1, -1, -1):
            if is_user(i) and message_text(messages[i]) == user_text:
                idx = i
                break
    if idx is None:
        return None
    end = n
    for j in range(idx + 1, n):
        if is_user(j):
            end = j
            break
    return idx, end
