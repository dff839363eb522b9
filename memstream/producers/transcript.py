"""What a turn's messages say, read from an OpenAI-style transcript (a list of message dicts
as Hermes keeps them): a message's text, and the brief of the turn's tool calls.

Shared by the provider (the transcript Hermes passes to ``sync_turn``) and the import of
Hermes's own history (its ``state.db``), so both record a turn alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BRIEF_CHARS", "message_text", "tool_calls_of"]

BRIEF_CHARS = 1000


def message_text(message: dict[str, Any]) -> str:
    """The text of a message; multimodal content parts are flattened."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


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
                entry = [
                    str(fn.get("name") or call.get("name") or "?"),
                    _clip(fn.get("arguments", "")),
                    "",
                    str(call.get("id") or ""),
                ]
                calls.append(entry)
                if entry[3]:
                    by_id[entry[3]] = entry
        elif m.get("role") == "tool":
            answered = by_id.get(str(m.get("tool_call_id") or ""))
            if answered is not None:
                answered[2] = _clip(message_text(m))
    return [(c[0], c[1], c[2], c[3]) for c in calls]
