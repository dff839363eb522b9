"""The projection pipeline as a unit: store, embedder, the projections of
``memstream.projections.registry`` (turns, memories, facts, sessions) and their consumers,
run as threads (``memstream up`` in embedded mode, ``memstream worker``).

The embedded store (qdrant-edge under ``$MEMSTREAM_HOME/data/qdrant``) can be opened by
one process only, so in embedded mode the service process owns it; with
``MEMSTREAM_QDRANT_URL`` any number of worker processes share the work through the
consumer groups.

Every version of every projection that the catalog (``projections.catalog``) keeps runs
here: the active one, and below it in priority (``workers.priority``) a building version
(a replay) and the retired ones, so that activating any of them again is instant. A
version records the embedder it was built with; its consumer embeds with that one, and
the query server queries each version with its own (``query.versions``).

A vector projection's version also runs its dense stage on a thread of its own
(``workers.embedding``): its ``Consumer`` writes each point with its keywords at once, and
the ``EmbedConsumer`` adds the dense vectors from the version's backlog as fast as the
embedder goes (``projections.vector``). A building version is activated once both have
caught up (``caught_up`` with its backlog), so readers never switch to a version that
finds by keywords only.

A supervisor thread watches the consumer threads: one that died anyway (``Consumer.run``
survives every ``Exception``; this is for anything else) is restarted after a jittered
backoff and counted in its consumer's ``stats.restarts`` and health record. Every
``CATALOG_EVERY`` seconds it also reads the catalog: it starts a consumer for a version
that a replay added, activates a building version once it has caught up (unless its
activation is manual), and removes what a dropped or cancelled version wrote.

A pipeline may run some of the projections only (``PipelineConfig.projections``): the
projections without vectors in a process of their own (``service.sidecar``, ``memstream
worker --projections``), the others beside the store. One without any vector projection
opens no store, loads no embedder and serves no queries; it follows the catalog of its
own projections (a replay of facts is built and activated where facts run).

A **read replica**'s pipeline (``PipelineConfig.replica``: N, 1 or more; a child of
``memstream up --query-replicas``, ``service.sidecar``) runs memstream's vector projections
(turns, memories) over a store of its own (``data/qdrant-replica-N``) through consumer
groups of its own (``projections.replicas``: ``turns.v1~rN``), and a query server on the
same request lists. It follows the catalog but never writes it: it runs every version the
catalog keeps, activates nothing, and answers from the version it served (its store's
pointer) until its own group of the catalog's active version has caught up
(``caught_up`` with its backlog), then from that one. It beats in the replicas' registry
(its groups, and those it answers from: read-your-writes waits for them). A version
dropped in the catalog is dropped from its store by the replica. A replica reads the
streams only, never the archive: on a log with an archive it runs only the versions whose
groups it made before (the archiver trims only what every group applied), and a new
replica is refused.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, overload

import redis
import structlog

from memstream.core import PermanentError, Settings, as_str, backoff_delay, keys
from memstream.producers import Archive, ArchiveError, EntryFields, EventLog, parse_entry_id
from memstream.projections import (
    BEAT_EVERY_S,
    PROJECTIONS,
    Catalog,
    Embedder,
    FactsTable,
    Projection,
    Registered,
    Replicas,
    SessionsIndex,
    VectorProjection,
    VectorStore,
    Version,
    all_registered,
    drop_version,
    open_store,
    physical_name,
    query_view,
    replica_group,
    select,
)
from memstream.query import ActiveVersions, CountAnswer, CountRequest
from memstream.workers.consumer import Consumer
from memstream.workers.embedding import EmbedConsumer, Embedding
from memstream.workers.loop import Tuning
from memstream.workers.priority import Priority
from memstream.workers.replay import Archived, caught_up

if TYPE_CHECKING:
    from memstream.projections import LatePassages
    from memstream.query import QueryServer

__all__ = ["Pipeline", "PipelineConfig"]

log = structlog.get_logger("memstream.pipeline")

_P = TypeVar("_P")  # the class a caller asks a projection as (``Pipeline.projection``)


@dataclass(frozen=True)
class PipelineConfig:
    embedder: str = ""  # "" -> settings.embedder
    qdrant_url: str = ""  # "" -> the embedded store under $MEMSTREAM_HOME/data/qdrant
    consumer: str = ""  # stable consumer name; "" -> host name + settings.worker_index
    batch: int = 128
    max_deliveries: int = 5
    claim_idle_ms: int = 60_000
    projections: tuple[str, ...] = ()  # the names of the projections to run; () -> every registered one
    replica: int = 0  # 1 or more: a read replica's pipeline (its own store and groups; see the module docstring)

    @property
    def tuning(self) -> Tuning:
        """How the consumers and the dense stages read and retry."""
        return Tuning(batch=self.batch, max_deliveries=self.max_deliveries, claim_idle_ms=self.claim_idle_ms)

    @classmethod
    def of(cls, settings: Settings, **overrides: Any) -> PipelineConfig:
        values: dict[str, Any] = {"embedder": settings.embedder, "qdrant_url": settings.qdrant_url}
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})
        return cls(**values)


class EmbedderMissing(PermanentError):
    """A version's embedder cannot be loaded in this process (the message says how to fix it)."""


class ReplicaRefused(PermanentError, ValueError):
    """A read replica cannot run here (the message says why)."""


@dataclass
class Run:
    """One version of one projection, running here."""

    row: Registered
    version: Version
    projection: Projection
    consumer: Consumer
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    started: float = 0.0
    quick: int = 0  # deaths in a row soon after a start
    restart_at: float | None = None
    embedding: EmbedConsumer | None = None  # a vector projection's dense stage
    embed_thread: threading.Thread | None = None
    embed_restart_at: float | None = None

    @property
    def group(self) -> str:
        return self.consumer.group


class Pipeline:
    """Every version of the selected projections, fed by their consumers (see the module
    docstring). Built in steps: the store, the default embedder, whether the log has a
    history, the catalog's versions with a run each, and the query server."""

    def __init__(
        self, settings: Settings, events: EventLog, config: PipelineConfig | None = None, archive: Archived | None = None
    ):
        self.settings = settings
        self.events = events
        self.config = config or PipelineConfig(embedder=settings.embedder, qdrant_url=settings.qdrant_url)
        self._archive_given = archive  # what a replay reads before the streams (default: the settings')
        self.replica = self.config.replica
        self.rows = select(all_registered(settings.projections), self.config.projections)
        if self.replica:  # memstream's own vector projections, over the embedded store
            if self.config.qdrant_url:
                raise ReplicaRefused("a read replica copies the embedded store; with a Qdrant server run `memstream worker`s")
            self.rows = tuple(row for row in self.rows if row.vectors and row in PROJECTIONS)
            if self._archived() and not Replicas(events.client, events.prefix).groups().get(self.replica):
                raise ReplicaRefused(
                    "a new read replica of a log with an archive is not supported: it would miss what was archived"
                )
        # the store, the embedder and the query server: only beside a vector projection
        self.vectors = any(row.vectors for row in self.rows)
        self.spec = self.config.embedder or settings.embedder
        self._embedders: dict[str, Embedder] = {}
        self._embedders_lock = threading.Lock()
        self._query_embedders: dict[str, Embedder] = {}  # per spec: the read side's, keeping questions in memory only
        self.catalog = Catalog(events.client, events.prefix)
        self.priority = Priority()
        self.consumer_name = self.config.consumer or f"{socket.gethostname()}-{settings.worker_index}"
        self.runs: dict[str, Run] = {}  # group -> its run
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._last_catalog = 0.0
        self._running = False
        self.facts = FactsTable(events.client, events.prefix)
        self.replicas = Replicas(events.client, events.prefix)
        self._served: dict[str, Version] = {}  # a replica's: per projection, the version it answers from
        self._served_lock = threading.Lock()
        self._last_beat = 0.0
        self.versions = ActiveVersions(
            events.client, events.prefix, self._query_embedder_of, pick=self._pick if self.replica else None
        )
        # the steps, in order
        self._store = self._open_store()
        self._embedder = self._load_embedder(self.spec) if self.vectors else None  # new versions' default
        # token vectors of what the dense stage embeds, for the prefetch's late interaction (query.late)
        self.late: LatePassages | None = None
        if self.vectors and settings.late_reranks(self.spec):
            # numpy's: a process without vectors never imports it
            from memstream.projections import EmbeddingCache, LatePassages, shared_late_scorer

            threads = settings.embed_threads or None  # the late model's threads are the embedder's
            self.late = LatePassages(
                EmbeddingCache(settings.data_dir / "embeddings.sqlite3", memory_items=0),
                lambda: shared_late_scorer(threads),
            )
        if self.replica:
            self._enter_catalog_replica()
        else:
            self._enter_catalog(history=self._has_history())
        self._queries = self._query_server()

    def _open_store(self) -> VectorStore | None:
        """The vector store, beside a vector projection only: a Qdrant server's, or the
        embedded one under the data directory."""
        if not self.vectors:
            return None
        where = f"qdrant-replica-{self.replica}" if self.replica else "qdrant"
        return open_store(
            url=self.config.qdrant_url or None,
            path=str(self.settings.data_dir / where),
            dense_index_from=self.settings.dense_index_from,
        )

    def _has_history(self) -> bool:
        """Whether the log holds anything yet: an entry in a stream, or an archive."""
        return any(self.events.client.xlen(key) for key in self.events.stream_keys) or self._archived()

    def _enter_catalog(self, history: bool) -> None:
        """Each projection's versions in the catalog (its first one made now), and a run for
        each that runs here. A version whose embedder cannot be loaded fails (the active
        one raises ``EmbedderMissing``)."""
        own = {r.name for r in self.rows[len(PROJECTIONS) :]}
        for row in self.rows:
            # a projection of your own, new to a log with a history, builds before readers see it
            build = history and row.name in own
            # a first version made now records the options of new versions; one that stands for
            # a log projected before versions were recorded keeps the behaviour it had
            options = row.new_options if build or not history else {}
            built_with = self._built_with(row)
            if built_with and not build and self._legacy_collection(row):
                # a collection projected before the catalog recorded embedders: it holds the
                # vectors of the default of its time, not of today's
                from memstream.projections import LEGACY_SPEC

                legacy = self._load_embedder(LEGACY_SPEC)
                built_with = {"embedder": LEGACY_SPEC, "model": legacy.name, "dim": legacy.dim}
            active = self.catalog.ensure(row.name, row.version, build=build, options=options, **built_with)
            for v in self.catalog.versions(row.name):
                if v.state in ("dropping", "failed") and v.version != active.version:
                    continue
                try:
                    self._add_run(row, v)
                except EmbedderMissing as exc:
                    if v.version == active.version:
                        raise
                    self.catalog.fail(row.name, v.version, str(exc))

    def _enter_catalog_replica(self) -> None:
        """A replica's runs: one for each version the catalog keeps (it makes none: a version
        the primary has not recorded yet is added by ``sync_catalog`` once it is there)."""
        for row in self.rows:
            for v in self.catalog.versions(row.name):
                if v.state in ("dropping", "failed"):
                    continue
                try:
                    self._add_run(row, v)
                except (EmbedderMissing, ReplicaRefused) as exc:
                    log.error("pipeline.replica_version_skipped", group=v.group, error=str(exc)[:500])

    def _may_copy(self, v: Version) -> None:
        """``ReplicaRefused`` for a version this replica cannot copy whole: its group is new
        and the log has an archive (a replica reads the streams only, never the archive)."""
        group = self._group(v)
        if group in self.replicas.groups().get(self.replica, []) or not self._archived():
            return
        raise ReplicaRefused(f"{group}: a read replica does not replay the archive, so it cannot copy a version it has not run")

    def _group(self, v: Version) -> str:
        """The group this pipeline reads ``v`` through (a replica's own)."""
        return replica_group(v.group, self.replica)

    def _pick(self, name: str, active: Version | None) -> Version | None:
        """A replica's version of ``name`` to answer from: the one it served (its store's
        pointer, across restarts) until its own group of the catalog's ``active`` version
        has caught up; a served version the catalog dropped is left at once."""
        if active is None or all(row.name != name for row in self.rows):
            return active  # facts and sessions: the primary's, read from Redis as they are
        with self._served_lock:
            served = self._served.get(name)
            if served is None:
                pointer = self.store.active_version(name)
                served = self.catalog.get(name, pointer) if pointer is not None else None
            elif served.version != active.version:
                served = self.catalog.get(name, served.version)
            if served is None or served.state in ("dropping", "failed") or self._group(served) not in self.runs:
                served = active
            if served.version != active.version:
                r = self.runs.get(self._group(active))
                backlog = r.embedding.stream if r is not None and r.embedding is not None else None
                if r is not None and caught_up(self.events.client, self.events.stream_keys, r.group, backlog):
                    log.info("pipeline.replica_switched", projection=name, version=active.version, replica=self.replica)
                    served = active
            if self.store.active_version(name) != served.version:
                self.store.set_active_version(name, served.version)
            self._served[name] = served
            return served

    def _beat(self) -> None:
        """A replica's beat: its groups, and those it answers from."""
        serving = [self._group(v) for v in list(self._served.values())]
        for row in self.rows:  # not asked yet: what it would answer from
            if row.name not in self._served:
                v = self.versions.version(row.name)
                if v is not None:
                    serving.append(self._group(v))
        self.replicas.beat(self.replica, list(self.runs), serving)
        self._last_beat = time.monotonic()

    def _query_server(self) -> QueryServer | None:
        """The query server over the store (None without one: nothing to search)."""
        if self._store is None:
            return None
        from memstream.query import QueryServer, ReadOps, Searcher  # the read side's models: with a store only

        client, prefix = self.events.client, self.events.prefix
        self.searcher = Searcher(self._store, self.embedder, self.facts, versions=self.versions)
        self.reads = ReadOps(
            self._store,
            self.searcher,
            self.facts,
            SessionsIndex(client, prefix),
            versions=self.versions,
            hot_days=self.settings.hot_days,
            late=self.late,
            recall_candidates=self.settings.recall_candidates,
        )
        return QueryServer(
            client,
            prefix,
            replace(self.reads.handlers(), count=self._count),
            threads=self.settings.query_server_threads,
            batched=self.reads.batched(),
            hurried=self.reads.hurried(),
            hurry_after_s=self.settings.late_shed_ms / 1000,
        )

    SUPERVISE_EVERY = 0.25  # seconds between the supervisor's looks at the threads
    CATALOG_EVERY = 1.0  # seconds between its reads of the catalog
    QUICK_DEATH_S = 30.0  # a thread that dies sooner after its start backs its restart off further

    @property
    def store(self) -> VectorStore:
        """The vector store (``RuntimeError`` in a pipeline without a vector projection)."""
        if self._store is None:
            raise RuntimeError("this pipeline runs no vector projection: it opened no store")
        return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedder new versions are built with (``RuntimeError`` without a vector projection)."""
        if self._embedder is None:
            raise RuntimeError("this pipeline runs no vector projection: it loaded no embedder")
        return self._embedder

    @property
    def queries(self) -> QueryServer:
        """The query server (``RuntimeError`` without a vector projection: nothing to search)."""
        if self._queries is None:
            raise RuntimeError("this pipeline runs no vector projection: it serves no queries")
        return self._queries

    # -- embedders -------------------------------------------------------------------------
    def _load_embedder(self, spec: str) -> Embedder:
        from memstream.projections import CachedEmbedder, configured_embedder, how_to_load  # the models' modules

        with self._embedders_lock:
            found = self._embedders.get(spec)
            if found is not None:
                return found
            try:
                inner = configured_embedder(self.settings, spec)
            except Exception as exc:
                raise EmbedderMissing(
                    f"embedder {spec!r} cannot be loaded in this process ({type(exc).__name__}: {exc}); "
                    f"{how_to_load(spec)}; then `memstream replay` the projection again"
                ) from exc
            # the cache saves model calls; feature hashing is cheaper than a cache lookup
            embedder = (
                CachedEmbedder(inner, self.settings.data_dir / "embeddings.sqlite3")
                if getattr(inner, "worth_caching", True)
                else inner
            )
            self._embedders[spec] = embedder
            return embedder

    def _embedder_of(self, version: Version) -> Embedder:
        """The embedder ``version`` was built with (the configured one for a version without)."""
        return self._load_embedder(version.embedder or self.spec)

    def _query_embedder_of(self, version: Version) -> Embedder:
        """What the read side embeds a question with for ``version``: its embedder, keeping a
        question's vector in memory only (``CachedEmbedder.for_queries``), so the cache's file
        holds only what was embedded for an event, which ``memstream forget`` reaches."""
        spec = version.embedder or self.spec
        with self._embedders_lock:
            found = self._query_embedders.get(spec)
        if found is None:
            embedder = self._load_embedder(spec)
            view = query_view(embedder)  # a CachedEmbedder's, or a model's own
            with self._embedders_lock:
                found = self._query_embedders.setdefault(spec, view)
        return found

    def _legacy_collection(self, row: Registered) -> bool:
        """Whether ``row``'s collection was projected before the catalog recorded its
        embedder (it exists, the catalog has no version of it) and nobody named an embedder."""
        by_default = self.spec == self.settings.embedder and "embedder" not in dict(self.settings.sources)
        return (
            by_default
            and self._store is not None
            and not self.catalog.versions(row.name)
            and row.version in self._store.versions(row.name)
        )

    def _built_with(self, row: Registered) -> dict[str, Any]:
        if not row.vectors:
            return {}
        return {"embedder": self.spec, "model": self.embedder.name, "dim": self.embedder.dim}

    # -- runs ------------------------------------------------------------------------------
    def _add_run(self, row: Registered, v: Version) -> Run:
        if self.replica:
            self._may_copy(v)
        embedder = self._embedder_of(v) if row.vectors else None
        if row.vectors and v.state == "active" and embedder is not None and embedder.name != self.embedder.name:
            log.warning(
                "pipeline.embedder_differs",
                projection=row.name,
                version=v.version,
                built_with=embedder.name,
                configured=self.embedder.name,
                action=f"queries and new points keep using {embedder.name}; to change the model, "
                f"`memstream replay {row.name} --embedder {self.spec}`",
            )
        if embedder is not None:  # the metrics time each embedding call of this version (observed.py)
            from memstream.workers.observed import ObservedEmbedder  # the embedders' modules: with vectors only

            embedder = ObservedEmbedder(embedder, v.group)
        projection: Projection = row.build(
            self._store,
            embedder,
            self.events.client,
            self.events.prefix,
            version=v.version,
            options=v.options or None,
            replica=self.replica,
        )
        if isinstance(projection, VectorProjection):
            projection.late = self.late
        low = v.state != "active"
        try:
            # a replica reads every version from the log's start (it refuses a log with an archive)
            archive = None if v.archive_done or self.replica else self.archive()
            start_at = archive.watermark() if archive is not None else {}
        except ArchiveError:  # the build's backfill fails it, saying why
            start_at = {}
        consumer = Consumer(
            self.events,
            projection,
            self.consumer_name,
            tuning=self.config.tuning,
            max_text_bytes=self.settings.max_text_bytes,
            priority=self.priority,
            low=low,
            start_at=start_at,
            dlq_max_letters=self.settings.dlq_max_letters,
        )
        embedding = None
        if row.vectors and isinstance(projection, Embedding):
            embedding = EmbedConsumer(
                self.events.client,
                projection,
                self.consumer_name,
                tuning=self.config.tuning,
                priority=self.priority,
                low=low,
                dlq_max_letters=self.settings.dlq_max_letters,
            )
        run = Run(row, v, projection, consumer, embedding=embedding)
        with self._lock:
            self.runs[consumer.group] = run
        return run

    def _active_runs(self) -> list[Run]:
        return [r for r in self.runs.values() if not r.consumer.low]

    @property
    def projections(self) -> list[Projection]:
        """The active version of each projection, in the table's order."""
        return [r.projection for r in self._active_runs()]

    @property
    def consumers(self) -> list[Consumer]:
        """Every running version's consumer (active ones first, in the table's order)."""
        runs = list(self.runs.values())
        return [r.consumer for r in runs if not r.consumer.low] + [r.consumer for r in runs if r.consumer.low]

    @property
    def embedders(self) -> list[EmbedConsumer]:
        """Every running vector version's dense stage (active ones first)."""
        runs = list(self.runs.values())
        return [r.embedding for r in runs if r.embedding is not None and not r.embedding.low] + [
            r.embedding for r in runs if r.embedding is not None and r.embedding.low
        ]

    @property
    def _threads(self) -> list[threading.Thread]:
        runs = list(self.runs.values())
        return [r.thread for r in runs if r.thread is not None] + [r.embed_thread for r in runs if r.embed_thread is not None]

    @overload
    def projection(self, name: str) -> Projection: ...

    @overload
    def projection(self, name: str, kind: type[_P]) -> _P: ...

    def projection(self, name: str, kind: type[Any] | None = None) -> Any:
        """The active version of the projection called ``name`` (``KeyError`` for none); with
        ``kind``, as that class (its search and read methods, which tests and benchmarks
        call; ``TypeError`` when the projection is not one)."""
        for r in self._active_runs():
            if r.projection.name == name:
                if kind is not None and not isinstance(r.projection, kind):
                    raise TypeError(f"the projection {name!r} is a {type(r.projection).__name__}, not a {kind.__name__}")
                return r.projection
        raise KeyError(name)

    def _count(self, request: CountRequest) -> CountAnswer:
        """Points in each vector projection's store, per running version (``memstream stats``: items,
        by the version's group: a replica counts its own copy of the version); with a ``tenant``,
        also its points per tier (``tiers``)."""
        items = {
            r.version.group: self.store.count(physical_name(r.row.name, r.version.version))
            for r in list(self.runs.values())
            if r.row.vectors
        }
        return CountAnswer(items=items, tiers=self.reads.tiers(request.tenant) if request.tenant else None)

    def drain(self) -> int:
        """Burst mode: apply everything in the log now (tests, replays, benchmarks), every
        running version (a replay reads the archive first), dense stages included; returns
        the log entries handled.

        The projections drain concurrently, one thread each, as ``start()`` runs them:
        one's store, socket or model time overlaps the others' Python work."""
        runs = list(self.runs.values())
        counts = [0] * len(runs)
        errors: list[BaseException] = []

        def run(i: int, r: Run) -> None:
            try:
                self._prepare(r)
                counts[i] = self._backfill(r) + r.consumer.drain()
                if r.embedding is not None:
                    r.embedding.drain()
            except BaseException as exc:  # re-raised in the caller below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i, r), name=f"memstream-drain-{r.group}") for i, r in enumerate(runs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.sync_catalog()
        return sum(counts)

    def archive(self) -> Archived | None:
        """The log's archive when it holds anything (``MEMSTREAM_ARCHIVE_DIR``), else None."""
        if self._archive_given is not None:
            return self._archive_given
        return Archive.holding(self.settings.archive_path)

    def _archived(self) -> bool:
        try:
            return self.archive() is not None
        except ArchiveError:
            return True  # something is there, unreadable: a build will say so

    BACKFILL_LOCK_S = 60  # a backfilling worker renews its claim each batch; a dead one's expires

    def _backfill(self, r: Run, stop: threading.Event | None = None) -> int:
        """A replay's first part: the archived entries up to where its group starts, in
        order, before the group reads the streams. One worker does it (a claim in Redis;
        the others wait for it); its position is recorded after each batch, so a crash
        resumes there. An unreadable archive fails the version, saying why."""
        v = self.catalog.get(r.row.name, r.version.version) or r.version
        if v.archive_done:
            return 0
        lock = keys.backfill_lock(self.events.prefix, v.group)
        client = self.events.client
        while not client.set(lock, self.consumer_name, nx=True, ex=self.BACKFILL_LOCK_S):
            if as_str(client.get(lock) or b"") == self.consumer_name:
                break  # our own claim, from before a restart of this thread
            if (stop or threading.Event()).wait(1.0):
                return 0
            v = self.catalog.get(r.row.name, r.version.version) or v
            if v.archive_done:
                return 0
        try:
            archive = self.archive()
            if archive is None:
                self.catalog.update(r.row.name, v.version, archive_done=True)
                return 0
            upto = r.consumer.start_at
            applied, position = v.archive_applied, v.archive_position
            batch: list[tuple[str, str, EntryFields]] = []

            def flush() -> None:
                nonlocal applied, position, batch
                if r.consumer.low:
                    self.priority.wait_turn(stop)
                r.consumer.backfill(batch)
                applied += len(batch)
                position = max((b[1] for b in batch), key=parse_entry_id)
                self.catalog.update(r.row.name, v.version, archive_position=position, archive_applied=applied)
                client.expire(lock, self.BACKFILL_LOCK_S)
                batch = []

            try:
                for stream, entry_id, fields in archive.entries(since=position or "-"):
                    if stop is not None and stop.is_set():
                        return applied - v.archive_applied
                    last = upto.get(stream)
                    if last is None or parse_entry_id(entry_id) > parse_entry_id(last):
                        continue  # past where the group starts: the group reads it from the stream
                    batch.append((stream, entry_id, fields))
                    if len(batch) >= r.consumer.tuning.batch:
                        flush()
                if batch:
                    flush()
            except ArchiveError as exc:
                self.catalog.fail(r.row.name, v.version, f"the archive cannot be read: {exc}")
                r.stop.set()
                return applied - v.archive_applied
            self.catalog.update(r.row.name, v.version, archive_done=True)
            return applied - v.archive_applied
        finally:
            if as_str(client.get(lock) or b"") == self.consumer_name:
                client.delete(lock)

    def start(self) -> Pipeline:
        for r in list(self.runs.values()):
            self._start_run(r)
        if self.replica:  # listed before it answers: read-your-writes waits for it from its first answer
            self._beat()
        if self._queries is not None:
            self._queries.start()
        self._running = True
        self._supervisor = threading.Thread(target=self._supervise, name="memstream-supervisor", daemon=True)
        self._supervisor.start()
        log.info("pipeline.started", groups=list(self.runs), consumer=self.consumer_name)
        return self

    def _start_run(self, r: Run) -> None:
        try:
            r.consumer.ensure_groups()
        except redis.RedisError as exc:  # e.g. a full or read-only server: its loop retries
            log.warning(
                "pipeline.groups_not_ready",
                group=r.group,
                error=f"{type(exc).__name__}: {exc}",
                action="the consumer creates them once the server takes writes",
            )
        self._spawn(r)
        if r.embedding is not None:
            self._spawn_embedding(r)

    def _spawn_embedding(self, r: Run) -> None:
        assert r.embedding is not None
        r.embed_thread = threading.Thread(target=self._run_embedding, args=(r,), name=f"memstream-{r.group}-embed", daemon=True)
        r.embed_thread.start()

    def _run_embedding(self, r: Run) -> None:
        assert r.embedding is not None
        try:
            r.embedding.run(r.stop)
        except BaseException as exc:  # noqa: BLE001  the supervisor restarts the thread
            if r.stop.is_set():
                return
            r.embedding.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.error(
                "pipeline.embedding_died",
                group=r.embedding.group,
                error=r.embedding.stats.last_error[:500],
                action="the supervisor restarts it",
                exc_info=True,
            )

    @staticmethod
    def _prepare(r: Run) -> None:
        """What the projection does once before it reads (``prepare``, when it has one)."""
        prepare = getattr(r.projection, "prepare", None)
        if prepare is not None:
            prepare()

    def _spawn(self, r: Run) -> None:
        r.thread = threading.Thread(target=self._run, args=(r,), name=f"memstream-{r.group}", daemon=True)
        r.started = time.monotonic()
        r.thread.start()

    def _run(self, r: Run) -> None:
        consumer = r.consumer
        try:
            self._prepare(r)
            if not self.replica:  # a replica refuses a log with an archive
                self._backfill(r, r.stop)
            consumer.run(r.stop)
        except BaseException as exc:  # noqa: BLE001  the supervisor restarts the thread
            if r.stop.is_set():
                return
            error = f"{type(exc).__name__}: {exc}"
            consumer.stats.last_error = error
            consumer.health.error(error, state="dead")
            consumer.health.beat(consumer.stats, force=True)
            log.error(
                "pipeline.consumer_died",
                group=consumer.group,
                error=error[:500],
                action="the supervisor restarts it",
                exc_info=True,
            )

    def _supervise(self) -> None:
        """Restart consumer threads that died (not on shutdown), with backoff; follow the
        catalog. Never dies: a look that fails (whatever raised) is tried again at the next."""
        while not self._stop.wait(self.SUPERVISE_EVERY):
            try:
                self._look()
            except Exception:  # noqa: BLE001  the supervisor outlives anything a look meets
                pass

    def _look(self) -> None:
        """One look of the supervisor: restart what died (the thread first, the log line after)."""
        for r in list(self.runs.values()):
            if r.thread is None or r.thread.is_alive() or r.stop.is_set():
                continue
            consumer = r.consumer
            now = time.monotonic()
            if r.restart_at is None:
                lived = now - r.started
                r.quick = r.quick + 1 if lived < self.QUICK_DEATH_S else 1
                r.restart_at = now + backoff_delay(r.quick, 0.2, 30.0)
            if now < r.restart_at or self._stop.is_set():
                continue
            r.restart_at = None
            consumer.stats.restarts += 1
            consumer._pending_done = False  # re-read what it holds
            consumer._groups_ready = False
            self._spawn(r)
            consumer.health.beat(consumer.stats, force=True)
            log.error("pipeline.consumer_restarted", group=consumer.group, restarts=consumer.stats.restarts)
        for r in list(self.runs.values()):
            t, e = r.embed_thread, r.embedding
            if t is None or e is None or t.is_alive() or r.stop.is_set() or self._stop.is_set():
                continue
            now = time.monotonic()
            if r.embed_restart_at is None:
                r.embed_restart_at = now + backoff_delay(e.stats.restarts + 1, 0.2, 30.0)
            if now < r.embed_restart_at:
                continue
            r.embed_restart_at = None
            e.stats.restarts += 1
            e._pending_done = False
            e._ready = False
            self._spawn_embedding(r)
            log.error("pipeline.embedding_restarted", group=e.group, restarts=e.stats.restarts)
        if time.monotonic() - self._last_catalog >= self.CATALOG_EVERY:
            self._last_catalog = time.monotonic()
            try:
                self.sync_catalog()
            except Exception as exc:  # noqa: BLE001  logged; the next look retries
                log.warning("pipeline.catalog_failed", error=f"{type(exc).__name__}: {exc}"[:500])
        if self.replica and time.monotonic() - self._last_beat >= BEAT_EVERY_S:
            self._beat()

    # -- the catalog -----------------------------------------------------------------------
    def sync_catalog(self) -> None:
        """Follow the catalog once: start new versions, activate caught-up builds, drop the
        versions asked to go, stop those another worker dropped, and give each running
        version its priority."""
        if self.replica:
            self._sync_catalog_replica()
            return
        for row in self.rows:
            versions = self.catalog.versions(row.name)
            active = next((v for v in versions if v.state == "active"), None)
            if active is not None and row.vectors and self.store.active_version(row.name) != active.version:
                # activated elsewhere (`memstream projections activate`): the store's own
                # pointer follows the catalog (tools that read the store directly), before
                # any drop, which the store refuses for the version its pointer names
                self.store.set_active_version(row.name, active.version)
                self.versions.refresh()
            known = {v.group for v in versions}
            for group, gone in [(g, r) for g, r in self.runs.items() if r.row.name == row.name and g not in known]:
                gone.stop.set()  # dropped by another worker: its data is gone already
                with self._lock:
                    self.runs.pop(group, None)
                log.info("pipeline.version_gone", group=group)
            for v in versions:
                group = v.group
                r = self.runs.get(group)
                if v.state == "dropping":
                    self._drop(row, v, r)
                    continue
                added = r is None
                if r is None:
                    if v.state == "failed":
                        continue
                    try:
                        r = self._add_run(row, v)
                    except EmbedderMissing as exc:
                        self.catalog.fail(row.name, v.version, str(exc))
                        log.error("pipeline.version_failed", group=group, error=str(exc)[:500])
                        continue
                self._follow(r, v, added)
                if v.state == "building":
                    self._maybe_activate(row, v, r)

    def _sync_catalog_replica(self) -> None:
        """A replica's look at the catalog: a run for each new version, its own copy of a
        dropped one removed (collection and group), each run's priority."""
        for row in self.rows:
            versions = self.catalog.versions(row.name)
            known = {self._group(v): v for v in versions if v.state not in ("dropping", "failed")}
            for gone in [r for g, r in self.runs.items() if r.row.name == row.name and g not in known]:
                self._drop_own(gone)
            for group, v in known.items():
                r = self.runs.get(group)
                added = r is None
                if r is None:
                    try:
                        r = self._add_run(row, v)
                    except (EmbedderMissing, ReplicaRefused) as exc:
                        log.error("pipeline.replica_version_skipped", group=group, error=str(exc)[:500])
                        continue
                self._follow(r, v, added)

    def _follow(self, r: Run, v: Version, added: bool) -> None:
        """``r`` follows its version's record ``v``: started when just ``added``, below the
        live versions when ``v`` is not the active one."""
        if added:
            log.info("pipeline.version_added", group=r.group, state=v.state)
            if self._running:
                self._start_run(r)
        r.version = v
        r.consumer.low = v.state != "active"
        if r.embedding is not None:
            r.embedding.low = r.consumer.low

    def _drop_own(self, r: Run) -> None:
        """A replica's copy of a version the catalog dropped: its run stopped, its collection
        and its group gone."""
        self._end_run(r)
        with self._served_lock:
            served = self._served.get(r.row.name)
            if served is not None and served.version == r.version.version:
                self._served.pop(r.row.name, None)
        self.versions.refresh()
        if self.store.active_version(r.row.name) == r.version.version:
            active = self.catalog.active(r.row.name)
            if active is not None:
                self.store.set_active_version(r.row.name, active.version)
        self.store.drop_collection(r.row.name, r.version.version)
        self.replicas.drop(r.group, self.events.stream_keys)
        log.info("pipeline.version_dropped", group=r.group)

    def _maybe_activate(self, row: Registered, v: Version, r: Run) -> None:
        backlog = r.embedding.stream if r.embedding is not None else None
        if not v.archive_done or not caught_up(self.events.client, self.events.stream_keys, v.group, backlog):
            return
        if v.activate == "manual":
            if not v.caught_up_at:
                self.catalog.update(row.name, v.version, caught_up_at=time.time())
                log.info(
                    "pipeline.version_caught_up",
                    group=v.group,
                    action=f"activate it with `memstream projections activate {row.name} {v.version}`",
                )
            return
        self.activate(row.name, v.version)

    def activate(self, name: str, version: int) -> Version:
        """Switch readers of ``name`` to ``version`` (the store's own pointer too)."""
        if any(r.row.name == name and r.row.vectors for r in self.runs.values()):
            self.store.set_active_version(name, version)
        new = self.catalog.activate(name, version)
        self.versions.refresh()
        for r in self.runs.values():
            if r.row.name == name:
                r.consumer.low = r.version.version != version
                if r.embedding is not None:
                    r.embedding.low = r.consumer.low
        log.info("pipeline.version_activated", projection=name, version=version)
        return new

    def _end_run(self, r: Run) -> None:
        """``r`` stopped (its threads given 10 s to finish their batch) and no longer run here."""
        r.stop.set()
        for t in (r.thread, r.embed_thread):
            if t is not None:
                t.join(10.0)
        with self._lock:
            self.runs.pop(r.group, None)

    def _drop(self, row: Registered, v: Version, r: Run | None) -> None:
        if r is not None:
            self._end_run(r)
        drop_version(row, self._store, self.events.client, self.events.prefix, v.version, self.events.stream_keys)
        self.catalog.forget(row.name, v.version)
        log.info("pipeline.version_dropped", group=v.group)

    def health(self) -> dict[str, dict[str, Any]]:
        """Per group: whether its thread is alive, and its consumer's counters."""
        out = {}
        for r in list(self.runs.values()):
            c, t, s = r.consumer, r.thread, r.consumer.stats
            out[c.group] = {
                "alive": bool(t and t.is_alive()),
                "state": c.health.state,
                "applied": s.applied,
                "dead_lettered": s.dead_lettered,
                "errors": s.errors,
                "transient_failures": s.transient_failures,
                "restarts": s.restarts,
                "last_error": s.last_error,
            }
            if r.embedding is not None:
                e, et = r.embedding.stats, r.embed_thread
                out[r.embedding.group] = {
                    "alive": bool(et and et.is_alive()),
                    "applied": e.applied,
                    "embedded": e.embedded,
                    "dead_lettered": e.dead_lettered,
                    "errors": e.errors,
                    "transient_failures": e.transient_failures,
                    "restarts": e.restarts,
                    "last_error": e.last_error,
                }
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """Let every consumer finish its batch, then close the store."""
        self._stop.set()
        self._running = False
        for r in self.runs.values():
            r.stop.set()
        if self._queries is not None:
            self._queries.stop()
        if self._supervisor is not None:
            self._supervisor.join(timeout)
            self._supervisor = None
        for r in self.runs.values():
            for t in (r.thread, r.embed_thread):
                if t is not None:
                    t.join(timeout)
        if self._store is not None:
            self._store.close()
        if self.late is not None and self.late.cache is not None:
            self.late.cache.close()
