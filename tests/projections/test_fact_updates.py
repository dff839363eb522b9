"""Updates in the facts table: a retraction ends the current fact of its value, never shows
itself, and keeps the table's rules (idempotent, an older statement replayed late stays
history, a forget removes it); and the labelled update dialogues scored through the facts
projection (tests/support/update_dialogues.py, tests/text/corpus/updates_*.jsonl)."""

from __future__ import annotations

import pytest
import update_dialogues
from pipeline_support import forgotten, turn

from memstream.projections import Delivery, Fact, FactsProjection, FactsTable, fact_id


def _apply(projection: FactsProjection, events: list) -> None:
    for i, event in enumerate(events, 1):
        projection.apply([Delivery("s", f"{i}-0", {}, event)])


def _current(projection: FactsProjection, key: str) -> list[str]:
    return sorted(f.value for f in projection.table.query("t1", key=key))


def _fact(n: int, value: str, when: float, *, key: str = "location", retracts: bool = False) -> Fact:
    event = f"01a206c3-66eb-715d-a5e8-90c9102010{n:02d}"
    return Fact(
        id=fact_id(event, 1),
        tenant="t1",
        agent="a1",
        subject="user",
        kind="identity",
        key=key,
        value=value,
        text="",
        confidence=0.8,
        valid_from=when,
        event_ids=[event],
        retracts=retracts,
    )


def test_a_retraction_ends_the_current_fact_of_its_value_and_is_never_current_itself(redis_client):
    table = FactsTable(redis_client, "ms")
    berlin, gone = _fact(1, "Berlin", 1.0), _fact(2, "berlin", 2.0, retracts=True)
    assert table.assert_facts([(berlin, True), (gone, True)]) == ["new", "retracted"]

    assert table.query("t1") == []
    (ended,) = table.query("t1", history=True)  # the retraction itself is never listed
    assert (ended.value, ended.valid_to, ended.superseded_by) == ("Berlin", 2.0, gone.id)
    assert [f.value for _, f in table.facts_of_events("t1", [gone.event_ids[0], berlin.event_ids[0]])] == ["Berlin"]


def test_a_retraction_of_another_value_or_an_older_one_leaves_the_current_fact(redis_client):
    table = FactsTable(redis_client, "ms")
    assert table.assert_fact(_fact(1, "Lisbon", 5.0), single=True) == "new"
    assert table.assert_fact(_fact(2, "Berlin", 6.0, retracts=True), single=True) == "unmatched"
    assert table.assert_fact(_fact(3, "Lisbon", 4.0, retracts=True), single=True) == "unmatched"  # said before
    assert [f.value for f in table.query("t1")] == ["Lisbon"]


def test_a_retraction_naming_no_value_ends_whatever_the_key_holds(redis_client):
    table = FactsTable(redis_client, "ms")
    table.assert_fact(_fact(1, "555-0101", 1.0, key="phone"), single=True)
    assert table.assert_fact(_fact(2, "", 2.0, key="phone", retracts=True), single=True) == "retracted"
    assert table.query("t1") == []


def test_after_a_retraction_a_newer_statement_holds_and_an_older_one_replayed_late_stays_history(redis_client):
    table = FactsTable(redis_client, "ms")
    table.assert_fact(_fact(1, "Berlin", 1.0), single=True)
    table.assert_fact(_fact(2, "Berlin", 2.0, retracts=True), single=True)
    assert table.assert_fact(_fact(3, "Paris", 1.5), single=True) == "history"
    assert table.query("t1") == []
    assert table.assert_fact(_fact(4, "Berlin", 3.0), single=True) == "new"  # moved back
    assert [f.value for f in table.query("t1")] == ["Berlin"]
    # the first Berlin, followed through the retraction, arrives at the current fact
    first = table.get("t1", _fact(1, "Berlin", 1.0).id)
    assert first is not None and first.superseded_by == _fact(2, "", 2.0).id
    retraction = table.get("t1", first.superseded_by)
    assert retraction is not None and retraction.superseded_by == _fact(4, "Berlin", 3.0).id


def test_a_retraction_in_an_empty_slot_holds_it_against_an_older_statement(redis_client):
    table = FactsTable(redis_client, "ms")
    assert table.assert_fact(_fact(1, "Vim", 2.0, key="uses", retracts=True), single=False) == "unmatched"
    assert table.assert_fact(_fact(2, "Vim", 1.0, key="uses"), single=False) == "history"
    assert table.query("t1") == []


def test_a_multi_valued_value_is_retracted_alone_and_redelivery_changes_nothing(redis_client):
    facts = FactsProjection(redis_client, "p")
    events = [turn("I use Vim and Git.", when=0), turn("I no longer use Vim.", when=1)]
    _apply(facts, events)
    assert _current(facts, "uses") == ["Git"]
    stored = redis_client.hgetall("p:facts:v1:t1")
    _apply(facts, events)
    assert redis_client.hgetall("p:facts:v1:t1") == stored


def test_forgetting_the_retraction_removes_it_and_its_event_facts(redis_client):
    facts = FactsProjection(redis_client, "p")
    vim, gone = turn("I use Vim.", when=0), turn("I no longer use Vim.", when=1)
    _apply(facts, [vim, gone, forgotten(gone.id)])
    assert not [f for f in facts.table.query("t1", history=True, retractions=True) if gone.id in f.event_ids]


def test_switching_moves_the_current_tool_and_a_move_the_location():
    assert update_dialogues.current_after(["I use Python.", "I switched from Python to Go this year."]) == {
        ("user", "uses", "go")
    }
    assert update_dialogues.current_after(["I live in Berlin.", "We're fully moved to Lisbon now."]) == {
        ("user", "location", "lisbon")
    }


def test_the_tuned_update_dialogues_are_all_right():
    result = update_dialogues.score(update_dialogues.load("tuned"))
    assert result.right == result.dialogues, result.wrong


def test_the_held_out_update_dialogues_end_nine_in_ten_old_values_and_lose_no_value_in_negatives():
    """Measured 18/20 ended, 17/17 kept, 28/30 dialogues right (before the update rules:
    1/20 ended, 11/30 right); the bound leaves room for one more miss, not for a regression
    to declarations only."""
    result = update_dialogues.score(update_dialogues.load("heldout"))
    assert result.ended >= 0.85 * result.to_end, result.wrong
    assert result.lost == 0 and result.kept == result.current, result.wrong


@pytest.mark.parametrize("part", update_dialogues.PARTS)
def test_each_part_of_the_update_dialogues_has_positives_and_negatives(part):
    dialogues = update_dialogues.load(part)
    assert len(dialogues) >= 30
    assert sum(1 for d in dialogues if not d["ended"]) >= 10
