"""The query side: hybrid (dense + sparse) search over turns and memories, plus facts.

Scope rules: the tenant always comes from configuration (the caller's settings), never
from a query argument; ``scope`` is ``current`` (the asking agent), ``all`` (every
agent of the tenant) or an agent name.
"""

from __future__ import annotations

from datetime import datetime, timezone

from .facts_table import FactsTable
from .sparse import sparse_vector, tokenize
from .store import CollectionNotFound, Filter, VectorStore

__all__ = ["Searcher"]


class Searcher:
    def __init__(self, store: VectorStore, embedder, facts: FactsTable):
        self.store = store
        self.embedder = embedder
        self.facts = facts

    def search(self, query: str, *, tenant: str, agent: str = "default", scope: str = "current",
               k: int = 10, kinds: tuple[str, ...] = ("turns", "memories", "facts")) -> list[dict]:
        """Top ``k`` results, best first: {id, kind, text, score, agent, session, occurred_at}."""
        agents = None if scope == "all" else (agent if scope == "current" else scope)
        f = Filter(tenant=tenant, agent=agents)
        dense = self.embedder.embed([query])[0]
        sparse = sparse_vector(query)
        ranked: list[tuple[float, dict]] = []
        for name in ("turns", "memories"):
            if name not in kinds:
                continue
            try:
                collection = self.store.collection_for_read(name)
            except CollectionNotFound:
                continue
            hits = self.store.search(collection, dense=dense, sparse=sparse if sparse[0] else None,
                                     filter=f, limit=k)
            for rank, hit in enumerate(hits):
                p = hit.payload
                ranked.append((1.0 / (60 + rank + 1), {
                    "id": p.get("event_id"), "kind": "turn" if name == "turns" else "memory",
                    "text": p.get("text", ""), "score": round(float(hit.score), 6),
                    "agent": p.get("agent"), "session": p.get("session_id"),
                    "occurred_at": p.get("occurred_at")}))
        if "facts" in kinds:
            terms = set(tokenize(query))
            facts = self.facts.query(tenant, agents=None if agents is None else [agents])
            scored = []
            for fact in facts:
                overlap = len(terms & set(tokenize(f"{fact.subject} {fact.key} {fact.value} {fact.text}")))
                if overlap:
                    scored.append((overlap, fact))
            scored.sort(key=lambda x: (-x[0], -x[1].valid_from))
            for rank, (overlap, fact) in enumerate(scored[:k]):
                ranked.append((1.0 / (60 + rank + 1), {
                    "id": fact.id, "kind": "fact", "text": f"{fact.subject} {fact.key}: {fact.value}",
                    "score": float(overlap), "agent": fact.agent, "session": fact.session_id,
                    "occurred_at": datetime.fromtimestamp(fact.valid_from, timezone.utc).isoformat()}))
        ranked.sort(key=lambda x: -x[0])
        seen: set[tuple] = set()
        out = []
        for _, item in ranked:
            key = (item["kind"], item["id"], item["text"])
            if key in seen:
                continue
            seen.add(key)
            out.append(item)
            if len(out) >= k:
                break
        return out
