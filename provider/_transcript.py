"""This turn's slice of the whole transcript Hermes passes to ``sync_turn``.

Hermes passes every message so far (after compaction: the compacted transcript), and a
turn's sync may run after the next turn started. The slice is found from a watermark
(reset on session switch) and the user text, never by assuming the tail is this turn.
"""

from __future__ import annotations

from typing import Any

__all__ = ["message_text", "find_turn", "tool_calls_of"]

BRIEF_CHARS = 1000


def message_text(message: dict) -> str:
    """The text of a message; multimodal content parts are flattened."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def find_turn(messages: list, watermark: int, user_text: str) -> tuple[int, int] | None:
    """(start, end) of the turn whose user message is ``user_text``: the first user
    message at or after ``watermark`` (preferring an exact text match), else the last
    matching one anywhere (the transcript was rewritten). ``end`` is the next user
    message or the end of the list. None if no user message is found."""
    n = len(messages)
    start = watermark if 0 <= watermark <= n else 0
    first = exact = None
    for i in range(start, n):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "user":
            if first is None:
                first = i
            if message_text(m) == user_text:
                exact = i
                break
    idx = exact if exact is not None else first
    if idx is None or (exact is None and start > 0):
        for i in range(n - 1, -1, -1):
            m = messages[i]
            if isinstance(m, dict) and m.get("role") == "user" and message_text(m) == user_text:
                idx = i
                break
    if idx is None:
        return None
    end = n
    for j in range(idx + 1, n):
        m = messages[j]
        if isinstance(m, dict) and m.get("role") == "user":
            end = j
            break
    return idx, end


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS] + "…"


def tool_calls_of(messages: list) -> list[tuple[str, str, str, str]]:
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
            entry = by_id.get(str(m.get("tool_call_id") or ""))
            if entry is not None:
                entry[2] = _clip(message_text(m))
    return [tuple(c) for c in calls]  # type: ignore[misc]
