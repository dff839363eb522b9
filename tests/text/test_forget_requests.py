"""forget_request: a forget request said in conversation, recognised conservatively (a false
positive erases what the user wanted kept). Labelled requests and non-requests in two
parts, ``TUNED`` (written with the patterns) and ``HELD_OUT`` (written before they were run
on it, not tuned on); and none at all in the ordinary corpus (tests/text/corpus)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.text.forget import ForgetRequest, forget_request

CORPUS = Path(__file__).parent / "corpus" / "ordinary.jsonl.gz"

# (text, the topic asked to be forgotten, or None for no request)
TUNED = [
    ("Please forget my home address.", "my home address"),
    ("delete what I told you about my health", "my health"),
    ("Can you forget my phone number?", "my phone number"),
    ("Forget everything about my ex, please.", "my ex"),
    ("I want you to forget my salary.", "my salary"),
    ("Please don't remember my address.", "my address"),
    ("Could you erase any information you have about my kids?", "my kids"),
    ("Remove my email from your memory.", "my email"),
    ("Stop remembering my birthday.", "my birthday"),
    ("Forget what I told you about my divorce.", "my divorce"),
    ("Ok, please forget that I mentioned the lawsuit.", "the lawsuit"),
    ("Don't forget my keys!", None),
    ("I forgot my password.", None),
    ("Forget it.", None),
    ("Forget my last message.", None),
    ("Delete my account please.", None),
    ("Do you ever forget things?", None),
    ("Delete the file.", None),
    ("I'll never forget my trip to Paris.", None),
    ("Remove the button from the page.", None),
    ("Let's forget about work for a day.", None),
    ("Never forget my advice.", None),
    ("Please remember my address.", None),
    ("Clear the cache.", None),
    ("Forget about it, it's fine.", None),
    ("Can you remove my name from the list?", None),
    ("Forget my coffee order, I'll get tea.", None),
]
HELD_OUT = [
    ("please forget my medical history", "my medical history"),
    ("Would you delete everything you know about my sister?", "my sister"),
    ("I'd like you to forget my credit card details.", "my credit card details"),
    ("Hey, can you wipe what I said to you about my boss?", "my boss"),
    ("Erase all the notes about my therapy, please.", "my therapy"),
    ("You should forget my old address.", "my old address"),
    ("Please don't store my phone number.", "my phone number"),
    ("Forget all about my previous job.", "my previous job"),
    ("I keep forgetting my keys.", None),
    ("Forget the meeting, it's cancelled.", None),
    ("Did you forget my order?", None),
    ("Delete the last paragraph.", None),
    ("Please forget my earlier question.", None),
    ("She told me to forget my worries.", None),
    ("Remove the stain from my shirt.", None),
    ("Can you delete my comment on the PR?", None),
]


def _right(cases) -> int:
    return sum(((r := forget_request(t)) is not None and r.topic == want) or (r is None and want is None) for t, want in cases)


def test_every_tuned_sentence_is_read_as_labelled():
    wrong = [
        (t, forget_request(t))
        for t, want in TUNED
        if (forget_request(t) or ForgetRequest(what="", topic="", sentence="")).topic != (want or "")
    ]
    assert wrong == []


def test_the_held_out_sentences_give_no_false_request():
    """Conservative first: no non-request is taken for one; requests are measured (the
    report gives how many were found)."""
    assert [t for t, want in HELD_OUT if want is None and forget_request(t) is not None] == []
    assert _right(HELD_OUT) >= len(HELD_OUT) // 2


def test_no_sentence_of_the_ordinary_corpus_is_a_forget_request():
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    assert len(texts) >= 1000
    assert [t for t in texts if forget_request(t) is not None] == []


@pytest.mark.parametrize("text", ["", "forget", "Please forget", "delete " * 5000, "forget my " * 5000, "\ud800 forget my x"])
def test_odd_text_never_raises(text):
    assert forget_request(text) is None or isinstance(forget_request(text), ForgetRequest)


@given(st.text(alphabet=st.sampled_from(list("please forget my delete what I told you about everything x .,?")), max_size=300))
@hsettings(max_examples=200, deadline=None)
def test_any_arrangement_of_request_words_never_raises(text):
    r = forget_request(text)
    assert r is None or (r.topic and r.sentence)
