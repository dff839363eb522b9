"""The query side: hybrid (dense + sparse) search over turns and memories, plus facts.

Scope rules: the tenant always comes from configuration (the caller's settings), never
from a query argument; ``scope`` is ``current`` (the asking agent), ``session`` (the
asking session), ``all`` (every agent of the tenant) or an agent name.

Ranking (each step measured on the LoCoMo dev split, see BENCHMARKS.md):

1. per collection, the top ``CANDIDATES`` by cosine (dense) and the top ``CANDIDATES``
   by BM25 (the sparse vector, IDF from the engine), each min-max normalised to [0, 1]
   and fused convexly: ``DENSE_WEIGHT * dense + (1 - DENSE_WEIGHT) * sparse``. With the
   small int8 MiniLM the keyword side carries more; engine RRF, which ignores the score
   gaps, lost 10 points of Recall@10 to this;
2. when the query names some of the people whose turns are among the candidates (a
   turn's ``author``: a gateway user's name, a speaker), their turns get ``AUTHOR_WEIGHT``
   more: "what did Caroline research?" asks for Caroline's words, not for Melanie's
   replies that mention her. Naming every author (or a turn without one) changes nothing;
3. a turn inherits ``NEIGHBOUR_WEIGHT`` times the better fused score of its neighbours in
   the session (previous and next turn, among the candidates), and
   ``SECOND_NEIGHBOUR_WEIGHT`` times that of the turns two away: an answer usually sits
   next to the question or the remark that matches the query;
4. when the query asks about time ("latest", "recently", "now"...), newer candidates get
   up to ``RECENCY_WEIGHT`` more;
5. facts come through the provenance of the hits: every fact extracted from a hit's event
   (``FactsTable.facts_of_events``), followed to the current fact of their slot unless
   ``history``; a fact scores as the hit it came from;
6. diversity: items with the same normalised text are collapsed (a memory repeating the
   turn it came from, the same sentence said twice), the best one kept.

The score an item shows is its ranking score divided by ``SCORE_MAX``, the most that steps
1-4 can give anything: in [0, 1] for every kind, and ordered as the ranking is (a fact
scores as the hit it came from). It is relative to this query's candidates (step 1
normalises each side), not a probability; an item scoring 0 (the weakest dense candidate,
sharing no word with the query) is not a match and is not returned.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstream.projections import (
    CollectionNotFound,
    Fact,
    FactsTable,
    Filter,
    Hit,
    VectorStore,
    sparse_vector,
)
from memstream.query.versions import FixedVersions, Versions
from memstream.text import fact_sentence

if TYPE_CHECKING:
    import numpy as np

    from memstream.projections import Embedder

__all__ = ["Searcher", "asks_about_time", "fact_item"]

CANDIDATES = 50
DENSE_WEIGHT = 0.4
NEIGHBOUR_WEIGHT = 0.5
SECOND_NEIGHBOUR_WEIGHT = 0.35  # two turns away
RECENCY_WEIGHT = 0.15
AUTHOR_WEIGHT = 0.4
# the most steps 1-4 give: a fused 1 named author, its neighbours as good, and the newest
SCORE_MAX = (1.0 + AUTHOR_WEIGHT) * (1.0 + NEIGHBOUR_WEIGHT + SECOND_NEIGHBOUR_WEIGHT) + RECENCY_WEIGHT
KEYWORD_FLOOR = 1e-6  # the least a keyword match weighs on its side (it is a match)
FACT_SOURCES = 10  # the facts of this many best hits (at least 2 k) are looked up

_TIME = re.compile(
    r"\b(latest|recent(ly)?|lately|last|newest|now|currently|current|today|yesterday|"
    r"this (week|month|year)|these days)\b",
    re.IGNORECASE,
)
_NORM = re.compile(r"\W+")
_WORDS = re.compile(r"[^\W\d_]{3,}")


def named_authors(query: str, authors: set[str]) -> set[str]:
    """The authors among ``authors`` the query names (any word of three letters or more of
    the name, case-insensitive): {} unless that singles out some but not all of them."""
    authors = {a for a in authors if a}
    words = set(_WORDS.findall(query.casefold()))
    named = {a for a in authors if words & set(_WORDS.findall(a.casefold()))}
    return named if named and named != authors else set()


def asks_about_time(query: str) -> bool:
    return bool(_TIME.search(query or ""))


def _minmax(hits: list[Hit]) -> dict[str, tuple[float, Hit]]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    return {h.id: ((h.score - lo) / (hi - lo) if hi > lo else 1.0, h) for h in hits}


class Searcher:
    """Hybrid search over the versions ``versions`` resolves (the active ones, from the
    catalog; by default the store's own pointer, ``embedder`` and ``facts``)."""

    def __init__(self, store: VectorStore, embedder: Embedder, facts: FactsTable, versions: Versions | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.versions: Versions = versions or FixedVersions(store, embedder, facts)

    @property
    def facts(self) -> FactsTable:
        return self.versions.facts()

    def search(
        self,
        query: str,
        *,
        tenant: str,
        agent: str = "default",
        scope: str = "current",
        k: int = 10,
        kinds: tuple[str, ...] = ("turns", "memories", "facts"),
        session: str = "",
        history: bool = False,
        hot_since: float | None = None,
    ) -> list[dict[str, Any]]:
        """Top ``k`` results, best first: {id, kind, text, score, agent, session,
        occurred_at, event_ids} (facts also valid_to, superseded_by). ``hot_since`` (unix
        seconds): only the hot tier, turns and delegations that happened since then (every
        memory, and the facts of the hits)."""
        if scope == "session":
            f = Filter(tenant=tenant, session_id=session or "\x00none")
        else:
            f = Filter(tenant=tenant, agent=None if scope == "all" else (agent if scope == "current" else scope))
        dense_of: dict[int, np.ndarray] = {}  # per embedder: a version queries with its own
        sparse = sparse_vector(query)
        timely = asks_about_time(query)
        scored: list[tuple[float, dict[str, Any]]] = []
        sources: list[dict[str, Any]] = []  # the hits whose facts are wanted
        for name in ("turns", "memories"):
            if name not in kinds and not (name == "turns" and "facts" in kinds):
                continue
            try:
                collection, embedder = self.versions.reader(name)  # one version: its collection, its model
            except CollectionNotFound:
                continue
            dense = dense_of.get(id(embedder))
            if dense is None:
                dense = dense_of[id(embedder)] = embedder.embed([query])[0]
            narrowed = replace(f, since_ts=hot_since) if name == "turns" and hot_since is not None else f
            for score, item in self._rank(collection, dense, sparse, narrowed, timely, query, neighbours=name == "turns"):
                if name in kinds:
                    scored.append((score, item))
                if "facts" in kinds:
                    sources.append({**item, "_score": score})
        if "facts" in kinds:
            scored.extend(self._facts(tenant, sources, history, k))
        scored.sort(key=lambda x: -x[0])
        out: list[dict[str, Any]] = []
        seen_ids: set[str] = set()
        seen_texts: set[str] = set()
        for score, item in scored:
            if score <= 0.0:
                break  # sorted: no match from here on
            norm = _NORM.sub(" ", str(item.get("text", "")).casefold()).strip()
            if item["id"] in seen_ids or (norm and norm in seen_texts):
                continue
            seen_ids.add(item["id"])
            seen_texts.add(norm)
            item["score"] = round(min(1.0, score / SCORE_MAX), 6)
            out.append(item)
            if len(out) >= k:
                break
        return out

    def elsewhere(self, query: str, *, tenant: str, agents: list[str], kinds: tuple[str, ...]) -> dict[str, int]:
        """Per agent of ``tenant`` not in ``agents``: how many of its turns and memories share
        words with ``query`` (one keyword query per collection, at most ``CANDIDATES`` hits
        each, so a count is a lower bound past that). What a narrower scope left out."""
        sparse = sparse_vector(query)
        if not sparse[0]:
            return {}
        found: dict[str, set[str]] = {}
        for name in ("turns", "memories"):
            if name not in kinds and "facts" not in kinds:
                continue
            try:
                collection = self.versions.collection(name)
            except CollectionNotFound:
                continue
            for hit in self.store.search(collection, sparse=sparse, filter=Filter(tenant=tenant), limit=CANDIDATES):
                agent = str(hit.payload.get("agent") or "")
                if hit.score > 0 and agent not in agents:
                    found.setdefault(agent, set()).add(str(hit.payload.get("event_id")))
        return {agent: len(ids) for agent, ids in sorted(found.items())}

    # -- turns and memories -------------------------------------------------------------
    def _rank(
        self,
        collection: str,
        dense: np.ndarray,
        sparse: tuple[list[int], list[float]],
        f: Filter,
        timely: bool,
        query: str,
        neighbours: bool,
    ) -> list[tuple[float, dict[str, Any]]]:
        d = _minmax(self.store.search(collection, dense=dense, filter=f, limit=CANDIDATES))
        s = _minmax(self.store.search(collection, sparse=sparse, filter=f, limit=CANDIDATES)) if sparse[0] else {}
        fused: dict[str, tuple[float, Hit]] = {}
        for pid in set(d) | set(s):
            hit = (d.get(pid) or s[pid])[1]
            # a keyword match scores above 0 even as the weakest of its side (0 after _minmax):
            # a 0 is left for a dense candidate that shares no word and is the weakest of its side
            keyword = max(s[pid][0], KEYWORD_FLOOR) if pid in s else 0.0
            fused[pid] = (DENSE_WEIGHT * d.get(pid, (0.0, None))[0] + (1 - DENSE_WEIGHT) * keyword, hit)
        # one entry per event (chunks of one turn): the best chunk speaks for it
        best: dict[str, tuple[float, Hit]] = {}
        for score, hit in fused.values():
            eid = str(hit.payload.get("event_id"))
            if eid not in best or score > best[eid][0]:
                best[eid] = (score, hit)
        named = named_authors(query, {str(h.payload.get("author") or "") for _, h in best.values()})
        if named:
            best = {eid: (sc + AUTHOR_WEIGHT * (h.payload.get("author") in named), h) for eid, (sc, h) in best.items()}
        if neighbours:
            at = {
                (h.payload.get("session_id"), h.payload.get("turn_index")): sc
                for sc, h in best.values()
                if isinstance(h.payload.get("turn_index"), int)
            }
            boosted = {}
            for eid, (score, hit) in best.items():
                i = hit.payload.get("turn_index")
                if isinstance(i, int):
                    sess = hit.payload.get("session_id")
                    score += NEIGHBOUR_WEIGHT * max(at.get((sess, i - 1), 0.0), at.get((sess, i + 1), 0.0))
                    score += SECOND_NEIGHBOUR_WEIGHT * max(at.get((sess, i - 2), 0.0), at.get((sess, i + 2), 0.0))
                boosted[eid] = (score, hit)
            best = boosted
        if timely and best:
            times = [float(h.payload.get("occurred_at_ts") or 0) for _, h in best.values()]
            lo, hi = min(times), max(times)
            if hi > lo:
                best = {
                    eid: (sc + RECENCY_WEIGHT * (float(h.payload.get("occurred_at_ts") or 0) - lo) / (hi - lo), h)
                    for eid, (sc, h) in best.items()
                }
        out = []
        for eid, (score, hit) in best.items():
            p = hit.payload
            kind = p.get("kind", "turn")
            out.append(
                (
                    score,
                    {
                        "id": eid,
                        "kind": kind if kind in ("turn", "delegation") else "memory",
                        "text": p.get("text", ""),
                        "agent": p.get("agent"),
                        "session": p.get("session_id"),
                        "occurred_at": p.get("occurred_at"),
                        "event_ids": [eid],
                    },
                )
            )
        return out

    # -- facts, through the provenance of the hits -------------------------------------------
    def _facts(self, tenant: str, hits: list[dict[str, Any]], history: bool, k: int) -> list[tuple[float, dict[str, Any]]]:
        by_event: dict[str, float] = {}
        # the facts of the best hits only: a fact scores as its hit, so a later one cannot rank
        top = sorted(hits, key=lambda h: -float(h.get("_score", 0.0)))[: max(FACT_SOURCES, 2 * k)]
        for hit in top:
            if float(hit.get("_score", 0.0)) <= 0.0:
                continue  # not a match: neither are its facts
            by_event[hit["id"]] = max(by_event.get(hit["id"], 0.0), float(hit.get("_score", 0.0)))
        if not by_event:
            return []
        found = self.facts.facts_of_events(tenant, list(by_event))
        out: dict[str, tuple[float, Fact]] = {}
        for event_id, fact in found:
            score = by_event[event_id] + 1e-6  # just before the hit it came from
            if fact.valid_to is not None and not history:
                current = self._current(tenant, fact)
                if current is None:
                    continue
                fact = current
            if fact.id not in out or score > out[fact.id][0]:
                out[fact.id] = (score, fact)
        return [(score, fact_item(fact)) for score, fact in out.values()]

    def _current(self, tenant: str, fact: Fact) -> Fact | None:
        seen = set()
        while fact.valid_to is not None and fact.superseded_by and fact.id not in seen:
            seen.add(fact.id)
            nxt = self.facts.get_many(tenant, [fact.superseded_by])
            if not nxt:
                return None
            fact = nxt[0]
        return fact if fact.valid_to is None else None


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def fact_item(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "kind": "fact",
        "text": fact_sentence(fact.subject, fact.key, fact.value),
        "subject": fact.subject,
        "key": fact.key,
        "value": fact.value,
        "fact_kind": fact.kind,
        "agent": fact.agent,
        "session": fact.session_id,
        "occurred_at": _iso(fact.valid_from),
        "valid_to": _iso(fact.valid_to),
        "superseded_by": fact.superseded_by or None,
        "confidence": fact.confidence,
        "event_ids": list(fact.event_ids),
    }
