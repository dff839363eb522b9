"""What the projections into the vector store share: their collection, indexing a batch's
points (a forgotten event's left out), the stage that gives them their dense vectors, and
forgetting an item.

Two stages. Keywords first: ``apply`` writes each point at once with its payload and its
keyword (sparse) vector, so keyword search finds a turn or a memory as soon as its event
is applied, whatever the rate. Meaning second: the dense vector is made by the embedder
and set on the point later (``embed_backlog``), in the order the points were written.
Between the two, the dense work waits in the version's backlog, ``P:embed:{group}``
(``core.keys.embed_backlog``, a stream: one entry per point, its id, its ``dense_key``,
tenant, event id and the text to embed). ``apply`` adds the entries after the upsert and
before it returns, so before its events are acknowledged: a crash between the stages loses
nothing (the redelivered batch writes the points and their entries again). The workers
(``memstream.workers.embedding``) read the backlog through a consumer group and delete
each entry once its vector is set.

Exactly once in effect: every point's payload carries ``dense_key`` (``stores.ids.dense_key``:
a digest of its id and the text its dense vector is made from), and ``VectorStore.set_dense``
sets a vector only on a point that exists with that key, in one conditional update of the
engine. An entry applied twice sets the same vector twice; an entry for a point forgotten
since (a tombstone applied between the stages: the point is deleted) or re-indexed since
(a newer text: a newer key and a newer entry) changes nothing, so the dense stage never
undoes a forget and never puts an older text's vector on a newer point, in whatever order
several workers apply the entries.

Writing a point again (a redelivered batch, an event applied twice) keeps the dense
vector it holds when its stored ``dense_key`` is the new one (the same text): the keyword
stage reads the vector with the key and writes it back with the point, and adds no backlog
entry for it; a new text drops the old vector and queues the new one.

An embedder cheaper than a cache lookup (feature hashing: ``worth_caching`` False) keeps
up with any rate: with it, ``apply`` writes the dense vector in the same upsert and adds no
backlog entry (``inline``), as fast as one stage.

Every point's payload records ``sparse_version``: the ``memstream.projections.sparse``
``VERSION`` that made its keyword vector.

A point's id is its item's (``stores.ids.item_point_id``): with the option ``tenant_ids``
(every version built since it exists: ``NEW_OPTIONS``) it carries the event's tenant, so an
event of one tenant can never name another tenant's point, whatever id it carries (an
imported event's id is derived from inputs another tenant may guess). A version recorded
before keeps computing the ids it did (``OPTIONS``' default), and its writes are guarded
instead: a point another tenant's event already holds is left as it is and counted
(``foreign_ids``). ``memstream replay`` builds a version with tenant ids from the log.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import redis
import structlog

from memstream.core import as_str, keys
from memstream.producers import Event, MemoryForgotten
from memstream.projections.base import group_name
from memstream.projections.counters import Counters
from memstream.projections.sparse import VERSION as SPARSE_VERSION
from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.ids import dense_key, item_point_id
from memstream.projections.stores.port import DENSE_KEY, Point, VectorStore
from memstream.projections.tombstones import Tombstones

if TYPE_CHECKING:
    from memstream.projections.embedders.late import LatePassages
    from memstream.projections.embedders.port import Embedder

log = structlog.get_logger("memstream.projection")


def embeds_inline(embedder: Any) -> bool:
    """Whether a projection on ``embedder`` sets dense vectors in the same write as the
    keywords: an embedder cheaper than a cache lookup (``worth_caching`` False)."""
    return not getattr(embedder, "worth_caching", True)


# A backlog entry: what the dense stage needs of one point (fields of ``P:embed:{group}``).
BacklogEntry = tuple[str, str, str, str, str]  # point id, dense key, tenant, event id, text
_FIELDS = ("id", "key", "tenant", "event", "text")


def backlog_entry(fields: Mapping[Any, Any]) -> BacklogEntry | None:
    """A backlog entry's fields (bytes or str, as read from Redis) as a ``BacklogEntry``;
    None for one that is not (a missing field, an id that is no UUID): read from the shared
    Redis, never trusted."""
    try:
        raw = [fields.get(f.encode(), fields.get(f)) for f in _FIELDS]
        if any(v is None for v in raw):
            return None
        values = [as_str(v) for v in raw]
        uuid.UUID(values[0])
    except (TypeError, ValueError, AttributeError):
        return None
    if not all(values[:4]):
        return None
    pid, key, tenant, event, text = values
    return pid, key, tenant, event, text


def item_payload(event: Event, kind: str, text: str, **extra: Any) -> dict[str, Any]:
    scope = event.scope
    return {
        "tenant": scope.tenant,
        "agent": scope.agent,
        "session_id": scope.session_id,
        "kind": kind,
        "event_id": event.id,
        "occurred_at_ts": event.occurred_at.timestamp(),
        "occurred_at": event.occurred_at.isoformat(),
        "platform": scope.platform,
        "text": text,
        **extra,
    }


class VectorProjection:
    name = ""
    version = 1
    # the options a version records (``projections.catalog``), with the values a version
    # recorded before an option existed computes: ``validate_options`` fills them in
    OPTIONS: ClassVar[dict[str, Any]] = {"tenant_ids": False}
    OPTION_BOUNDS: ClassVar[dict[str, tuple[int, int]]] = {}
    # what every version built from now on records (``memstream replay``, a new log's first)
    NEW_OPTIONS: ClassVar[dict[str, Any]] = {"tenant_ids": True}
    # where the dense stage stores the token vectors of the texts its points show (the
    # prefetch's late interaction, ``memstream.query.late``); None: not stored
    late: LatePassages | None = None

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        client: redis.Redis,
        prefix: str,
        *,
        version: int | None = None,
        inline: bool | None = None,
        options: Mapping[str, Any] | None = None,
        replica: int = 0,
    ) -> None:
        self.replica = replica  # a read replica's: its consumer group and records are its own (group_name)
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:  # type: ignore[redundant-expr]  # for untyped callers
                raise ValueError(f"version must be an int >= 1, got {version!r}")
            self.version = version  # a replayed version: its collection and keys carry it
        self.options = self.validate_options(options)
        self.tenant_ids = bool(self.options["tenant_ids"])
        self.store = store
        self.embedder = embedder
        self.client = client
        self.prefix = prefix
        # whether apply sets dense vectors itself (None: as the embedder's cost says)
        self.inline = embeds_inline(embedder) if inline is None else inline
        self.backlog = keys.embed_backlog(prefix, group_name(self))
        self.collection = store.ensure_collection(self.name, self.version, embedder.dim)
        if store.active_version(self.name) is None:
            store.set_active_version(self.name, self.version)
        self.counters = Counters(client, prefix, group_name(self))
        self.tombstones = Tombstones(client, prefix)

    @classmethod
    def validate_options(cls, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """``OPTIONS`` with ``options`` over them; ``ValueError`` naming the option for an
        unknown name, a wrong type (a bool is not an int) or a value out of bounds."""
        merged = dict(cls.OPTIONS)
        for name, value in (options or {}).items():
            if name not in cls.OPTIONS:
                raise ValueError(
                    f"unknown option {name!r} of the {cls.name} projection (known: {', '.join(sorted(cls.OPTIONS))})"
                )
            default = cls.OPTIONS[name]
            if type(value) is not type(default):
                raise ValueError(
                    f"option {name!r} of the {cls.name} projection must be "
                    f"{type(default).__name__}, got {type(value).__name__} {value!r}"
                )
            if name in cls.OPTION_BOUNDS:
                lo, hi = cls.OPTION_BOUNDS[name]
                if not lo <= value <= hi:
                    raise ValueError(f"option {name!r} of the {cls.name} projection must be between {lo} and {hi}, got {value!r}")
            merged[name] = value
        return merged

    def point_of(self, tenant: str, event_id: str, chunk: int = 0) -> str:
        """The id of the point of chunk ``chunk`` of event ``event_id`` of ``tenant`` in this version."""
        return item_point_id(tenant, event_id, chunk, scoped=self.tenant_ids)

    def _index(self, docs: list[tuple[str, str, dict[str, Any]]], keywords: dict[str, str] | None = None) -> int:
        """Write (point id, text, payload) documents as points, a forgotten event's left out;
        returns how many were written. Each point gets its payload and its keyword
        (sparse) vector, made from the same text or from ``keywords[point id]`` when given,
        and ``dense_key`` of the text. Its dense vector is written with it (``inline``),
        or the one the point holds for the same text is kept (``_kept_vectors``), or else
        the point is written without it and a backlog entry for it is added after the
        upsert (see the module docstring): before ``apply`` returns, so before its events
        are acknowledged."""
        if not docs:
            return 0
        gone = self.tombstones.among([(d[2]["tenant"], d[2]["event_id"]) for d in docs])
        if gone:
            docs = [d for d in docs if d[2]["event_id"] not in gone]
            self.counters.add(tombstoned=len(gone))
            if not docs:
                return 0
        keywords = keywords or {}
        dense_keys = [dense_key(pid, text) for pid, text, _ in docs]
        held = None if self.tenant_ids else self._held([pid for pid, _, _ in docs], with_vectors=not self.inline)
        if held is not None:
            foreign = {pid for pid, _, payload in docs if pid in held and held[pid].payload.get("tenant") != payload["tenant"]}
            if foreign:  # another tenant's event holds the point: an upsert never replaces it
                self.counters.add(foreign_ids=len(foreign))
                log.warning("projection.foreign_point_id", group=group_name(self), points=len(foreign))
                keep = [i for i, d in enumerate(docs) if d[0] not in foreign]
                docs, dense_keys = [docs[i] for i in keep], [dense_keys[i] for i in keep]
                if not docs:
                    return 0
        if self.inline:
            vectors: list[Any] = list(self.embedder.embed([text for _, text, _ in docs]))
        else:
            kept = self._kept_vectors([pid for pid, _, _ in docs], dense_keys, held)
            vectors = [kept.get(pid) for pid, _, _ in docs]
        points = [
            Point(
                id=pid,
                dense=vectors[i],
                sparse=sparse_vector(keywords.get(pid, text)),
                payload={**payload, "sparse_version": SPARSE_VERSION, DENSE_KEY: dense_keys[i]},
            )
            for i, (pid, text, payload) in enumerate(docs)
        ]
        self.store.upsert(self.collection, points)
        if not self.inline:
            pipe = self.client.pipeline(transaction=False)
            for (pid, text, payload), key, dense in zip(docs, dense_keys, vectors):
                if dense is None:
                    pipe.xadd(
                        self.backlog,
                        {"id": pid, "key": key, "tenant": payload["tenant"], "event": payload["event_id"], "text": text},
                    )
            pipe.execute()
            self.counters.add(dense_kept=sum(1 for v in vectors if v is not None))
        return len(points)

    def _held(self, ids: list[str], with_vectors: bool) -> dict[str, Point]:
        """The points among ``ids`` the store holds now, by id as given."""
        wanted = {str(uuid.UUID(pid)): pid for pid in ids}
        out: dict[str, Point] = {}
        for p in self.store.retrieve(self.collection, ids, with_vectors=with_vectors):
            pid = wanted.get(str(uuid.UUID(p.id)))
            if pid:
                out[pid] = p
        return out

    def _kept_vectors(self, ids: list[str], keys: list[str], held: dict[str, Point] | None = None) -> dict[str, Any]:
        """The dense vectors the points among ``ids`` hold now that were made from the text
        they are written with again (their stored ``dense_key`` is the new one): point id ->
        vector. The keyword stage writes them back with the point, so rewriting a point (a
        redelivered batch, a replayed event) never hides the vector the dense stage gave it,
        and needs no new backlog entry. The vector and the key are read together: a vector
        is only ever kept on the text it was made from. A point whose key changed, or that
        has no vector yet, is written without one and gets a backlog entry (a vector the
        dense stage sets between this look and the write is set again from that entry)."""
        points = self._held(ids, with_vectors=True) if held is None else held
        kept: dict[str, Any] = {}
        for pid, key in zip(ids, keys):
            p = points.get(pid)
            if p is not None and p.dense is not None and p.payload.get(DENSE_KEY) == key:
                kept[pid] = p.dense
        return kept

    def embed_backlog(self, entries: Sequence[BacklogEntry]) -> int:
        """The dense stage: embed the texts of backlog ``entries`` (oldest first) and set
        each vector on its point (``VectorStore.set_dense``: only on a point that still
        exists with the entry's ``dense_key``, so of the texts a point was given the one it
        holds now wins, in whatever order they come). A forgotten event's entries are not
        embedded, and an entry given twice is embedded once. Idempotent. Returns how many
        points got their vector."""
        distinct = list({(e[0], e[1]): e for e in entries}.values())
        gone = self.tombstones.among([(e[2], e[3]) for e in distinct])
        items = [e for e in distinct if e[3] not in gone]
        done = 0
        if items:
            vectors = self.embedder.embed([e[4] for e in items])
            note = getattr(self.embedder, "note_origins", None)  # a cached embedder: forget finds the rows by event
            if note is not None:
                note([(e[3], e[4]) for e in items])
            done = self.store.set_dense(self.collection, [(e[0], vectors[i], e[1]) for i, e in enumerate(items)])
            if self.late is not None and done:
                self._store_late([e[0] for e in items])
        self.counters.add(embedded=done, embed_skipped=len(entries) - done)
        return done

    def _store_late(self, ids: list[str]) -> None:
        """The token vectors of the texts the points ``ids`` show (``late``), for the events
        they are of; a failure is counted (``late_failed``) and logged, never raised: the
        query side computes what is missing."""
        from memstream.projections.embedders.late import LateError

        assert self.late is not None
        try:
            pairs = [
                (str(p.payload.get("event_id", "")), str(p.payload.get("text", "")))
                for p in self.store.retrieve(self.collection, ids)
                if p.payload.get("kind") != "fact" and p.payload.get("event_id")
            ]
            self.counters.add(late_stored=self.late.warm(pairs))
        except LateError as exc:
            self.counters.add(late_failed=1)
            log.warning("projection.late_failed", group=group_name(self), points=len(ids), error=str(exc))

    def _forget(self, event: MemoryForgotten) -> dict[str, Any] | None:
        """Record the tombstone and delete the item's points; returns the payload of the
        item's first point when this projection held it (None otherwise)."""
        self.tombstones.add(event.scope.tenant, event.forgotten_id)
        tenant = event.scope.tenant
        head = self.store.retrieve(self.collection, [self.point_of(tenant, event.forgotten_id, 0)])
        n = int(head[0].payload.get("chunks", 1)) if head else 1
        ids = [self.point_of(tenant, event.forgotten_id, i) for i in range(n)]
        if head and head[0].payload.get("tenant") != event.scope.tenant:
            return None  # never across tenants
        self.store.delete(self.collection, ids)
        self.counters.add(forgotten=1 if head else 0)
        self._compact_due = self._compact_due or bool(head)
        return dict(head[0].payload) if head else None

    _compact_due = False

    def _compact_if_due(self) -> None:
        """After a batch that deleted a forgotten item's points: rewrite the collection
        without them when the store can (the embedded one: ``EdgeStore.compact``), so the
        text is left in none of its files. Once per batch; a Qdrant server keeps its own
        write-ahead log (see docs/operations/forget.md)."""
        if not self._compact_due:
            return
        compact = getattr(self.store, "compact", None)
        if compact is not None:
            compact(self.collection)
            self.counters.add(compacted=1)
        self._compact_due = False
