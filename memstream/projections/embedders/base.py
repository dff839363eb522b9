"""What the embedders share: L2 normalisation, input checks, the base of an embedder
that wraps another (``Wrapper``), and giving the heap a model freed back to the system
(``release_freed_heap``). The port and its errors are in ``port``."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from memstream.projections.embedders.port import Embedder

__all__ = ["l2_normalize", "as_text_list", "Wrapper", "release_freed_heap"]

_trim_lock = threading.Lock()
_trim: list[Any] = []  # glibc's malloc_trim once looked up; [None] where there is none


def release_freed_heap() -> bool:
    """Give the system back the memory the C heap holds free (glibc's ``malloc_trim``;
    False, doing nothing, elsewhere). glibc keeps what a large native computation freed
    (building an onnxruntime session: about 60 MB; a batch of long texts: about 50 MB)
    for the process's later allocations, so its resident size stays at its peak."""
    with _trim_lock:
        if not _trim:
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _trim.append(getattr(libc, "malloc_trim", None))
            except OSError:
                _trim.append(None)
        trim = _trim[0]
    if trim is None:
        return False
    trim(0)
    return True


class Wrapper:
    """An embedder around ``inner``: the same ``name``, ``dim``, ``max_tokens`` and
    ``count_tokens``; a subclass adds what it does around ``embed``."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm, as float32; an all-zero row stays zero."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    out: np.ndarray = (v / norms).astype(np.float32, copy=False)
    return out


def as_text_list(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing a bare string (a common slip) and non-strings."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed() takes a sequence of texts, not one string: embed([text])")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"embed() texts must be str; item {i} is {type(t).__name__}")
    return out


EmbedderWrapper = Wrapper  # the name other packages import it by (memstream.projections)
