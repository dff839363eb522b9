"""The facts table: current facts and their history, in Redis, where every host reads it.

Keys (``P`` = prefix): ``P:facts:{tenant}`` hash fact id -> JSON fact;
``P:facts:{tenant}:current`` hash slot -> fact id. A slot is (agent, subject, key) for a
single-valued key (name, location, ...) and (agent, subject, key, value) for a
multi-valued one (likes, uses, ...).

Guarantees: ``assert_fact`` is idempotent (the fact id derives from the event id and
the fact's index in it) and atomic per tenant (WATCH/MULTI, retried); a new value in a
slot supersedes the old fact, which gets ``valid_to`` and stays as history; the same
value again only adds provenance; an older event replayed after a newer one becomes
history, never the current fact.
"""

from __future__ import annotations

import json
from typing import Iterable

import msgspec
import redis

__all__ = ["Fact", "FactsTable"]


class Fact(msgspec.Struct, kw_only=True):
    id: str
    tenant: str
    agent: str
    subject: str
    kind: str
    key: str
    value: str
    text: str
    confidence: float
    valid_from: float
    valid_to: float | None = None
    superseded_by: str = ""
    event_ids: list[str] = []
    session_id: str = ""

    @property
    def current(self) -> bool:
        return self.valid_to is None


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(Fact)


def _norm(value: str) -> str:
    return " ".join(value.casefold().split())


class FactsTable:
    def __init__(self, client: redis.Redis, prefix: str = "memstream", namespace: str = "facts"):
        self.client = client
        self.prefix = prefix
        self.namespace = namespace

    def _keys(self, tenant: str) -> tuple[str, str]:
        base = f"{self.prefix}:{self.namespace}:{tenant}"
        return base, f"{base}:current"

    @staticmethod
    def slot(agent: str, subject: str, key: str, value: str, single: bool) -> str:
        parts = [agent, _norm(subject), key] + ([] if single else [_norm(value)])
        return "\x1f".join(parts)

    def assert_fact(self, fact: Fact, single: bool) -> str:
        """Record ``fact``; returns "new", "superseded", "history", "confirmed" or "duplicate"."""
        facts_key, current_key = self._keys(fact.tenant)
        slot = self.slot(fact.agent, fact.subject, fact.key, fact.value, single)

        def attempt(pipe: redis.client.Pipeline) -> str:
            # runs with both keys WATCHed; redis-py re-runs it when either changed before EXEC
            if pipe.hexists(facts_key, fact.id):
                pipe.unwatch()
                return "duplicate"
            cur_id = pipe.hget(current_key, slot)
            cur = None
            if cur_id is not None:
                raw = pipe.hget(facts_key, cur_id)
                cur = _dec.decode(raw) if raw else None
            pipe.multi()
            return self._plan(pipe, facts_key, current_key, slot, fact, cur)

        return self.client.transaction(attempt, facts_key, current_key, value_from_callable=True)

    def _plan(self, pipe, facts_key: str, current_key: str, slot: str, fact: Fact,
              cur: Fact | None) -> str:
        if cur is None:
            pipe.hset(facts_key, fact.id, _enc.encode(fact))
            pipe.hset(current_key, slot, fact.id)
            return "new"
        if _norm(cur.value) == _norm(fact.value):
            for eid in fact.event_ids:
                if eid not in cur.event_ids:
                    cur.event_ids.append(eid)
            pipe.hset(facts_key, cur.id, _enc.encode(cur))
            return "confirmed"
        if fact.valid_from < cur.valid_from:  # an older statement, replayed late
            fact.valid_to = cur.valid_from
            fact.superseded_by = cur.id
            pipe.hset(facts_key, fact.id, _enc.encode(fact))
            return "history"
        cur.valid_to = fact.valid_from
        cur.superseded_by = fact.id
        pipe.hset(facts_key, cur.id, _enc.encode(cur))
        pipe.hset(facts_key, fact.id, _enc.encode(fact))
        pipe.hset(current_key, slot, fact.id)
        return "superseded"

    def retract_event(self, tenant: str, event_id: str) -> int:
        """Remove every fact whose only source is ``event_id`` (a forgotten event)."""
        facts_key, current_key = self._keys(tenant)
        removed = 0
        for fact in self.query(tenant, history=True):
            if event_id not in fact.event_ids:
                continue
            fact.event_ids.remove(event_id)
            if fact.event_ids:
                self.client.hset(facts_key, fact.id, _enc.encode(fact))
                continue
            self.client.hdel(facts_key, fact.id)
            for slot, fid in self.client.hgetall(current_key).items():
                if (fid.decode() if isinstance(fid, bytes) else fid) == fact.id:
                    self.client.hdel(current_key, slot)
            removed += 1
        return removed

    def get_many(self, tenant: str, fact_ids: list[str]) -> list[Fact]:
        """The facts among ``fact_ids`` that exist (current or history), one round trip."""
        if not fact_ids:
            return []
        return [_dec.decode(raw) for raw in self.client.hmget(self._keys(tenant)[0], fact_ids) if raw]

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        """One fact by id (current or history), or None."""
        found = self.get_many(tenant, [fact_id])
        return found[0] if found else None

    def forget_fact(self, tenant: str, fact_id: str) -> int:
        """Remove one fact (a tombstone named it): 1 if it existed; the slot it held is freed."""
        facts_key, current_key = self._keys(tenant)
        if not self.client.hdel(facts_key, fact_id):
            return 0
        for slot, fid in self.client.hgetall(current_key).items():
            if (fid.decode() if isinstance(fid, bytes) else fid) == fact_id:
                self.client.hdel(current_key, slot)
        return 1

    def query(self, tenant: str, *, agents: Iterable[str] | None = None, subject: str | None = None,
              kind: str | None = None, key: str | None = None, history: bool = False) -> list[Fact]:
        """Facts of a tenant (current only unless ``history``), newest first."""
        facts_key, _ = self._keys(tenant)
        agent_set = set(agents) if agents is not None else None
        out = []
        for raw in self.client.hvals(facts_key):
            fact = _dec.decode(raw)
            if not history and not fact.current:
                continue
            if agent_set is not None and fact.agent not in agent_set:
                continue
            if subject is not None and _norm(fact.subject) != _norm(subject):
                continue
            if kind is not None and fact.kind != kind:
                continue
            if key is not None and fact.key != key:
                continue
            out.append(fact)
        out.sort(key=lambda f: f.valid_from, reverse=True)
        return out

    def count(self, tenant: str | None = None) -> int:
        if tenant is not None:
            return int(self.client.hlen(self._keys(tenant)[0]))
        total = 0
        for key in self.client.scan_iter(match=f"{self.prefix}:{self.namespace}:*", count=500):
            k = key.decode() if isinstance(key, bytes) else key
            if not k.endswith(":current"):
                total += int(self.client.hlen(k))
        return total

    @staticmethod
    def to_dict(fact: Fact) -> dict:
        return json.loads(_enc.encode(fact))

