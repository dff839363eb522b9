"""projections: read models rebuilt from the log (Qdrant collections, the facts table)
and the query side. Backends are imported on first use (``open_store``): qdrant-client
alone takes about a second to import."""

from projections.facts_table import Fact, FactsTable
from projections.sparse import sparse_vector, tokenize
from projections.store import (
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    Hit,
    Point,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    VectorStore,
    open_store,
    point_id,
)

__all__ = [
    "Fact", "FactsTable", "sparse_vector", "tokenize", "CollectionNotFound", "DimensionMismatch",
    "Filter", "Hit", "Point", "StoreError", "StoreLocked", "StoreUnavailable", "VectorStore",
    "open_store", "point_id",
]
