"""What the embedders share: L2 normalisation, input checks and the base of an embedder
that wraps another (``Wrapper``). Giving the heap a model freed back to the system is
``memstream.core.memory``'s ``release_freed_heap``. The port and its errors are in ``port``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from memstream.projections.embedders.port import Embedder

__all__ = ["l2_normalize", "as_text_list", "Wrapper"]


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
