"""A forget request said in conversation ("Please forget my home address") is honoured.

``sync_turn`` hands the user's text to ``ForgetRequests.heard``: a substring check, and for
a text that passes it the pure recogniser (``memstream.text.forget``); nothing else
happens on the hook's thread. A request is queued for one background thread
(``memstream-forget``, started through ``core.threads`` when there is work), which searches
the user's own scope (this tenant and agent, scope ``current``; superseded facts included)
for the topic in facts, memories and turns through the query client, keeps the items
whose text holds every content word of the topic (``matches``) and forgets each through the
``memstream_forget`` tool's own path (a tombstone event through the spool; the workers'
erase path does the rest). A turn that is itself a forget request is kept: it holds the
topic, not the value.

Why every content word and not a score: a search score is relative to its query's
candidates (``memstream.query.ranking``), so the best of unrelated items scores high; an
item that names every word of what the user named is about it. Parts joined by "and" or a
comma ("my phone number and my email") are matched each on its own. A topic without a
content word ("everything about me") forgets nothing here: the agent's tool stays the way.

The forgotten items are kept out of this session's prefetch blocks at once (the workers
may not have applied the tombstones yet), and the next prefetch block says
"forgotten at your request: <topic>" once (the topic as the user said it, never a stored
value; nothing when no item matched). Counts in the provider's ``stats()``: ``forget_requests`` (recognised),
``forget_request_items`` (forgotten), ``forget_requests_unmatched`` (nothing matched),
``forget_request_errors`` (the service could not be asked, or a forget failed).
Nothing here raises into the agent loop.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from memstream.core import threads
from memstream.provider.block import HEADER, neutralise
from memstream.provider.tools import ToolError
from memstream.query import SearchKind, SearchRequest

if TYPE_CHECKING:
    from memstream.provider.handlers import ToolHandlers
    from memstream.text import ForgetRequest

__all__ = ["ForgetRequests", "NOTICE", "matches", "says_a_request", "topic_parts"]

NOTICE = "forgotten at your request: "
SEARCH_KINDS: tuple[SearchKind, ...] = ("facts", "memories", "turns")
SEARCH_K = 30  # items read per kind (the protocol allows 50)
MAX_PENDING = 8  # requests waiting for the thread; older ones beyond this are dropped (counted)
TOPIC_CHARS = 120  # of a topic in the notice

# words of a topic that do not say what it is about
_FILLER = frozenset(
    "a an the my me mine i i'm you your yours our ours we us it its this that these those of about on regarding "
    "re in at to for from with by all any every everything anything something some and or is are was were be been "
    "what which who whom told said mentioned shared stuff thing things info information details data memory "
    "memories notes facts records please".split()
)
_WORD = re.compile(r"[^\W_]+")
_PARTS = re.compile(r"(?i)\s*(?:,|;|\band\b|\bas\s+well\s+as\b)\s*")
_SPEAKER = re.compile(r"^\s*(?:User|Assistant)\s*:\s*")
_CUES = ("forget", "remember", "delete", "erase", "remove", "wipe", "purge", "clear", "scrub", "drop")


def topic_parts(topic: str) -> list[frozenset[str]]:
    """The content words of each part of a topic ("my phone number and my email" ->
    [{phone, number}, {email}]), casefolded; parts without one are left out."""
    parts = []
    for part in _PARTS.split(topic or ""):
        words = frozenset(w for w in _WORD.findall(part.casefold()) if len(w) > 1 and w not in _FILLER)
        if words:
            parts.append(words)
    return parts


def _has(word: str, tokens: set[str]) -> bool:
    if word in tokens or word + "s" in tokens or word + "es" in tokens:
        return True
    return word.endswith("s") and word[:-1] in tokens


def matches(parts: list[frozenset[str]], text: object) -> bool:
    """Whether ``text`` holds every content word of one of the topic's parts (a plural
    "s"/"es" either way)."""
    if not parts or not isinstance(text, str) or not text:
        return False
    tokens = set(_WORD.findall(text.casefold()))
    return any(all(_has(w, tokens) for w in part) for part in parts)


def says_a_request(text: str) -> bool:
    """Whether a turn's indexed text ("User: ...", "Assistant: ...", a line each) holds a
    forget request: each line is read without its speaker's label, which the recogniser
    would otherwise take for the sentence's first words."""
    from memstream.text import forget_request

    return any(forget_request(_SPEAKER.sub("", line, count=1)) is not None for line in text.splitlines())


class ForgetRequests:
    """One provider's forget requests: recognised on ``sync_turn``, honoured on a
    background thread, reported once by the next prefetch (see the module docstring)."""

    def __init__(self, tools: ToolHandlers, hide: Callable[[str, list[str]], None]) -> None:
        # what it sees of the provider: the tools (their ``ToolContext``, and ``memstream_forget``),
        # and ``hide(session, ids)``, which keeps items out of that session's next blocks
        self.tools = tools
        self.context = tools.context
        self.hide = hide
        self._lock = threading.Lock()
        self._pending: deque[tuple[ForgetRequest, str]] = deque()
        self._notices: list[str] = []
        self._thread: threading.Thread | None = None
        self.busy = False  # a request is being honoured (tests wait for the thread with ``idle``)

    # -- the hook's side: pure, no network ----------------------------------------------
    def heard(self, user_text: str) -> None:
        """The user's text of a turn: queue it when it is a forget request. Never raises."""
        try:
            low = user_text.lower()
            if not any(cue in low for cue in _CUES):
                return
            from memstream.text import forget_request  # imported by the first candidate only

            request = forget_request(user_text)
            if request is None:
                return
            try:
                self.context.check_writes()
            except ToolError:  # a cron job or subagent forgets nothing of the user's
                return
            self.context.count("forget_requests")
            with self._lock:
                self._pending.append((request, self.context.asker()[2]))
                while len(self._pending) > MAX_PENDING:
                    self._pending.popleft()
                    self.context.count("forget_request_errors")
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threads.spawn(self._run, name="memstream-forget")
                    self._thread.start()
        except Exception as exc:
            self.context.count("forget_request_errors")
            self.context.warn("provider.forget_request_failed", error=f"{type(exc).__name__}: {exc}")

    def idle(self) -> bool:
        """Nothing is waiting or being honoured."""
        with self._lock:
            return not self._pending and not self.busy

    def notice(self, block: str) -> str:
        """``block`` with the pending "forgotten at your request" lines (each given once);
        a block of its own when ``block`` is empty."""
        with self._lock:
            notices, self._notices = self._notices, []
        if not notices:
            return block
        lines = [f"- {NOTICE}{neutralise(topic, TOPIC_CHARS)}" for topic in notices]
        return "\n".join([block or HEADER, *lines])

    # -- the background thread -------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self.busy = False
                    self._thread = None
                    return
                request, session = self._pending.popleft()
                self.busy = True
            try:
                self._honour(request, session)
            except Exception as exc:
                self.context.count("forget_request_errors")
                self.context.warn("provider.forget_request_failed", error=f"{type(exc).__name__}: {exc}")

    def _honour(self, request: ForgetRequest, session: str) -> None:
        c = self.context
        parts = topic_parts(request.topic)
        if not parts:
            c.count("forget_requests_unmatched")
            return
        recall, settings = c.recall(), c.settings()
        if recall is None or settings is None:
            c.count("forget_request_errors")
            return
        tenant, agent, _ = c.asker()
        found: dict[str, None] = {}  # ids in the order found, once each
        for kind in SEARCH_KINDS:
            ask = SearchRequest(
                tenant=tenant, agent=agent, session=session, query=request.topic, kind=kind, k=SEARCH_K, history=True
            )
            answer = recall.ask(ask, timeout=settings.tool_timeout)
            if "error" in answer:  # the service refused the search: nothing is forgotten
                c.count("forget_request_errors")
                c.warn("provider.forget_request_failed", error=str(answer["error"]))
                return
            for item in answer.get("results") or []:
                if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                    continue
                text = item.get("text")
                if not matches(parts, text) or (item.get("kind") == "turn" and says_a_request(str(text))):
                    continue
                found[item["id"]] = None
        if not found:
            c.count("forget_requests_unmatched")
            return
        forgotten = []
        for item_id in found:
            result = json.loads(self.tools.handle("memstream_forget", {"id": item_id, "reason": "the user asked to forget it"}))
            if result.get("ok"):
                forgotten.append(item_id)
                c.count("forget_request_items")
            else:
                c.count("forget_request_errors")
                c.warn("provider.forget_request_failed", item=item_id, error=str(result.get("error")))
        if forgotten:
            self.hide(session, forgotten)  # out of the session's blocks while the workers apply the tombstones
            with self._lock:
                self._notices.append(request.topic)
