"""The facts table: one atomic read-plan-write per fact, retried when another writer won."""

from __future__ import annotations

from memstream.projections.facts_table import Fact, FactsTable


def _fact(fid: str, value: str, at: float) -> Fact:
    return Fact(id=fid, tenant="t1", agent="a", subject="user", kind="identity", key="location",
                value=value, text=f"I live in {value}", confidence=0.9, valid_from=at, event_ids=[f"e-{fid}"])


def test_a_new_value_supersedes_the_current_fact_and_the_same_fact_again_is_a_duplicate(redis_client):
    table = FactsTable(redis_client, "p")
    assert table.assert_fact(_fact("f1", "Paris", 1.0), single=True) == "new"
    assert table.assert_fact(_fact("f2", "Berlin", 2.0), single=True) == "superseded"
    assert table.assert_fact(_fact("f2", "Berlin", 2.0), single=True) == "duplicate"
    assert table.assert_fact(_fact("f0", "Rome", 0.5), single=True) == "history"
    assert table.assert_fact(_fact("f3", "berlin", 3.0), single=True) == "confirmed"
    current = table.query("t1")
    assert [(f.id, f.value, f.event_ids) for f in current] == [("f2", "Berlin", ["e-f2", "e-f3"])]


def test_a_write_that_lands_between_the_read_and_the_commit_makes_the_assert_start_over(redis_client, monkeypatch):
    table = FactsTable(redis_client, "p")
    table.assert_fact(_fact("f1", "Paris", 1.0), single=True)
    rival = FactsTable(redis_client, "p")
    plans = []
    real_plan = FactsTable._plan

    def plan_with_a_rival(self, pipe, *args):
        plans.append(args[-1].value if args[-1] else None)  # the current fact this attempt read
        if len(plans) == 1:  # another worker commits a newer value under our WATCH
            monkeypatch.setattr(FactsTable, "_plan", real_plan)
            rival.assert_fact(_fact("f3", "Rome", 3.0), single=True)
            monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
        return real_plan(self, pipe, *args)

    monkeypatch.setattr(FactsTable, "_plan", plan_with_a_rival)
    outcome = table.assert_fact(_fact("f2", "Berlin", 2.0), single=True)
    assert plans == ["Paris", "Rome"]  # the first attempt was discarded, the second saw the rival
    assert outcome == "history"  # Berlin (t=2) is older than Rome (t=3): never the current fact
    assert [f.value for f in table.query("t1")] == ["Rome"]
    assert {f.id: f.superseded_by for f in table.query("t1", history=True)} == {"f1": "f3", "f2": "f3", "f3": ""}
