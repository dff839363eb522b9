"""asks_about_past: a question about an earlier value gets superseded facts too, any other
question only current ones. Two labelled parts: ``TUNED`` (written with the pattern) and
``HELD_OUT`` (written after it, and the pattern not changed once they were run)."""

from __future__ import annotations

import pytest

from memstream.text.facts.past import asks_about_past

TUNED = [
    ("Where did I live before?", True),
    ("What was my old number?", True),
    ("Where did I use to work?", True),
    ("What was my previous email address?", True),
    ("Which editor did I use before Helix?", True),
    ("What city was I originally from?", True),
    ("Where was I living last year?", True),
    ("Did I ever work at Google?", True),
    ("What did I use to code in?", True),
    ("Which languages do I no longer use?", True),
    ("Where do I live?", False),
    ("What's my number?", False),
    ("How old is my daughter?", False),
    ("What was discussed in the LGBTQ+ counseling workshop?", False),
    ("What is my email?", False),
    ("Which tools do I use?", False),
    ("What did Maria participate in last weekend before April 10, 2023?", False),
    ("What did Jean go through before meeting Maria?", False),
    ("What health issue did Sam face that motivated him to change his lifestyle?", False),
    ("What was the name of the restaurant?", False),
]
HELD_OUT = [
    ("What was my address before the move?", True),
    ("Where did we live previously?", True),
    ("What phone number did I have before this one?", True),
    ("Who was my former manager?", True),
    ("What did I used to drink in the mornings?", True),
    ("Which company was I at earlier?", True),
    ("What was my email?", True),
    ("Have I lived in Berlin?", True),
    ("What do I do for work?", False),
    ("How old was Melanie when she started painting?", False),
    ("When did Caroline go to the adoption meeting?", False),
    ("What was grandma's gift to Caroline?", False),
    ("Which city is the user based in?", False),
    ("What did Audrey do with her pups over the weekend before 4th October, 2023?", False),
    ("What is my current role?", False),
    ("Where was the conference held?", False),
]


def _accuracy(cases) -> float:
    return sum(asks_about_past(q) == want for q, want in cases) / len(cases)


def test_every_tuned_question_is_read_as_labelled():
    assert [q for q, want in TUNED if asks_about_past(q) != want] == []


def test_the_held_out_questions_are_read_right_nine_times_in_ten():
    """Measured 16/16 (the earlier word list read 11/16: "was" and "old" alone are past)."""
    assert _accuracy(HELD_OUT) >= 0.9


@pytest.mark.parametrize("text", ["", " ", "?", "before" * 1000, "\ud800 old"])
def test_odd_questions_never_raise(text):
    assert isinstance(asks_about_past(text), bool)
