"""The query process of one tree for ``memstream bench reads`` (``memstream.bench.reads``):
run by path (``runpy.run_path``) with that tree's ``memstream`` first on the path, so it
imports only what every tree measured has (the pipeline, the query protocol, the bench's
prefetch workload), never the bench's own newer modules. It reads one command a line on
stdin (start, throughput, stages, floor, quit) and answers one JSON line each."""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from typing import Any

from memstream.core import Settings
from memstream.producers import EventLog, redis_client

__all__ = ["CANDIDATES", "CHILD", "STAGES", "STAGE_BATCH"]

STAGE_BATCH = 8
CANDIDATES = 50  # as the searcher's candidates per side
CHILD = _CHILD = "__memstream_reads_child__"
# the late interaction's parts (``memstream.query.late``): the question's model call, the passages'
# stored token vectors (read, unpacked, or computed when not stored), and the rest of it (maxsim, the order)
LATE_STAGES = ("late_query", "late_passages", "late_rest")
STAGES = ("embed", "dense", "keyword", "searches", "facts", *LATE_STAGES, "late_computed", "per_hit", "handler")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Timed:
    """CPU seconds spent inside wrapped calls, per stage (process CPU: the engines' own
    threads count), each call's own: a wrapped call inside another counts for its stage and
    not for the outer one. Wraps attributes of objects; ``undo`` puts them back."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self._undo: list[tuple[Any, str, Any, bool]] = []
        self._inner: list[float] = []  # per open call: the CPU of the wrapped calls inside it

    def wrap(self, obj: Any, name: str, stage: Any) -> None:
        if obj is None or not hasattr(obj, name):
            return
        had = name in vars(obj) if hasattr(obj, "__dict__") else False
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            which = stage(*args, **kwargs) if callable(stage) else stage
            self._inner.append(0.0)
            t = _cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                took = _cpu() - t
                self.cpu[which] = self.cpu.get(which, 0.0) + took - self._inner.pop()
                if self._inner:
                    self._inner[-1] += took

        setattr(obj, name, timed)
        self._undo.append((obj, name, inner, had))

    def undo(self) -> None:
        for obj, name, inner, had in reversed(self._undo):
            if had:
                setattr(obj, name, inner)
            else:
                delattr(obj, name)
        self._undo.clear()


class _Served:
    """What a serving server's threads spend, counted by wrapping its methods (any tree's
    ``QueryServer``): the batches taken (how many requests each ``handle_batch`` got) and the
    serving threads' own CPU (``time.thread_time``) answering them and taking them (``_take``:
    the BLMPOP); the process's other CPU (the store's native threads, the idle lane) is the rest."""

    def __init__(self, server: Any) -> None:
        self.sizes: dict[int, int] = {}
        self.cpu = {"handle": 0.0, "take": 0.0}
        self._lock = threading.Lock()
        self._wrap(server, "handle_batch", "handle")
        self._wrap(server, "_take", "take")

    def _wrap(self, server: Any, name: str, stage: str) -> None:
        inner = getattr(server, name, None)
        if inner is None:
            return

        def counted(*args: Any, **kwargs: Any) -> Any:
            t = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                took = time.thread_time() - t
                with self._lock:
                    self.cpu[stage] += took
                    if stage == "handle" and len(args) >= 3:
                        self.sizes[len(args[2])] = self.sizes.get(len(args[2]), 0) + 1

        setattr(server, name, counted)

    def figures(self) -> dict[str, Any]:
        return {
            "batch_sizes": dict(sorted(self.sizes.items())),
            "handle_cpu_s": self.cpu["handle"],
            "take_cpu_s": self.cpu["take"],
        }


def _search_stage(*args: Any, **kwargs: Any) -> str:
    return "dense" if kwargs.get("dense") is not None else "keyword"


class _Child:
    """The query process of one tree: loads the pipeline, serves, times stages, the floor."""

    def __init__(self, url: str, prefix: str, home: str, embedder: str, replica: int = 0) -> None:
        from memstream.workers import Pipeline, PipelineConfig

        self.settings = Settings.load(
            home=home, redis_url=url, autostart=False, embedder=embedder, tenant="bench", stream_prefix=prefix
        )
        self.client = redis_client(url, timeout=30)
        log = EventLog(self.client, prefix, self.settings.shards)
        # a read replica (``replica`` 1 or more: this tree's, never the tree before's) has its own store and groups
        config = (
            PipelineConfig(embedder=embedder, consumer="bench", replica=replica)
            if replica
            else PipelineConfig(embedder=embedder, consumer="bench")
        )
        self.pipeline = Pipeline(self.settings, log, config)
        self.server: Any = None
        self.cpu_at = 0.0
        self.peak: Any = None  # the rounds' peak RSS (``_serving_peak``)

    def load(self) -> dict[str, Any]:
        out = self._project()
        out["late_interaction"] = getattr(self.pipeline.reads, "late", None) is not None  # this tree's, as it runs
        self._serving_peak()
        return out

    def _project(self) -> dict[str, Any]:
        t = time.perf_counter()
        self.pipeline.drain()
        out: dict[str, Any] = {"projected_s": round(time.perf_counter() - t, 1)}
        try:  # a tree whose large scopes get an index in the background: built before the rounds
            from memstream.projections import indexer
        except ImportError:  # a tree before the index
            return out
        t = time.perf_counter()
        self.stages(["warm up", "the dense copy"])
        indexer().idle(600)
        out["indexed_s"] = round(time.perf_counter() - t, 1)
        return out

    def _serving_peak(self) -> None:
        """The peak RSS from here on (the rounds), not the projection's: a tree that embedded
        its memories and one that read their vectors from the first tree's file then compare
        alike (the ingest bench's ``Phase``: VmHWM reset, else the process's own peak)."""
        try:
            from memstream.bench.ingest.memory import Phase
        except ImportError:  # a tree before it: the process's peak
            return
        self.peak = Phase().__enter__()

    def serve(self, threads: int) -> dict[str, Any]:
        from memstream.query import QueryServer

        queries = self.pipeline.queries
        extra = {k: getattr(queries, k) for k in ("batched", "hurried", "hurry_after_s") if hasattr(queries, k)}
        self.server = QueryServer(self.client, self.settings.stream_prefix, queries.handlers, threads=threads, **extra)
        self.served = _Served(self.server)
        self.server.start()
        self.cpu_at = _cpu()
        return {}

    def stop(self) -> dict[str, Any]:
        cpu = _cpu() - self.cpu_at
        self.server.stop()
        counts = self.server.counts
        return {
            "cpu_s": cpu,
            "answered": counts.get("answered", 0),
            "late_shed": counts.get("late_shed", 0),
            **self.served.figures(),
        }

    def _instrumented(self) -> _Timed:
        timed = _Timed()
        reads = self.pipeline.reads
        searcher = reads.searcher
        embedders = {id(searcher.embedder): searcher.embedder}
        for name in ("turns", "memories"):
            try:
                embedder = reads.versions.reader(name)[1]
            except Exception:  # noqa: BLE001  no such collection in this tree's store
                continue
            embedders[id(embedder)] = embedder
        for embedder in embedders.values():
            timed.wrap(embedder, "embed", "embed")
        store = self.pipeline.store
        timed.wrap(store, "search", _search_stage)
        timed.wrap(store, "search_many", "batched")  # dense and keyword searches in one engine call
        timed.wrap(reads.facts, "facts_of_events", "facts")
        late = getattr(reads, "late", None)  # a tree with the late interaction on
        if late is not None:
            from memstream.query import ops  # its module: late_order is wrapped where ReadOps reads it

            timed.wrap(ops, "late_order", "late_rest")
            timed.wrap(late, "vectors", "late_passages")
            timed.wrap(late.scorer(), "queries", "late_query")
        return timed

    def _late_computed(self) -> int:
        """Passages whose token vectors the query side computed so far (not stored)."""
        late = getattr(self.pipeline.reads, "late", None)
        stats = getattr(late, "stats", None)
        return int(stats().get("computed", 0)) if stats is not None else 0

    def stages(self, questions: list[str]) -> dict[str, Any]:
        reads = self.pipeline.reads
        request = {"op": "recall", "tenant": "bench", "agent": "bench-agent", "session": "s", "k": 12}
        handlers = reads.handlers()
        if isinstance(handlers, dict):  # a tree before the typed protocol: its handlers take dicts
            handler = handlers["recall"]

            def asking(q: str) -> Any:
                return {**request, "query": q}
        else:  # the typed protocol: each handler takes its op's request Struct
            import msgspec

            from memstream.query import RecallRequest

            handler = handlers.recall

            def asking(q: str) -> Any:
                return msgspec.convert({**request, "query": q}, RecallRequest)

        many = getattr(reads, "recall_many", None)
        out: dict[str, Any] = {}
        half = len(questions) // 2  # each mode its own questions: none answered by the cache
        for mode, asked in (("lone", questions[:half]), ("batch", questions[half:])):
            if mode == "batch" and many is None:
                continue
            timed = self._instrumented()
            computed = self._late_computed()
            started = _cpu()
            try:
                if mode == "lone":
                    for q in asked:
                        handler(asking(q))
                elif many is not None:
                    for i in range(0, len(asked), STAGE_BATCH):
                        many([asking(q) for q in asked[i : i + STAGE_BATCH]])
            finally:
                timed.undo()
            total = _cpu() - started
            n = len(asked)
            named = ("embed", "dense", "keyword", "batched", "facts", *LATE_STAGES)
            row = {stage: 1000 * timed.cpu.get(stage, 0.0) / n for stage in named}
            row["searches"] = row["dense"] + row["keyword"] + row.pop("batched")
            row["late_computed"] = (self._late_computed() - computed) / n  # passages a recall encoded
            row["handler"] = 1000 * total / n
            row["per_hit"] = row["handler"] - sum(row[s] for s in ("embed", "searches", "facts", *LATE_STAGES))
            out[mode] = row
        return out

    def floor(self, questions: list[str]) -> dict[str, Any]:
        """The least code doing a recall's work, in this process: embed, an exact dense
        top-50 and a keyword top-50 in numpy over the agent's points, one Redis round trip."""
        import numpy as np

        from memstream.projections import Filter, sparse_vector

        store = self.pipeline.store
        collection, embedder = self.pipeline.reads.versions.reader("memories")
        ids: list[str] = []
        offset = None
        while True:
            page, offset = store.scroll(collection, Filter(tenant="bench", agent="bench-agent"), limit=1024, offset=offset)
            ids += [p.id for p in page]
            if offset is None:
                break
        points = store.retrieve(collection, ids, with_vectors=True)
        matrix = np.asarray([p.dense for p in points if p.dense is not None], dtype=np.float32)
        postings: dict[int, tuple[list[int], list[float]]] = {}
        for row, p in enumerate(points):
            for token, weight in zip(*(p.sparse or ([], []))):
                entry = postings.setdefault(int(token), ([], []))
                entry[0].append(row)
                entry[1].append(float(weight))
        index = {t: (np.asarray(r), np.asarray(w, dtype=np.float32)) for t, (r, w) in postings.items()}
        n = len(points)

        def search(dense: Any, query: str) -> None:
            scores = matrix @ dense
            np.argpartition(-scores, min(CANDIDATES, n - 1))[:CANDIDATES]
            keyword = np.zeros(n, dtype=np.float32)
            tokens, weights = sparse_vector(query)
            for t, w in zip(tokens, weights):
                hit = index.get(int(t))
                if hit is not None:
                    keyword[hit[0]] += w * hit[1]
            np.argpartition(-keyword, min(CANDIDATES, n - 1))[:CANDIDATES]

        embed = embedder
        while hasattr(embed, "inner"):  # the model itself, not its cache
            embed = embed.inner
        embed.embed(["warm up"])
        out: dict[str, Any] = {"points": n}
        started = _cpu()
        for q in questions:
            search(np.asarray(embed.embed([q])[0], dtype=np.float32), q)
            self.client.ping()
        out["lone_ms"] = 1000 * (_cpu() - started) / len(questions)
        started = _cpu()
        for i in range(0, len(questions), STAGE_BATCH):
            group = questions[i : i + STAGE_BATCH]
            vectors = np.asarray(embed.embed(group), dtype=np.float32)
            for v, q in zip(vectors, group):
                search(v, q)
            self.client.ping()
        out["batch_ms"] = 1000 * (_cpu() - started) / len(questions)
        return out

    def rss_mb(self) -> float:
        if self.peak is None:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.peak.__exit__()
        return float(self.peak.peak_mb)


def _child_main() -> None:  # pragma: no cover - runs in the child process
    """Commands on stdin (one JSON object a line), answers on stdout (one a line)."""
    from memstream.core import logs

    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed goes to the log, not the answers
    logs.configure("WARNING", stream=sys.stderr)  # the service's level: no debug line in what is measured
    config = json.loads(sys.stdin.readline())
    child = _Child(config["url"], config["prefix"], config["home"], config["embedder"], int(config.get("replica") or 0))
    out.write(json.dumps({"ok": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            what = cmd["cmd"]
            if what == "load":
                answer = child.load()
            elif what == "serve":
                answer = child.serve(int(cmd["threads"]))
            elif what == "stop":
                answer = child.stop()
            elif what == "stages":
                answer = child.stages(cmd["questions"])
            elif what == "floor":
                answer = child.floor(cmd["questions"])
            elif what == "quit":
                child.pipeline.stop()
                out.write(json.dumps({"rss_mb": child.rss_mb()}) + "\n")
                out.flush()
                return
            else:
                answer = {"error": f"unknown command {what!r}"}
        except Exception as exc:  # noqa: BLE001  said to the parent, which fails the run with it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == _CHILD:  # pragma: no cover - the query process of one tree (see bench.reads_tree.QueryProcess)
    _child_main()
