"""This turn's slice of the whole transcript Hermes passes to ``sync_turn``.

Hermes passes every message so far (after compaction: the compacted transcript), and a
turn's sync may run after the next turn started. The slice is found from a watermark
(reset on session switch) and the user text, never by assuming the tail is this turn.
"""

from __future__ import annotations

from typing import Any

__all__ = ["message_text", "find_turn", "tool_calls_of"]

BRIEF_CHARS = 1000


def message_text(message: dict[str, Any]) -> str:
    """The text of a message; multimodal content parts are flattened."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


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


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    text = text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS] + "…"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # e.g. a tool read a binary file with surrogateescape:
        text = text.encode("utf-8", "replace").decode("utf-8")  # else the whole turn fails to encode
    return text


def tool_calls_of(messages: list[Any]) -> list[tuple[str, str, str, str]]:
    """(name, arguments, result, call_id) of every tool call in ``messages``, clipped."""
    calls: list[list[str]] = []
    by_id: dict[str, list[str]] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant" and m.get("tool_calls"):
            for call in m["tool_calls"] or []:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                entry = [str(fn.get("name") or call.get("name") or "?"),
                         _clip(fn.get("arguments", "")), "", str(call.get("id") or "")]
                calls.append(entry)
                if entry[3]:
                    by_id[entry[3]] = entry
        elif m.get("role") == "tool":
            answered = by_id.get(str(m.get("tool_call_id") or ""))
            if answered is not None:
                answered[2] = _clip(message_text(m))
    return [(c[0], c[1], c[2], c[3]) for c in calls]
