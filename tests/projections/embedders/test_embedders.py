"""The embedder port: the hash embedder, the factory, and the dimension guard."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from memstream.core import Settings
from memstream.projections.embedders.factory import configured_embedder, describe_embedder, get_embedder
from memstream.projections.embedders.hashing import HashEmbedder
from memstream.projections.embedders.onnx import DIM, MODEL_ID, default_threads
from memstream.projections.embedders.port import Embedder, EmbedderError, check_dim
from memstream.projections.embedders.remote import OllamaEmbedder, OpenAIEmbedder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_hash_vectors_are_unit_float32_rows_in_input_order():
    e = HashEmbedder()
    texts = ["deploy the build", "", "Valkey streams", "deploy the build"]
    v = e.embed(texts)
    assert v.dtype == np.float32 and v.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)
    assert np.array_equal(v[0], v[3])
    assert not np.array_equal(v[0], v[2])
    assert np.array_equal(e.embed(["Valkey streams"])[0], v[2])


def test_hash_vectors_are_identical_in_another_process():
    here = HashEmbedder().embed(["The deploy failed on Tuesday"])[0]
    code = (
        "import sys; from memstream.projections.embedders.hashing import HashEmbedder;"
        "sys.stdout.buffer.write(HashEmbedder().embed(['The deploy failed on Tuesday'])[0].tobytes())"
    )
    # A different hash seed would change Python's hash(): the embedder must not depend on it.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, env={**os.environ, "PYTHONHASHSEED": "123"}
    )
    assert np.array_equal(np.frombuffer(out.stdout, dtype=np.float32), here)


def test_hash_similarity_follows_shared_words_and_inflections():
    e = HashEmbedder()
    q, near, inflected, far = e.embed(
        [
            "the deploy to production failed",
            "production deploy failed again",
            "deploying to production fails",
            "my cat likes sardines",
        ]
    )
    assert cos(q, near) > cos(q, inflected) > cos(q, far)
    assert abs(cos(q, far)) < 0.3


def test_hash_is_case_and_width_insensitive():
    e = HashEmbedder()
    a, b = e.embed(["Ｒｅｄｉｓ STREAMS", "redis streams"])
    assert np.array_equal(a, b)


def test_hash_truncates_past_max_tokens_and_counts_words():
    e = HashEmbedder(max_tokens=4)
    a, b = e.embed(["one two three four five six", "one two three four"])
    assert np.array_equal(a, b)
    assert e.count_tokens("one two, three-four!") == 4


def test_embed_refuses_a_bare_string():
    with pytest.raises(TypeError, match="embed\\(\\[text\\]\\)"):
        HashEmbedder().embed("just one text")


def test_embedding_nothing_gives_an_empty_matrix_of_the_right_width():
    assert HashEmbedder(dim=64).embed([]).shape == (0, 64)


def test_factory_builds_each_spec_and_names_carry_the_model():
    assert isinstance(get_embedder("hash", dim=32), HashEmbedder)
    assert get_embedder("hash", dim=32).name == "hash-v1-32"
    oa = get_embedder("openai:nomic-embed", base_url="http://127.0.0.1:9/v1", dim=768)
    assert isinstance(oa, OpenAIEmbedder) and oa.name == "openai:nomic-embed" and oa.dim == 768
    ol = get_embedder("ollama", model="all-minilm", dim=384)
    assert isinstance(ol, OllamaEmbedder) and ol.name == "ollama:all-minilm"
    assert isinstance(get_embedder("hash"), Embedder)


def test_the_configured_embedder_is_the_one_the_environment_names(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    assert isinstance(configured_embedder(Settings.load()), HashEmbedder)
    assert isinstance(configured_embedder(Settings.load(), "hash"), HashEmbedder)


def test_describe_says_what_the_embedder_would_be_without_making_it():
    assert describe_embedder(Settings(embedder="onnx-minilm")) == {
        "embedder": "onnx-minilm",
        "model": MODEL_ID,
        "dim": DIM,
        "threads": default_threads(),
    }
    assert describe_embedder(Settings(embed_threads=3))["threads"] == 3
    openai = describe_embedder(Settings(embedder="openai", embed_url="https://u:pw@llm.example/v1", embed_api_key="sk-secret"))
    assert openai == {"embedder": "openai", "url": "https://u:***@llm.example/v1", "model": "text-embedding-3-small", "dim": 1536}
    assert describe_embedder(Settings(embedder="ollama:mxbai"))["dim"] is None  # learnt from its first answer
    with pytest.raises(EmbedderError, match="onnx-minilm, bge-small, colbert-small, hash"):
        describe_embedder(Settings(embedder="word2vec"))


def test_unknown_spec_is_refused_with_the_choices():
    with pytest.raises(EmbedderError, match=r"onnx-minilm, bge-small, colbert-small, hash, openai\[:MODEL\]"):
        get_embedder("word2vec")
    with pytest.raises(EmbedderError, match="takes no model"):
        get_embedder("hash:big")


def test_remote_embedder_without_a_model_says_how_to_set_one(monkeypatch):
    monkeypatch.delenv("MEMSTREAM_EMBED_MODEL", raising=False)
    monkeypatch.setattr(OllamaEmbedder, "default_model", None)
    with pytest.raises(EmbedderError, match="MEMSTREAM_EMBED_MODEL"):
        get_embedder("ollama")


def test_check_dim_passes_a_matching_collection():
    check_dim(HashEmbedder(dim=384), 384, "turns_v1")


def test_check_dim_names_both_sizes_and_the_way_out():
    with pytest.raises(EmbedderError) as err:
        check_dim(HashEmbedder(dim=384), 768, "turns_v1")
    msg = str(err.value)
    assert "'turns_v1' holds 768-d vectors" in msg
    assert "'hash-v1-384' makes 384-d" in msg
    assert "new projection version" in msg


_HEAP_SCRIPT = """
import ctypes, sys
from memstream.core.memory import release_freed_heap
def rss_mb():
    return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024
libc = ctypes.CDLL('libc.so.6')
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(16384) for _ in range(4000)]  # 64 MB on the heap, each below the mmap threshold
for b in blocks:
    ctypes.memset(b, 1, 16384)
fence = libc.malloc(64)  # above them: free() alone cannot shrink the heap past it
for b in blocks:
    libc.free(b)
freed = rss_mb()
print(release_freed_heap(), freed, rss_mb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_the_heap_a_native_computation_freed_goes_back_to_the_system():
    """What a model's session build freed stays resident under glibc until trimmed."""
    out = subprocess.run([sys.executable, "-c", _HEAP_SCRIPT], capture_output=True, text=True, check=True, timeout=60)
    trimmed, before, after = out.stdout.split()
    assert trimmed == "True"
    assert float(before) - float(after) > 40  # of the 64 MB freed under the fence


def test_a_process_without_a_remote_embedder_never_imports_httpx():
    script = "import sys, memstream.workers, memstream.service; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
