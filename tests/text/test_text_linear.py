"""The text stages stay linear on adversarial input, and the bounded scans still redact.

The timing test is a guard against the quadratic class, not a benchmark: every stage on
every input of ``memstream.bench.text`` at 256 KiB (the default MEMSTREAM_MAX_TEXT_BYTES)
must finish within 2 s of CPU time. A quadratic pattern takes 10-1000x longer than that
(``redact("token:" * n)`` took about 55 s at 256 KiB), a linear one takes milliseconds to
a few hundred, so the bound is generous against a noisy machine yet fails on the class
of bug it guards against. CPU time (``time.process_time``) rather than wall time, so
other processes on the machine do not count. The numbers themselves are in
``memstream bench text`` and BENCHMARKS.md.
"""

from __future__ import annotations

import time

import pytest
from fuzzing import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream.bench.text import ADVERSARIAL, _stages, adversarial
from memstream.text.redaction import redact

SIZE = 256 * 1024
BOUND_S = 2.0
STAGES = _stages()


@pytest.mark.parametrize("name", [*ADVERSARIAL, "mixed"])
@pytest.mark.parametrize("stage", list(STAGES))
def test_every_stage_finishes_an_adversarial_256k_text_within_the_bound(stage, name):
    text = adversarial(name, SIZE)
    assert len(text.encode("utf-8")) > SIZE * 0.9
    t0 = time.process_time()
    STAGES[stage](text)
    took = time.process_time() - t0
    assert took < BOUND_S, f"{stage} on {name!r} x 256 KiB took {took:.2f} s"


# --- the bounded / rewritten patterns still find real secrets -------------------------


def test_a_200_character_password_value_is_redacted_whole():
    value = "Ab1" + "x" * 197
    out, n = redact(f"password={value} and more")
    assert value not in out and "x" * 20 not in out
    assert out == "password=[REDACTED:secret] and more" and n == 1


def test_a_long_value_whose_first_secret_character_is_far_in_is_still_redacted():
    value = "a" * 600 + "1"
    out, _ = redact(f"token: {value} done")
    assert out == "token: [REDACTED:secret] done"


def test_a_secret_at_the_end_of_a_256k_adversarial_text_is_redacted():
    for name in ("token:", "password:", "-token:", "pwd: x", "one char", "Bearer", "mixed"):
        text = adversarial(name, SIZE) + "\napi_key=zq81Xx_aa77 ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456"
        out, n = redact(text)
        assert "zq81Xx_aa77" not in out, name
        assert "ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456" not in out, name
        assert n >= 2


def test_names_inside_a_run_without_a_secret_character_are_each_still_judged():
    # The first value (read through the run) has no digit; a later name in the same run
    # has a letters-only value of 16+ and is a secret on its own; a quoted one after it too.
    text = "token:ab:token:abcdefghijklmnopqrstu token:ab:password:'c0rrect horse'"
    out, n = redact(text)
    assert out == "token:ab:token:[REDACTED:secret] token:ab:password:'[REDACTED:secret]'"
    assert n == 2


def test_prose_about_tokens_is_still_left_alone_at_any_length():
    text = "The token: it expires hourly. " * 5000
    assert redact(text) == (text, 0)


def test_a_pem_key_with_an_ordinary_label_is_redacted_and_an_absurd_label_is_not_a_key():
    key = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----"
    assert redact(f"x {key} y") == ("x [REDACTED:private_key] y", 1)
    absurd = "-----BEGIN " + "A" * 100 + " PRIVATE KEY-----"
    assert redact(absurd)[1] == 0


# --- property: any text ------------------------------------------------------------------

PLANTED = [
    "sk-proj-AbC123def456GHI789jkl012MNO345pqr678",
    "ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678",
]
_SEP = st.sampled_from([" ", "\n", " token: ", " password=", " -- ", ", ", " (", ") ", " "])


@settings(max_examples=examples(300), deadline=None)
@given(st.text(), st.lists(st.tuples(st.sampled_from(PLANTED), _SEP, st.text(max_size=20)), max_size=4))
def test_redact_never_raises_is_idempotent_and_leaks_no_planted_token(noise, planted):
    text = noise
    for token, sep, tail in planted:
        text += sep + token + " " + tail
    out, n = redact(text)
    assert isinstance(out, str) and n >= 0
    assert redact(out) == (out, 0)
    for token, _, _ in planted:
        assert token not in out
