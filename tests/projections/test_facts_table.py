"""The facts table (memstream.projections.facts_table): fact ids, the facts of an event and
the event → facts index."""

from __future__ import annotations

import fakeredis
import msgspec
import pytest
from fuzzing import examples
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.core import keys
from memstream.projections import Fact, FactsTable, fact_id, fact_ids, point_id

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


def _index(client, table: FactsTable, tenant: str = "t1") -> dict[str, list[str]]:
    return {k.decode(): v.decode().split() for k, v in client.hgetall(keys.facts_index("ms", table.version, tenant)).items()}


@pytest.mark.parametrize("count", [1, 12, 13, 40])
def test_every_stored_fact_of_an_event_is_found_however_many_it_has(redis_client, count):
    table = FactsTable(redis_client, "ms")
    other = "01a206c3-66eb-715d-a5e8-90c910201b08"
    for n in range(1, count + 1):
        table.assert_fact(_fact(EVENT, n, f"thing {n}"), single=False)
    table.assert_fact(_fact(other, 1, "something else"), single=False)

    found = table.facts_of_events("t1", [EVENT, other, "no-such-event"])
    assert [(eid, f.value) for eid, f in found] == [(EVENT, f"thing {n}") for n in range(1, count + 1)] + [
        (other, "something else")
    ]
    assert table.facts_of_events("t2", [EVENT]) == []  # another tenant's table
    assert table.count() == table.count("t1") == count + 1  # the index and its mark are not facts
    assert _index(redis_client, table) == {EVENT: fact_ids(EVENT, 1, count), other: [fact_id(other, 1)]}
    assert redis_client.get(keys.facts_indexed("ms", table.version, "t1")) == b"1"


def test_the_index_names_what_the_table_holds_once_each(redis_client):
    table = FactsTable(redis_client, "ms")
    first = _fact(EVENT, 1, "tea")
    assert table.assert_facts([(first, False), (_fact(EVENT, 2, "coffee"), False)]) == ["new", "new"]
    # delivered again, and the same value said by another event: no entry changes or grows
    again = _fact("e2", 1, "tea")
    assert table.assert_facts([(first, False), (again, False)]) == ["duplicate", "confirmed"]
    retraction = msgspec.structs.replace(_fact("e3", 1, "coffee"), retracts=True, valid_from=2.0)
    assert table.assert_facts([(retraction, False)]) == ["retracted"]
    assert _index(redis_client, table) == {EVENT: fact_ids(EVENT, 1, 2)}  # a retraction is never read: not indexed
    assert [f.value for _, f in table.facts_of_events("t1", [EVENT, "e2", "e3"])] == ["tea", "coffee"]


def test_a_retracted_event_leaves_neither_its_facts_nor_their_index_entries(redis_client):
    table = FactsTable(redis_client, "ms")
    for n in range(1, 15):
        table.assert_fact(_fact(EVENT, n, f"thing {n}"), single=False)
    table.assert_fact(_fact("kept", 1, "other"), single=False)

    assert table.retract_event("t1", EVENT) == 14
    assert table.facts_of_events("t1", [EVENT]) == []
    assert _index(redis_client, table) == {"kept": [fact_id("kept", 1)]}


def test_a_forgotten_event_and_a_forgotten_fact_leave_the_index(redis_client):
    table = FactsTable(redis_client, "ms")
    shared = _fact(EVENT, 1, "tea")
    table.assert_facts([(shared, False), (_fact(EVENT, 2, "coffee"), False), (_fact("e2", 1, "tea"), False)])
    table.assert_facts([(_fact("e3", 1, "jazz"), False), (_fact("e3", 2, "blues"), False)])
    # the fact of EVENT that e2 stated too stays (e2's); EVENT's own entry goes
    assert table.forget_event("t1", EVENT) == 1
    assert _index(redis_client, table) == {"e3": fact_ids("e3", 1, 2)}
    assert [f.value for _, f in table.facts_of_events("t1", [EVENT, "e3"])] == ["jazz", "blues"]
    assert table.forget_fact("t1", fact_id("e3", 1)) == 1
    assert _index(redis_client, table) == {"e3": [fact_id("e3", 2)]}
    assert table.forget_fact("t1", fact_id("e3", 2)) == 1
    assert _index(redis_client, table) == {}
    assert table.forget_fact("t1", fact_id("e3", 2)) == 0


def _as_an_older_release_wrote(client, table: FactsTable, facts: list[Fact], counts: dict[str, int]) -> None:
    """The table as releases before the index left it: facts and the counts of events with more than 12, no index."""
    table.assert_facts([(f, False) for f in facts])
    for key in (keys.facts_index("ms", table.version, "t1"), keys.facts_indexed("ms", table.version, "t1")):
        client.delete(key)
    if counts:
        client.hset(keys.facts_events("ms", table.version, "t1"), mapping=counts)


def test_a_table_written_before_the_index_is_indexed_once(redis_client):
    table = FactsTable(redis_client, "ms")
    facts = [_fact(EVENT, n, f"thing {n}") for n in (3, 1, 20)] + [_fact("small", 2, "tea")]
    facts.append(msgspec.structs.replace(_fact("e9", 1, "jazz"), retracts=True))
    _as_an_older_release_wrote(redis_client, table, facts, {EVENT: 20})
    redis_client.hset(keys.facts("ms", table.version, "t1"), "garbage", b"not a fact")
    assert table.facts_of_events("t1", [EVENT]) == []  # not indexed yet

    assert table.index_existing() == ["t1"]
    assert _index(redis_client, table) == {
        EVENT: [fact_id(EVENT, n) for n in (1, 3, 20)],  # in the order extracted
        "small": [fact_id("small", 2)],
    }
    assert [f.value for _, f in table.facts_of_events("t1", [EVENT])] == ["thing 1", "thing 3", "thing 20"]
    assert not redis_client.exists(keys.facts_events("ms", table.version, "t1"))  # the old counts are not needed
    assert table.index_existing() == []  # once: the mark says the index is whole
    assert table.count("t1") == 6  # nothing of the table lost, the unreadable entry included


def test_a_table_with_a_new_fact_before_its_build_keeps_both(redis_client):
    table = FactsTable(redis_client, "ms")
    _as_an_older_release_wrote(redis_client, table, [_fact(EVENT, 1, "tea")], {})
    redis_client.hset(keys.facts_index("ms", table.version, "t1"), "e2", fact_id("e2", 1))  # written meanwhile
    table.index_existing()
    assert _index(redis_client, table) == {EVENT: [fact_id(EVENT, 1)], "e2": [fact_id("e2", 1)]}


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
    facts_key, current_key, _ = table._keys(tenant)
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
