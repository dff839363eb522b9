"""``memstream bench reads``: what one recall costs the query process, stage by stage, how
many recalls a second one query process answers, and the floor of the same work.

One run, on this machine:

* A real Valkey (``ValkeyProcess``, temp dir). ``memories`` memories of one agent
  (generated sentences, as ``memstream bench prefetch`` writes them), plus noise of another
  agent and another tenant, are appended to the log of each tree measured (its own key
  prefix: the same events, the same seed).
* Each tree's query process is a child process of its own (``python`` with that tree's
  ``memstream`` first on the path, running this file): the real pipeline of the embedded
  service (qdrant-edge in a temp ``MEMSTREAM_HOME``) projects the log, then serves with
  its ``QueryServer``. ``--against PATH`` adds another checkout (e.g. the tree before a
  change) measured the same way in the same run; the trees alternate in every round.
* **Throughput:** ``clients`` callers in ``processes`` other processes (spawned) send
  ``recall`` requests back to back (``ask``, the call the provider makes) for ``seconds``
  seconds. Reported: recalls answered per second, round trip p50/p95, errors, and the query
  process's CPU per recall (``/proc``-free: the child's own ``getrusage``).
* **Stages:** the same child answers ``stage_questions`` recalls by calling its recall
  handler directly (no transport), one question at a time, with the embedder, the store's
  searches and the facts lookup timed by wrappers: CPU per recall in the embedding, the
  searches (dense and keyword apart, or together when the tree sends them in one call,
  ``VectorStore.search_many``), the facts lookup, and the rest of the handler (the
  per-hit Python work: ids, payloads, ranking). ``transport`` is the CPU per recall of the
  throughput run minus the lone handler's: the Redis round trips, envelopes, JSON, threads
  (below 0 when the server's batches save more than the transport costs). A tree whose
  read side answers a batch (``ReadOps.recall_many``) also answers as many other recalls
  in batches of ``STAGE_BATCH``. Every mode (and the floor) asks its own questions, so that
  no embedding cache answers one.
* **Floor:** in the same child, the least code doing the same work: the question embedded
  by the same model (alone, and ``STAGE_BATCH`` at once), an exact dense top-``CANDIDATES``
  in numpy over the agent's vectors, a keyword top-``CANDIDATES`` from an inverted index in
  numpy, and one Redis round trip.

Each query process runs with one BLAS thread (``OPENBLAS_NUM_THREADS=1``, both trees alike):
OpenBLAS's spinning threads otherwise count as CPU of whatever uses numpy.

Questions are fresh by default: every request is a new sentence (a subject, a verb, an
object, a time and a ticket number drawn at random), as a prefetch is a new user message
every turn, so an embedding cache does not answer them. ``cached`` asks only the 60
questions ``bench prefetch`` asks, which the embedding cache answers after the first round
(labelled ``questions: cached``).

The figures are medians over ``rounds`` rounds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.prefetch import _OBJECTS, _SUBJECTS, _WHEN, _append, _question
from memstream.bench.stats import latency_summary, machine
from memstream.core import Settings, argtypes
from memstream.producers import EventLog, redis_client
from memstream.service import ValkeyProcess

__all__ = ["add_arguments", "run", "reads_bench", "format_reads", "fresh_question"]

STAGE_BATCH = 8
CANDIDATES = 50  # as the searcher's candidates per side
_CHILD = "__memstream_reads_child__"
_STAGES = ("embed", "dense", "keyword", "searches", "facts", "per_hit", "handler")


def fresh_question(rng: random.Random) -> str:
    """A question nobody asked before (in practice): a subject, verb, object, time and number."""
    when = rng.choice(_WHEN).format(n=rng.randrange(1, 10**6))
    verb = rng.choice(["run on", "depend on", "deploy to", "use", "still need", "talk to"])
    return f"Does {rng.choice(_SUBJECTS)} {verb} {rng.choice(_OBJECTS)} {when}, ticket {rng.randrange(10**7)}?"


def _ask_question(rng: random.Random, cached: bool) -> str:
    return _question(rng) if cached else fresh_question(rng)


# -- the callers (spawned processes) ------------------------------------------------------
def _caller(
    url: str, prefix: str, threads: int, seconds: float, seed: int, cached: bool, out: Any
) -> None:  # pragma: no cover - runs in a spawned process
    """``threads`` callers sending recall back to back until ``seconds`` pass; puts
    (round trips ms, errors) on ``out``."""
    from memstream.query import QueryTimeout, ask

    client = redis_client(url, timeout=30)
    trips: list[float] = []
    errors = 0
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def call(i: int) -> None:
        nonlocal errors
        local = random.Random(seed * 1000 + i)
        mine: list[float] = []
        failed = 0
        while time.monotonic() < end:
            request = {
                "op": "recall",
                "tenant": "bench",
                "agent": "bench-agent",
                "session": f"s{i}",
                "k": 12,
                "query": _ask_question(local, cached),
            }
            t = time.perf_counter()
            try:
                answer = ask(client, prefix, request, timeout=10)
            except QueryTimeout:
                failed += 1
                continue
            mine.append((time.perf_counter() - t) * 1000)
            if "error" in answer:
                failed += 1
        with lock:
            trips.extend(mine)
            errors += failed

    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((trips, errors))


# -- the query process under test (a child running this file on its tree's path) --------------
def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Timed:
    """CPU seconds spent inside wrapped calls, per stage (process CPU: the engines' own
    threads count). Wraps attributes of objects; ``undo`` puts them back."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self._undo: list[tuple[Any, str, Any, bool]] = []
        self._depth = 0

    def wrap(self, obj: Any, name: str, stage: Any) -> None:
        if obj is None or not hasattr(obj, name):
            return
        had = name in vars(obj) if hasattr(obj, "__dict__") else False
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            which = stage(*args, **kwargs) if callable(stage) else stage
            if self._depth:  # inside another timed call: counted there
                return inner(*args, **kwargs)
            self._depth += 1
            t = _cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                self.cpu[which] = self.cpu.get(which, 0.0) + _cpu() - t
                self._depth -= 1

        setattr(obj, name, timed)
        self._undo.append((obj, name, inner, had))

    def undo(self) -> None:
        for obj, name, inner, had in reversed(self._undo):
            if had:
                setattr(obj, name, inner)
            else:
                delattr(obj, name)
        self._undo.clear()


def _search_stage(*args: Any, **kwargs: Any) -> str:
    return "dense" if kwargs.get("dense") is not None else "keyword"


class _Child:
    """The query process of one tree: loads the pipeline, serves, times stages, the floor."""

    def __init__(self, url: str, prefix: str, home: str, embedder: str) -> None:
        from memstream.workers import Pipeline, PipelineConfig

        self.settings = Settings.load(
            home=home, redis_url=url, autostart=False, embedder=embedder, tenant="bench", stream_prefix=prefix
        )
        self.client = redis_client(url, timeout=30)
        log = EventLog(self.client, prefix, self.settings.shards)
        self.pipeline = Pipeline(self.settings, log, PipelineConfig(embedder=embedder, consumer="bench"))
        self.server: Any = None
        self.cpu_at = 0.0

    def load(self) -> dict[str, Any]:
        t = time.perf_counter()
        self.pipeline.drain()
        return {"projected_s": round(time.perf_counter() - t, 1)}

    def serve(self, threads: int) -> dict[str, Any]:
        from memstream.query import QueryServer

        queries = self.pipeline.queries
        extra = {k: getattr(queries, k) for k in ("batched",) if hasattr(queries, k)}
        self.server = QueryServer(self.client, self.settings.stream_prefix, queries.handlers, threads=threads, **extra).start()
        self.cpu_at = _cpu()
        return {}

    def stop(self) -> dict[str, Any]:
        cpu = _cpu() - self.cpu_at
        self.server.stop()
        return {"cpu_s": cpu, "answered": self.server.counts.get("answered", 0)}

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
        return timed

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

            from memstream.query.protocol import RecallRequest

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
            row = {stage: 1000 * timed.cpu.get(stage, 0.0) / n for stage in ("embed", "dense", "keyword", "batched", "facts")}
            row["searches"] = row["dense"] + row["keyword"] + row.pop("batched")
            row["handler"] = 1000 * total / n
            row["per_hit"] = row["handler"] - row["embed"] - row["searches"] - row["facts"]
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
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_main() -> None:  # pragma: no cover - runs in the child process
    """Commands on stdin (one JSON object a line), answers on stdout (one a line)."""
    from memstream.core import logs

    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed goes to the log, not the answers
    logs.configure("WARNING", stream=sys.stderr)  # the service's level: no debug line in what is measured
    config = json.loads(sys.stdin.readline())
    child = _Child(config["url"], config["prefix"], config["home"], config["embedder"])
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


class _Tree:
    """The parent's handle on one tree's query process."""

    def __init__(self, label: str, path: Path, url: str, prefix: str, home: Path, embedder: str) -> None:
        self.label = label
        self.prefix = prefix
        boot = f"import runpy, sys; sys.path.insert(0, sys.argv[1]); runpy.run_path(sys.argv[2], run_name={_CHILD!r})"
        # one BLAS thread: OpenBLAS's idle threads spin, and on a shared 2-CPU machine that
        # spin is counted as the process's CPU (the floor's numpy scan doubled with it)
        env = {**os.environ, "PYTHONPATH": str(path), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        env.pop("MEMSTREAM_HOME", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", boot, str(path), str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.ask({"url": url, "prefix": prefix, "home": str(home), "embedder": embedder})

    def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the query process of {self.label} ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.label}: {answer['error']}")
        return answer

    def close(self) -> dict[str, Any]:
        try:
            return self.ask({"cmd": "quit"})
        except (RuntimeError, OSError, ValueError):
            return {}
        finally:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# -- the run ------------------------------------------------------------------------------
def reads_bench(
    memories: int = 10_000,
    threads: int = 2,
    clients: int = 16,
    processes: int = 2,
    seconds: float = 8.0,
    rounds: int = 3,
    embedder: str = "hash",
    cached: bool = False,
    against: str = "",
    stage_questions: int = 200,
    seed: int = 7,
) -> dict[str, Any]:
    """The figures of one run (JSON-ready): per tree, medians over ``rounds``."""
    this = Path(__file__).resolve().parents[2]
    trees = [("this", this)] + ([("against", Path(against).resolve())] if against else [])
    for _, path in trees:
        if not (path / "memstream" / "query" / "server.py").exists():
            raise ValueError(f"{path} is not a memstream checkout (no memstream/query/server.py)")
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-reads-"))
    server = ValkeyProcess(root / "valkey").start()
    ctx = mp.get_context("spawn")
    out: dict[str, Any] = {
        "benchmark": "reads",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": embedder,
        "questions": "cached" if cached else "fresh",
        "memories": memories,
        "threads": threads,
        "clients": clients,
        "processes": processes,
        "seconds": seconds,
        "rounds": rounds,
        "trees": {},
    }
    handles: list[_Tree] = []
    try:
        client = redis_client(server.url, timeout=30)
        for label, path in trees:
            prefix = f"bench-{label}"
            log = EventLog(client, prefix, Settings.load(redis_url=server.url, autostart=False).shards)
            rng = random.Random(seed)
            _append(log, "bench", "bench-agent", memories, rng, 0)
            _append(log, "bench", "other-agent", max(1, memories // 10), rng, 0)
            _append(log, "other-tenant", "bench-agent", max(1, memories // 10), rng, 0)
            handles.append(_Tree(label, path, server.url, prefix, root / f"home-{label}", embedder))
            out["trees"][label] = {"path": str(path), "rounds": []}
        for h in handles:
            out["trees"][h.label]["projected_s"] = h.ask({"cmd": "load"})["projected_s"]
        split = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
        qrng = random.Random(seed + 1)
        for r in range(rounds):
            order = handles if r % 2 == 0 else handles[::-1]
            for h in order:
                questions = [_ask_question(qrng, cached) for _ in range(3 * stage_questions)]
                stages = h.ask({"cmd": "stages", "questions": questions[: 2 * stage_questions]})
                floor = h.ask({"cmd": "floor", "questions": questions[2 * stage_questions :]})
                h.ask({"cmd": "serve", "threads": threads})
                results: Any = ctx.Queue()
                callers = [
                    ctx.Process(
                        target=_caller,
                        args=(server.url, h.prefix, n, seconds, seed + 100 * r + i, cached, results),
                        daemon=True,
                    )
                    for i, n in enumerate(split)
                    if n
                ]
                for c in callers:
                    c.start()
                trips: list[float] = []
                errors = 0
                for _ in callers:
                    a, e = results.get(timeout=seconds + 120)
                    trips += a
                    errors += e
                for c in callers:
                    c.join(10)
                served = h.ask({"cmd": "stop"})
                cpu_ms = 1000 * served["cpu_s"] / max(1, len(trips))
                out["trees"][h.label]["rounds"].append(
                    {
                        "recalls_per_s": len(trips) / seconds,
                        "round_trip_ms": latency_summary(trips),
                        "errors": errors,
                        "cpu_ms_per_recall": cpu_ms,
                        "transport_ms": cpu_ms - stages["lone"]["handler"],
                        "stages": stages,
                        "floor": floor,
                    }
                )
        for h in handles:
            out["trees"][h.label]["rss_mb"] = round(h.close().get("rss_mb", 0.0), 1)
    finally:
        for h in handles:
            if h.proc.poll() is None:
                h.proc.kill()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    for tree in out["trees"].values():
        tree["summary"] = _summary(tree.pop("rounds"))
    if "against" in out["trees"]:
        a, b = out["trees"]["this"]["summary"], out["trees"]["against"]["summary"]
        out["ratio"] = {
            "recalls_per_s": _ratio(a["recalls_per_s"], b["recalls_per_s"]),
            "cpu_ms_per_recall": _ratio(a["cpu_ms_per_recall"], b["cpu_ms_per_recall"]),
        }
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 3) if kept else None


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "recalls_per_s": _median([r["recalls_per_s"] for r in rows]),
        "per_round_recalls_per_s": [round(r["recalls_per_s"], 1) for r in rows],
        "round_trip_p50_ms": _median([r["round_trip_ms"]["p50"] for r in rows]),
        "round_trip_p95_ms": _median([r["round_trip_ms"]["p95"] for r in rows]),
        "errors": sum(r["errors"] for r in rows),
        "cpu_ms_per_recall": _median([r["cpu_ms_per_recall"] for r in rows]),
        "transport_ms": _median([r["transport_ms"] for r in rows]),
        "floor_lone_ms": _median([r["floor"]["lone_ms"] for r in rows]),
        "floor_batch_ms": _median([r["floor"]["batch_ms"] for r in rows]),
        "stages": {},
    }
    for mode in ("lone", "batch"):
        have = [r["stages"][mode] for r in rows if mode in r["stages"]]
        if have:
            out["stages"][mode] = {s: _median([h[s] for h in have]) for s in _STAGES}
    return out


def format_reads(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"memstream bench reads  ({r['date']}, embedder {r['embedder']}, questions: {r['questions']}, "
        f"{r['memories']:,} memories, {r['clients']} callers in {r['processes']} processes, {r['threads']} server "
        f"threads, {r['seconds']} s x {r['rounds']} rounds; {m.get('cpus')} CPUs, load at start {m.get('loadavg_at_start')})",
        "tree      recalls/s  rt p50  rt p95  errors  cpu ms/recall  floor lone  floor batch  rss MB",
    ]
    for label, tree in r["trees"].items():
        s = tree["summary"]
        lines.append(
            f"{label:<8}  {s['recalls_per_s'] or 0:>9.1f}  {s['round_trip_p50_ms'] or 0:>6.1f}  "
            f"{s['round_trip_p95_ms'] or 0:>6.1f}  {s['errors']:>6}  {s['cpu_ms_per_recall'] or 0:>13.2f}  "
            f"{s['floor_lone_ms'] or 0:>10.2f}  {s['floor_batch_ms'] or 0:>11.2f}  {tree.get('rss_mb', 0):>6.0f}"
        )
    lines.append("CPU ms per recall by stage (handler called directly; transport = served minus handler):")
    lines.append("tree      mode   embed  searches (dense  keyword)  facts  per-hit  handler  transport")
    for label, tree in r["trees"].items():
        s = tree["summary"]
        for mode, st in s["stages"].items():
            lines.append(
                f"{label:<8}  {mode:<5}  {st['embed']:>5.2f}  {st['searches']:>8.2f}  "
                + (f"({st['dense']:>5.2f}  {st['keyword']:>7.2f})" if st["dense"] or st["keyword"] else "(one call)      ")
                + f"  {st['facts']:>5.2f}  {st['per_hit']:>7.2f}  {st['handler']:>7.2f}  "
                + (f"{s['transport_ms']:>9.2f}" if mode == "lone" and s["transport_ms"] is not None else "")
            )
    if "ratio" in r:
        lines.append(
            f"this / against: recalls/s x{r['ratio']['recalls_per_s']}, CPU per recall x{r['ratio']['cpu_ms_per_recall']}"
        )
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memstream bench reads``."""
    parser.add_argument(
        "--memories",
        "--events",
        dest="memories",
        type=argtypes.int_between(1, 10_000_000),
        default=10_000,
        help="memories of the asking agent (default 10000)",
    )
    parser.add_argument("--embedder", default="hash", help="the pipeline's embedder (default hash; e.g. bge-small)")
    parser.add_argument(
        "--cached", action="store_true", help="ask the 60 questions of bench prefetch over and over (the cache answers)"
    )
    parser.add_argument("--against", default="", metavar="PATH", help="another checkout measured in the same run")
    parser.add_argument("--threads", type=argtypes.int_between(1, 64), default=2, help="query server threads (default 2)")
    parser.add_argument(
        "--clients", type=argtypes.int_between(1, 4096), default=16, help="callers sending recall back to back (default 16)"
    )
    parser.add_argument(
        "--processes", type=argtypes.int_between(1, 64), default=2, help="processes the callers are spread over (default 2)"
    )
    parser.add_argument("--seconds", type=argtypes.seconds, default=8.0, help="seconds of calls per tree and round (default 8)")
    parser.add_argument(
        "--rounds",
        "--runs",
        dest="rounds",
        type=argtypes.int_between(1, 1000),
        default=3,
        help="rounds, the trees alternating; one round measures each tree once (default 3)",
    )
    parser.add_argument(
        "--stage-questions",
        type=argtypes.int_between(1, 100_000),
        default=200,
        help="recalls timed by stage per round (default 200)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the bench with the parsed options; print its table (or JSON)."""
    result = reads_bench(
        memories=args.memories,
        threads=args.threads,
        clients=args.clients,
        processes=args.processes,
        seconds=args.seconds,
        rounds=args.rounds,
        embedder=args.embedder,
        cached=args.cached,
        against=args.against,
        stage_questions=args.stage_questions,
    )
    return show(args, result, format_reads(result))


if __name__ == _CHILD:  # pragma: no cover - the query process of one tree (see _Tree)
    _child_main()
