"""extract_facts(): rule-based facts, checked against a labelled matrix and by behaviour."""

from __future__ import annotations

import re

import msgspec
import pytest
from fact_cases import DEV_CASES, HELD_OUT_CASES
from fuzzing import examples
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.text.facts import FACT_KINDS, FactCandidate, extract_facts, is_single_valued
from memstream.text.facts.patterns import gate_fold

# Known misses, kept in the matrix so the precision/recall figures stay honest.
KNOWN_WRONG = {
    "We agreed to drop support for Python 3.8.": "a version is taken from any sentence, even one that drops it",
}


def _norm(value: str) -> str:
    return value.strip(" \t.,;:!?)\"'").casefold()


def _got(text: str, speaker: str) -> set[tuple[str, str, str, str]]:
    """The facts stated (retractions, "I used to live in Paris", are labelled in the update
    dialogues: tests/projections/test_fact_updates.py)."""
    return {(f.kind, f.subject, f.key, _norm(f.value)) for f in extract_facts(text, speaker=speaker) if not f.retracts}


def _want(expected: set[tuple[str, str, str, str]]) -> set[tuple[str, str, str, str]]:
    return {(k, s, key, _norm(v)) for k, s, key, v in expected}


def _scores(cases) -> tuple[float, float]:
    tp = fp = fn = 0
    for text, speaker, expected in cases:
        got, want = _got(text, speaker), _want(expected)
        tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
    return tp / max(1, tp + fp), tp / max(1, tp + fn)


@pytest.mark.parametrize(
    ("text", "speaker", "expected"),
    [
        pytest.param(*case, marks=pytest.mark.xfail(reason=KNOWN_WRONG[case[0]], strict=True)) if case[0] in KNOWN_WRONG else case
        for case in DEV_CASES + HELD_OUT_CASES
    ],
    ids=lambda v: v[:40] if isinstance(v, str) and len(v) > 12 else None,
)
def test_labelled_sentence_yields_exactly_its_facts(text, speaker, expected):
    assert _got(text, speaker) == _want(expected)


def test_the_matrix_has_at_least_sixty_sentences_with_positives_and_negatives():
    cases = DEV_CASES + HELD_OUT_CASES
    assert len(cases) >= 60
    assert sum(1 for *_, e in cases if not e) >= 20
    assert {k for *_, e in cases for k, *_ in e} == set(FACT_KINDS)


@pytest.mark.parametrize("cases", [DEV_CASES, HELD_OUT_CASES], ids=["dev", "held_out"])
def test_precision_and_recall_over_the_matrix_stay_above_ninety_five_percent(cases):
    precision, recall = _scores(cases)
    assert precision >= 0.95
    assert recall >= 0.95


def test_a_later_move_gives_a_new_value_for_the_same_single_valued_key():
    (before,) = extract_facts("I live in Berlin.")
    (after,) = extract_facts("Last spring I moved to Lisbon.")
    assert (before.subject, before.key, before.value) == ("user", "location", "Berlin")
    assert (after.subject, after.key, after.value) == ("user", "location", "Lisbon")
    assert is_single_valued(after.key)


def test_love_and_hate_in_one_sentence_give_two_facts():
    facts = extract_facts("I love Rust but hate Java")
    assert [(f.kind, f.key, f.value) for f in facts] == [
        ("preference", "likes", "Rust"),
        ("dislike", "dislikes", "Java"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Do you like Rust?",
        "do you prefer tabs or spaces?",
        "Would you say I love chaos?",
        "Is your name Bob?",
        "I live in Berlin?",
    ],
)
def test_a_question_yields_no_facts(text):
    assert extract_facts(text) == []


@pytest.mark.parametrize("text", ["I'm not sure.", "I'm going to deploy later.", "I'm happy with it.", "I'm Still waiting."])
def test_states_and_intentions_are_not_names(text):
    assert not [f for f in extract_facts(text) if f.key == "name"]


def test_the_assistants_first_person_is_not_the_users_identity():
    text = "My name is Hermes. I live in the cloud and I love helping. We decided to use Redis for caching."
    facts = extract_facts(text, speaker="assistant")
    assert [(f.kind, f.key) for f in facts] == [("decision", "decision:caching")]
    assert facts[0].confidence < extract_facts(text)[-1].confidence


def test_the_assistant_still_produces_values_and_terse_notation():
    facts = extract_facts("The API server listens on port 8080.\nD[auth]: JWT", speaker="assistant")
    assert {(f.kind, f.subject, f.key, f.value) for f in facts} == {
        ("value", "api server", "port", "8080"),
        ("decision", "project", "decision:auth", "JWT"),
    }


def test_terse_notation_gives_one_fact_per_line_and_nothing_else():
    text = "C[deploy]: never on Fridays, I love Rust\nnot notation\nV[db.host]: db.internal"
    facts = extract_facts(text)
    assert [(f.kind, f.subject, f.key, f.value) for f in facts] == [
        ("constraint", "deploy", "constraint", "never on Fridays, I love Rust"),
        ("value", "db.host", "value", "db.internal"),
    ]
    assert facts[0].text == "C[deploy]: never on Fridays, I love Rust"


def test_a_decision_names_its_topic_when_it_says_what_it_is_for():
    (fact,) = extract_facts("We decided to use Kafka for the event bus.")
    assert fact.key == "decision:event bus"
    assert is_single_valued(fact.key)
    (bare,) = extract_facts("Let's go with option B.")
    assert bare.key == "decision" and not is_single_valued(bare.key)


def test_a_value_the_sentence_does_not_attribute_is_a_mention():
    (fact,) = extract_facts("Try https://example.com/docs first.")
    assert (fact.subject, fact.key) == ("project", "mention:url")
    assert not is_single_valued(fact.key)


def test_a_url_is_not_also_reported_as_its_host_or_path():
    facts = extract_facts("Grafana is at https://grafana.example.com/d/abc/overview")
    assert [f.key for f in facts] == ["url"]


def test_numbers_with_units_are_not_versions():
    assert extract_facts("The job took 3.5 hours and used 2.5 GB on Python workers.") == []


@pytest.mark.parametrize(
    ("key", "single"),
    [
        ("name", True),
        ("location", True),
        ("employer", True),
        ("role", True),
        ("host", True),
        ("port", True),
        ("url", True),
        ("decision:queue", True),
        ("version:python", True),
        ("favorite:editor", True),
        ("likes", False),
        ("dislikes", False),
        ("uses", False),
        ("constraint", False),
        ("decision", False),
        ("note", False),
        ("mention:url", False),
    ],
)
def test_single_valued_keys_supersede_and_others_accumulate(key, single):
    assert is_single_valued(key) is single


def test_facts_come_in_text_order_without_duplicates():
    facts = extract_facts("I live in Berlin. I live in Berlin! My name is Ana.")
    assert [(f.key, f.value) for f in facts] == [("location", "Berlin"), ("name", "Ana")]


def test_each_fact_carries_its_source_sentence_and_a_confidence_in_the_unit_interval():
    facts = extract_facts("Hi! My name is Priya. I live in Toronto and I work at Shopify.")
    assert {f.text for f in facts} == {"My name is Priya.", "I live in Toronto and I work at Shopify."}
    assert all(0.0 < f.confidence <= 1.0 for f in facts)


def test_a_fact_candidate_is_frozen_and_encodes_to_json():
    (fact,) = extract_facts("My name is Ana.")
    with pytest.raises(AttributeError):
        fact.value = "Bob"  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(fact), type=FactCandidate) == fact


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\n\n",
        "🙂" * 50,
        "?" * 100,
        "[" * 500,
        "C[",
        "V[]: ",
        "I'm",
        "my name is",
        "x" * 20000,
        "/a/b " * 2000,
        "I love " * 500,
        "\x00\x01 binary \ud800 junk",
    ],
)
def test_odd_input_never_raises(text):
    assert isinstance(extract_facts(text), list)


def test_every_fact_the_extractor_gives_has_one_of_the_fact_kinds():
    kinds = {f.kind for text, speaker, _ in DEV_CASES + HELD_OUT_CASES for f in extract_facts(text, speaker=speaker)}
    assert kinds <= set(FACT_KINDS)


def test_the_fact_kinds_are_written_down_once_in_kinds_py():
    """No other module of memstream lists the fact kinds or names the list again: the
    extractor, the facts table and the ``memstream_facts`` tool read ``FACT_KINDS``."""
    import ast
    from pathlib import Path

    import memstream

    root = Path(memstream.__file__).parent
    home = root / "text" / "facts" / "kinds.py"
    elsewhere = []
    for path in sorted(root.rglob("*.py")):
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(words) >= 3 and set(words) <= set(FACT_KINDS):
                    elsewhere.append(f"{path.relative_to(root)}:{node.lineno} lists {words}")
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and isinstance(node.value, ast.Name)
                and node.value.id == "FACT_KINDS"
            ):
                elsewhere.append(f"{path.relative_to(root)}:{node.lineno} names FACT_KINDS again")
    assert not elsewhere


def test_the_agents_process_describes_the_facts_tool_without_loading_the_extractor():
    import subprocess
    import sys

    probe = (
        "import sys, memstream.provider\n"
        "from memstream.text import FACT_KINDS\n"
        "print(sorted(m for m in sys.modules if m.startswith('memstream.text.facts.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['memstream.text.facts.kinds', 'memstream.text.facts.sentences']"  # tables and wording only


# -- gates: the words a gated pattern needs, looked for before it scans ----------------------
def _gated():
    from memstream.text.facts import patterns

    found = []
    for name, value in vars(patterns).items():
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            item = item[0] if isinstance(item, tuple) else item
            if isinstance(item, patterns.Gated):
                found.append(pytest.param(item, id=f"{name}[{i}]" if isinstance(value, list) else name))
    return found


# the letters a case-insensitive pattern also matches with a character that is not ASCII
_EXOTIC = {"i": "\u0130\u0131", "I": "\u0130\u0131", "s": "\u017f", "S": "\u017f", "k": "\u212a", "K": "\u212a"}


@pytest.mark.parametrize("gated", _gated())
@hsettings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_text_a_gated_pattern_matches_contains_one_of_its_words(gated, data):
    text = data.draw(st.from_regex(gated.rx))
    swaps = data.draw(st.lists(st.integers(0, max(0, len(text) - 1)), max_size=4))
    for i in swaps:  # a letter swapped for one the pattern matches it to, where there is one
        if text and text[i] in _EXOTIC:
            text = text[:i] + data.draw(st.sampled_from(_EXOTIC[text[i]])) + text[i + 1 :]
    if gated.rx.search(text):
        assert gated.may_match(gate_fold(text))
        assert gated.search(text, gate_fold(text)) is not None


def test_the_gate_fold_knows_every_letter_a_case_insensitive_pattern_takes_for_an_ascii_one():
    letter = re.compile("[a-z]", re.I)
    others = {chr(c) for c in range(128, 0x110000) if letter.fullmatch(chr(c))}
    assert others == set("\u0130\u0131\u017f\u212a")
    for ch in others:
        folded = gate_fold(ch)
        assert len(folded) == 1 and re.fullmatch(folded, ch, re.I)
    assert gate_fold("I LIVE IN Paris, İstanbul ſide") == "i live in paris, istanbul side"


_ODD_TEXTS = [
    "I\u2019m Ada",
    "I\u2019m from İzmir",
    "MY NAME IS ADA",
    "my name is ada",
    "I ЛЮБЛЮ Rust, I love Go",
    "I live in Kraków",
    "I LIVE IN KRAKÓW",
    "I work at Ünicorn GmbH",
    "I use Rust 🦀 daily",
    "We uſe Zig for the build",
    "I\u02bcm ba\u017fed in O\u017flo",
    "I\u2019ve been living in Lyon",
    "my favourite editor is Helix",
    "My e-mail is ada@example.com",
    "Je m\u2019appelle Zoé",
    "Ich wohne jetzt in Köln",
    "I'm a data engineer at Acme",
    "I joined Globex last year",
]


def test_the_gates_change_no_fact_that_the_patterns_alone_give(monkeypatch):
    from memstream.text.facts.patterns import Gated

    texts = [text for text, _, _ in DEV_CASES + HELD_OUT_CASES] + _ODD_TEXTS
    gated = [
        [(f.kind, f.subject, f.key, f.value) for f in extract_facts(t, speaker=sp)] for t in texts for sp in ("user", "assistant")
    ]
    monkeypatch.setattr(Gated, "search", lambda self, text, folded: self.rx.search(text))
    monkeypatch.setattr(Gated, "finditer", lambda self, text, folded: self.rx.finditer(text))

    assert gated == [
        [(f.kind, f.subject, f.key, f.value) for f in extract_facts(t, speaker=sp)] for t in texts for sp in ("user", "assistant")
    ]
    assert any(gated)
