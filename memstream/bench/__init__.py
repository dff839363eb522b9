"""bench: every benchmark of ``memstream bench NAME``, one module each, and what they share
(``stats``: percentiles, sign tests, the machine's description; ``command``: printing and
failing). Each benchmark module has ``add_arguments(parser)`` and ``run(args) -> int``; the
command line loads a benchmark's module only when it is chosen (``BENCHMARKS`` names them).
The real servers and the browser that benchmarks and tests both start are in
``memstream.bench.testbed``."""

from memstream.bench.command import BenchError

__all__ = ["BENCHMARKS", "BenchError"]

# name -> (module, one line for `memstream bench --help`)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "hotpath": ("memstream.bench.hotpath", "what each hook costs the agent with Redis up, down and reporting off"),
    "ingest": ("memstream.bench.ingest", "pipeline throughput against the raw stages, memory, and freshness"),
    "prefetch": ("memstream.bench.prefetch", "prefetch return time and fresh query latency at 10k and 100k memories"),
    "locomo": ("memstream.bench.locomo", "LoCoMo evidence recall through the real pipeline and query path"),
    "queries": ("memstream.bench.queries", "the query transport's round trip against rq jobs (needs memstream[bench])"),
    "chaos": ("memstream.bench.chaos", "agents, workers and Valkey killed and restarted: nothing lost or duplicated"),
    "text": ("memstream.bench.text", "the text stages on adversarial inputs: linear time"),
    "archive": ("memstream.bench.archive", "Redis memory freed by archiving, the archive's size and throughput"),
    "replay": ("memstream.bench.replay", "a replay's throughput over the log"),
    "import": ("memstream.bench.imports", "`memstream import hermes` of a synthetic state.db: messages/s"),
    "metrics": ("memstream.bench.metrics", "what the metrics cost the pipeline, and a scrape of 1,000 agents' reports"),
    "reads": ("memstream.bench.reads", "CPU per recall by stage with fresh questions, recalls/s and the floor of the same work"),
    "fleet": ("memstream.bench.fleet", "many agents on one service: hook cost, freshness, lag, the knee"),
    "dashboard": ("memstream.bench.dashboard", "the dashboard's first full render in headless Chromium"),
    "failover": ("memstream.bench.failover", "a primary with replicas and Sentinels killed or switched: recovery, losses"),
    "wait": ("memstream.bench.wait", "what WAIT 1 costs the shipper per batch"),
    "crypto": ("memstream.bench.crypto", "what per-tenant encryption of event bodies would cost"),
    "redaction": ("memstream.bench.redaction", "secret redaction's recall and false changes on the labelled corpus, and speed"),
    "cluster": ("memstream.bench.cluster", "appends/s into one Valkey and into Valkey Clusters"),
    "noisy": ("memstream.bench.noisy", "one tenant's flood against another tenant's recall latency"),
    "stages": ("memstream.bench.stages", "the text stages' throughput on synthetic (and LoCoMo) turns, as JSON lines"),
    "store": ("memstream.bench.store", "vector store search latency: filtered dense, sparse and hybrid, as JSON lines"),
    "hnsw": ("memstream.bench.hnsw", "a large scope's dense search through its HNSW index against the exact pass: CPU, recall"),
    "paraphrase": ("memstream.bench.paraphrase", "a fleet's paraphrases of a few facts in recall: distinct facts, tokens"),
    "idle": ("memstream.bench.idle", "the resident memory of the embedded default at rest, per process"),
    "rerank": (
        "memstream.bench.rerank",
        "what the cross-encoder costs a reranked search (LoCoMo candidates), by batch size, threads and token cap",
    ),
    "rerank-fit": (
        "memstream.bench.rerank_fit",
        "the rerank's learned order fit again from a LoCoMo grid's stored candidates, left out one conversation at a time",
    ),
}
