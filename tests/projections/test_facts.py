"""The facts projection (memstream.projections.facts) on one batch: facts asserted, retracted
and forgotten in the order of the log."""

from __future__ import annotations

from pipeline_support import forgotten, make_pipeline, memory, turn

from memstream.core import keys
from memstream.producers import EventLog
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
    index = redis_client.hgetall(keys.facts_index("p", facts.version, "t1"))
    assert index
    _apply(facts, events)

    assert [redis_client.hgetall(key) for key in stored] == table
    assert [f.value for f in facts.table.query("t1", key="location")] == ["Lisbon"]
    assert redis_client.hgetall(keys.facts_index("p", facts.version, "t1")) == index  # nor any index entry


def test_forget_through_the_log_removes_the_forgotten_events_index_entries(redis_client):
    facts = FactsProjection(redis_client, "p")
    kept, gone = turn("I live in Berlin", when=0), turn("My name is Ada and I love tea", when=1)
    _apply(facts, [kept, gone])
    index_key = keys.facts_index("p", facts.version, "t1")
    assert {k.decode() for k in redis_client.hkeys(index_key)} == {kept.id, gone.id}
    _apply(facts, [forgotten(gone.id)])

    assert {k.decode() for k in redis_client.hkeys(index_key)} == {kept.id}
    assert [f.value for _, f in facts.table.facts_of_events("t1", [kept.id, gone.id])] == ["Berlin"]


def test_a_pipeline_indexes_a_table_an_older_release_wrote_before_it_reads(tmp_path, redis_client):
    log = EventLog(redis_client, "p")
    events = [turn("I live in Berlin", when=0), turn("My name is Ada", when=1)]
    log.append(events)
    pipeline = make_pipeline(tmp_path / "home", log, projections=("facts",))
    try:
        pipeline.drain()
    finally:
        pipeline.stop()
    table = pipeline.projection("facts", FactsProjection).table
    index_key, mark = keys.facts_index("p", table.version, "t1"), keys.facts_indexed("p", table.version, "t1")
    index = redis_client.hgetall(index_key)
    assert len(index) == 2
    redis_client.delete(index_key, mark)  # as releases before the index left the table

    again = make_pipeline(tmp_path / "home", log, projections=("facts",))
    try:
        again.drain()  # nothing new in the log: the index is built before the consumer reads
    finally:
        again.stop()
    assert redis_client.hgetall(index_key) == index
    assert redis_client.get(mark) == b"1"
    assert sorted(f.value for _, f in table.facts_of_events("t1", [e.id for e in events])) == ["Ada", "Berlin"]
