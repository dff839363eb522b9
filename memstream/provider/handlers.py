"""The memstream tools' handlers: what each ``memstream_*`` call does for the agent.

The arguments' types, the schemas and the decoding are in ``tools``; here a decoded call
becomes a typed query to the service (search, context, recent, facts: answered within
``tool_timeout``) or an event (remember, forget: spooled like every hook's event). The
handlers see their provider only through a ``ToolContext``: the few things a tool needs
of it. Every failure is a ``ToolError`` with a message that says what to do; ``handle``
turns any call into one strict JSON string and never raises.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from memstream.core import Settings, new_event_id
from memstream.producers import Event, MemoryForgotten, MemoryRemembered, Scope, utcnow
from memstream.provider.recall import Recall, RecallUnavailable
from memstream.provider.tools import (
    TOOL_NAMES,
    ForgetArgs,
    QueryArgs,
    RememberArgs,
    SearchArgs,
    ToolError,
    finite,
    search_note,
    tool_args,
)
from memstream.query import ExistsRequest, QueryRefused, QueryTimeout
from memstream.text import clean_text

__all__ = ["ToolHandlers", "ToolContext", "clip"]


def clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class ToolContext:
    """What the tools need of the provider that runs them, and nothing more."""

    settings: Callable[[], Settings | None]  # the provider's settings once initialized, else None
    recall: Callable[[], Recall | None]  # the way to the query service, None before initialize
    asker: Callable[[], tuple[str, str, str]]  # (tenant, agent, session) a query asks in: configuration only
    scope: Callable[[], Scope]  # the scope of an event of the current session
    emit: Callable[[Event], bool]  # spool one event; False: not recorded (counted by the provider)
    problems: Callable[[dict[str, list[str]]], list[str]]  # count the cleaning's problems per field; the fields clipped
    check_writes: Callable[[], None]  # ToolError when this agent context records nothing
    forgotten: Callable[[str], None]  # an item forgotten: never injected again
    count: Callable[[str], None]  # one more of a provider counter (stats())
    warn: Callable[..., None]  # a rate-limited warning in the provider's log


class ToolHandlers:
    """The tools of one provider, through its ``ToolContext``."""

    def __init__(self, context: ToolContext):
        self.context = context
        self._remembered: deque[str] = deque(maxlen=256)  # ids of memstream_remember calls

    def handle(self, tool_name: Any, args: Any) -> str:
        """Run one memstream tool; always a strict JSON string (errors as ``{"error": ...}``,
        no NaN/Infinity), whatever the name and arguments; never raises."""
        try:
            return json.dumps(finite(self._tool(tool_name, args)), default=str, allow_nan=False)
        except ToolError as exc:
            self.context.count("tool_errors")
            return json.dumps({"error": clip(str(exc))})
        except Exception as exc:
            self.context.count("tool_errors")
            name = clip(str(tool_name) if isinstance(tool_name, str) else repr(tool_name), 60)
            self.context.warn("provider.tool_failed", tool=name, error=clip(f"{type(exc).__name__}: {exc}"))
            return json.dumps({"error": clip(f"memstream {name} failed: {type(exc).__name__}: {exc}")})

    def _tool(self, name: Any, raw: Any) -> dict[str, Any]:
        if not isinstance(name, str) or name not in TOOL_NAMES:
            raise ToolError(f"memstream has no tool named {clip(repr(name), 60)}; it has {', '.join(TOOL_NAMES)}")
        args = tool_args(name, raw)  # bad arguments are an error even before initialize
        if isinstance(args, RememberArgs):
            return self.remember(args)
        if isinstance(args, ForgetArgs):
            return self.forget(args)
        if not isinstance(args, QueryArgs):  # every other tool asks the service
            raise ToolError(f"{name} is not a query tool")
        settings, recall = self.context.settings(), self.context.recall()
        if settings is None or recall is None:
            raise ToolError("memstream is not initialized")
        request = args.request(*self.context.asker())  # the tenant: configuration only
        try:
            answer = recall.ask(request, timeout=settings.tool_timeout)
        except RecallUnavailable as exc:
            raise ToolError(f"memory service unavailable: {exc}") from exc
        except QueryTimeout as exc:
            raise ToolError(
                f"no answer within {settings.tool_timeout}s: the memstream service "
                "(`memstream up`) or its workers are not running or are busy"
            ) from exc
        except QueryRefused as exc:
            raise ToolError(str(exc)) from exc
        if not isinstance(answer, dict):
            raise ToolError(f"the memory service sent a malformed answer ({type(answer).__name__}, not an object)")
        answer.pop("queued_ms", None)
        note = search_note(answer) if isinstance(args, SearchArgs) and "error" not in answer else ""
        if note:
            answer["note"] = note
        return answer

    def remember(self, args: RememberArgs) -> dict[str, Any]:
        settings = self.context.settings()
        if settings is None:
            raise ToolError("memstream is not initialized")
        self.context.check_writes()
        text, problems = clean_text(args.content, settings.max_text_bytes)
        clipped = self.context.problems({"content": problems})
        event = MemoryRemembered(
            id=new_event_id(), occurred_at=utcnow(), scope=self.context.scope(), clipped=clipped, content=text, target=args.target
        )
        if not self.context.emit(event):
            raise ToolError("the memory could not be recorded (the local spool refused it: see memstream doctor)")
        self._remembered.append(event.id)
        answer = {
            "ok": True,
            "id": event.id,
            "target": args.target,
            "status": "recorded; searchable as soon as the workers have projected it",
        }
        if clipped:
            answer["clipped"] = f"content was longer than {settings.max_text_bytes} bytes: only its start was kept"
        return answer

    def forget(self, args: ForgetArgs) -> dict[str, Any]:
        if self.context.settings() is None:
            raise ToolError("memstream is not initialized")
        self.context.check_writes()
        item_id = args.id
        verified = self.exists(item_id)
        if verified is False:
            raise ToolError(
                f"no turn, memory or fact with id {item_id!r} in this tenant: use an id from memstream_search or memstream_facts"
            )
        event = MemoryForgotten(
            id=new_event_id(), occurred_at=utcnow(), scope=self.context.scope(), forgotten_id=item_id, reason=args.reason
        )
        if not self.context.emit(event):
            raise ToolError("the tombstone could not be recorded (the local spool refused it: see memstream doctor)")
        self.context.forgotten(item_id)
        status = "every projection removes it as soon as the workers apply the tombstone"
        if verified is None:
            status += " (the service could not be asked whether the id exists: recorded anyway)"
        return {"ok": True, "forgotten_id": item_id, "tombstone": event.id, "status": status}

    def exists(self, item: str) -> bool | None:
        """Whether the service knows ``item`` in this tenant; None when it cannot be asked
        (or the item is one this provider remembered and the workers may not have yet)."""
        settings, recall = self.context.settings(), self.context.recall()
        if item in self._remembered or recall is None or settings is None:
            return None
        tenant, agent, _ = self.context.asker()
        try:
            answer = recall.ask(ExistsRequest(tenant=tenant, agent=agent, id=item), timeout=min(settings.tool_timeout, 2.0))
        except Exception:
            return None
        if "error" in answer:
            return None
        return bool(answer.get("exists"))
