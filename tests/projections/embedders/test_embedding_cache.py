"""The embedding cache: each text embedded once per embedder, across instances and processes."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from memstream.projections.embedders.cache import (
    CachedEmbedder,
    EmbeddingCache,
    text_key,
)
from memstream.projections.embedders.hashing import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """A hash embedder that records every text it is asked to embed."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return super().embed(texts)

    @property
    def embedded(self) -> int:
        return sum(len(c) for c in self.calls)


def test_second_instance_on_the_same_file_embeds_nothing_again(tmp_path):
    path = tmp_path / "emb.sqlite3"
    texts = ["alpha beta", "gamma delta", "alpha beta", "epsilon"]

    inner1 = CountingEmbedder()
    first = CachedEmbedder(inner1, path)
    v1 = first.embed(texts)
    assert inner1.calls == [["alpha beta", "gamma delta", "epsilon"]]  # the duplicate is embedded once
    assert first.stats() == {"hits": 1, "misses": 3, "memory_hits": 0, "disk_hits": 0, "errors": 0}

    inner2 = CountingEmbedder()
    second = CachedEmbedder(inner2, path)  # another instance, its own connection and LRU
    v2 = second.embed(texts + ["zeta"])
    assert inner2.calls == [["zeta"]]
    assert second.stats() == {"hits": 4, "misses": 1, "memory_hits": 0, "disk_hits": 3, "errors": 0}
    assert np.array_equal(v1, v2[:4])  # bit for bit

    v3 = second.embed(texts)
    assert second.stats()["memory_hits"] == 3 and second.stats()["misses"] == 1
    assert np.array_equal(v1, v3)
    first.close()
    second.close()


def test_cached_vectors_come_back_in_input_order_with_the_inner_metadata(tmp_path):
    inner = HashEmbedder(dim=64, max_tokens=10)
    cached = CachedEmbedder(inner, EmbeddingCache(tmp_path / "c.sqlite3"))
    texts = [f"text number {i}" for i in range(20)]
    cached.embed(texts[::2])
    v = cached.embed(texts)
    assert np.array_equal(v, inner.embed(texts))
    assert v.dtype == np.float32 and v.shape == (20, 64)
    assert (cached.name, cached.dim, cached.max_tokens) == (inner.name, 64, 10)
    assert cached.count_tokens("a b c") == 3


def test_embedders_with_different_names_never_share_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    a = CachedEmbedder(CountingEmbedder(dim=32), cache)
    b_inner = CountingEmbedder(dim=48)
    b = CachedEmbedder(b_inner, cache)
    a.embed(["same text"])
    assert b.embed(["same text"]).shape == (1, 48)
    assert b_inner.embedded == 1
    assert cache.count() == 2 and cache.count("hash-v1-32") == 1


def test_vectors_are_stored_as_float32_bytes_under_the_text_sha256(tmp_path):
    path = tmp_path / "c.sqlite3"
    cached = CachedEmbedder(HashEmbedder(dim=16), path)
    v = cached.embed(["hello"])[0]
    cached.close()
    row = sqlite3.connect(path).execute("SELECT embedder, text_sha256, vector FROM embeddings").fetchone()
    assert row[0] == "hash-v1-16" and row[1] == text_key("hello") and len(row[1]) == 32
    assert np.array_equal(np.frombuffer(row[2], dtype="<f4"), v)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_batch_is_looked_up_in_one_query(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3", memory_items=0)
    cached = CachedEmbedder(HashEmbedder(dim=16), cache)
    texts = [f"t{i}" for i in range(300)]
    cached.embed(texts)
    statements: list[str] = []
    cache._db.set_trace_callback(statements.append)
    cached.embed(texts)
    assert sum(s.startswith("SELECT") for s in statements) == 1
    assert cached.stats()["disk_hits"] == 300


def test_the_memory_lru_keeps_only_the_most_recent_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3", memory_items=2)
    cached = CachedEmbedder(HashEmbedder(dim=16), cache)
    cached.embed(["a", "b", "c"])
    cached.embed(["c", "a"])
    s = cached.stats()
    assert (s["memory_hits"], s["disk_hits"]) == (1, 1)  # "c" from memory, "a" from the file


def test_a_stored_vector_of_another_size_is_ignored(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3", memory_items=0)
    cache.put_many("hash-v1-16", {text_key("x"): np.ones(8, dtype=np.float32)})
    inner = CountingEmbedder(dim=16)
    v = CachedEmbedder(inner, cache).embed(["x"])
    assert inner.embedded == 1 and v.shape == (1, 16)


def test_a_broken_cache_file_does_not_stop_embedding(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    inner = CountingEmbedder(dim=16)
    cached = CachedEmbedder(inner, cache)
    cache._db.close()  # every SQLite call now raises sqlite3.ProgrammingError
    v = cached.embed(["still works", "still works"])
    assert v.shape == (2, 16) and inner.embedded == 1
    assert cached.stats()["errors"] == 2  # the read and the write


def test_concurrent_threads_share_one_cache(tmp_path):
    inner = HashEmbedder(dim=32)
    cached = CachedEmbedder(inner, tmp_path / "c.sqlite3")
    texts = [f"turn {i}" for i in range(200)]
    results: list[np.ndarray] = []

    def work():
        results.append(cached.embed(texts))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = inner.embed(texts)
    assert all(np.array_equal(r, expected) for r in results)
    s = cached.stats()
    assert s["hits"] + s["misses"] == 800 and s["errors"] == 0
    assert cached.cache.count() == 200


def test_the_cache_file_is_the_one_given_whatever_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path / "home"))
    cached = CachedEmbedder(HashEmbedder(dim=16), tmp_path / "given" / "c.sqlite3")
    cached.embed(["x"])
    cached.close()
    assert (tmp_path / "given" / "c.sqlite3").exists() and not (tmp_path / "home").exists()


def test_inner_errors_propagate_and_nothing_is_stored(tmp_path):
    class Failing(HashEmbedder):
        def embed(self, texts):
            raise RuntimeError("model crashed")

    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    with pytest.raises(RuntimeError):
        CachedEmbedder(Failing(dim=16), cache).embed(["x"])
    assert cache.count() == 0


def test_delete_removes_the_rows_of_the_texts_of_every_embedder_from_memory_and_the_file(tmp_path):
    path = tmp_path / "cache.sqlite3"
    with EmbeddingCache(path) as cache:
        vec = np.ones(4, dtype="<f4")
        cache.put_many("a", {text_key("gone"): vec, text_key("kept"): vec})
        cache.put_many("b", {text_key("gone"): vec})
        assert cache.delete([text_key("gone"), text_key("never stored")]) == 2
        assert cache.get_many("a", [text_key("gone")], 4)[0] == {}  # not from the memory either
        assert cache.delete([text_key("gone")]) == 0
    with EmbeddingCache(path) as cache:
        assert cache.count() == 1 and set(cache.get_many("a", [text_key("kept")], 4)[0]) == {text_key("kept")}


def test_a_query_view_reads_the_file_and_keeps_what_it_embeds_in_memory_only(tmp_path):
    """``for_queries``: a passage stored by the write side is read from the file; a question
    it embeds is answered again from memory, and never reaches the file (a new cache on the
    same file embeds it again), so ``memstream forget`` has nothing of it to miss."""
    path = tmp_path / "emb.sqlite3"
    inner = CountingEmbedder()
    writer = CachedEmbedder(inner, path)
    stored = writer.embed(["the staging database listens on port 6543"])
    queries = writer.for_queries()
    assert queries.persist is False and queries.inner is inner and queries.cache is writer.cache
    question = "what port is the staging database on"
    first = queries.embed([question, "the staging database listens on port 6543"])
    assert np.array_equal(first[1], stored[0]) and inner.calls[-1] == [question]
    again = queries.embed([question])
    assert np.array_equal(again[0], first[0]) and queries.stats()["memory_hits"] >= 2
    writer.close()
    fresh_inner = CountingEmbedder()
    with EmbeddingCache(path) as cache:
        reopened = CachedEmbedder(fresh_inner, cache)
        reopened.embed([question, "the staging database listens on port 6543"])
    assert fresh_inner.calls == [[question]]  # the passage was in the file; the question was not
