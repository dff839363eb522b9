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
