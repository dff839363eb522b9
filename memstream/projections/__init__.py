"""projections: the read models rebuilt from the log, one module each (turns, memories,
facts with its table, sessions) and their table (``registry``: names, versions, consumer
groups), what they share (base, vector, counters, tombstones,
sparse vectors) and where they keep their data: the vector stores (``stores/``) and the
embedders (``embedders/``). Store backends are imported on first use (``open_store``):
qdrant-client alone takes about a second to import."""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.projections.base import Delivery, Projection, group_name
from memstream.projections.catalog import STATES, Catalog, CatalogError, Version
from memstream.projections.counters import Counters
from memstream.projections.embedders.port import Embedder, EmbedderError, EmbedderUnavailable, query_view
from memstream.projections.facts import FactsProjection
from memstream.projections.facts_table import Fact, FactsTable, fact_id, fact_ids
from memstream.projections.memories import MemoriesProjection
from memstream.projections.registry import (
    PROJECTIONS,
    PluginError,
    Registered,
    active_group,
    all_registered,
    drop_version,
    group_names,
    group_of,
    memory_write_groups,
    plugins,
    registered,
    running_versions,
    select,
)
from memstream.projections.replicas import BEAT_EVERY_S, Replicas, replica_group, replica_of
from memstream.projections.sessions import SessionsIndex, SessionsProjection
from memstream.projections.sparse import sparse_vector, tokenize
from memstream.projections.stores.factory import open_store
from memstream.projections.stores.ids import POINT_NAMESPACE, item_point_id, point_id
from memstream.projections.stores.port import (
    CollectionNotFound,
    Filter,
    Hit,
    Point,
    Search,
    StoreError,
    StoreUnavailable,
    VectorStore,
    physical_name,
)
from memstream.projections.turns import TurnsProjection
from memstream.projections.vector import BacklogEntry, VectorProjection, backlog_entry, embeds_inline

if TYPE_CHECKING:
    from memstream.projections.embedders.base import EmbedderWrapper
    from memstream.projections.embedders.cache import CachedEmbedder, EmbeddingCache, text_key
    from memstream.projections.embedders.crossencoder import CrossEncoder, RerankerError, shared_cross_encoder
    from memstream.projections.embedders.factory import (
        LEGACY_SPEC,
        configured_embedder,
        describe_embedder,
        get_embedder,
        how_to_load,
    )
    from memstream.projections.embedders.late import LateError, LatePassages, LateScorer, shared_late_scorer
    from memstream.projections.stores.dense_index import Indexer, indexer
    from memstream.projections.stores.dense_scope import DenseScopes
    from memstream.projections.stores.edge import EdgeStore

__all__ = [
    "BEAT_EVERY_S",
    "LEGACY_SPEC",
    "EmbeddingCache",
    "text_key",
    "BacklogEntry",
    "backlog_entry",
    "embeds_inline",
    "Catalog",
    "CatalogError",
    "STATES",
    "Version",
    "PluginError",
    "active_group",
    "all_registered",
    "drop_version",
    "plugins",
    "running_versions",
    "physical_name",
    "Embedder",
    "query_view",
    "CachedEmbedder",
    "CollectionNotFound",
    "configured_embedder",
    "Counters",
    "CrossEncoder",
    "RerankerError",
    "shared_cross_encoder",
    "LateError",
    "LatePassages",
    "LateScorer",
    "shared_late_scorer",
    "Delivery",
    "describe_embedder",
    "DenseScopes",
    "EdgeStore",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbedderWrapper",
    "Fact",
    "fact_id",
    "fact_ids",
    "FactsProjection",
    "FactsTable",
    "Filter",
    "get_embedder",
    "how_to_load",
    "group_name",
    "group_names",
    "group_of",
    "Hit",
    "Indexer",
    "indexer",
    "Search",
    "MemoriesProjection",
    "memory_write_groups",
    "open_store",
    "Point",
    "point_id",
    "item_point_id",
    "POINT_NAMESPACE",
    "Projection",
    "PROJECTIONS",
    "registered",
    "Replicas",
    "replica_group",
    "replica_of",
    "select",
    "Registered",
    "SessionsIndex",
    "SessionsProjection",
    "sparse_vector",
    "StoreError",
    "StoreUnavailable",
    "tokenize",
    "TurnsProjection",
    "VectorProjection",
    "VectorStore",
]

_LAZY = {  # heavy backends, imported on first use
    "EdgeStore": "memstream.projections.stores.edge",
    "DenseScopes": "memstream.projections.stores.dense_scope",
    "Indexer": "memstream.projections.stores.dense_index",
    "indexer": "memstream.projections.stores.dense_index",
    # the models and their cache (numpy; onnxruntime once one loads): the projections without
    # vectors need none, and their process is lighter for it
    "CachedEmbedder": "memstream.projections.embedders.cache",
    "EmbeddingCache": "memstream.projections.embedders.cache",
    "text_key": "memstream.projections.embedders.cache",
    "CrossEncoder": "memstream.projections.embedders.crossencoder",
    "RerankerError": "memstream.projections.embedders.crossencoder",
    "shared_cross_encoder": "memstream.projections.embedders.crossencoder",
    "LateError": "memstream.projections.embedders.late",
    "LatePassages": "memstream.projections.embedders.late",
    "LateScorer": "memstream.projections.embedders.late",
    "shared_late_scorer": "memstream.projections.embedders.late",
    "LEGACY_SPEC": "memstream.projections.embedders.factory",
    "configured_embedder": "memstream.projections.embedders.factory",
    "describe_embedder": "memstream.projections.embedders.factory",
    "get_embedder": "memstream.projections.embedders.factory",
    "how_to_load": "memstream.projections.embedders.factory",
    "EmbedderWrapper": "memstream.projections.embedders.base",
}

__getattr__ = lazy_exports(__name__, _LAZY)
