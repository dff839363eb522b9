"""Updates in the forms people say them: a newer value said as a change, and a value said to
hold no longer (``FactCandidate.retracts``). What the facts table makes of them, and the
labelled dialogues, are in tests/projections/test_fact_updates.py."""

from __future__ import annotations

import time

import msgspec
import pytest
from fact_cases import DEV_CASES, HELD_OUT_CASES
from fuzzing import examples
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.text.facts import FactCandidate, extract_facts
from memstream.text.facts.rules import updates as update_rules


def _facts(text: str, speaker: str = "user") -> set[tuple[str, str, str, str, bool]]:
    return {(f.kind, f.subject, f.key, f.value, f.retracts) for f in extract_facts(text, speaker=speaker)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the four: a newer value said as news rather than as a declaration
        ("We're fully moved to Lisbon now.", {("identity", "user", "location", "Lisbon", False)}),
        ("Started at the new company on Monday.", {("identity", "user", "employer", "", True)}),
        ("these days I mostly write Go", {("tool", "user", "uses", "Go", False)}),
        ("The new number ends in 0202.", {("identity", "user", "phone", "ending in 0202", False)}),
        # the relative forms
        ("I don't live in Berlin anymore.", {("identity", "user", "location", "Berlin", True)}),
        ("I'm no longer based in Oslo.", {("identity", "user", "location", "Oslo", True)}),
        ("I moved from Paris to Lyon.", {("identity", "user", "location", "Lyon", False)}),
        ("We've settled in Valencia.", {("identity", "user", "location", "Valencia", False)}),
        ("We moved away from Leeds.", {("identity", "user", "location", "Leeds", True)}),
        (
            "I left Google.",
            {("identity", "user", "employer", "Google", True), ("identity", "user", "location", "Google", True)},
        ),
        ("I no longer work at Hooli.", {("identity", "user", "employer", "Hooli", True)}),
        ("I'm not at Globex anymore.", {("identity", "user", "employer", "Globex", True)}),
        ("I quit my job last week.", {("identity", "user", "employer", "", True)}),
        ("I got laid off.", {("identity", "user", "employer", "", True)}),
        ("I started a new job at Stripe on Monday.", {("identity", "user", "employer", "Stripe", False)}),
        (
            "I switched from Python to Go.",
            {("tool", "user", "uses", "Python", True), ("tool", "user", "uses", "Go", False)},
        ),
        ("I switched to Helix from Vim.", {("tool", "user", "uses", "Helix", False), ("tool", "user", "uses", "Vim", True)}),
        (
            "We migrated from MySQL to Postgres.",
            {("tool", "project", "uses", "MySQL", True), ("tool", "project", "uses", "Postgres", False)},
        ),
        ("I no longer use Vim.", {("tool", "user", "uses", "Vim", True)}),
        ("I stopped using Emacs after the RSI.", {("tool", "user", "uses", "Emacs", True)}),
        (
            "I don't like Java anymore.",
            {("dislike", "user", "dislikes", "Java", False), ("preference", "user", "likes", "Java", True)},
        ),
        ("I used to love sushi.", {("preference", "user", "likes", "sushi", True)}),
        ("I got promoted to staff engineer!", {("identity", "user", "role", "staff engineer", False)}),
        ("I'm no longer a manager.", {("identity", "user", "role", "manager", True)}),
        ("My new email is ana@new.example.", {("identity", "user", "email", "ana@new.example", False)}),
        ("My phone number is now 555-0303.", {("identity", "user", "phone", "555-0303", False)}),
        ("I got a new phone number.", {("identity", "user", "phone", "", True)}),
        ("My new job is at Stripe.", {("identity", "user", "employer", "Stripe", False)}),
        ("My new role is team lead.", {("identity", "user", "role", "team lead", False)}),
        ("Our new place is in Porto.", {("identity", "user", "location", "Porto", False)}),
        ("I go by Sam now.", {("identity", "user", "name", "Sam", False)}),
        (
            "I'm using Linux now instead of Windows.",
            {("tool", "user", "uses", "Linux", False), ("tool", "user", "uses", "Windows", True)},
        ),
    ],
)
def test_an_update_said_as_news_gives_the_new_value_or_retracts_the_old(text, expected):
    assert _facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "My sister moved to Lisbon.",
        "If I moved to Lisbon I'd learn Portuguese.",
        "I'm thinking about moving to Lisbon.",
        "We're moving to Milan next spring.",
        "Should I switch to Go?",
        "I'm thinking of switching to Go.",
        "I left my keys at the office again.",
        "Started the day with a long walk.",
        "My colleague no longer uses Vim.",
        "My friend got a new phone number.",
        "Did you ever leave Google?",
        "I visited Lisbon last week.",
        "Apple started a new project on Monday.",
        "I go by bus most days.",
        "My new job is great.",
        "Our new place is in a quiet street.",
    ],
)
def test_someone_elses_change_an_intention_or_a_question_is_no_update(text):
    assert _facts(text) == set()


def test_the_assistant_saying_a_change_is_not_the_users_update():
    assert _facts("I switched from Python to Go and no longer use Vim.", speaker="assistant") == set()


def test_update_facts_come_after_the_declared_ones_so_earlier_fact_ids_stay_put(monkeypatch):
    """A fact's id is its index in its event's facts: the update rules add facts after the
    others, so each text's declared facts keep the indexes they had before the rules."""
    texts = [t for t, _, _ in DEV_CASES + HELD_OUT_CASES] + [
        "I used to work at Google but now I work at Meta and I love Rust.",
        "I don't like Java anymore, I love Go. I live in Porto now.",
    ]
    with_updates = [extract_facts(t) for t in texts]
    monkeypatch.setattr("memstream.text.facts.extract.updates", lambda *args: None)
    without = [extract_facts(t) for t in texts]
    assert all(w[: len(wo)] == wo for w, wo in zip(with_updates, without))
    assert any(len(w) > len(wo) for w, wo in zip(with_updates, without))


def test_a_retraction_is_a_fact_candidate_that_encodes_and_defaults_to_false():
    (fact,) = extract_facts("I no longer use Vim.")
    assert fact.retracts
    assert msgspec.json.decode(msgspec.json.encode(fact), type=FactCandidate) == fact
    assert not FactCandidate(kind="tool", subject="user", key="uses", value="Go", text="", confidence=0.8).retracts


def test_a_retraction_of_any_value_is_only_for_single_valued_keys():
    facts = extract_facts("I got a new phone number.")
    assert [(f.key, f.value) for f in facts] == [("phone", "")]
    assert all(f.value for f in extract_facts("I don't like it anymore. I no longer use them."))


@given(
    st.text(alphabet=st.sampled_from(list("I we moved from to switched left no longer don't anymore new Abc .,")), max_size=300)
)
@hsettings(max_examples=300, deadline=None)
def test_update_words_in_any_order_never_raise(text):
    for fact in extract_facts(text):
        assert fact.kind and fact.key and (fact.value or fact.retracts)


# Each repeats an opening of an update rule whose ending never comes: a pattern that
# scans to the end from every opening is quadratic (these took 25-75 s at 256 KiB before
# the lazy groups were bounded); CPU time, against a bound that fails only on that class.
_SIZE = 256 * 1024
_ADVERSARIAL = [
    "we moved from a ",
    "I don't like x ",
    "I'm not at Abc ",
    "I switched to a from ",
    "I'm not a b ",
    "I used to love a ",
    "I got a new phone number ",
    "I use a instead of ",
    "my new job is ",
]


@pytest.mark.parametrize("opening", _ADVERSARIAL)
def test_repeated_update_openings_are_read_in_linear_time(opening):
    text = opening * (_SIZE // len(opening))
    t0 = time.process_time()
    extract_facts(text)
    assert time.process_time() - t0 < 2.0


@pytest.mark.parametrize("rule", range(len(update_rules._RULES)))
@hsettings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_update_gate_passes_every_text_an_update_rule_matches(rule, data):
    """``may_be_update`` is an exact shortcut: a sentence it turns away no rule can match."""
    gated = update_rules._RULES[rule]
    text = data.draw(st.from_regex(gated.rx))
    if gated.rx.search(text):
        assert update_rules.may_be_update(text)


def test_the_update_gate_turns_away_a_sentence_without_update_words():
    assert update_rules.may_be_update("We're fully moved to Lisbon now.")
    assert not update_rules.may_be_update("My name is Ana and I love tea.")
