"""The facts table: current facts and their history, in Redis, where every host reads it.

Keys (``P`` = prefix, ``N`` = the table's version, the facts projection's; built by
``memstream.core.keys``): ``P:facts:vN:{tenant}`` hash fact id -> JSON fact;
``P:facts:vN:{tenant}:current`` hash slot -> fact id. A slot is (agent, subject, key) for a
single-valued key (name, location, ...) and (agent, subject, key, value) for a
multi-valued one (likes, uses, ...). ``P:facts:vN:{tenant}:by_event`` hash event id -> the
ids of the facts extracted from it that the table holds (the event → facts index, written
in the transaction that writes the facts, entries removed with the facts they name);
``P:facts:vN:{tenant}:indexed`` says the index covers the whole table. A new version of the
facts projection builds its own table beside the live one.

Fact ids: the n-th fact extracted from an event (n from 1, counting every fact the
extractor proposed, kept or not) has the id ``fact_id(event_id, n)``, the same in every
process and release. ``facts_of_events`` finds every stored fact of the events it is
given through the index: one script call reads the index entries of the events and the
facts they name, nothing else. A table written before the index existed is indexed once
(``index_existing``, run by the facts projection before it applies anything).

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
import structlog
from redis.exceptions import NoScriptError

from memstream.core import as_str, keys
from memstream.projections.stores.ids import named_uuid

__all__ = ["Fact", "FactsTable", "fact_id", "fact_ids"]

log = structlog.get_logger("memstream.projection")

# Releases before the event → facts index looked up the first 12 ids of each event and
# recorded the count of an event with more (``keys.facts_events``): the build of the index
# for such a table (``index_existing``) searches an event's ids that far, or to its count.
_LEGACY_PROBED = 12

# The suffixes of a table's keys that are not its facts hash (``keys.facts_pattern`` finds them all).
_NOT_FACTS = (":current", ":events", ":by_event", ":indexed")


def fact_ids(event_id: str, first: int, last: int) -> list[str]:
    """``fact_id(event_id, n)`` for n in ``first..last``, computed together (a search
    asks for the ids of every hit: the JSON encoding of the event id is done once)."""
    head = '["fact",' + json.dumps(event_id, ensure_ascii=False, separators=(",", ":")) + ","
    return [named_uuid(f"{head}{n}]") for n in range(first, last + 1)]


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


# What a batch of asserts reads, in one round trip: KEYS are each tenant's facts hash,
# current hash and event → facts index, in threes; ARGV per tenant: n, n fact ids, m, m
# slots, e, e event ids. Per tenant it returns {whether each fact id is stored (1/0), each
# slot's current fact id, that fact, each event's index entry}.
_LOOKUP = """
local out, a = {}, 1
for t = 1, #KEYS, 3 do
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
  local e = tonumber(ARGV[a]); a = a + 1
  local entries = {}
  for i = 1, e do entries[i] = redis.call('HGET', KEYS[t + 2], ARGV[a]) or ''; a = a + 1 end
  out[#out + 1] = {stored, ids, facts, entries}
end
return out
"""
_LOOKUP_SHA = hashlib.sha1(_LOOKUP.encode()).hexdigest()

# The facts of some events, in one round trip: KEYS the index and the facts hash, ARGV the
# event ids; per event, the stored facts its index entry names, in its order.
_OF_EVENTS = """
local out = {}
for i = 1, #ARGV do
  local found = {}
  local ids = redis.call('HGET', KEYS[1], ARGV[i])
  if ids then
    for fid in string.gmatch(ids, '%S+') do
      local raw = redis.call('HGET', KEYS[2], fid)
      if raw then found[#found + 1] = raw end
    end
  end
  out[i] = found
end
return out
"""
_OF_EVENTS_SHA = hashlib.sha1(_OF_EVENTS.encode()).hexdigest()


def _script(client: Any, script: str, sha: str, script_keys: Sequence[str], args: Sequence[str | int]) -> Any:
    """``script`` run by its sha, loaded when the server's script cache lacks it."""
    try:
        return client.evalsha(sha, len(script_keys), *script_keys, *args)
    except NoScriptError:  # the server's script cache was flushed (or never had it)
        return client.eval(script, len(script_keys), *script_keys, *args)


class _TenantPlan:
    """One tenant's share of a batch of asserts: what was read, and what planning changed
    (facts by id, slots, index entries), for the facts that come after it in the batch and
    for the write."""

    __slots__ = ("facts_key", "current_key", "index_key", "stored", "current", "facts", "written", "moved", "index", "indexed")

    def __init__(self, facts_key: str, current_key: str, index_key: str) -> None:
        self.facts_key, self.current_key, self.index_key = facts_key, current_key, index_key
        self.stored: set[str] = set()  # fact ids in the table (read, or written by this batch)
        self.current: dict[str, str] = {}  # slot -> its current fact id
        self.facts: dict[str, Fact] = {}  # id -> fact, for the current facts of the slots read
        self.written: dict[str, Fact] = {}  # id -> fact to write
        self.moved: dict[str, str] = {}  # slot -> the fact id that becomes its current one
        self.index: dict[str, list[str]] = {}  # event id -> its index entry (read, with this batch's facts)
        self.indexed: set[str] = set()  # the events whose entry this batch changes


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

    def _keys(self, tenant: str) -> tuple[str, str, str]:
        """The tenant's facts hash, current hash and event → facts index."""
        return (
            keys.facts(self.prefix, self.version, tenant),
            keys.facts_current(self.prefix, self.version, tenant),
            keys.facts_index(self.prefix, self.version, tenant),
        )

    def facts_of_events(self, tenant: str, event_ids: list[str]) -> list[tuple[str, Fact]]:
        """Every stored fact extracted from the events (current or history, retractions
        left out), as (event id, fact), by event then in the order extracted; one round
        trip that reads the events' index entries and the facts they name."""
        if not event_ids:
            return []
        facts_key, _, index_key = self._keys(tenant)
        rows = _script(self.client, _OF_EVENTS, _OF_EVENTS_SHA, [index_key, facts_key], event_ids)
        found = [(eid, _dec.decode(raw)) for eid, row in zip(event_ids, rows) for raw in row]
        return [(eid, fact) for eid, fact in found if not fact.retracts]

    @staticmethod
    def slot(agent: str, subject: str, key: str, value: str, single: bool) -> str:
        parts = [agent, _norm(subject), key] + ([] if single else [_norm(value)])
        return "\x1f".join(parts)

    def assert_fact(self, fact: Fact, single: bool) -> str:
        """Record ``fact``; returns "new", "superseded", "history", "confirmed" or "duplicate";
        for a retraction "retracted" (it ended the current fact) or "unmatched" (it did not)."""
        return self.assert_facts([(fact, single)])[0]

    def assert_facts(self, facts: Sequence[tuple[Fact, bool]]) -> list[str]:
        """Record each ``(fact, single)`` in order, as ``assert_fact`` one after the other
        would (a fact sees those before it in the batch), with each new fact (not a
        retraction) added to the index entry of the event it came from (its first
        ``event_ids``). Returns each fact's outcome, in order.

        One transaction for the batch: its tenants' tables are WATCHed, read in one round
        trip, planned here and written in one MULTI/EXEC; when another writer changed one
        of them in between, the batch is read and planned again (redis-py's
        ``transaction``). The facts given are never changed (planning works on copies)."""
        if not facts:
            return []
        slots = [self.slot(f.agent, f.subject, f.key, f.value, single) for f, single in facts]
        # tenant -> its fact ids, its slots, the events its facts came from
        tenants: dict[str, tuple[list[str], dict[str, None], dict[str, None]]] = {}
        for (fact, _), slot in zip(facts, slots):
            ids, wanted, events = tenants.setdefault(fact.tenant, ([], {}, {}))
            ids.append(fact.id)
            wanted[slot] = None
            if fact.event_ids:
                events[fact.event_ids[0]] = None
        watched = [key for tenant in tenants for key in self._keys(tenant)]

        def attempt(pipe: redis.client.Pipeline) -> list[str]:
            # runs with every table WATCHed; redis-py re-runs it when one changed before EXEC
            tables = self._lookup(pipe, tenants)
            outcomes = [self._assert_in(tables[fact.tenant], _copy(fact), slot) for (fact, _), slot in zip(facts, slots)]
            pipe.multi()
            for tenant, table in tables.items():
                if table.written:
                    pipe.hset(table.facts_key, mapping={fid: _enc.encode(f) for fid, f in table.written.items()})
                if table.moved:
                    pipe.hset(table.current_key, mapping={slot: fid for slot, fid in table.moved.items()})
                if table.indexed:
                    pipe.hset(table.index_key, mapping={eid: " ".join(table.index[eid]) for eid in table.indexed})
                pipe.set(keys.facts_indexed(self.prefix, self.version, tenant), 1)  # a new tenant's index is whole
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
        self, pipe: redis.client.Pipeline, tenants: dict[str, tuple[list[str], dict[str, None], dict[str, None]]]
    ) -> dict[str, _TenantPlan]:
        """What the batch needs of each tenant's table, read in one round trip (``_LOOKUP``)."""
        script_keys: list[str] = []
        args: list[str | int] = []
        for tenant, (ids, wanted, events) in tenants.items():
            script_keys += self._keys(tenant)
            args += [len(ids), *ids, len(wanted), *wanted, len(events), *events]
        replies = _script(pipe, _LOOKUP, _LOOKUP_SHA, script_keys, args)
        tables = {}
        for (tenant, (ids, wanted, events)), (stored, current, raws, entries) in zip(tenants.items(), replies):
            table = _TenantPlan(*self._keys(tenant))
            table.stored = {fid for fid, flag in zip(ids, stored) if flag}
            for slot, fid, raw in zip(wanted, current, raws):
                if fid is None:
                    continue
                table.current[slot] = as_str(fid)
                if raw:
                    table.facts[as_str(fid)] = _dec.decode(raw)
            table.index = {eid: as_str(entry).split() for eid, entry in zip(events, entries)}
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
        if not fact.retracts and fact.event_ids and any(f is fact for f in changed):  # a fact the table did not hold
            entry = table.index.setdefault(fact.event_ids[0], [])
            if fact.id not in entry:
                entry.append(fact.id)
                table.indexed.add(fact.event_ids[0])
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
        """Remove every fact whose only source is ``event_id`` (a forgotten event, a memory
        entry removed), and those facts' index entries."""
        facts_key, current_key, _ = self._keys(tenant)
        removed: list[str] = []
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
            removed.append(fact.id)
        self._unindex(tenant, set(removed))
        return len(removed)

    def forget_event(self, tenant: str, event_id: str) -> int:
        """``retract_event`` for a forgotten event, whose own index entry goes too (the facts
        it gave that other events also stated stay, found through those events' hits, as the
        forgotten event's points are gone): how many facts were removed."""
        removed = self.retract_event(tenant, event_id)
        self.client.hdel(self._keys(tenant)[2], event_id)
        return removed

    def _unindex(self, tenant: str, fact_ids: set[str]) -> None:
        """Remove ``fact_ids`` from the tenant's index entries (an entry left empty goes)."""
        if not fact_ids:
            return
        index_key = self._keys(tenant)[2]
        changed: dict[str, str] = {}
        for eid, entry in self.client.hgetall(index_key).items():
            ids = as_str(entry).split()
            kept = [fid for fid in ids if fid not in fact_ids]
            if len(kept) != len(ids):
                changed[as_str(eid)] = " ".join(kept)
        if not changed:
            return
        with self.client.pipeline(transaction=True) as pipe:
            gone = [eid for eid, entry in changed.items() if not entry]
            if gone:
                pipe.hdel(index_key, *gone)
            if len(gone) < len(changed):
                pipe.hset(index_key, mapping={eid: entry for eid, entry in changed.items() if entry})
            pipe.execute()

    def index_existing(self) -> list[str]:
        """Build the event → facts index of every tenant's table written before the index
        existed (no ``facts_indexed`` mark): each fact is indexed under the event among its
        ``event_ids`` its id derives from, searched up to the event's count recorded by those
        releases. One transaction a tenant (WATCHed: a writer meanwhile makes it read again),
        idempotent; the tenants indexed. A fact that cannot be read is left out, logged."""
        head = keys.facts(self.prefix, self.version, "")
        done = []
        for raw_key in self.client.scan_iter(match=keys.facts_pattern(self.prefix, self.version), count=500):
            key = as_str(raw_key)
            if key.endswith(_NOT_FACTS):
                continue
            tenant = key[len(head) :]
            if self.client.exists(keys.facts_indexed(self.prefix, self.version, tenant)):
                continue
            self.client.transaction(functools.partial(self._index_tenant, tenant=tenant), *self._keys(tenant))
            done.append(tenant)
        return done

    def _index_tenant(self, pipe: redis.client.Pipeline, *, tenant: str) -> None:
        facts_key, _, index_key = self._keys(tenant)
        legacy_key = keys.facts_events(self.prefix, self.version, tenant)
        counts = {as_str(eid): int(n) for eid, n in pipe.hgetall(legacy_key).items() if as_str(n).isdigit()}
        entries: dict[str, list[str]] = {as_str(eid): as_str(ids).split() for eid, ids in pipe.hgetall(index_key).items()}
        found: dict[str, list[tuple[int, str]]] = {}
        unreadable = 0
        for raw in pipe.hvals(facts_key):
            try:
                fact = _dec.decode(raw)
            except msgspec.DecodeError:
                unreadable += 1
                continue
            if fact.retracts:
                continue
            for eid in fact.event_ids:
                ids = fact_ids(eid, 1, max(_LEGACY_PROBED, counts.get(eid, 0)))
                if fact.id in ids:
                    found.setdefault(eid, []).append((ids.index(fact.id), fact.id))
                    break
        if unreadable:
            log.warning("facts.index_unreadable", tenant=tenant, facts=unreadable, action="left out of the index")
        for eid, ranked in found.items():
            entry = entries.setdefault(eid, [])
            entry += [fid for _, fid in sorted(ranked) if fid not in entry]
        pipe.multi()
        if found:
            pipe.hset(index_key, mapping={eid: " ".join(entries[eid]) for eid in found})
        pipe.set(keys.facts_indexed(self.prefix, self.version, tenant), 1)
        pipe.delete(legacy_key)

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
        """Remove one fact (a tombstone named it): 1 if it existed; the slot it held is freed,
        its index entry goes."""
        facts_key, current_key, _ = self._keys(tenant)
        if not self.client.hdel(facts_key, fact_id):
            return 0
        for slot, fid in self.client.hgetall(current_key).items():
            if (fid.decode() if isinstance(fid, bytes) else fid) == fact_id:
                self.client.hdel(current_key, slot)
        self._unindex(tenant, {fact_id})
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
        facts_key = self._keys(tenant)[0]
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
            if not k.endswith(_NOT_FACTS):
                total += int(self.client.hlen(k))
        return total

    @staticmethod
    def to_dict(fact: Fact) -> dict[str, Any]:
        built: dict[str, Any] = json.loads(_enc.encode(fact))
        return built
