"""The read operations the query servers answer: recall (prefetch), search, context,
recent, facts and count.

Each op takes its typed request (``memstream.query.protocol``: decoded and checked there,
within its limits) and returns its typed answer, or a ``Refusal`` saying why it cannot.
Every request names its tenant, which the asking side takes from its own configuration
(the provider never lets a tool argument choose it; the server refuses a request without
one). ``scope`` is ``current`` (the asking agent, the default), ``session`` (the asking
session), ``all`` (every agent of the tenant) or an agent's name.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from typing import Any, Callable, Mapping

import structlog

from memstream.projections import (
    CollectionNotFound,
    CrossEncoder,
    FactsTable,
    Filter,
    LateError,
    LatePassages,
    RerankerError,
    SessionsIndex,
    VectorStore,
    item_point_id,
    shared_cross_encoder,
)
from memstream.query import ranking
from memstream.query.late import LATE_CANDIDATES, late_first, late_order, late_scores
from memstream.query.protocol import (
    BatchHandler,
    ContextAnswer,
    ContextRequest,
    ExistsAnswer,
    ExistsRequest,
    FactsAnswer,
    FactsRequest,
    Handlers,
    RecallAnswer,
    RecallRequest,
    RecentAnswer,
    RecentRequest,
    Refusal,
    SearchAnswer,
    Searched,
    SearchKind,
    SearchRequest,
)
from memstream.query.ranking import Ask, Searcher, fact_item
from memstream.query.rerank import CE_WEIGHT, LATE_CE_WEIGHT, LATE_KEEP, learned_cut, rerank
from memstream.query.versions import FixedVersions, Versions
from memstream.text import asks_about_past

__all__ = ["ReadOps", "asks_about_history"]

# The collections a search of each kind reads.
SEARCH_COLLECTIONS: dict[SearchKind, tuple[str, ...]] = {
    "turns": ("turns",),
    "memories": ("memories",),
    "facts": ("facts",),
    "all": ("turns", "memories", "facts"),
}


def asks_about_history(query: str) -> bool:
    """Questions about how things were, not how they are: superseded facts are wanted then
    (``memstream.text.facts.past``)."""
    return asks_about_past(query or "")


log = structlog.get_logger("memstream.query")


class ReadOps:
    def __init__(
        self,
        store: VectorStore,
        searcher: Searcher,
        facts: FactsTable,
        sessions: SessionsIndex,
        versions: Versions | None = None,
        hot_days: float = 0.0,
        cross_encoder: Callable[[], CrossEncoder] = shared_cross_encoder,
        late: LatePassages | None = None,
        recall_candidates: int = 0,
    ) -> None:
        self.store = store
        # a recall's candidates a side (MEMSTREAM_RECALL_CANDIDATES); 0: the ranking's RECALL_CANDIDATES
        self.recall_candidates = recall_candidates
        # what reorders a recall's best turns and memories (None: the ranking's order stands)
        self.late = late
        self.late_failures = 0  # recalls and searches the late model failed: the ranking's order stands
        self.learned_rerank = True  # the late cut's best ordered by rerank.LEARNED_WEIGHTS (off: the hand sum, as before)
        # what reranks a request that asks for it (loaded on its first use: one per process)
        self.cross_encoder = cross_encoder
        self.hot_days = hot_days  # prefetch (recall) reads the hot tier only; 0: every turn is hot
        self.searcher = searcher
        self.versions: Versions = versions or FixedVersions(store, searcher.embedder, facts, sessions)

    @property
    def facts(self) -> FactsTable:
        return self.versions.facts()

    @property
    def sessions(self) -> SessionsIndex:
        return self.versions.sessions()

    def handlers(self) -> Handlers:
        """The read ops as a query server's table (``count`` is the pipeline's)."""
        return Handlers(
            recall=self.recall,
            search=self.search,
            context=self.context,
            recent=self.recent,
            facts=self.facts_op,
            exists=self.exists,
        )

    @staticmethod
    def _agents(scope: str, agent: str) -> list[str] | None:
        """The agents a scope reads (None: every agent of the tenant)."""
        if scope == "all":
            return None
        if scope in ("current", "session"):
            return [agent or "default"]
        return [scope]

    # -- ops ------------------------------------------------------------------------------
    def _ask(
        self,
        request: SearchRequest | RecallRequest,
        kinds: tuple[str, ...],
        history: bool,
        hot_since: float | None = None,
        least: int = 0,
        candidates: int = 0,
    ) -> Ask:
        """The search ``request`` asks for (already within the protocol's limits), of at
        least ``least`` items (the candidates a reordering takes), from ``candidates`` a side
        (0: the ranking's ``CANDIDATES``)."""
        if isinstance(request, SearchRequest) and request.rerank:
            least = max(least, request.rerank_candidates)
        return Ask(
            request.query,
            tenant=request.tenant,
            agent=request.agent or "default",
            scope=request.scope or "current",
            k=max(request.k, least),
            kinds=kinds,
            session=request.session,
            history=history,
            hot_since=hot_since,
            candidates=candidates,
        )

    def search(self, request: SearchRequest, late: bool = True) -> SearchAnswer:
        """The results, the scope searched (``searched``: scope and agents, None for every
        agent) and, unless every agent or the session was searched, ``elsewhere``: per
        other agent, how many of its items share words with the query (``Searcher.elsewhere``).

        With the rerank asked, ``_reranked``'s order. Without it and with the late interaction
        on, the turns and memories among the ranking's best ``LATE_CANDIDATES`` in the late
        interaction's order, as the prefetch has them, each fact in its place (``late`` false:
        the ranking's order, as ``hurried`` answers; so does a late model that fails, counted)."""
        history = request.history or asks_about_history(request.query)
        passages = self.late if late and not request.rerank else None
        least = LATE_CANDIDATES if passages is not None else 0
        ask = self._ask(request, SEARCH_COLLECTIONS[request.kind], history, least=least)
        results = self.searcher.search_many([ask])[0]
        if isinstance(results, Exception):
            raise results
        if passages is not None:
            results = self._late_first(request.query, results, passages) + results[LATE_CANDIDATES:]
        results = results[: request.k] if not request.rerank else results
        agents = self._agents(ask.scope, ask.agent)
        answer = SearchAnswer(results=results, searched=Searched(scope=ask.scope, agents=agents))
        if request.rerank:
            answer.results, answer.reranked, answer.rerank_error = self._reranked(request, results)
        if agents is not None and ask.scope != "session":
            answer.elsewhere = self.searcher.elsewhere(request.query, tenant=request.tenant, agents=agents, kinds=ask.kinds)
        return answer

    def _reranked(self, request: SearchRequest, results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool, str | None]:
        """``results`` (the ranking's, up to the candidates) reranked by the cross-encoder and
        cut to the request's ``k``, and whether they were; with the late interaction on and more
        than ``LATE_KEEP`` candidates, the cross-encoder scores the late order's best ``LATE_KEEP``,
        ordered by the learned weights (``learned_cut``; by the hand sum at ``LATE_CE_WEIGHT`` with
        ``learned_rerank`` off). A late model that fails leaves the cross-encoder all of
        them at ``CE_WEIGHT`` (counted); a cross-encoder that cannot load or score leaves the order it was
        given, and says why."""
        candidates, k = request.rerank_candidates, request.k
        head, tail = results[:candidates], results[candidates:]
        passages, late = self.late, None
        if passages is not None and len(head) > LATE_KEEP:  # the late interaction's first cut
            try:
                (late,) = late_scores([request.query], [head], passages)
            except (LateError, sqlite3.Error) as exc:
                self.late_failures += 1
                log.warning("search.late_failed", error=str(exc))
        try:
            if passages is None or late is None:
                return rerank(request.query, results, k, self.cross_encoder, candidates, CE_WEIGHT), True, None
            if self.learned_rerank:
                return (learned_cut(request.query, head, late, k, self.cross_encoder) + tail)[:k], True, None
            ordered = late_first(request.query, head, passages, scores=late) + tail
            return rerank(request.query, ordered, k, self.cross_encoder, LATE_KEEP, LATE_CE_WEIGHT), True, None
        except RerankerError as exc:
            return results[:k], False, str(exc)

    def _late_first(self, query: str, results: list[dict[str, Any]], passages: LatePassages) -> list[dict[str, Any]]:
        """The first ``LATE_CANDIDATES`` of ``results`` with their turns and memories in the
        late interaction's order (their token vectors are stored) and each fact in its place;
        in the ranking's order when the late model fails (counted)."""
        head = results[:LATE_CANDIDATES]
        places = [i for i, item in enumerate(head) if item.get("kind") != "fact"]
        if len(places) < 2:
            return head
        try:
            ordered = late_first(query, [head[i] for i in places], passages)
        except (LateError, sqlite3.Error) as exc:
            self.late_failures += 1
            log.warning("search.late_failed", error=str(exc))
            return head
        out = list(head)
        for i, item in zip(places, ordered):
            out[i] = item
        return out

    def _hot_since(self) -> float | None:
        return time.time() - self.hot_days * 86_400 if self.hot_days > 0 else None

    def recall(self, request: RecallRequest) -> RecallAnswer:
        """Prefetch: the turn's best items of the hot tier (turns of the last ``hot_days``,
        every memory, the facts of those) of every kind, current facts first (superseded
        ones only when the message asks about the past)."""
        return self.recall_many([request])[0]

    def recall_many(self, requests: list[RecallRequest], late: bool = True) -> list[RecallAnswer]:
        """What ``recall`` answers to each of ``requests``, in order, with the shared work done
        once (``Searcher.search_many``: one model call, one engine call per collection, one
        facts lookup). A failure (the model, Redis, one search) raises: the server then
        answers the batch one request at a time, so the failing one fails alone. ``late``
        false: without the late interaction (the ranking's order), as ``hurried`` answers."""
        hot_since = self._hot_since()
        kinds = SEARCH_COLLECTIONS["all"]
        passages = self.late if late else None
        least = LATE_CANDIDATES if passages is not None else 0
        candidates = self.recall_candidates or ranking.RECALL_CANDIDATES  # read at the call: the prefetch grid moves it
        asks = [self._ask(r, kinds, asks_about_history(r.query), hot_since, least, candidates) for r in requests]
        ranked = []
        for items in self.searcher.search_many(asks):
            if isinstance(items, Exception):
                raise items
            ranked.append(items)
        ks = [r.k for r in requests]
        if passages is not None:
            try:
                return [RecallAnswer(items=items) for items in late_order([r.query for r in requests], ranked, ks, passages)]
            except (LateError, sqlite3.Error) as exc:
                self.late_failures += len(requests)
                log.warning("recall.late_failed", recalls=len(requests), error=str(exc))
        answers = []
        for items, k in zip(ranked, ks):
            facts = [item for item in items[:k] if item.get("kind") == "fact"]
            answers.append(RecallAnswer(items=(facts + [item for item in items if item.get("kind") != "fact"])[:k]))
        return answers

    def batched(self) -> dict[str, BatchHandler]:
        """The ops answered a batch at a time (``QueryServer``'s ``batched``)."""
        return {"recall": self.recall_many}

    def hurried(self) -> dict[str, BatchHandler]:
        """The ops' handlers for requests that waited too long (``QueryServer``'s ``hurried``):
        a recall and a search without the late interaction, when it has one (a reranked
        search keeps its rerank)."""
        if self.late is None:
            return {}
        return {
            "recall": functools.partial(self.recall_many, late=False),
            "search": lambda requests: [self.search(request, late=False) for request in requests],
        }

    def context(self, request: ContextRequest) -> ContextAnswer | Refusal:
        """The turns around a hit in its session: ``before`` earlier, ``after`` later."""
        tenant, item_id, before, after = request.tenant, request.id, request.before, request.after
        anchor = self._anchor(tenant, item_id)
        if anchor is None:
            return Refusal(error=f"no turn, memory or fact with id {item_id!r} in this tenant")
        agents = self._agents(request.scope or "current", request.agent)
        if agents is not None and anchor.get("agent") not in agents:
            return Refusal(error=f"{item_id!r} belongs to agent {anchor.get('agent')!r}: use scope='all' or that agent's name")
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
        return ContextAnswer(
            anchor={
                "id": item_id,
                "kind": anchor.get("kind"),
                "session": anchor.get("session_id"),
                "agent": anchor.get("agent"),
                "text": anchor.get("text", ""),
            },
            turns=window,
        )

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

    def exists(self, request: ExistsRequest) -> ExistsAnswer:
        """Whether ``id`` names a turn, memory or fact of the request's tenant (what
        ``memstream_forget`` checks before it writes a tombstone)."""
        anchor = self._anchor(request.tenant, request.id)
        if anchor is None:
            return ExistsAnswer(exists=False)
        return ExistsAnswer(exists=True, kind=anchor.get("kind"), agent=anchor.get("agent"))

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

    def recent(self, request: RecentRequest) -> RecentAnswer:
        scope, agent = request.scope or "current", request.agent or "default"
        if scope == "session":
            scope = "current"
        who = None if scope == "all" else (agent if scope == "current" else scope)
        return RecentAnswer(sessions=self.sessions.recent(request.tenant, who, request.limit))

    def facts_op(self, request: FactsRequest) -> FactsAnswer:
        found = self.facts.query(
            request.tenant,
            agents=self._agents(request.scope or "current", request.agent),
            subject=request.subject or None,
            kind=request.kind or None,
            history=request.history,
        )
        return FactsAnswer(facts=[fact_item(f) for f in found[: request.limit]], total=len(found))
