"""A projection's embedder, each call reported to the process's observer.

The pipeline hands each running version's projection its embedder through
``ObservedEmbedder``: every ``embed`` call is reported (``memstream.core.observe``) with
the version's group, the number of texts and the seconds it took, so the metrics show
the embedding batches of the write path apart from the queries' (which embed through
the unwrapped embedder).

Guarantee: the same vectors, name, size and token counts as ``inner``, and the same
errors; any other attribute is ``inner``'s.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

from memstream.core import observe
from memstream.projections import EmbedderWrapper

if TYPE_CHECKING:
    import numpy as np

    from memstream.projections import Embedder

__all__ = ["ObservedEmbedder"]


class ObservedEmbedder(EmbedderWrapper):
    """``inner``, its ``embed`` calls reported for ``group``."""

    def __init__(self, inner: Embedder, group: str) -> None:
        super().__init__(inner)
        self.group = group

    def __repr__(self) -> str:
        return f"ObservedEmbedder({self.inner!r}, {self.group!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        out = self.inner.embed(texts)
        observe.embedded(self.group, len(texts), time.perf_counter() - started)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
