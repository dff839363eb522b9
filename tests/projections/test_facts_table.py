"""The facts table (memstream.projections.facts_table): fact ids and the facts of an event."""

from __future__ import annotations

import pytest

from memstream.core import keys
from memstream.projections import PROBED_FACTS, Fact, FactsTable, fact_id, fact_ids, point_id

EVENT = "01a206c3-66eb-715d-a5e8-90c910201b07"


def _fact(event_id: str, n: int, value: str, tenant: str = "t1") -> Fact:
    return Fact(id=fact_id(event_id, n), tenant=tenant, agent="a1", subject="user", kind="preference",
                key="likes", value=value, text=f"I love {value}.", confidence=0.8, valid_from=1.0,
                event_ids=[event_id])


def test_the_nth_fact_of_an_event_has_the_same_id_in_every_release():
    assert fact_id(EVENT, 13) == "ca7b996a-aba2-51e1-ad5d-9327c6ad80ea"  # frozen: stored facts keep their ids
    for event_id in (EVENT, 'odd "id" é\\n'):
        assert fact_ids(event_id, 1, 20) == [fact_id(event_id, n) for n in range(1, 21)]
        assert [fact_id(event_id, n) for n in (1, 12, 13)] == [point_id("fact", event_id, n) for n in (1, 12, 13)]


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
        (other, "something else")]
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


# -- one atomic read-plan-write per fact, retried when another writer won ---------------
def _located(fid: str, value: str, at: float) -> Fact:
    return Fact(id=fid, tenant="t1", agent="a", subject="user", kind="identity", key="location",
                value=value, text=f"I live in {value}", confidence=0.9, valid_from=at, event_ids=[f"e-{fid}"])


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

    def plan_with_a_rival(self, pipe, *args):
        plans.append(args[-1].value if args[-1] else None)  # the current fact this attempt read
        if len(plans) == 1:  # another worker commits a newer value under our WATCH
            monkeypatch.setattr(FactsTable, "_plan", real_plan)
            rival.assert_fact(_located("f3", "Rome", 3.0), single=True)
            monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
        return real_plan(self, pipe, *args)

    monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
    outcome = table.assert_fact(_located("f2", "Berlin", 2.0), single=True)
    assert plans == ["Paris", "Rome"]  # the first attempt was discarded, the second saw the rival
    assert outcome == "history"  # Berlin (t=2) is older than Rome (t=3): never the current fact
    assert [f.value for f in table.query("t1")] == ["Rome"]
    assert {f.id: f.superseded_by for f in table.query("t1", history=True)} == {"f1": "f3", "f2": "f3", "f3": ""}
