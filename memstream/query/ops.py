"""The read operations the query servers answer: recall (prefetch), search, context,
recent, facts and count.

Every request names its tenant, which the asking side takes from its own configuration
(the provider never lets a tool argument choose it); a request without one is an error.
``scope`` is ``current`` (the asking agent, the default), ``session`` (the asking
session), ``all`` (every agent of the tenant) or an agent's name. Answers are JSON-ready
dicts; a bad request is ``{"error": ...}``.
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping

from memstream.core import PermanentError
from memstream.projections import (
    CollectionNotFound,
    FactsTable,
    Filter,
    SessionsIndex,
    VectorStore,
    item_point_id,
)
from memstream.query.protocol import BatchHandler, Handler, most
from memstream.query.ranking import Ask, Searcher, fact_item
from memstream.query.versions import FixedVersions, Versions

__all__ = ["ReadOps", "asks_about_history", "BadRequest"]

# The collections a search of each kind reads.
SEARCH_COLLECTIONS = {"turns": ("turns",), "memories": ("memories",), "facts": ("facts",), "all": ("turns", "memories", "facts")}

# Questions about how things were, not how they are: superseded facts are wanted then.
_HISTORY = re.compile(
    r"\b(used to|previous(ly)?|before|formerly|former|earlier|originally|no longer|any ?more|"
    r"history|changed?|past|old|was|were|did .* (live|work|use))\b",
    re.IGNORECASE,
)


class BadRequest(PermanentError, ValueError):
    """A request no handler can answer as asked (the answer says why)."""


def asks_about_history(query: str) -> bool:
    return bool(_HISTORY.search(query or ""))


class ReadOps:
    def __init__(
        self,
        store: VectorStore,
        searcher: Searcher,
        facts: FactsTable,
        sessions: SessionsIndex,
        versions: Versions | None = None,
        hot_days: float = 0.0,
    ) -> None:
        self.store = store
        self.hot_days = hot_days  # prefetch (recall) reads the hot tier only; 0: every turn is hot
        self.searcher = searcher
        self.versions: Versions = versions or FixedVersions(store, searcher.embedder, facts, sessions)

    @property
    def facts(self) -> FactsTable:
        return self.versions.facts()

    @property
    def sessions(self) -> SessionsIndex:
        return self.versions.sessions()

    def handlers(self) -> dict[str, Handler]:
        ops = {
            "recall": self.recall,
            "search": self.search,
            "context": self.context,
            "recent": self.recent,
            "facts": self.facts_op,
            "exists": self.exists,
        }

        def checked(fn: Handler) -> Handler:
            def run(request: dict[str, Any]) -> dict[str, Any]:
                try:
                    return fn(request)
                except BadRequest as exc:
                    return {"error": str(exc)}

            return run

        return {name: checked(fn) for name, fn in ops.items()}

    # -- request fields ---------------------------------------------------------------
    @staticmethod
    def _tenant(request: dict[str, Any]) -> str:
        tenant = request.get("tenant")
        if not isinstance(tenant, str) or not tenant:
            raise BadRequest("the request has no tenant")
        return tenant

    @staticmethod
    def _limit(request: dict[str, Any], key: str, default: int, top: int) -> int:
        value = request.get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise BadRequest(f"{key} must be an integer, got {value!r}")
        if not 0 <= int(value) <= top:
            raise BadRequest(f"{key} must be between 0 and {top}, got {value}")
        return int(value)

    @staticmethod
    def _scope(request: dict[str, Any]) -> tuple[str, str]:
        scope = request.get("scope") or "current"
        if not isinstance(scope, str):
            raise BadRequest(f"scope must be a string, got {scope!r}")
        agent = str(request.get("agent") or "default")
        return scope, agent

    def _agents(self, request: dict[str, Any]) -> list[str] | None:
        scope, agent = self._scope(request)
        if scope == "all":
            return None
        if scope in ("current", "session"):
            return [agent]
        return [scope]

    # -- ops ------------------------------------------------------------------------------
    def _ask(self, request: dict[str, Any], hot_since: float | None = None) -> Ask:
        """The search ``request`` asks for (``BadRequest`` when it cannot be answered as asked)."""
        tenant = self._tenant(request)
        query = request.get("query")
        if not isinstance(query, str) or not query.strip():
            raise BadRequest("query must be a non-empty string")
        kind = request.get("kind") or "all"
        kinds = tuple(request["kinds"]) if isinstance(request.get("kinds"), list) else SEARCH_COLLECTIONS.get(kind)
        if not kinds or not set(kinds) <= {"turns", "memories", "facts"}:
            raise BadRequest(f"kind must be one of {sorted(SEARCH_COLLECTIONS)}, got {kind!r}")
        scope, agent = self._scope(request)
        op = "recall" if request.get("op") == "recall" else "search"
        k = self._limit(request, "k", 10, most(op, "k")) or 10
        return Ask(
            query,
            tenant=tenant,
            agent=agent,
            scope=scope,
            k=k,
            kinds=kinds,
            session=str(request.get("session") or ""),
            history=bool(request.get("history")) or asks_about_history(query),
            hot_since=hot_since,
        )

    def search(self, request: dict[str, Any], hot_since: float | None = None, elsewhere: bool = True) -> dict[str, Any]:
        """The results, the scope searched (``searched``: scope and agents, None for every
        agent) and, unless every agent was searched, ``elsewhere``: per other agent, how
        many of its items share words with the query (``Searcher.elsewhere``)."""
        ask = self._ask(request, hot_since)
        results = self.searcher.search_many([ask])[0]
        if isinstance(results, Exception):
            raise results
        agents = self._agents(request)
        answer: dict[str, Any] = {"results": results, "searched": {"scope": ask.scope, "agents": agents}}
        if elsewhere and agents is not None and ask.scope != "session":
            answer["elsewhere"] = self.searcher.elsewhere(ask.query, tenant=ask.tenant, agents=agents, kinds=ask.kinds)
        return answer

    def _hot_since(self) -> float | None:
        return time.time() - self.hot_days * 86_400 if self.hot_days > 0 else None

    def recall(self, request: dict[str, Any]) -> dict[str, Any]:
        """Prefetch: the turn's best items of the hot tier (turns of the last ``hot_days``,
        every memory, the facts of those), current facts first (superseded ones only when
        the message asks about the past)."""
        return self.recall_many([request])[0]

    def recall_many(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What ``recall`` answers to each of ``requests``, in order, with the shared work done
        once (``Searcher.search_many``): a request that cannot be answered as asked gets its
        error answer and the others their items. Any other failure (the model, Redis, one
        search) raises: the server then answers the batch one request at a time."""
        hot_since = self._hot_since()
        answers: list[dict[str, Any] | None] = [None] * len(requests)
        asks: list[tuple[int, Ask]] = []
        for i, request in enumerate(requests):
            try:
                asks.append((i, self._ask({**request, "kind": "all", "kinds": None}, hot_since)))
            except BadRequest as exc:
                answers[i] = {"error": str(exc)}
        found = self.searcher.search_many([ask for _, ask in asks]) if asks else []
        for (i, _), items in zip(asks, found):
            if isinstance(items, BadRequest):
                answers[i] = {"error": str(items)}
                continue
            if isinstance(items, Exception):
                # a failure, not a bad request: raised, so that the server answers the batch
                # one request at a time and counts and logs this one's failure as any other
                raise items
            facts = [item for item in items if item.get("kind") == "fact"]
            answers[i] = {"items": facts + [item for item in items if item.get("kind") != "fact"]}
        return [a if a is not None else {"error": "recall returned no answer"} for a in answers]

    def batched(self) -> dict[str, BatchHandler]:
        """The ops answered a batch at a time (``QueryServer``'s ``batched``)."""
        return {"recall": self.recall_many}

    def context(self, request: dict[str, Any]) -> dict[str, Any]:
        """The turns around a hit in its session: ``before`` earlier, ``after`` later."""
        tenant = self._tenant(request)
        item_id = request.get("id")
        if not isinstance(item_id, str) or not item_id:
            raise BadRequest("id must be a non-empty string (an id from memstream_search)")
        before = self._limit(request, "before", 3, most("context", "before"))
        after = self._limit(request, "after", 3, most("context", "after"))
        anchor = self._anchor(tenant, item_id)
        if anchor is None:
            return {"error": f"no turn, memory or fact with id {item_id!r} in this tenant"}
        agents = self._agents(request)
        if agents is not None and anchor.get("agent") not in agents:
            return {"error": f"{item_id!r} belongs to agent {anchor.get('agent')!r}: use scope='all' or that agent's name"}
        turns = self._session_turns(tenant, str(anchor.get("session_id") or ""))
        at = float(anchor.get("occurred_at_ts") or 0)
        pos = next((i for i, t in enumerate(turns) if t["id"] == anchor.get("event_id")), None)
        if pos is None:  # a memory or fact: the turns nearest in time
            pos = sum(1 for t in turns if t["_ts"] <= at) - 1
            window = turns[max(0, pos + 1 - before) : pos + 1 + after]
        else:
            window = turns[max(0, pos - before) : pos + 1 + after]
        for t in window:
            t.pop("_ts", None)
            t["hit"] = t["id"] == anchor.get("event_id")
        return {
            "anchor": {
                "id": item_id,
                "kind": anchor.get("kind"),
                "session": anchor.get("session_id"),
                "agent": anchor.get("agent"),
                "text": anchor.get("text", ""),
            },
            "turns": window,
        }

    def tiers(self, tenant: str) -> dict[str, dict[str, int]]:
        """Points of the active turns and memories versions of ``tenant`` in each tier
        (``memstream stats``): hot (what prefetch reads) and cold (only search and tools)."""
        cutoff = self._hot_since()
        out: dict[str, dict[str, int]] = {}
        for name in ("turns", "memories"):
            try:
                collection = self.versions.collection(name)
            except CollectionNotFound:
                continue
            total = self.store.count(collection, Filter(tenant=tenant))
            hot = (
                total
                if name == "memories" or cutoff is None
                else self.store.count(collection, Filter(tenant=tenant, since_ts=cutoff))
            )
            out[name] = {"hot": hot, "cold": total - hot}
        return out

    def exists(self, request: dict[str, Any]) -> dict[str, Any]:
        """Whether ``id`` names a turn, memory or fact of the request's tenant (what
        ``memstream_forget`` checks before it writes a tombstone)."""
        tenant = self._tenant(request)
        item_id = request.get("id")
        if not isinstance(item_id, str) or not item_id:
            raise BadRequest("id must be a non-empty string")
        anchor = self._anchor(tenant, item_id)
        if anchor is None:
            return {"exists": False}
        return {"exists": True, "kind": anchor.get("kind"), "agent": anchor.get("agent")}

    def _anchor(self, tenant: str, item_id: str) -> dict[str, Any] | None:
        # the item's first point as a version with tenant ids names it, and as one without
        candidates = [item_point_id(tenant, item_id, 0, scoped=True), item_point_id(tenant, item_id, 0, scoped=False)]
        for name in ("turns", "memories"):
            try:
                collection = self.versions.collection(name)
                found = self.store.retrieve(collection, candidates)
            except (CollectionNotFound, ValueError):
                continue
            for point in found:
                if point.payload.get("tenant") == tenant and point.payload.get("event_id") == item_id:
                    return dict(point.payload)
        fact = self.facts.get(tenant, item_id)
        if fact is not None and fact.event_ids:
            anchor = self._anchor(tenant, fact.event_ids[0]) or {}
            return {
                **anchor,
                "kind": "fact",
                "text": fact_item(fact)["text"],
                "agent": fact.agent,
                "session_id": fact.session_id or anchor.get("session_id"),
            }
        return None

    def _session_turns(self, tenant: str, session: str) -> list[dict[str, Any]]:
        try:
            collection = self.versions.collection("turns")
        except CollectionNotFound:
            return []
        chunks: dict[str, list[Mapping[str, Any]]] = {}
        offset: str | None = None
        while True:
            page, offset = self.store.scroll(collection, Filter(tenant=tenant, session_id=session), limit=256, offset=offset)
            for p in page:
                chunks.setdefault(str(p.payload.get("event_id")), []).append(p.payload)
            if offset is None:
                break
        turns = []
        for event_id, parts in chunks.items():
            parts.sort(key=lambda p: int(p.get("chunk", 0)))
            head = parts[0]
            turns.append(
                {
                    "id": event_id,
                    "kind": head.get("kind"),
                    "turn_index": head.get("turn_index"),
                    "occurred_at": head.get("occurred_at"),
                    "agent": head.get("agent"),
                    "session": head.get("session_id"),
                    "text": "\n".join(str(p.get("text", "")) for p in parts),
                    "_ts": float(head.get("occurred_at_ts") or 0),
                }
            )
        turns.sort(key=lambda t: (t["_ts"], t["turn_index"] or 0))
        return turns

    def recent(self, request: dict[str, Any]) -> dict[str, Any]:
        tenant = self._tenant(request)
        limit = self._limit(request, "limit", 5, most("recent", "limit")) or 5
        scope, agent = self._scope(request)
        if scope == "session":
            scope = "current"
        who = None if scope == "all" else (agent if scope == "current" else scope)
        return {"sessions": self.sessions.recent(tenant, who, limit)}

    def facts_op(self, request: dict[str, Any]) -> dict[str, Any]:
        tenant = self._tenant(request)
        subject = request.get("subject") or None
        kind = request.get("kind") or None
        for name, value in (("subject", subject), ("kind", kind)):
            if value is not None and not isinstance(value, str):
                raise BadRequest(f"{name} must be a string, got {value!r}")
        limit = self._limit(request, "limit", 20, most("facts", "limit")) or 20
        found = self.facts.query(
            tenant, agents=self._agents(request), subject=subject, kind=kind, history=bool(request.get("history"))
        )
        return {"facts": [fact_item(f) for f in found[:limit]], "total": len(found)}
