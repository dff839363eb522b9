"""The labelled corpus (tests/text/corpus/, written by make_corpus.py): every tuned secret
but one is redacted, at least 97% of the held-out ones, at most 0.2% of ordinary turns
change, and none of the ordinary turns that name hex digests (cache keys, commits,
checksums), in the tuned and the held-out draw.

These are quality assertions on fixed files, not timings; ``memstream bench redaction``
gives the same figures with throughput, and BENCHMARKS.md records them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from memstream.bench.testbed.secretcorpus import leaked
from memstream.text.redaction import SECRET_KINDS, redact

CORPUS = Path(__file__).resolve().parent / "corpus"


def _secrets(part: str) -> list[dict]:
    with open(CORPUS / f"secrets_{part}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _ordinary() -> list[str]:
    with gzip.open(CORPUS / "ordinary.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _digest_turns(part: str) -> list[str]:
    with open(CORPUS / f"ordinary_digests_{part}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _missed(items: list[dict]) -> list[tuple[str, str]]:
    missed = []
    for item in items:
        out, _ = redact(item["text"])
        if any(leaked(out, s, item["text"]) for s in item["secrets"]):
            missed.append((item["text"], out))
    return missed


def test_the_corpus_is_as_large_as_promised():
    tuned, held = _secrets("tuned"), _secrets("heldout")
    assert len(tuned) + len(held) >= 700 and len(held) >= 90
    assert len({i["kind"] for i in tuned + held}) >= 30  # providers and ways of writing
    assert len(_ordinary()) >= 5000


def test_every_tuned_secret_but_a_known_one_is_redacted():
    # the third held-out draw's known miss, kept as measured: words between the name and "is"
    assert [text for text, _ in _missed(_secrets("tuned"))] == ["the token you need is QmaI3vHx97sIMbV3o8jdzSFG=="]


def test_at_least_97_percent_of_the_held_out_secrets_are_redacted():
    held = _secrets("heldout")
    missed = _missed(held)
    assert 1 - len(missed) / len(held) >= 0.97, missed


@pytest.mark.parametrize("part", ["tuned", "heldout"])
def test_no_ordinary_turn_naming_a_digest_changes(part):
    turns = _digest_turns(part)
    assert len(turns) >= 300
    assert [t for t in turns if redact(t)[0] != t] == []


def test_at_most_0_2_percent_of_ordinary_turns_change():
    turns = _ordinary()
    changed = [(t, redact(t)[0]) for t in turns if redact(t)[0] != t]
    assert len(changed) / len(turns) <= 0.002, changed[:5]


def test_redacting_the_redacted_corpus_changes_nothing():
    for item in _secrets("tuned") + _secrets("heldout"):
        once, _ = redact(item["text"])
        assert redact(once) == (once, 0), item["text"]


def test_every_kind_of_mark_is_produced_by_the_corpus():
    seen = set()
    for item in _secrets("tuned"):
        out, _ = redact(item["text"])
        seen.update(k for k in SECRET_KINDS if f"[REDACTED:{k}]" in out)
    assert seen == set(SECRET_KINDS)


@pytest.mark.parametrize(
    ("out", "secret", "kept"),
    [
        ("token [REDACTED:secret]", "ghp_abcdefghij0123456789", False),
        ("token ghp_abcdefghij[REDACTED:secret]", "ghp_abcdefghij0123456789", True),  # a half kept
        ("[REDACTED:secret]\nj0123456789xyz", "abcdef\nj0123456789xyz", True),  # the wrapped line kept
        ("key gh\u200bp_abcdefghij0123", "ghp_abcdefghij0123", True),  # split by a zero-width space
        ("here: glpаt-abcdefghij", "glpat-abcdefghij", True),  # a Cyrillic а
    ],
)
def test_the_leak_check_sees_pieces_of_a_secret(out, secret, kept):
    assert leaked(out, secret) is kept
