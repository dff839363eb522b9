"""Embedding cache: a text is embedded once per embedder, whatever replays and duplicates.

``EmbeddingCache`` keeps vectors in a SQLite file (WAL, shared by processes and by every
embedder instance that opens it) behind an in-memory LRU, keyed by
``(embedder name, sha256 of the UTF-8 text)`` and stored as float32 bytes.
``CachedEmbedder(inner, cache)`` wraps any embedder: per ``embed`` call it dedupes the
texts, answers what it can from the LRU, then from SQLite in one query per batch, embeds
only the rest with ``inner`` (in one call) and stores them.

Guarantees: a cached vector is returned bit for bit as first computed, so a replay yields
the same vectors even where batching would change the last bits. The embedder's name
carries its model and settings, so a new model never meets an old vector. The cache is
an optimisation: when SQLite fails (locked past the timeout, disk full) the texts are
embedded anyway, the failure is counted in ``stats()["errors"]`` and logged (counts
only, never text); ``inner``'s errors propagate unchanged. The file only grows: delete
it to reclaim space (it is rebuilt on demand). ``note_origins`` records which event each
text was embedded for (the dense stage calls it), so ``memstream forget`` deletes the rows
of what was embedded for an event, whatever text that was.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import structlog

from memstream.projections.embedders.base import Wrapper, as_text_list
from memstream.projections.embedders.port import query_view

if TYPE_CHECKING:
    from memstream.projections.embedders.port import Embedder

__all__ = ["EmbeddingCache", "CachedEmbedder", "text_key"]

log = structlog.get_logger("memstream.embedding_cache")

SCHEMA_VERSION = 2  # 2: origins
_QUERY_CHUNK = 500  # keys per SELECT ... IN (...): under every SQLite's variable limit


def text_key(text: str) -> bytes:
    """The 32-byte cache key of a text: sha256 of its UTF-8 bytes (lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Vectors by ``(embedder name, text key)``: an LRU in memory over a SQLite file.

    ``path``: the SQLite file (the pipeline's is ``$MEMSTREAM_HOME/data/embeddings.sqlite3``);
    ``":memory:"`` keeps it in this process.
    Thread-safe; several processes may share one file (WAL, ``busy_timeout``).
    """

    def __init__(self, path: str | os.PathLike[str], *, memory_items: int = 8192, busy_timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.memory_items = int(memory_items)
        self._lru: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=busy_timeout, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last commit on power loss is fine
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " embedder TEXT NOT NULL, text_sha256 BLOB NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (embedder, text_sha256)) WITHOUT ROWID"
            )
            # which event each embedded text was for (the dense stage says): forget finds the
            # rows of what was embedded (a turn's unit: its date and earlier turns around it)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS origins ("
                " event_id TEXT NOT NULL, text_sha256 BLOB NOT NULL,"
                " PRIMARY KEY (event_id, text_sha256)) WITHOUT ROWID"
            )
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def __repr__(self) -> str:
        return f"EmbeddingCache(path={self.path!r})"

    def get_many(self, embedder: str, keys: Sequence[bytes], dim: int) -> tuple[dict[bytes, np.ndarray], int]:
        """Vectors found for ``keys`` and how many came from memory; one SELECT per 500 misses.

        A stored vector of another size than ``dim`` counts as missing. Raises
        ``sqlite3.Error`` when the file cannot be read.
        """
        found: dict[bytes, np.ndarray] = {}
        rest: list[bytes] = []
        with self._lock:
            for key in keys:
                blob = self._lru.get((embedder, key))
                if blob is not None:
                    self._lru.move_to_end((embedder, key))
                    found[key] = np.frombuffer(blob, dtype="<f4")
                else:
                    rest.append(key)
        from_memory = len(found)
        size = 4 * dim
        for start in range(0, len(rest), _QUERY_CHUNK):
            part = rest[start : start + _QUERY_CHUNK]
            marks = ",".join("?" * len(part))
            with self._lock:
                rows = self._db.execute(
                    f"SELECT text_sha256, vector FROM embeddings WHERE embedder = ? AND text_sha256 IN ({marks})",
                    [embedder, *part],
                ).fetchall()
                for key, blob in rows:
                    if len(blob) == size:
                        found[bytes(key)] = np.frombuffer(blob, dtype="<f4")
                        self._remember(embedder, bytes(key), bytes(blob))
        return found, from_memory

    def put_many(self, embedder: str, items: Mapping[bytes, np.ndarray]) -> None:
        """Store vectors (float32) in memory and in one SQLite transaction; first write wins.

        Raises ``sqlite3.Error`` when the file cannot be written (the LRU keeps them).
        """
        rows = [(embedder, key, np.asarray(vec, dtype="<f4").tobytes()) for key, vec in items.items()]
        if not rows:
            return
        with self._lock:
            for _, key, blob in rows:
                self._remember(embedder, key, blob)
            self._insert("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)

    def remember_many(self, embedder: str, items: Mapping[bytes, np.ndarray]) -> None:
        """Keep vectors (float32) in memory only, never in the file (a query's: ``CachedEmbedder.for_queries``)."""
        with self._lock:
            for key, vec in items.items():
                self._remember(embedder, key, np.asarray(vec, dtype="<f4").tobytes())

    def get_blobs(self, embedder: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored bytes of ``keys`` under ``embedder`` as they were put (``put_blobs``),
        read from the file only (not the LRU: a late-interaction passage is kilobytes, its
        caller keeps its own); one SELECT per 500 keys. Raises ``sqlite3.Error``."""
        found: dict[bytes, bytes] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), _QUERY_CHUNK):
            part = wanted[start : start + _QUERY_CHUNK]
            with self._lock:
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT text_sha256, vector FROM embeddings WHERE embedder = ? AND text_sha256 IN ({marks})",
                    [embedder, *part],
                ).fetchall()
            found.update((bytes(k), bytes(v)) for k, v in rows)
        return found

    def put_blobs(self, embedder: str, items: Mapping[bytes, bytes]) -> None:
        """Store bytes by key under ``embedder`` in one transaction, first write wins; forget
        deletes them with the key's other rows (``delete``). Raises ``sqlite3.Error``."""
        rows = [(embedder, key, blob) for key, blob in items.items()]
        if rows:
            with self._lock:
                self._insert("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)

    def _insert(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        """``rows`` inserted by ``sql`` in one transaction (the lock held by the caller)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def note_origins(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        """Record that the text of each key was embedded for the event (event id, key), in
        one transaction; idempotent. Raises ``sqlite3.Error``."""
        rows = list(dict.fromkeys(pairs))
        if rows:
            with self._lock:
                self._insert("INSERT OR IGNORE INTO origins VALUES (?, ?)", rows)

    def keys_of(self, event_ids: Sequence[str]) -> set[bytes]:
        """The keys of the texts embedded for ``event_ids`` (``note_origins``)."""
        ids = sorted(set(event_ids))
        found: set[bytes] = set()
        with self._lock:
            for start in range(0, len(ids), _QUERY_CHUNK):
                part = ids[start : start + _QUERY_CHUNK]
                rows = self._db.execute(
                    f"SELECT text_sha256 FROM origins WHERE event_id IN ({','.join('?' * len(part))})", part
                ).fetchall()
                found.update(bytes(r[0]) for r in rows)
        return found

    def count(self, embedder: str | None = None) -> int:
        """Vectors stored in the file (for one embedder, or all)."""
        with self._lock:
            if embedder is None:
                return int(self._db.execute("SELECT count(*) FROM embeddings").fetchone()[0])
            row = self._db.execute("SELECT count(*) FROM embeddings WHERE embedder = ?", (embedder,)).fetchone()
            return int(row[0])

    def delete(self, keys: Sequence[bytes]) -> int:
        """Delete the vectors of ``keys`` (every embedder's), from memory and the file, and
        checkpoint the file's write-ahead log into it; returns the rows deleted (``memstream
        forget``). The file holds no text, only its sha256 and vector. Raises ``sqlite3.Error``."""
        wanted = set(keys)
        if not wanted:
            return 0
        deleted = 0
        with self._lock:
            for item in [k for k in self._lru if k[1] in wanted]:
                del self._lru[item]
            ordered = sorted(wanted)
            for start in range(0, len(ordered), _QUERY_CHUNK):
                part = ordered[start : start + _QUERY_CHUNK]
                cursor = self._db.execute(f"DELETE FROM embeddings WHERE text_sha256 IN ({','.join('?' * len(part))})", part)
                deleted += max(0, cursor.rowcount)
                self._db.execute(f"DELETE FROM origins WHERE text_sha256 IN ({','.join('?' * len(part))})", part)
            if deleted and self.path != ":memory:":
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    def close(self) -> None:
        """Close the file; idempotent."""
        with self._lock:
            self._lru.clear()
            try:
                self._db.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remember(self, embedder: str, key: bytes, blob: bytes) -> None:
        if self.memory_items <= 0:
            return
        self._lru[(embedder, key)] = blob
        self._lru.move_to_end((embedder, key))
        while len(self._lru) > self.memory_items:
            self._lru.popitem(last=False)


class CachedEmbedder(Wrapper):
    """An embedder that asks ``cache`` first and embeds only what it has never seen.

    Same ``name``, ``dim``, ``max_tokens`` and ``count_tokens`` as ``inner``, same
    vectors. ``cache`` is an ``EmbeddingCache`` or a path for one. ``stats()`` counts
    per text: ``hits`` (not embedded: from memory, the file, or a duplicate in the same
    call), ``misses`` (embedded by ``inner``), ``errors`` (cache failures survived).
    Thread-safe when ``inner`` is. ``persist=False`` (``for_queries``): what it embeds is kept
    in the cache's memory only, never written to the file, where ``memstream forget`` could not
    find it (a question has no event); it still reads what the file holds.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache | str | os.PathLike[str], *, persist: bool = True) -> None:
        super().__init__(inner)
        self.persist = persist
        self._owns_cache = not isinstance(cache, EmbeddingCache)
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self._counts = {"hits": 0, "misses": 0, "memory_hits": 0, "disk_hits": 0, "errors": 0}
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {self.cache!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 vectors in input order; each distinct new text embedded once."""
        items = as_text_list(texts)
        name, dim = self.inner.name, self.inner.dim
        keys = [text_key(t) for t in items]
        first: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        unique = list(first)
        errors = 0
        try:
            found, from_memory = self.cache.get_many(name, unique, dim)
        except sqlite3.Error as exc:
            found, from_memory, errors = {}, 0, 1
            log.warning("embedding_cache.read_failed", path=self.cache.path, keys=len(unique), error=str(exc))
        missing = [k for k in unique if k not in found]
        if missing:
            fresh = self.inner.embed([items[first[k]] for k in missing])
            new = dict(zip(missing, fresh))
            try:
                if self.persist:
                    self.cache.put_many(name, new)
                else:
                    self.cache.remember_many(name, new)
            except sqlite3.Error as exc:
                errors += 1
                log.warning("embedding_cache.write_failed", path=self.cache.path, vectors=len(new), error=str(exc))
            found.update(new)
        out = np.empty((len(items), dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        with self._count_lock:
            c = self._counts
            c["misses"] += len(missing)
            c["hits"] += len(items) - len(missing)
            c["memory_hits"] += from_memory
            c["disk_hits"] += len(unique) - len(missing) - from_memory
            c["errors"] += errors
        return out

    def for_queries(self) -> CachedEmbedder:
        """The same model and cache for a query's text: read from the file and memory, kept in
        memory only (``persist=False``); the model's own view of questions where it has one
        (its ``for_queries``, under its own name)."""
        return CachedEmbedder(query_view(self.inner), self.cache, persist=False)

    def note_origins(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Record which event each text was embedded for ((event id, text) pairs), so that
        ``memstream forget`` finds its row by the event. A failure is counted, never raised."""
        try:
            self.cache.note_origins([(event_id, text_key(text)) for event_id, text in pairs])
        except sqlite3.Error as exc:
            with self._count_lock:
                self._counts["errors"] += 1
            log.warning("embedding_cache.write_failed", path=self.cache.path, origins=len(pairs), error=str(exc))

    def stats(self) -> dict[str, int]:
        """Counts since this instance was made (see the class doc)."""
        with self._count_lock:
            return dict(self._counts)

    def close(self) -> None:
        """Close the cache if this instance opened it (not one passed in)."""
        if self._owns_cache:
            self.cache.close()
