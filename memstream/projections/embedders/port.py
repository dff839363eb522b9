"""Text to dense vectors: the ``Embedder`` port and its errors.

Every embedder returns float32 rows of unit L2 norm, shape ``(n, dim)``, in input order,
and never refuses a long text (it is truncated to ``max_tokens``; chunk before embedding
with ``count_tokens``). ``name`` identifies the model and every setting that changes the
vectors: it keys the embedding cache and is what a collection should record.

Errors: ``EmbedderUnavailable`` is transient (a ``TransientError``: retry later);
``EmbedderError`` is permanent (a ``PermanentError``: fix the configuration). ``check_dim`` guards a
collection against vectors of another size. The implementations and the factory that makes
one from its spec are in ``memstream.projections.embedders.factory``; ``CachedEmbedder`` (in
``memstream.projections.embedders.cache``) embeds each text once per embedder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

from memstream.core import PermanentError, TransientError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Embedder", "EmbedderError", "EmbedderUnavailable", "check_dim", "innermost", "query_view"]


class EmbedderError(PermanentError):
    """An embedder cannot make vectors: misconfigured, rejected input, wrong size.

    Permanent: retrying the same call gives the same answer. The message says what to
    do next. Never carries the texts being embedded.
    """


class EmbedderUnavailable(TransientError):
    """A remote embedder is unreachable, timed out, overloaded or failed (HTTP 5xx/429).

    Transient: retry later (a projection worker leaves the entry pending for redelivery).
    Not an ``EmbedderError`` (that one is permanent): catch both to catch every embedder
    error. Never carries the texts being embedded either.
    """


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of one size."""

    @property
    def name(self) -> str:
        """The model id and every setting that changes the vectors, e.g.
        "onnx-minilm:all-MiniLM-L6-v2-onnx-int8"."""
        ...

    @property
    def dim(self) -> int:
        """The size of every vector."""
        ...

    @property
    def max_tokens(self) -> int:
        """Longer texts are truncated."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32, shape ``(len(texts), dim)``, rows of L2 norm 1, in input order."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for ``text`` before truncation (approximate for remote models)."""
        ...


def check_dim(embedder: Embedder, expected_dim: int, collection: str) -> None:
    """Return if ``embedder`` makes ``expected_dim``-d vectors, else raise ``EmbedderError``.

    Call it before writing into or querying an existing collection.
    """
    if int(embedder.dim) == int(expected_dim):
        return
    raise EmbedderError(
        f"collection {collection!r} holds {expected_dim}-d vectors but embedder {embedder.name!r} makes "
        f"{embedder.dim}-d; replay into a new projection version built with this embedder (its collection "
        f"gets the new size, readers switch when it has caught up), or configure the embedder that built "
        f"{collection!r}"
    )


def innermost(embedder: object) -> object:
    """The model under ``embedder``'s wrappers: an embedder that wraps another (the cache,
    the metrics' ``ObservedEmbedder``: ``base.Wrapper``) holds it as ``inner``."""
    while hasattr(embedder, "inner"):
        embedder = embedder.inner
    return embedder


def query_view(embedder: Embedder) -> Embedder:
    """What embeds a question for ``embedder``: its ``for_queries()`` where it has one (a
    ``CachedEmbedder``'s, kept out of the cache's file; a model's own view of questions,
    ``ColbertSmallEmbedder``'s), else the embedder itself."""
    for_queries = getattr(embedder, "for_queries", None)
    view: Embedder = for_queries() if callable(for_queries) else embedder
    return view
