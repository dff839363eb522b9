"""The facts table (memstream.projections.facts_table): fact ids and the facts of an event."""

from __future__ import annotations

import fakeredis
import msgspec
import pytest
from fuzzing import examples
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.core import keys
from memstream.projections import PROBED_FACTS, Fact, FactsTable, fact_id, fact_ids, point_id
from memstream.projections.facts_table import _probed_ids

EVENT = "01a206c3-66eb-715d-a5e8-90c910201b07"


def _fact(event_id: str, n: int, value: str, tenant: str = "t1") -> Fact:
    return Fact(
        id=fact_id(event_id, n),
        tenant=tenant,
        agent="a1",
        subject="user",
        kind="preference",
        key="likes",
        value=value,
        text=f"I love {value}.",
        confidence=0.8,
        valid_from=1.0,
        event_ids=[event_id],
    )


def test_the_nth_fact_of_an_event_has_the_same_id_in_every_release():
    assert fact_id(EVENT, 13) == "ca7b996a-aba2-51e1-ad5d-9327c6ad80ea"  # frozen: stored facts keep their ids
    for event_id in (EVENT, 'odd "id" é\\n'):
        assert fact_ids(event_id, 1, 20) == [fact_id(event_id, n) for n in range(1, 21)]
        assert [fact_id(event_id, n) for n in (1, 12, 13)] == [point_id("fact", event_id, n) for n in (1, 12, 13)]
        assert _probed_ids(event_id) == tuple(fact_ids(event_id, 1, PROBED_FACTS))  # kept, the same
        assert _probed_ids(event_id) == tuple(fact_ids(event_id, 1, PROBED_FACTS))


@pytest.mark.parametrize("count", [1, PROBED_FACTS, PROBED_FACTS + 1, 3 * PROBED_FACTS])
def test_every_stored_fact_of_an_event_is_found_however_many_it_has(redis_client, count):
    table = FactsTable(redis_client, "ms")
    other = "01a206c3-66eb-715d-a5e8-90c910201b08"
    table.note_extracted("t1", EVENT, count)
    for n in range(1, count + 1):
        table.assert_fact(_fact(EVENT, n, f"thing {n}"), single=False)
    table.assert_fact(_fact(other, 1, "something else"), single=False)

    found = table.facts_of_events("t1", [EVENT, other])
    assert [(eid, f.value) for eid, f in found] == [(EVENT, f"thing {n}") for n in range(1, count + 1)] + [
        (other, "something else")
    ]
    assert table.facts_of_events("t2", [EVENT]) == []  # another tenant's table
    assert table.count() == table.count("t1") == count + 1  # the counts of events are not facts


def test_a_retracted_event_leaves_neither_its_facts_nor_its_count(redis_client):
    table = FactsTable(redis_client, "ms")
    table.note_extracted("t1", EVENT, PROBED_FACTS + 2)
    for n in range(1, PROBED_FACTS + 3):
        table.assert_fact(_fact(EVENT, n, f"thing {n}"), single=False)

    events_key = keys.facts_events("ms", table.version, "t1")
    assert redis_client.exists(events_key)
    assert table.retract_event("t1", EVENT) == PROBED_FACTS + 2
    assert table.facts_of_events("t1", [EVENT]) == []
    assert not redis_client.exists(events_key)


# -- one atomic read-plan-write, retried when another writer won ----------------------------
def _located(fid: str, value: str, at: float) -> Fact:
    return Fact(
        id=fid,
        tenant="t1",
        agent="a",
        subject="user",
        kind="identity",
        key="location",
        value=value,
        text=f"I live in {value}",
        confidence=0.9,
        valid_from=at,
        event_ids=[f"e-{fid}"],
    )


def test_a_new_value_supersedes_the_current_fact_and_the_same_fact_again_is_a_duplicate(redis_client):
    table = FactsTable(redis_client, "p")
    assert table.assert_fact(_located("f1", "Paris", 1.0), single=True) == "new"
    assert table.assert_fact(_located("f2", "Berlin", 2.0), single=True) == "superseded"
    assert table.assert_fact(_located("f2", "Berlin", 2.0), single=True) == "duplicate"
    assert table.assert_fact(_located("f0", "Rome", 0.5), single=True) == "history"
    assert table.assert_fact(_located("f3", "berlin", 3.0), single=True) == "confirmed"
    current = table.query("t1")
    assert [(f.id, f.value, f.event_ids) for f in current] == [("f2", "Berlin", ["e-f2", "e-f3"])]


def test_a_write_that_lands_between_the_read_and_the_commit_makes_the_assert_start_over(redis_client, monkeypatch):
    table = FactsTable(redis_client, "p")
    table.assert_fact(_located("f1", "Paris", 1.0), single=True)
    rival = FactsTable(redis_client, "p")
    plans = []
    real_plan = FactsTable._plan

    def plan_with_a_rival(self, fact, cur):
        plans.append(cur.value if cur else None)  # the current fact this attempt read
        if len(plans) == 1:  # another worker commits a newer value under our WATCH
            monkeypatch.setattr(FactsTable, "_plan", real_plan)
            rival.assert_fact(_located("f3", "Rome", 3.0), single=True)
            monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
        return real_plan(self, fact, cur)

    monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
    outcome = table.assert_fact(_located("f2", "Berlin", 2.0), single=True)
    assert plans == ["Paris", "Rome"]  # the first attempt was discarded, the second saw the rival
    assert outcome == "history"  # Berlin (t=2) is older than Rome (t=3): never the current fact
    assert [f.value for f in table.query("t1")] == ["Rome"]
    assert {f.id: f.superseded_by for f in table.query("t1", history=True)} == {"f1": "f3", "f2": "f3", "f3": ""}


def test_a_write_that_lands_while_a_batch_is_planned_makes_the_whole_batch_start_over(redis_client, monkeypatch):
    table = FactsTable(redis_client, "p")
    table.assert_fact(_located("f1", "Paris", 1.0), single=True)
    rival = FactsTable(redis_client, "p")
    real_plan = FactsTable._plan
    rivals = []

    def plan_with_a_rival(self, fact, cur):
        if not rivals:  # before the first fact of the first attempt is planned
            rivals.append(True)
            monkeypatch.setattr(FactsTable, "_plan", real_plan)
            rival.assert_fact(_located("f3", "Rome", 3.0), single=True)
            monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
        return real_plan(self, fact, cur)

    monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
    outcomes = table.assert_facts([(_located("f2", "Berlin", 2.0), True), (_located("f4", "Oslo", 4.0), True)])

    assert outcomes == ["history", "superseded"]  # planned again over Rome: Berlin older, Oslo newer
    assert {f.id: f.superseded_by for f in table.query("t1", history=True)} == {"f1": "f3", "f2": "f3", "f3": "f4", "f4": ""}


# -- a batch of asserts: one transaction, the outcomes of one assert after the other -------------
def _table_state(client, table: FactsTable, tenant: str = "t1") -> tuple[dict, dict]:
    facts_key, current_key = table._keys(tenant)
    return ({k: FactsTable.to_dict(_decode(v)) for k, v in client.hgetall(facts_key).items()}, client.hgetall(current_key))


def _decode(raw: bytes) -> Fact:
    return msgspec.json.decode(raw, type=Fact)


def test_two_facts_of_one_slot_in_one_batch_supersede_each_other_in_order(redis_client):
    table = FactsTable(redis_client, "p")
    outcomes = table.assert_facts(
        [
            (_located("f1", "Paris", 1.0), True),
            (_located("f2", "Berlin", 2.0), True),
            (_located("f0", "Rome", 0.5), True),
            (_located("f3", "berlin", 3.0), True),
            (_located("f2", "Berlin", 2.0), True),
        ]
    )

    assert outcomes == ["new", "superseded", "history", "confirmed", "duplicate"]
    assert [(f.id, f.value, f.event_ids) for f in table.query("t1")] == [("f2", "Berlin", ["e-f2", "e-f3"])]
    history = {f.id: (f.valid_to, f.superseded_by) for f in table.query("t1", history=True)}
    assert history == {"f1": (2.0, "f2"), "f2": (None, ""), "f0": (2.0, "f2")}


def test_a_batch_leaves_the_table_and_outcomes_that_one_assert_after_the_other_leaves(redis_client):
    batch = [
        (_located("f1", "Paris", 1.0), True),
        (_located("f2", "Berlin", 2.0), True),
        (_located("f0", "Rome", 0.5), True),
        (_fact(EVENT, 1, "tea"), False),
        (_fact(EVENT, 2, "Tea"), False),
        (_located("f4", "Lisbon", 1.5), True),
        (_located("f5", "Oslo", 4.0), True),
    ]
    one_by_one, batched = FactsTable(redis_client, "seq"), FactsTable(redis_client, "batch")
    given = [FactsTable.to_dict(f) for f, _ in batch]

    assert batched.assert_facts(batch) == [one_by_one.assert_fact(f, single) for f, single in batch]
    assert _table_state(redis_client, batched) == _table_state(redis_client, one_by_one)
    assert [FactsTable.to_dict(f) for f, _ in batch] == given  # the facts given are left as they were
    assert batched.assert_facts(batch) == [
        "duplicate",
        "duplicate",
        "duplicate",
        "duplicate",
        "confirmed",
        "duplicate",
        "duplicate",
    ]  # delivered again: nothing changes
    assert _table_state(redis_client, batched) == _table_state(redis_client, one_by_one)


def test_a_batch_notes_the_counts_of_its_events_with_their_facts(redis_client):
    table = FactsTable(redis_client, "ms")
    count = PROBED_FACTS + 3
    outcomes = table.assert_facts(
        [(_fact(EVENT, n, f"thing {n}"), False) for n in range(1, count + 1)], [("t1", EVENT, count), ("t1", "small", 2)]
    )

    assert outcomes == ["new"] * count
    assert [f.value for _, f in table.facts_of_events("t1", [EVENT])] == [f"thing {n}" for n in range(1, count + 1)]
    assert redis_client.hkeys(keys.facts_events("ms", table.version, "t1")) == [EVENT.encode()]  # only above PROBED_FACTS
    table.assert_facts([], [("t1", "other", count)])  # a count without facts kept (below the threshold)
    assert redis_client.hget(keys.facts_events("ms", table.version, "t1"), "other") == str(count).encode()


def test_a_batch_over_several_tenants_keeps_each_tenants_facts_apart(redis_client):
    table = FactsTable(redis_client, "p")
    paris, berlin = _located("f1", "Paris", 1.0), _located("f2", "Berlin", 2.0)
    berlin.tenant = "t2"

    assert table.assert_facts([(paris, True), (berlin, True)]) == ["new", "new"]
    assert [f.value for f in table.query("t1")] == ["Paris"]
    assert [f.value for f in table.query("t2")] == ["Berlin"]


_pool = st.lists(
    st.tuples(
        st.sampled_from(["a1", "a2"]),
        st.sampled_from(["location", "likes"]),
        st.sampled_from(["Paris", "paris", "Berlin"]),
        st.sampled_from([1.0, 2.0, 3.0]),
    ),
    min_size=1,
    max_size=6,
)


@hsettings(max_examples=examples(200), deadline=None)
@given(pool=_pool, picks=st.lists(st.integers(0, 5), max_size=14), split=st.integers(0, 14))
def test_any_batch_has_the_outcomes_and_leaves_the_table_of_one_assert_after_the_other(pool, picks, split):
    facts = [
        Fact(
            id=f"f{i}",
            tenant="t1",
            agent=agent,
            subject="user",
            kind="identity",
            key=key,
            value=value,
            text=value,
            confidence=0.9,
            valid_from=at,
            event_ids=[f"e{i}"],
        )
        for i, (agent, key, value, at) in enumerate(pool)
    ]
    batch = [(facts[i % len(facts)], facts[i % len(facts)].key == "location") for i in picks]
    client = fakeredis.FakeRedis()
    one_by_one, batched = FactsTable(client, "seq"), FactsTable(client, "batch")

    expected = [one_by_one.assert_fact(f, single) for f, single in batch]
    assert batched.assert_facts(batch[:split]) + batched.assert_facts(batch[split:]) == expected
    assert _table_state(client, batched) == _table_state(client, one_by_one)
