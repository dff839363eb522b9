"""The memstream tools' handlers: what each ``memstream_*`` call does for the agent.

The schemas and the checking of arguments are in ``tools``; here a checked call becomes a
query to the service (search, context, recent, facts: answered within ``tool_timeout``)
or an event (remember, forget: spooled like every hook's event). Every failure is a
``ToolError`` with a message that says what to do; ``handle`` turns any call into one
strict JSON string and never raises.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memstream.core import new_event_id
from memstream.producers import MemoryForgotten, MemoryRemembered, utcnow
from memstream.provider.recall import RecallUnavailable
from memstream.provider.tools import TOOL_NAMES, ToolError, finite, forget_args, remember_args, search_note, tool_request
from memstream.query import QueryRefused, QueryTimeout
from memstream.text import clean_text

if TYPE_CHECKING:
    from memstream.provider.provider import MemstreamProvider

__all__ = ["ToolHandlers", "clip"]


def clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ToolHandlers:
    """The tools of one provider (its settings, scope, recall and writer)."""

    def __init__(self, provider: MemstreamProvider):
        self.p = provider

    def handle(self, tool_name: Any, args: Any) -> str:
        """Run one memstream tool; always a strict JSON string (errors as ``{"error": ...}``,
        no NaN/Infinity), whatever the name and arguments; never raises."""
        p = self.p
        try:
            return json.dumps(finite(self._tool(tool_name, args)), default=str, allow_nan=False)
        except ToolError as exc:
            p._count("tool_errors")
            return json.dumps({"error": clip(str(exc))})
        except Exception as exc:
            p._count("tool_errors")
            name = clip(str(tool_name) if isinstance(tool_name, str) else repr(tool_name), 60)
            p._warn("provider.tool_failed", tool=name, error=clip(f"{type(exc).__name__}: {exc}"))
            return json.dumps({"error": clip(f"memstream {name} failed: {type(exc).__name__}: {exc}")})

    def _tool(self, name: Any, args: Any) -> dict[str, Any]:
        p = self.p
        if not isinstance(name, str) or name not in TOOL_NAMES:
            raise ToolError(f"memstream has no tool named {clip(repr(name), 60)}; it has {', '.join(TOOL_NAMES)}")
        if name == "memstream_remember":
            return self.remember(args)
        if name == "memstream_forget":
            return self.forget(args)
        request = tool_request(name, args)  # bad arguments are an error even before initialize
        if not p.initialized or p.settings is None or p.recall is None:
            raise ToolError("memstream is not initialized")
        request.update({**p._request_base(), "session": p._session})  # tenant: configuration only
        try:
            answer = p.recall.ask(request, timeout=p.settings.tool_timeout)
        except RecallUnavailable as exc:
            raise ToolError(f"memory service unavailable: {exc}") from exc
        except QueryTimeout as exc:
            raise ToolError(
                f"no answer within {p.settings.tool_timeout}s: the memstream service "
                "(`memstream up`) or its workers are not running or are busy"
            ) from exc
        except QueryRefused as exc:
            raise ToolError(str(exc)) from exc
        if not isinstance(answer, dict):
            raise ToolError(f"the memory service sent a malformed answer ({type(answer).__name__}, not an object)")
        answer.pop("queued_ms", None)
        note = search_note(answer) if request["op"] == "search" and "error" not in answer else ""
        if note:
            answer["note"] = note
        return answer

    def remember(self, args: Any) -> dict[str, Any]:
        p = self.p
        content, target = remember_args(args)
        if not p.initialized or p.settings is None:
            raise ToolError("memstream is not initialized")
        p.check_writes()
        text, problems = clean_text(content, p._max_bytes())
        clipped = p._problems({"content": problems})
        event = MemoryRemembered(
            id=new_event_id(), occurred_at=utcnow(), scope=p._scope(), clipped=clipped, content=text, target=target
        )
        if not p._emit(event):
            raise ToolError("the memory could not be recorded (the local spool refused it: see memstream doctor)")
        p._remembered.append(event.id)
        answer = {
            "ok": True,
            "id": event.id,
            "target": target,
            "status": "recorded; searchable as soon as the workers have projected it",
        }
        if clipped:
            answer["clipped"] = f"content was longer than {p._max_bytes()} bytes: only its start was kept"
        return answer

    def forget(self, args: Any) -> dict[str, Any]:
        p = self.p
        item_id, reason = forget_args(args)
        if not p.initialized or p.settings is None:
            raise ToolError("memstream is not initialized")
        p.check_writes()
        verified = self.exists(item_id)
        if verified is False:
            raise ToolError(
                f"no turn, memory or fact with id {item_id!r} in this tenant: use an id from memstream_search or memstream_facts"
            )
        event = MemoryForgotten(id=new_event_id(), occurred_at=utcnow(), scope=p._scope(), forgotten_id=item_id, reason=reason)
        if not p._emit(event):
            raise ToolError("the tombstone could not be recorded (the local spool refused it: see memstream doctor)")
        p.prefetcher.forgotten(item_id)
        status = "every projection removes it as soon as the workers apply the tombstone"
        if verified is None:
            status += " (the service could not be asked whether the id exists: recorded anyway)"
        return {"ok": True, "forgotten_id": item_id, "tombstone": event.id, "status": status}

    def exists(self, item: str) -> bool | None:
        """Whether the service knows ``item`` in this tenant; None when it cannot be asked
        (or the item is one this provider remembered and the workers may not have yet)."""
        p = self.p
        if item in p._remembered or p.recall is None or p.settings is None:
            return None
        try:
            answer = p.recall.ask({"op": "exists", **p._request_base(), "id": item}, timeout=min(p.settings.tool_timeout, 2.0))
        except Exception:
            return None
        if "error" in answer:
            return None
        return bool(answer.get("exists"))
