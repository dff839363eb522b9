"""The facts projection (memstream.projections.facts) on one batch: facts asserted, retracted
and forgotten in the order of the log."""

from __future__ import annotations

from pipeline_support import forgotten, memory, turn

from memstream.core import keys
from memstream.projections import Delivery, FactsProjection, fact_id
from memstream.projections.counters import Counters


def _apply(projection: FactsProjection, events: list) -> None:
    projection.apply([Delivery("s", f"{i}-0", {}, e) for i, e in enumerate(events, 1)])


def test_in_one_batch_facts_are_asserted_and_retracted_in_the_order_of_the_log(redis_client):
    facts = FactsProjection(redis_client, "p")
    berlin = memory("add", "I live in Berlin", target="user", when=0)
    moved = memory("replace", "I live in Lisbon", old_text="Berlin", target="user", when=1)
    ada = turn("My name is Ada", when=2)
    bea = turn("My name is Bea", when=3)
    cy = turn("My name is Cy", when=4)
    _apply(facts, [berlin, moved, ada, forgotten(fact_id(ada.id, 1)), forgotten(fact_id(cy.id, 1)), bea, cy])

    every = facts.table.query("t1", history=True)
    assert not any(berlin.id in f.event_ids for f in every)  # asserted, then retracted by the replace
    assert [f.value for f in facts.table.query("t1", key="location")] == ["Lisbon"]
    # Ada forgotten after her event, Cy before his (the same batch): Bea is the name
    assert [(f.value, f.current) for f in every if f.key == "name"] == [("Bea", True)]
    assert Counters(redis_client, "p", "facts.v1").get()["tombstoned"] == 1


def test_a_batch_delivered_again_changes_no_fact(redis_client):
    facts = FactsProjection(redis_client, "p")
    events = [
        turn("I live in Berlin", when=0),
        turn("I moved to Lisbon", when=1),
        turn("I live in Lisbon", when=2),
        turn("I love tea and I live in Rome", when=0.5),
    ]
    _apply(facts, events)
    stored = [keys.facts("p", facts.version, "t1"), keys.facts_current("p", facts.version, "t1")]
    table = [redis_client.hgetall(key) for key in stored]
    _apply(facts, events)

    assert [redis_client.hgetall(key) for key in stored] == table
    assert [f.value for f in facts.table.query("t1", key="location")] == ["Lisbon"]
