"""``memstream bench paraphrase`` on a small fleet (the hash embedder): the set is the same
every run, both template sets hold the same facts in other words, and the run reports the
collapse against none through the real pipeline and query path."""

from __future__ import annotations

import argparse

import pytest

from memstream.bench.paraphrase import _floats, format_paraphrase, paraphrase
from memstream.bench.paraphrase_set import SHARED, fleet_set


def test_the_set_is_deterministic_and_its_parts_share_no_wording():
    a, qa = fleet_set("tuning", 12)
    b, _ = fleet_set("tuning", 12)
    assert a == b
    assert len(a) == 12 * (len(SHARED) + 1)
    held, qh = fleet_set("held_out", 12)
    shared = lambda ms: {m.text for m in ms if m.fact.startswith("shared:")}  # noqa: E731
    assert not shared(a) & shared(held)
    assert {m.fact for m in a if m.fact.startswith("shared:")} == {m.fact for m in held if m.fact.startswith("shared:")}
    assert {q.text for q in qa}.isdisjoint(q.text for q in qh)
    with pytest.raises(ValueError):
        fleet_set("test")


def test_thresholds_are_checked():
    assert _floats("0,0.85") == [0.0, 0.85]
    for bad in ("", "x", "1.5", "-0.1"):
        with pytest.raises(argparse.ArgumentTypeError):
            _floats(bad)


@pytest.mark.valkey
def test_the_run_reports_each_threshold_through_the_real_path():
    # the hash embedder's exact repeats and near-repeats collapse; the paraphrases of bge-small do not all
    result = paraphrase("tuning", agents=8, embedder="hash", similarity=[0.0, 0.5], rounds=1)
    assert result["memories"] == 8 * (len(SHARED) + 1)
    none, some = result["runs"]
    assert none["similarity"] == 0.0 and some["similarity"] == 0.5
    assert len(none["questions"]) == len(fleet_set("tuning", 8)[1])
    # collapsing never shows fewer distinct facts, and says more agents agree
    assert some["distinct_at_10"] >= none["distinct_at_10"]
    assert max(max(q["agree"]) for q in some["questions"]) > max(max(q["agree"]) for q in none["questions"])
    assert "similarity" in format_paraphrase(result)
