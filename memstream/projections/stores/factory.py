"""Opening the vector store: a Qdrant server's or the embedded one."""

from __future__ import annotations

from memstream.projections.stores.port import VectorStore

__all__ = ["open_store"]


def open_store(*, url: str | None = None, path: str | None = None, dense_index_from: int | None = None) -> VectorStore:
    """A Qdrant server store if ``url`` is set (MEMSTREAM_QDRANT_URL), else the embedded
    qdrant-edge store under ``path`` (its scopes of ``dense_index_from`` points or more
    searched through an approximate index: ``EdgeStore``). Backends are imported here, on
    first use: qdrant-client alone takes about a second to import."""
    if url:
        from memstream.projections.stores.qdrant import QdrantStore

        return QdrantStore(url)
    if path:
        from memstream.projections.stores.edge import EdgeStore

        return EdgeStore(path, dense_index_from=dense_index_from)
    raise ValueError("open_store needs a Qdrant url or an embedded store path")
