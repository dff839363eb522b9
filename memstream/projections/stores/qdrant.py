"""``VectorStore`` on qdrant-client: a Qdrant server (production) or local mode (tests).

``QdrantStore(url="http://qdrant:6333")`` talks to a server; ``QdrantStore()`` is
in-memory local mode and ``QdrantStore(path=...)`` persistent local mode. Local mode has
the same API and results but evaluates filters in Python (about 0.1 s per filtered
search at 10k points, 1.5 s at 100k) and only one process can open a path: use it for
tests, and ``EdgeStore`` as the embedded default.

Versions are switched with a collection alias (the logical name), swapped in one
atomic ``update_collection_aliases`` call; the server resolves the alias per request.
On a server the tenant index is created with ``is_tenant=True`` and the HNSW graph is
built per tenant (``m=0, payload_m=16``: every query is tenant-filtered).

Thread-safety: server clients are used from any thread; local mode (plain Python
structures) is serialised with a lock.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Iterator, Mapping, Sequence

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memstream.projections.stores.backend import (
    RRF_K,
    check_point,
    check_search,
    dense_list,
    prefetch_limit,
    set_dense_looking,
    sparse_lists,
    uuid_ids,
)
from memstream.projections.stores.port import (
    DENSE,
    DENSE_KEY,
    INDEXED_FIELDS,
    SPARSE,
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    Fusion,
    Hit,
    Point,
    PointGone,
    Search,
    SparseVector,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    physical_name,
    split_physical,
)

__all__ = ["QdrantStore"]


class QdrantStore:
    """A ``VectorStore`` on qdrant-client (see the module docstring)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        path: str | None = None,
        api_key: str | None = None,
        timeout: float = 10.0,
        client: QdrantClient | None = None,
        exact: bool = False,
        check_compatibility: bool = True,
    ) -> None:
        if client is None:
            try:
                if url:
                    client = QdrantClient(
                        url=url,
                        api_key=api_key,
                        timeout=int(timeout),
                        check_compatibility=check_compatibility,  # a warning, in a thread
                    )
                elif path:
                    client = QdrantClient(path=str(path))
                else:
                    client = QdrantClient(":memory:")
            except RuntimeError as exc:  # local mode: "... already accessed by another instance"
                raise StoreLocked(f"{path}: {exc}") from exc
        self._client = client
        # local mode (no url) is plain Python structures: one caller at a time
        self._lock: contextlib.AbstractContextManager[Any] = threading.RLock() if url is None else contextlib.nullcontext()
        self.exact = exact
        self._dims: dict[str, int] = {}

    # --- collections and versions -------------------------------------------------

    def ensure_collection(self, name: str, version: int, dim: int) -> str:
        collection = physical_name(name, version)
        if dim < 1:
            raise ValueError("dim must be >= 1")
        with self._call(collection):
            if self._client.collection_exists(collection):
                existing = self._dim(collection)
                if existing != dim:
                    raise DimensionMismatch(
                        f"{collection} exists with dense dim {existing}, not {dim}: build a new version of {name!r} instead"
                    )
            else:
                self._client.create_collection(
                    collection,
                    vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                    sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                    hnsw_config=models.HnswConfigDiff(m=0, payload_m=16),
                )
            with warnings.catch_warnings():  # local mode: "payload indexes have no effect"
                warnings.simplefilter("ignore")
                for field, kind in INDEXED_FIELDS.items():
                    if field == "tenant":
                        schema: Any = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
                    elif kind == "keyword":
                        schema = models.PayloadSchemaType.KEYWORD
                    else:
                        schema = models.PayloadSchemaType.FLOAT
                    self._client.create_payload_index(collection, field, schema, wait=True)
        self._dims[collection] = dim
        return collection

    def drop_collection(self, name: str, version: int) -> None:
        collection = physical_name(name, version)
        if self.active_version(name) == version:
            raise StoreError(f"{collection} is the active version of {name!r}: switch first")
        with self._call(collection):
            self._client.delete_collection(collection)
        self._dims.pop(collection, None)

    def versions(self, name: str) -> list[int]:
        physical_name(name, 1)  # validates the name
        with self._call(name):
            names = [c.name for c in self._client.get_collections().collections]
        return sorted(v for n, v in filter(None, map(split_physical, names)) if n == name)

    def active_version(self, name: str) -> int | None:
        physical_name(name, 1)
        with self._call(name):
            aliases = self._client.get_aliases().aliases
        for alias in aliases:
            if alias.alias_name == name:
                parsed = split_physical(alias.collection_name)
                return parsed[1] if parsed else None
        return None

    def set_active_version(self, name: str, version: int) -> None:
        collection = physical_name(name, version)
        with self._call(collection):
            if not self._client.collection_exists(collection):
                raise CollectionNotFound(f"{collection} does not exist: ensure_collection first")
            ops: list[Any] = []
            if any(a.alias_name == name for a in self._client.get_aliases().aliases):
                ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name)))
            ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=collection, alias_name=name)))
            self._client.update_collection_aliases(ops)  # one request: atomic for readers

    def collection_for_read(self, name: str) -> str:
        version = self.active_version(name)
        if version is None:
            raise CollectionNotFound(f"no active version of {name!r}: set_active_version first")
        return physical_name(name, version)

    def close(self) -> None:
        with self._lock:
            self._client.close()

    # --- writes -------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        if not points:
            return
        dim = self._dims.get(collection)
        structs = []
        for p in points:
            check_point(p, dim)
            vector: dict[str, Any] = {}
            if p.dense is not None:
                vector[DENSE] = dense_list(p.dense)
            if p.sparse is not None:
                indices, values = sparse_lists(p.sparse)
                vector[SPARSE] = models.SparseVector(indices=indices, values=values)
            structs.append(models.PointStruct(id=p.id, vector=vector, payload=dict(p.payload)))
        with self._call(collection):
            self._client.upsert(collection, structs, wait=True)

    def set_dense(self, collection: str, vectors: Sequence[tuple[str, Sequence[float] | Any, str]]) -> int:
        def write(matched: list[tuple[str, list[float], str]]) -> None:
            updates = [models.PointVectors(id=pid, vector={DENSE: values}) for pid, values, _ in matched]
            # checked again by the server as it writes (a conditional update, Qdrant 1.16+):
            # a point re-indexed since the look keeps its new key and no vector
            condition = models.Filter(
                must=[models.FieldCondition(key=DENSE_KEY, match=models.MatchAny(any=[k for _, _, k in matched]))]
            )
            with self._call(collection):
                try:
                    self._client.update_vectors(collection, updates, update_filter=condition, wait=True)
                except KeyError as exc:  # local mode: a point deleted since the look
                    raise PointGone(f"{collection}: no point {exc}") from exc
                except UnexpectedResponse as exc:  # a server: 404 naming the point
                    if exc.status_code == 404 and b"No point" in (exc.content or b""):
                        raise PointGone(exc.content.decode("utf-8", "replace")[:300]) from exc
                    raise

        return set_dense_looking(lambda ids: self.retrieve(collection, ids), vectors, write, dim=self._dims.get(collection))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._call(collection):
            self._client.delete(collection, models.PointIdsList(points=_ids(ids)), wait=True)

    def delete_where(self, collection: str, filter: Filter) -> None:
        with self._call(collection):
            self._client.delete(collection, models.FilterSelector(filter=_filter(filter)), wait=True)

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        if not ids:
            return
        if "tenant" in payload and (not isinstance(payload["tenant"], str) or not payload["tenant"]):
            raise ValueError("payload['tenant'] must stay a non-empty str")
        # a filter selector ignores ids that do not exist (a list of ids fails on a server)
        selector = models.Filter(must=[models.HasIdCondition(has_id=_ids(ids))])
        with self._call(collection):
            self._client.set_payload(collection, dict(payload), points=selector, wait=True)

    # --- reads --------------------------------------------------------------------

    def search(
        self,
        collection: str,
        *,
        dense: Sequence[float] | Any | None = None,
        sparse: SparseVector | None = None,
        filter: Filter,
        limit: int = 10,
        fusion: Fusion = "rrf",
    ) -> list[Hit]:
        check_search(dense, sparse, limit, fusion)
        qfilter = _filter(filter)
        params = models.SearchParams(exact=True) if self.exact else None
        dense_q = dense_list(dense) if dense is not None else None
        sparse_q = None
        if sparse is not None:
            indices, values = sparse_lists(sparse)
            if indices:
                sparse_q = models.SparseVector(indices=indices, values=values)
        if dense_q is None and sparse_q is None:
            return []  # a query with no keyword tokens matches nothing
        kwargs: dict[str, Any] = {"query_filter": qfilter, "limit": limit, "with_payload": True}
        if dense_q is not None and sparse_q is not None:
            n = prefetch_limit(limit)
            kwargs["prefetch"] = [
                models.Prefetch(query=dense_q, using=DENSE, filter=qfilter, limit=n, params=params),
                models.Prefetch(query=sparse_q, using=SPARSE, filter=qfilter, limit=n),
            ]
            kwargs["query"] = (
                models.RrfQuery(rrf=models.Rrf(k=RRF_K)) if fusion == "rrf" else models.FusionQuery(fusion=models.Fusion.DBSF)
            )
        elif dense_q is not None:
            kwargs.update(query=dense_q, using=DENSE, search_params=params)
        else:
            kwargs.update(query=sparse_q, using=SPARSE)
        with self._call(collection):
            result = self._client.query_points(collection, **kwargs)
        return [Hit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in result.points]

    def search_many(self, collection: str, searches: Sequence[Search]) -> list[list[Hit]]:
        # one request each: the server's batch endpoint is a later step (its cost is the network)
        return [
            self.search(collection, dense=q.dense, sparse=q.sparse, filter=q.filter, limit=q.limit, fusion=q.fusion)
            for q in searches
        ]

    def scroll(
        self, collection: str, filter: Filter, *, limit: int = 100, offset: str | None = None
    ) -> tuple[list[Point], str | None]:
        with self._call(collection):
            records, next_offset = self._client.scroll(
                collection,
                scroll_filter=_filter(filter),
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=False,
            )
        points = [Point(id=str(r.id), payload=r.payload or {}) for r in records]
        return points, (str(next_offset) if next_offset is not None else None)

    def count(self, collection: str, filter: Filter | None = None) -> int:
        with self._call(collection):
            result = self._client.count(collection, count_filter=_filter(filter) if filter else None, exact=True)
        return result.count

    def retrieve(self, collection: str, ids: Sequence[str], *, with_vectors: bool = False) -> list[Point]:
        if not ids:
            return []
        with self._call(collection):
            records = self._client.retrieve(collection, uuid_ids(ids), with_payload=True, with_vectors=with_vectors)
        out = []
        for r in records:
            dense = sparse = None
            if with_vectors and isinstance(r.vector, dict):
                dense = r.vector.get(DENSE)
                sv = r.vector.get(SPARSE)
                if isinstance(sv, models.SparseVector):
                    sparse = (list(sv.indices), list(sv.values))
            out.append(Point(id=str(r.id), dense=dense, sparse=sparse, payload=r.payload or {}))
        return out

    # --- internals ----------------------------------------------------------------

    def _dim(self, collection: str) -> int:
        info = self._client.get_collection(collection)
        vectors = info.config.params.vectors
        if not isinstance(vectors, dict) or DENSE not in vectors:
            raise StoreError(f"{collection} has no {DENSE!r} vector: not a memstream collection")
        return vectors[DENSE].size

    @contextlib.contextmanager
    def _call(self, collection: str) -> Iterator[None]:
        """Serialise local mode and translate client errors, once, here."""
        try:
            with self._lock:
                yield
        except (StoreError, StoreUnavailable):
            raise
        except UnexpectedResponse as exc:
            detail = exc.content.decode("utf-8", "replace")[:300] if exc.content else ""
            if exc.status_code == 404:
                raise _not_found(collection, detail) from exc
            if exc.status_code is not None and (exc.status_code in (408, 429) or exc.status_code >= 500):
                raise StoreUnavailable(f"qdrant {exc.status_code} on {collection}: {detail}") from exc
            raise StoreError(f"qdrant {exc.status_code} on {collection}: {detail}") from exc
        except (ResponseHandlingException, ConnectionError, TimeoutError) as exc:
            raise StoreUnavailable(f"qdrant unreachable ({collection}): {exc}; retry later") from exc
        except ValueError as exc:  # local mode raises ValueError for server-side 4xx
            if "not found" in str(exc):
                raise _not_found(collection, str(exc)) from exc
            raise StoreError(f"{collection}: {exc}") from exc
        except KeyError as exc:  # local mode, e.g. an unknown alias
            raise _not_found(collection, str(exc)) from exc


def _ids(ids: Sequence[str]) -> list[models.ExtendedPointId]:
    """``uuid_ids(ids)`` as the list type qdrant-client's models take."""
    return list(uuid_ids(ids))


def _not_found(collection: str, detail: str) -> CollectionNotFound:
    if split_physical(collection) is None:
        return CollectionNotFound(f"{collection!r} has no active version (set_active_version first): {detail}")
    return CollectionNotFound(f"{collection} does not exist (ensure_collection first): {detail}")


def _match(field: str, value: str | tuple[str, ...]) -> models.FieldCondition:
    if isinstance(value, str):
        return models.FieldCondition(key=field, match=models.MatchValue(value=value))
    return models.FieldCondition(key=field, match=models.MatchAny(any=list(value)))


def _filter(f: Filter) -> models.Filter:
    must: list[Any] = [_match(field, value) for field, value in f.matches()]
    if f.since_ts is not None or f.until_ts is not None:
        must.append(models.FieldCondition(key="occurred_at_ts", range=models.Range(gte=f.since_ts, lt=f.until_ts)))
    must_not: list[Any] = []
    if f.exclude_ids:
        must_not.append(models.HasIdCondition(has_id=_ids(f.exclude_ids)))
    return models.Filter(must=must, must_not=must_not or None)
