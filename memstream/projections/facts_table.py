"""The facts table: current facts and their history, in Redis, where every host reads it.

Keys (``P`` = prefix, ``N`` = the table's version, the facts projection's; built by
``memstream.core.keys``): ``P:facts:vN:{tenant}`` hash fact id -> JSON fact;
``P:facts:vN:{tenant}:current`` hash slot -> fact id. A slot is (agent, subject, key) for a
single-valued key (name, location, ...) and (agent, subject, key, value) for a
multi-valued one (likes, uses, ...). ``P:facts:vN:{tenant}:events`` hash event id -> how
many facts were extracted from the event, for the events with more than
``PROBED_FACTS``. A new version of the facts projection builds its own table beside the
live one.

Fact ids: the n-th fact extracted from an event (n from 1, counting every fact the
extractor proposed, kept or not) has the id ``fact_id(event_id, n)``, the same in every
process and release. ``facts_of_events`` finds every stored fact of the events it is
given: the first ``PROBED_FACTS`` ids of each event are looked up directly, the others
through the event's count.

Guarantees: ``assert_fact`` is idempotent (the fact id derives from the event id and
the fact's index in it) and atomic per tenant (WATCH/MULTI, retried); a new value in a
slot supersedes the old fact, which gets ``valid_to`` and stays as history; the same
value again only adds provenance; an older event replayed after a newer one becomes
history, never the current fact. A retraction (``Fact.retracts``: "I don't live in Berlin
anymore") ends the slot's current fact when it has the retracted value (any value when the
retraction names none) and holds the slot itself, never current (``valid_to`` is its
``valid_from``), so that an older statement replayed late stays history; a later statement
of any value takes the slot again. Readers never see a retraction: ``query`` and
``facts_of_events`` leave them out; the fact it ended keeps ``superseded_by`` pointing at it.
``assert_facts`` asserts a batch with the outcome and the effect of ``assert_fact`` on
each fact in turn (two facts of one slot in a batch included), in one transaction for the
batch: one read of what the batch needs, one write, the whole batch planned again when
another writer changed a table it touches.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, Iterable, Sequence

import msgspec
import redis
from redis.exceptions import NoScriptError

from memstream.core import as_str, keys
from memstream.projections.stores.ids import named_uuid

__all__ = ["Fact", "FactsTable", "PROBED_FACTS", "fact_id", "fact_ids"]

# How many facts of an event are looked up by id without asking how many it has (a LoCoMo
# turn gives at most 3); an event with more records its count (``note_extracted``).
PROBED_FACTS = 12


def fact_ids(event_id: str, first: int, last: int) -> list[str]:
    """``fact_id(event_id, n)`` for n in ``first..last``, computed together (a search
    asks for the ids of every hit: the JSON encoding of the event id is done once)."""
    head = '["fact",' + json.dumps(event_id, ensure_ascii=False, separators=(",", ":")) + ","
    return [named_uuid(f"{head}{n}]") for n in range(first, last + 1)]


# The probed ids of this many events are kept (about 1 KB each): a query server looks up
# the facts of every hit, two dozen events a search, and the same events come back across
# searches (a recall at 10k memories spent 0.4 ms of its ~4 ms computing them).
PROBED_CACHE = 4096


@functools.lru_cache(maxsize=PROBED_CACHE)
def _probed_ids(event_id: str) -> tuple[str, ...]:
    return tuple(fact_ids(event_id, 1, PROBED_FACTS))


def fact_id(event_id: str, n: int) -> str:
    """The id of the ``n``-th fact (from 1) extracted from event ``event_id``:
    ``point_id("fact", event_id, n)``, stable across processes and releases."""
    return fact_ids(event_id, n, n)[0]


class Fact(msgspec.Struct, kw_only=True):
    """One fact as stored: ``kind`` is one of ``FACT_KINDS`` (``memstream.text``), as the
    extractor gave it."""

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
    retracts: bool = False  # a retraction: the slot's value (any, when empty) no longer holds

    @property
    def current(self) -> bool:
        return self.valid_to is None


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(Fact)


def _norm(value: str) -> str:
    return " ".join(value.casefold().split())


# What a batch of asserts reads, in one round trip: KEYS are each tenant's facts hash and
# current hash, in pairs; ARGV per tenant: n, n fact ids, m, m slots. Per tenant it returns
# {whether each fact id is stored (1/0), each slot's current fact id, that fact}.
_LOOKUP = """
local out, a = {}, 1
for t = 1, #KEYS, 2 do
  local n = tonumber(ARGV[a]); a = a + 1
  local stored = {}
  for i = 1, n do stored[i] = redis.call('HEXISTS', KEYS[t], ARGV[a]); a = a + 1 end
  local m = tonumber(ARGV[a]); a = a + 1
  local ids, facts = {}, {}
  for i = 1, m do
    local id = redis.call('HGET', KEYS[t + 1], ARGV[a]); a = a + 1
    ids[i] = id
    facts[i] = id and redis.call('HGET', KEYS[t], id)
  end
  out[#out + 1] = {stored, ids, facts}
end
return out
"""
_LOOKUP_SHA = hashlib.sha1(_LOOKUP.encode()).hexdigest()


class _TenantPlan:
    """One tenant's share of a batch of asserts: what was read, and what planning changed
    (facts by id, slots), for the facts that come after it in the batch and for the write."""

    __slots__ = ("facts_key", "current_key", "stored", "current", "facts", "written", "moved")

    def __init__(self, facts_key: str, current_key: str) -> None:
        self.facts_key, self.current_key = facts_key, current_key
        self.stored: set[str] = set()  # fact ids in the table (read, or written by this batch)
        self.current: dict[str, str] = {}  # slot -> its current fact id
        self.facts: dict[str, Fact] = {}  # id -> fact, for the current facts of the slots read
        self.written: dict[str, Fact] = {}  # id -> fact to write
        self.moved: dict[str, str] = {}  # slot -> the fact id that becomes its current one


def _copy(fact: Fact) -> Fact:
    return msgspec.structs.replace(fact, event_ids=list(fact.event_ids))


class FactsTable:
    """The facts of the facts projection's version ``version``, every tenant's."""

    version = 1

    def __init__(self, client: redis.Redis, prefix: str = "memstream", *, version: int | None = None):
        if version is not None:
            self.version = version
        self.client = client
        self.prefix = prefix

    def _keys(self, tenant: str) -> tuple[str, str]:
        return (keys.facts(self.prefix, self.version, tenant), keys.facts_current(self.prefix, self.version, tenant))

    def _events_key(self, tenant: str) -> str:
        return keys.facts_events(self.prefix, self.version, tenant)

    def note_extracted(self, tenant: str, event_id: str, count: int) -> None:
        """Record that ``count`` facts were extracted from ``event_id`` (their ids are
        ``fact_id(event_id, 1..count)``), when that is more than ``PROBED_FACTS``. Called
        before the facts are asserted: a reader may look up an id not stored yet, never
        miss one that is (``assert_facts`` writes it with the facts, atomically)."""
        if count > PROBED_FACTS:
            self.client.hset(self._events_key(tenant), event_id, count)

    def facts_of_events(self, tenant: str, event_ids: list[str]) -> list[tuple[str, Fact]]:
        """Every stored fact extracted from the events (current or history, retractions
        left out), as (event id, fact), by event then by index; one round trip, two for
        events with more than ``PROBED_FACTS`` facts."""
        if not event_ids:
            return []
        facts_key = self._keys(tenant)[0]
        probed = [_probed_ids(eid) for eid in event_ids]
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hmget(facts_key, [fid for ids in probed for fid in ids])
            pipe.hmget(self._events_key(tenant), event_ids)
            raws, counts = pipe.execute()
        rows = [raws[i * PROBED_FACTS : (i + 1) * PROBED_FACTS] for i in range(len(event_ids))]
        more = [
            (i, fact_ids(eid, PROBED_FACTS + 1, int(c)))
            for i, (eid, c) in enumerate(zip(event_ids, counts))
            if c is not None and int(c) > PROBED_FACTS
        ]
        if more:
            extra = iter(self.client.hmget(facts_key, [fid for _, ids in more for fid in ids]))
            for i, ids in more:
                rows[i] = rows[i] + [next(extra) for _ in ids]
        found = [(eid, _dec.decode(raw)) for eid, row in zip(event_ids, rows) for raw in row if raw]
        return [(eid, fact) for eid, fact in found if not fact.retracts]

    @staticmethod
    def slot(agent: str, subject: str, key: str, value: str, single: bool) -> str:
        parts = [agent, _norm(subject), key] + ([] if single else [_norm(value)])
        return "\x1f".join(parts)

    def assert_fact(self, fact: Fact, single: bool) -> str:
        """Record ``fact``; returns "new", "superseded", "history", "confirmed" or "duplicate";
        for a retraction "retracted" (it ended the current fact) or "unmatched" (it did not)."""
        return self.assert_facts([(fact, single)])[0]

    def assert_facts(self, facts: Sequence[tuple[Fact, bool]], extracted: Sequence[tuple[str, str, int]] = ()) -> list[str]:
        """Record each ``(fact, single)`` in order, as ``assert_fact`` one after the other
        would (a fact sees those before it in the batch), and note each ``(tenant, event
        id, count)`` of ``extracted`` as ``note_extracted`` does, in the same transaction,
        ahead of the facts. Returns each fact's outcome, in order.

        One transaction for the batch: its tenants' tables are WATCHed, read in one round
        trip, planned here and written in one MULTI/EXEC; when another writer changed one
        of them in between, the batch is read and planned again (redis-py's
        ``transaction``). The facts given are never changed (planning works on copies)."""
        notes = [(tenant, eid, count) for tenant, eid, count in extracted if count > PROBED_FACTS]
        if not facts:
            if notes:
                with self.client.pipeline(transaction=True) as pipe:
                    for tenant, eid, count in notes:
                        pipe.hset(self._events_key(tenant), eid, count)
                    pipe.execute()
            return []
        slots = [self.slot(f.agent, f.subject, f.key, f.value, single) for f, single in facts]
        tenants: dict[str, tuple[list[str], dict[str, None]]] = {}  # tenant -> its fact ids, its slots
        for (fact, _), slot in zip(facts, slots):
            ids, wanted = tenants.setdefault(fact.tenant, ([], {}))
            ids.append(fact.id)
            wanted[slot] = None
        watched = [key for tenant in tenants for key in self._keys(tenant)]

        def attempt(pipe: redis.client.Pipeline) -> list[str]:
            # runs with every table WATCHed; redis-py re-runs it when one changed before EXEC
            tables = self._lookup(pipe, tenants)
            outcomes = [self._assert_in(tables[fact.tenant], _copy(fact), slot) for (fact, _), slot in zip(facts, slots)]
            pipe.multi()
            for tenant, eid, count in notes:
                pipe.hset(self._events_key(tenant), eid, count)
            for table in tables.values():
                if table.written:
                    pipe.hset(table.facts_key, mapping={fid: _enc.encode(f) for fid, f in table.written.items()})
                if table.moved:
                    pipe.hset(table.current_key, mapping={slot: fid for slot, fid in table.moved.items()})
            return outcomes

        # with value_from_callable the transaction returns what ``attempt`` returns;
        # redis-py's types say the callable returns None
        outcomes = self.client.transaction(
            attempt,  # type: ignore[arg-type]  # typed as returning None
            *watched,
            value_from_callable=True,
        )
        assert isinstance(outcomes, list)
        return outcomes

    def _lookup(
        self, pipe: redis.client.Pipeline, tenants: dict[str, tuple[list[str], dict[str, None]]]
    ) -> dict[str, _TenantPlan]:
        """What the batch needs of each tenant's table, read in one round trip (``_LOOKUP``)."""
        script_keys: list[str] = []
        args: list[str | int] = []
        for tenant, (ids, wanted) in tenants.items():
            script_keys += self._keys(tenant)
            args += [len(ids), *ids, len(wanted), *wanted]
        try:
            replies = pipe.evalsha(_LOOKUP_SHA, len(script_keys), *script_keys, *args)
        except NoScriptError:  # the server's script cache was flushed (or never had it)
            replies = pipe.eval(_LOOKUP, len(script_keys), *script_keys, *args)
        tables = {}
        for (tenant, (ids, wanted)), (stored, current, raws) in zip(tenants.items(), replies):
            table = _TenantPlan(*self._keys(tenant))
            table.stored = {fid for fid, flag in zip(ids, stored) if flag}
            for slot, fid, raw in zip(wanted, current, raws):
                if fid is None:
                    continue
                table.current[slot] = as_str(fid)
                if raw:
                    table.facts[as_str(fid)] = _dec.decode(raw)
            tables[tenant] = table
        return tables

    def _assert_in(self, table: _TenantPlan, fact: Fact, slot: str) -> str:
        """Plan ``fact`` into ``table`` as it stands after the facts before it; its outcome."""
        if fact.id in table.stored:
            return "duplicate"
        cur_id = table.current.get(slot)
        cur = table.facts.get(cur_id) if cur_id is not None else None
        outcome, changed, becomes_current = self._plan(fact, cur)
        for f in changed:
            table.facts[f.id] = table.written[f.id] = f
            table.stored.add(f.id)
        if becomes_current:
            table.current[slot] = table.moved[slot] = fact.id
        return outcome

    def _plan(self, fact: Fact, cur: Fact | None) -> tuple[str, tuple[Fact, ...], bool]:
        """What asserting ``fact`` into a slot whose current fact is ``cur`` does: its
        outcome, the facts to write (changed in place), and whether ``fact`` becomes the
        slot's current fact."""
        if fact.retracts:
            return self._plan_retraction(fact, cur)
        if cur is None:
            return "new", (fact,), True
        if cur.retracts:  # the slot's value was retracted: any newer statement holds again
            if fact.valid_from < cur.valid_from:
                fact.valid_to = cur.valid_from
                fact.superseded_by = cur.id
                return "history", (fact,), False
            cur.superseded_by = fact.id  # a reader following an ended fact arrives here
            return "new", (cur, fact), True
        if _norm(cur.value) == _norm(fact.value):
            known = len(cur.event_ids)
            for eid in fact.event_ids:
                if eid not in cur.event_ids:
                    cur.event_ids.append(eid)
            return "confirmed", ((cur,) if len(cur.event_ids) > known else ()), False
        if fact.valid_from < cur.valid_from:  # an older statement, replayed late
            fact.valid_to = cur.valid_from
            fact.superseded_by = cur.id
            return "history", (fact,), False
        cur.valid_to = fact.valid_from
        cur.superseded_by = fact.id
        return "superseded", (cur, fact), True

    @staticmethod
    def _plan_retraction(fact: Fact, cur: Fact | None) -> tuple[str, tuple[Fact, ...], bool]:
        """``_plan`` for a retraction: it is never current itself; it ends ``cur`` when
        ``cur`` is no older and holds the retracted value (any value, when it names none),
        and holds an empty slot."""
        fact.valid_to = fact.valid_from
        if cur is None:
            return "unmatched", (fact,), True
        if cur.retracts or fact.valid_from < cur.valid_from or (fact.value and _norm(cur.value) != _norm(fact.value)):
            return "unmatched", (fact,), False
        cur.valid_to = fact.valid_from
        cur.superseded_by = fact.id
        return "retracted", (cur, fact), True

    def retract_event(self, tenant: str, event_id: str) -> int:
        """Remove every fact whose only source is ``event_id`` (a forgotten event)."""
        facts_key, current_key = self._keys(tenant)
        removed = 0
        for fact in self.query(tenant, history=True, retractions=True):
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
        self.client.hdel(self._events_key(tenant), event_id)
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

    def query(
        self,
        tenant: str,
        *,
        agents: Iterable[str] | None = None,
        subject: str | None = None,
        kind: str | None = None,
        key: str | None = None,
        history: bool = False,
        retractions: bool = False,
    ) -> list[Fact]:
        """Facts of a tenant (current only unless ``history``; retractions only with
        ``retractions``), newest first."""
        facts_key, _ = self._keys(tenant)
        agent_set = set(agents) if agents is not None else None
        out = []
        for raw in self.client.hvals(facts_key):
            fact = _dec.decode(raw)
            if not history and not fact.current:
                continue
            if fact.retracts and not retractions:
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
        for key in self.client.scan_iter(match=keys.facts_pattern(self.prefix, self.version), count=500):
            k = key.decode() if isinstance(key, bytes) else key
            if not k.endswith((":current", ":events")):
                total += int(self.client.hlen(k))
        return total

    @staticmethod
    def to_dict(fact: Fact) -> dict[str, Any]:
        built: dict[str, Any] = json.loads(_enc.encode(fact))
        return built
