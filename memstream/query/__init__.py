"""query: the read path, from the agent's question to the stores' answer.

``protocol`` (typed requests and their envelope) and ``client`` (``ask``, and ``Asker``:
every caller of a process over a bounded number of connections) are all a caller
needs, and light: the provider imports them without loading a store or a model. The
server side (``server``: the threads answering the channels, ``ops``: the read
operations, ``ranking``: hybrid retrieval) is imported on first use of its names.
"""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.query.client import (
    ANSWER_TTL,
    Asker,
    QueryTimeout,
    ask,
    operator_channel,
    reply_key,
    tenant_channel,
)
from memstream.query.protocol import (
    AGREE,
    LATE_SHED,
    MAX_ENVELOPE_BYTES,
    MAX_QUERY_CHARS,
    OPS,
    RERANK_SHED,
    Answer,
    ContextAnswer,
    ContextRequest,
    CountAnswer,
    CountRequest,
    Envelope,
    ExistsAnswer,
    ExistsRequest,
    FactsAnswer,
    FactsRequest,
    Handlers,
    QueryRefused,
    RecallAnswer,
    RecallRequest,
    RecentAnswer,
    RecentRequest,
    Refusal,
    Request,
    SearchAnswer,
    Searched,
    SearchKind,
    SearchRequest,
    decode_envelope,
    most,
)

if TYPE_CHECKING:
    from memstream.query.ops import ReadOps
    from memstream.query.ranking import Searcher
    from memstream.query.rerank import (
        FUSIONS,
        LATE_CE_WEIGHT,
        LATE_KEEP,
        LEARNED_FEATURES,
        LEARNED_WEIGHTS,
        PASSAGE_CHARS,
        combine,
        cut_order,
        learned_features,
    )
    from memstream.query.server import QueryServer
    from memstream.query.versions import ActiveVersions, FixedVersions

__all__ = [
    "ANSWER_TTL",
    "Asker",
    "QueryTimeout",
    "ask",
    "operator_channel",
    "reply_key",
    "tenant_channel",
    "AGREE",
    "MAX_ENVELOPE_BYTES",
    "MAX_QUERY_CHARS",
    "OPS",
    "LATE_SHED",
    "RERANK_SHED",
    "Envelope",
    "QueryRefused",
    "Request",
    "Answer",
    "Refusal",
    "RecallAnswer",
    "SearchAnswer",
    "Searched",
    "ContextAnswer",
    "RecentAnswer",
    "FactsAnswer",
    "ExistsAnswer",
    "CountAnswer",
    "Handlers",
    "RecallRequest",
    "SearchRequest",
    "ContextRequest",
    "RecentRequest",
    "FactsRequest",
    "ExistsRequest",
    "CountRequest",
    "SearchKind",
    "decode_envelope",
    "most",
    "QueryServer",
    "ReadOps",
    "Searcher",
    "ActiveVersions",
    "FixedVersions",
    "FUSIONS",
    "PASSAGE_CHARS",
    "combine",
    "LATE_CE_WEIGHT",
    "LATE_KEEP",
    "LEARNED_FEATURES",
    "LEARNED_WEIGHTS",
    "cut_order",
    "learned_features",
]

_LAZY = {  # the server side: stores, embedders, ranking
    "QueryServer": "memstream.query.server",
    "ReadOps": "memstream.query.ops",
    "Searcher": "memstream.query.ranking",
    "ActiveVersions": "memstream.query.versions",
    "FixedVersions": "memstream.query.versions",
    "FUSIONS": "memstream.query.rerank",
    "PASSAGE_CHARS": "memstream.query.rerank",
    "combine": "memstream.query.rerank",
    "LATE_CE_WEIGHT": "memstream.query.rerank",
    "LATE_KEEP": "memstream.query.rerank",
    "LEARNED_FEATURES": "memstream.query.rerank",
    "LEARNED_WEIGHTS": "memstream.query.rerank",
    "cut_order": "memstream.query.rerank",
    "learned_features": "memstream.query.rerank",
}

__getattr__ = lazy_exports(__name__, _LAZY)
