"""The query side: hybrid (dense + sparse) search over turns and memories, plus facts.

Scope rules: the tenant always comes from configuration (the caller's settings), never
from a query argument; ``scope`` is ``current`` (the asking agent), ``session`` (the
asking session), ``all`` (every agent of the tenant) or an agent name.

Ranking (each step measured on the LoCoMo dev split, see BENCHMARKS.md):

1. per collection, the top ``CANDIDATES`` by cosine (dense) and the top ``CANDIDATES``
   by BM25 (the sparse vector, IDF from the engine; a recall takes ``RECALL_CANDIDATES``
   of each, and never fewer than its ``k``), each min-max normalised to [0, 1]
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
6. diversity: items with the same normalised text (a memory repeating the turn it came
   from, the same sentence said twice) and memories whose dense vectors are within
   ``COLLAPSE_SIMILARITY`` cosine of one already taken from another agent (a fleet's
   agents writing the same fact in their own words) are collapsed into one:
   shown at the best one's place and score, with the newest one's text, and ``agree``,
   how many agents wrote it, when more than one did. Turns are never collapsed by their
   vectors (two alike turns, of one conversation or of two agents', are two moments, each
   with its neighbours: LoCoMo's multi-hop answers need both), nor one agent's own
   memories. Vectors are compared within one collection only (one version: one model's
   space), within one search (one tenant, one scope), for its best ``COLLAPSE_WINDOW``
   times k matching memories (the vectors the store holds, read once per collection for
   a batch).

The score an item shows is its ranking score divided by ``SCORE_MAX``, the most that steps
1-4 can give anything: in [0, 1] for every kind, and ordered as the ranking is (a fact
scores as the hit it came from). It is relative to this query's candidates (step 1
normalises each side), not a probability; an item scoring 0 (the weakest dense candidate,
sharing no word with the query) is not a match and is not returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from memstream.projections import (
    CollectionNotFound,
    Fact,
    FactsTable,
    Filter,
    Hit,
    Search,
    VectorStore,
    sparse_vector,
)
from memstream.query.protocol import AGREE
from memstream.query.versions import FixedVersions, Versions
from memstream.text import fact_sentence

if TYPE_CHECKING:
    import numpy as np

    from memstream.projections import Embedder

__all__ = ["RECALL_CANDIDATES", "Ask", "Searcher", "asks_about_time", "fact_item"]

CANDIDATES = 50
# a recall's (the prefetch's) candidates a side, never fewer than its k, unless MEMSTREAM_RECALL_CANDIDATES
# says otherwise: 30 against 50 costs x0.79 of a batched recall's CPU at 10k memories, and moved the
# prefetch's any@10 / all@10 by -0.3 / -0.7 points on LoCoMo dev (sign tests p 0.65 / 0.14) and
# -0.2 / -1.0 on test (BENCHMARKS.md, "The recall's candidates and the engine's calls"): recall first
RECALL_CANDIDATES = 50
DENSE_WEIGHT = 0.4
NEIGHBOUR_WEIGHT = 0.5
SECOND_NEIGHBOUR_WEIGHT = 0.35  # two turns away
RECENCY_WEIGHT = 0.15
AUTHOR_WEIGHT = 0.4
# the most steps 1-4 give: a fused 1 named author, its neighbours as good, and the newest
SCORE_MAX = (1.0 + AUTHOR_WEIGHT) * (1.0 + NEIGHBOUR_WEIGHT + SECOND_NEIGHBOUR_WEIGHT) + RECENCY_WEIGHT
KEYWORD_FLOOR = 1e-6  # the least a keyword match weighs on its side (it is a match)
FACT_SOURCES = 10  # the facts of this many best hits (at least 2 k) are looked up
# cosine at or above which two items of one collection state the same thing (bge-small;
# measured on the fleet paraphrase set and LoCoMo, BENCHMARKS.md); 0 or more than 1: off
COLLAPSE_SIMILARITY = 0.85
COLLAPSE_WINDOW = 5  # the vectors of this many times k best matches are read (tens of us a point)

_TIME = re.compile(
    r"\b(latest|recent(ly)?|lately|last|newest|now|currently|current|today|yesterday|"
    r"this (week|month|year)|these days)\b",
    re.IGNORECASE,
)
_NORM = re.compile(r"\W+")
_SCORE = itemgetter(0)  # the score of a (score, ...) pair: sorted best first, stable (reverse keeps ties in order)
_WORDS = re.compile(r"[^\W\d_]{3,}")


def named_authors(query: str, authors: set[str]) -> set[str]:
    """The authors among ``authors`` the query names (any word of three letters or more of
    the name, case-insensitive): {} unless that singles out some but not all of them."""
    authors = {a for a in authors if a}
    if len(authors) < 2:
        return set()  # none, or one: nothing to single out (the question not even read)
    words = set(_WORDS.findall(query.casefold()))
    named = {a for a in authors if words & set(_WORDS.findall(a.casefold()))}
    return named if named and named != authors else set()


def asks_about_time(query: str) -> bool:
    return bool(_TIME.search(query or ""))


def _scaled(hits: list[Hit]) -> list[float]:
    """The score of each of ``hits`` min-max scaled to its side's range, 1.0 when every
    score is the same (step 1)."""
    if not hits:
        return []
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi > lo:
        span = hi - lo
        return [(score - lo) / span for score in scores]
    return [1.0] * len(scores)


@dataclass(frozen=True, slots=True)
class Ask:
    """One search, as ``Searcher.search`` takes it."""

    query: str
    tenant: str
    agent: str = "default"
    scope: str = "current"
    k: int = 10
    kinds: tuple[str, ...] = ("turns", "memories", "facts")
    session: str = ""
    history: bool = False
    hot_since: float | None = None
    candidates: int = 0  # a side's candidates per collection, at least k (0: ``CANDIDATES``)

    def limit(self) -> int:
        """The dense and the keyword candidates this search takes per collection."""
        return max(self.candidates or CANDIDATES, self.k)


class _Plan:
    """One search under way: its filter and keyword vector, what it found so far."""

    __slots__ = ("ask", "filter", "sparse", "timely", "scored", "sources", "by_event", "error", "points")

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.error: Exception | None = None
        self.scored: list[tuple[float, _Item]] = []
        self.sources: list[tuple[float, str]] = []  # (score, event id) of the hits whose facts are wanted
        self.by_event: dict[str, float] = {}
        self.points: dict[str, tuple[str, str]] = {}  # item id -> (collection, its best point's id)
        try:
            if ask.scope == "session":
                self.filter = Filter(tenant=ask.tenant, session_id=ask.session or "\x00none")
            else:
                agent = None if ask.scope == "all" else (ask.agent if ask.scope == "current" else ask.scope)
                self.filter = Filter(tenant=ask.tenant, agent=agent)
            self.sparse = sparse_vector(ask.query)
            self.timely = asks_about_time(ask.query)
        except Exception as exc:  # noqa: BLE001  this search's failure, the others go on
            self.error = exc

    def wants(self, collection: str) -> bool:
        """Whether this search reads ``collection`` (the turns also for the facts of its hits)."""
        return collection in self.ask.kinds or (collection == "turns" and "facts" in self.ask.kinds)


def _fact_sources(sources: list[tuple[float, str]], k: int) -> dict[str, float]:
    """Event id -> best score, of the best hits only (``FACT_SOURCES``, at least 2 k) that
    are matches: a fact scores as its hit, so a later one cannot rank."""
    by_event: dict[str, float] = {}
    for score, event_id in sorted(sources, key=_SCORE, reverse=True)[: max(FACT_SOURCES, 2 * k)]:
        if score <= 0.0:
            break  # sorted: not a match from here on, nor are its facts
        if score > by_event.get(event_id, -1.0):
            by_event[event_id] = score
    return by_event


@lru_cache(maxsize=8192)
def _normalised(text: str) -> str:
    """``text`` as step 6 compares it (case and runs of non-word characters folded): the
    same memories come back recall after recall, so each text is folded once."""
    return _NORM.sub(" ", text.casefold()).strip()


_OWN_KINDS = frozenset(("turn", "delegation"))  # the kinds an item of a point keeps (any other is a memory)
_UNREAD = object()  # a field of a hit's payload not read yet


class _Item:
    """One ranked candidate (a hit's event or a fact) as step 6 reads it: its id and point
    given, every other field read from the hit's payload on first use (once), and the
    answer's dict built only for an item shown."""

    __slots__ = ("id", "point", "payload", "answer", "_kind", "_agent", "_text", "_ts", "_session")

    def __init__(
        self,
        iid: str,
        point: str,
        payload: Mapping[str, Any] | None = None,
        answer: dict[str, Any] | None = None,
        *,
        kind: Any = _UNREAD,
        agent: Any = _UNREAD,
        ts: Any = _UNREAD,
    ) -> None:
        self.id, self.point = iid, point
        self.payload, self.answer = payload, answer  # a hit's payload, or a fact's answer as it is shown
        self._kind, self._agent, self._ts = kind, agent, ts
        self._text: Any = _UNREAD
        self._session: Any = _UNREAD

    def kind(self) -> Any:
        if self._kind is _UNREAD:
            kind = self.payload.get("kind", "turn")  # type: ignore[union-attr]  # only a hit's is read
            self._kind = kind if kind in _OWN_KINDS else "memory"
        return self._kind

    def agent(self) -> Any:
        if self._agent is _UNREAD:
            self._agent = self.payload.get("agent")  # type: ignore[union-attr]  # only a hit's is read
        return self._agent

    def text(self) -> Any:
        if self._text is _UNREAD:
            self._text = self.answer.get("text", "") if self.payload is None else self.payload.get("text", "")  # type: ignore[union-attr]  # a fact's answer is set
        return self._text

    def ts(self) -> float:
        if self._ts is _UNREAD:
            self._ts = float(self.payload.get("occurred_at_ts") or 0.0)  # type: ignore[union-attr]  # a fact's time is given
        return float(self._ts)

    def session(self) -> Any:
        if self._session is _UNREAD:
            self._session = self.payload.get("session_id")  # type: ignore[union-attr]  # only a hit's is read
        return self._session

    def shown(self) -> dict[str, Any]:
        """The answer's fields of this item (a fresh dict: the caller adds its score)."""
        if self.answer is not None:
            return dict(self.answer)
        get = self.payload.get  # type: ignore[union-attr]  # a hit's payload, when no answer is given
        return {
            "id": self.id,
            "kind": self.kind(),
            "text": self.text(),
            "agent": self.agent(),
            "session": self.session(),
            "occurred_at": get("occurred_at"),
            "event_ids": [self.id],
        }


def _norm(item: _Item) -> str:
    return _normalised(str(item.text()))


class _Group:
    """Items that say one thing: shown as the newest of them, at the best one's score."""

    __slots__ = ("shown", "score", "agents", "ts", "home")

    def __init__(self, score: float, item: _Item, home: str) -> None:
        self.shown, self.score, self.ts, self.home = item, score, item.ts(), home
        self.agents = {str(item.agent() or "")}

    def add(self, item: _Item) -> None:
        self.agents.add(str(item.agent() or ""))
        ts = item.ts()
        if ts > self.ts:  # the newest wording speaks for the group
            self.shown, self.ts = item, ts

    def item(self) -> dict[str, Any]:
        out = self.shown.shown()
        out["score"] = round(min(1.0, self.score / SCORE_MAX), 6)
        if len(self.agents) > 1:
            out[AGREE] = len(self.agents)
        return out


def _best(
    scored: list[tuple[float, _Item]],
    k: int,
    vectors: dict[str, np.ndarray] | None = None,
    points: dict[str, tuple[str, str]] | None = None,
    similarity: float = 0.0,
) -> list[dict[str, Any]]:
    """The top ``k`` of ``scored``, best first, with their shown score; the same id, the
    same normalised text and (``similarity`` in (0, 1]) an item of one collection whose
    vector (``vectors``, by item id; ``points``: item id -> its collection) is within
    ``similarity`` cosine of a member's, once (step 6); none that scores 0 (not a match)."""
    import numpy as np

    scored.sort(key=_SCORE, reverse=True)
    vectors, points = vectors or {}, points or {}
    # the matches' vectors as rows, their cosines computed at once; each row's group, or -1
    rows: dict[str, int] = {}
    if vectors and 0.0 < similarity <= 1.0:
        rows = {iid: r for r, iid in enumerate(dict.fromkeys(i.id for sc, i in scored if sc > 0.0 and i.id in vectors))}
    if rows:
        matrix = np.stack([vectors[iid] for iid in rows])
        alike = (matrix @ matrix.T) >= similarity
        group_of = np.full(len(rows), -1)
    groups: list[_Group] = []
    by_id: dict[str, _Group] = {}
    by_text: dict[str, _Group] = {}
    for score, item in scored:
        if score <= 0.0:
            break  # sorted: no match from here on
        iid, norm = item.id, _norm(item)
        row = rows.get(iid) if rows else None
        group = by_id.get(iid) or (by_text.get(norm) if norm else None)
        home = points.get(iid, ("",))[0] if row is not None else ""
        if group is None and row is not None:
            agent = str(item.agent() or "")
            for g in sorted(set(group_of[alike[row] & (group_of >= 0)].tolist())):  # the earliest group first
                # another agent's words (one agent's own items stay apart), in this collection
                if groups[g].home == home and groups[g].agents != {agent}:
                    group = groups[g]
                    break
        if group is not None:
            group.add(item)
        elif len(groups) < k:
            group = _Group(score, item, home)
            groups.append(group)
        elif not rows:
            break  # one agent's matches (or no collapse): nothing later adds an agreeing agent
        else:
            continue  # past the k-th: only what folds into one of them still counts
        if row is not None:
            group_of[row] = groups.index(group)
        by_id[iid] = group
        if norm:
            by_text.setdefault(norm, group)
    return [g.item() for g in groups]


class Searcher:
    """Hybrid search over the versions ``versions`` resolves (the active ones, from the
    catalog; by default the store's own pointer, ``embedder`` and ``facts``)."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        facts: FactsTable,
        versions: Versions | None = None,
        similarity: float = COLLAPSE_SIMILARITY,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.versions: Versions = versions or FixedVersions(store, embedder, facts)
        self.similarity = similarity  # step 6's cosine (0: paraphrases are not collapsed)

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
        ask = Ask(query, tenant, agent, scope, k, kinds, session, history, hot_since)
        found = self.search_many([ask])[0]
        if isinstance(found, Exception):
            raise found
        return found

    def search_many(self, asks: Sequence[Ask]) -> list[list[dict[str, Any]] | Exception]:
        """What ``search`` answers to each of ``asks``, in order, doing the shared work once:
        the questions embedded in one model call per embedder, the facts of every hit read
        in one lookup per tenant. A search that fails alone is its exception in the list;
        a failure of the shared work (the model, Redis) raises."""
        plans = [_Plan(ask) for ask in asks]
        embedded: dict[int, dict[str, np.ndarray]] = {}  # per embedder: the questions it embedded
        for name in ("turns", "memories"):
            wanting = [p for p in plans if p.error is None and p.wants(name)]
            if not wanting:
                continue
            try:
                collection, embedder = self.versions.reader(name)  # one version: its collection, its model
            except CollectionNotFound:
                continue
            dense = self._dense(embedder, [p.ask.query for p in wanting], embedded.setdefault(id(embedder), {}))
            searches: list[Search] = []
            at: list[tuple[int, bool]] = []  # per plan: where its dense search is, whether a keyword one follows
            for plan in wanting:
                ask = plan.ask
                narrowed = (
                    replace(plan.filter, since_ts=ask.hot_since) if name == "turns" and ask.hot_since is not None else plan.filter
                )
                limit = ask.limit()
                at.append((len(searches), bool(plan.sparse[0])))
                searches.append(Search(filter=narrowed, dense=dense[ask.query], limit=limit))
                if plan.sparse[0]:
                    searches.append(Search(filter=narrowed, sparse=plan.sparse, limit=limit))
            found = self.store.search_many(collection, searches)  # one engine call for the batch's searches
            for plan, (i, keyword) in zip(wanting, at):
                ask = plan.ask
                try:
                    scored = self._rank(
                        found[i], found[i + 1] if keyword else [], timely=plan.timely, query=ask.query, neighbours=name == "turns"
                    )
                except Exception as exc:  # noqa: BLE001  this search's failure, the others go on
                    plan.error = exc
                    continue
                if name in ask.kinds:
                    plan.scored.extend(scored)
                    plan.points.update((item.id, (collection, item.point)) for _, item in scored)
                if "facts" in ask.kinds:
                    plan.sources.extend((score, item.id) for score, item in scored)
        self._facts_many([p for p in plans if p.error is None and "facts" in p.ask.kinds])
        live = [p for p in plans if p.error is None]
        vectors = self._vectors(live) if 0.0 < self.similarity <= 1.0 else {}
        return [p.error if p.error is not None else _best(p.scored, p.ask.k, vectors, p.points, self.similarity) for p in plans]

    def _vectors(self, plans: list[_Plan]) -> dict[str, np.ndarray]:
        """Item id -> the unit dense vector of its best point, for each plan's best
        ``COLLAPSE_WINDOW`` times k memories that are matches (a turn is a moment of one
        conversation, never folded into another agent's): one read per
        collection for the whole batch; none for a plan whose matches are all one agent's
        (nothing of it can collapse by vector)."""
        import numpy as np

        wanted: dict[str, dict[str, str]] = {}  # collection -> point id -> item id
        for plan in plans:
            if isinstance(plan.filter.agent, str):
                continue  # one agent's memories (the store's filter): none can fold into another agent's
            matches = [(sc, i) for sc, i in plan.scored if sc > 0.0 and i.kind() == "memory" and i.id in plan.points]
            if len({item.agent() for _, item in matches}) < 2:
                continue  # one agent's (and so are the best of them): not sorted
            matches.sort(key=_SCORE, reverse=True)
            matches = matches[: COLLAPSE_WINDOW * plan.ask.k]
            if len({item.agent() for _, item in matches}) < 2:
                continue
            for _, item in matches:
                collection, pid = plan.points[item.id]
                wanted.setdefault(collection, {})[pid] = item.id
        out: dict[str, np.ndarray] = {}
        for collection, items in wanted.items():
            for point in self.store.retrieve(collection, list(items), with_vectors=True):
                if point.dense is None or point.id not in items:
                    continue
                vector = np.asarray(point.dense, dtype=np.float32)
                norm = float(np.linalg.norm(vector))
                if norm > 0.0:
                    out[items[point.id]] = vector / norm
        return out

    def _dense(self, embedder: Embedder, queries: list[str], known: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each distinct query's vector by ``embedder``: those ``known`` (this embedder's,
        already asked for another collection) as they are, the others in one model call."""
        distinct = [q for q in dict.fromkeys(queries) if q not in known]
        if distinct:
            known.update(zip(distinct, embedder.embed(distinct)))
        return known

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
        self, dense_hits: list[Hit], keyword_hits: list[Hit], *, timely: bool, query: str, neighbours: bool
    ) -> list[tuple[float, _Item]]:
        """One collection's candidates of one search (its dense and keyword hits), scored:
        one pass over the hits for the fused score; then per event, its best chunk's payload
        read for what steps 2-4 and 6 need of every candidate (the rest when it is shown)."""
        fused: dict[str, list[Any]] = {}  # point id -> [fused score, hit]
        for h, scaled in zip(dense_hits, _scaled(dense_hits)):
            fused[h.id] = [DENSE_WEIGHT * scaled, h]
        for h, scaled in zip(keyword_hits, _scaled(keyword_hits)):
            # a keyword match scores above 0 even as the weakest of its side: a 0 is left
            # for a dense candidate that shares no word and is the weakest of its side
            keyword = (1 - DENSE_WEIGHT) * max(scaled, KEYWORD_FLOOR)
            entry = fused.get(h.id)
            if entry is None:
                fused[h.id] = [keyword, h]
            else:
                entry[0] += keyword
        # one entry per event (chunks of one turn): the best chunk speaks for it
        best: dict[str, list[Any]] = {}  # event id -> [score, hit]
        for entry in fused.values():
            eid = entry[1].payload.get("event_id")
            if type(eid) is not str:
                eid = str(eid)
            held = best.get(eid)
            if held is None or entry[0] > held[0]:
                best[eid] = entry
        rows = [[score, _Item(eid, hit.id, hit.payload), hit.payload.get("author")] for eid, (score, hit) in best.items()]
        named = named_authors(query, {str(row[2] or "") for row in rows})
        if named:
            for row in rows:
                row[0] += AUTHOR_WEIGHT * (row[2] in named)
        if neighbours:
            places = [(row[1].session(), row[1].payload.get("turn_index")) for row in rows]
            at = {place: row[0] for row, place in zip(rows, places) if isinstance(place[1], int)}
            for row, (sess, i) in zip(rows, places):
                if isinstance(i, int):
                    score = row[0]
                    score += NEIGHBOUR_WEIGHT * max(at.get((sess, i - 1), 0.0), at.get((sess, i + 1), 0.0))
                    score += SECOND_NEIGHBOUR_WEIGHT * max(at.get((sess, i - 2), 0.0), at.get((sess, i + 2), 0.0))
                    row[0] = score
        if timely and rows:
            times = [row[1].ts() for row in rows]
            lo, hi = min(times), max(times)
            if hi > lo:
                for row, ts in zip(rows, times):
                    row[0] = row[0] + RECENCY_WEIGHT * (ts - lo) / (hi - lo)
        return [(row[0], row[1]) for row in rows]

    # -- facts, through the provenance of the hits -------------------------------------------
    def _facts_many(self, plans: list[_Plan]) -> None:
        """Each plan's facts, scored as the hit they came from, added to its ``scored``: the
        facts of every plan's best hits read in one lookup per tenant."""
        wanted: dict[str, set[str]] = {}
        for plan in plans:
            plan.by_event = _fact_sources(plan.sources, plan.ask.k)
            if plan.by_event:
                wanted.setdefault(plan.ask.tenant, set()).update(plan.by_event)
        found: dict[str, dict[str, list[Fact]]] = {}
        for tenant, events in wanted.items():
            per_event: dict[str, list[Fact]] = {}
            for event_id, fact in self.facts.facts_of_events(tenant, sorted(events)):
                per_event.setdefault(event_id, []).append(fact)
            found[tenant] = per_event
        for plan in plans:
            if not plan.by_event:
                continue
            per_event = found.get(plan.ask.tenant, {})
            out: dict[str, tuple[float, Fact]] = {}
            for event_id, base in plan.by_event.items():
                score = base + 1e-6  # just before the hit it came from
                for fact in per_event.get(event_id, ()):
                    if fact.valid_to is not None and not plan.ask.history:
                        current = self._current(plan.ask.tenant, fact)
                        if current is None:
                            continue
                        fact = current
                    if fact.id not in out or score > out[fact.id][0]:
                        out[fact.id] = (score, fact)
            for score, fact in out.values():
                item = fact_item(fact)
                plan.scored.append(
                    (score, _Item(fact.id, "", answer=item, kind="fact", agent=fact.agent, ts=fact.valid_from or 0.0))
                )

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
