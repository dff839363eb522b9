"""Configuration: environment variables over an optional JSON file over defaults.

One type holds it all: each field of ``Settings`` carries its default, its bounds and its
meaning (``msgspec.Meta``). Its environment variable is ``MEMSTREAM_`` and the field's name
in capitals; ``$HERMES_HOME/memstream.json`` uses the field names. ``OPTIONS`` lists them,
derived from the type; the documentation's configuration page (docs/reference/configuration.md) is
generated from it (docs/gen/reference.py).
Below the entry points (the command line, the service, the benchmarks, the Hermes
installer) nothing else in memstream reads the environment: the other layers receive
these values.

Guarantees: ``Settings.load()`` never touches the network and never raises, whatever the
file and the environment hold: a missing or unreadable file, a value of the wrong type,
a number out of its bounds (or not finite) is reported in ``Settings.problems`` and the
default is used. A key of the file or a ``MEMSTREAM_*`` variable that names no setting
is reported there too, with the closest setting's name (its value is never shown). A
malformed URL setting (``redis_url``, ``qdrant_url``, ``embed_url``) is reported there and
kept as given (falling back to the embedded service would silently split the log);
connecting to it fails with a clear error; a malformed ``metrics_addr`` is reported and
the default used. TLS files set beside a URL that is not ``rediss://`` (where nothing
would use them), or a key without its certificate, are reported too. ``Settings.public()`` and every problem message
show URLs through ``mask_url`` (no password or query-string token is shown) and a secret
setting (``embed_api_key``) as ``***``. ``Settings.sources`` says where each value that is
not a default came from (a variable's name, the file's path, or ``given``), never the value.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, get_args, get_origin

import msgspec
from msgspec import Meta

__all__ = [
    "Settings",
    "OPTIONS",
    "Option",
    "OTHER_VARIABLES",
    "ENV_PREFIX",
    "LATE_RERANK_MODES",
    "LOCAL_EMBEDDERS",
    "config_file_for",
    "mask_url",
    "usable_cpus",
]

ENV_PREFIX = "MEMSTREAM_"
LATE_RERANK_MODES = ("auto", "on", "off")  # the values of ``late_rerank``
# the embedders that run a model in-process: ``embed_threads`` applies, ``late_rerank=auto`` is on
LOCAL_EMBEDDERS = ("bge-small", "colbert-small", "onnx-minilm")
_NAME_MAX = 256  # tenant, app, stream prefix, worker index: characters
# a name: 1 to _NAME_MAX printable characters, not all spaces (printable: checked in validated())
_Name = Annotated[str, Meta(min_length=1, max_length=_NAME_MAX)]
_SECRET = {"writeOnly": True}  # JSON Schema's mark of a value that is set but never shown


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of memstream; ``Settings.load()`` reads them (see the module doc)."""

    redis_url: Annotated[
        str,
        Meta(
            description=(
                "Redis/Valkey URL of a shared server, of the Sentinels that watch it "
                "(`redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db]`), or of a Redis "
                "Cluster (`redis+cluster://[[user]:password@]host[:port][,host[:port]...]`: the prefix becomes a hash "
                "tag); see docs/ha.md. Empty: the embedded Valkey of `memstream up`."
            )
        ),
    ] = ""
    redis_tls_ca_file: Annotated[
        str,
        Meta(
            description=(
                "PEM file of the CA(s) a `rediss://` server's certificate must chain to. Empty: the system's trusted CAs."
            )
        ),
    ] = ""
    redis_tls_cert_file: Annotated[
        str,
        Meta(
            description=(
                "PEM file of the client certificate presented to a `rediss://` server that asks for one "
                "(`tls-auth-clients`); its key in `MEMSTREAM_REDIS_TLS_KEY_FILE`, or in the same file."
            )
        ),
    ] = ""
    redis_tls_key_file: Annotated[
        str,
        Meta(
            description=(
                "PEM file of the client certificate's private key (owner-only). Empty: the key is in the certificate's file."
            )
        ),
    ] = ""
    redis_tls_check_hostname: Annotated[
        bool,
        Meta(
            description=(
                "Whether a `rediss://` server's certificate must name the URL's host. Off only for a server "
                "reached by an address its certificate does not name (the CA is still checked)."
            )
        ),
    ] = True
    tenant: Annotated[_Name, Meta(description=("Tenant every event of this installation belongs to."))] = "default"
    home: Annotated[Path, Meta(description=("Data directory: spool, embedded Valkey data, run file."))] = Path("~/.memstream")
    archive_dir: Annotated[
        str,
        Meta(
            description=(
                "Directory of the archive, the event log's cold part in compressed files (`memstream archive`); "
                "any host may mount it to read the whole log. Empty: `$MEMSTREAM_HOME/archive`."
            )
        ),
    ] = ""
    app: Annotated[_Name, Meta(description=("Application name recorded in every event's scope."))] = "hermes"
    stream_prefix: Annotated[
        _Name,
        Meta(
            description=("Prefix of every Redis key memstream uses. On a Redis Cluster it is used as a hash tag (`{memstream}`).")
        ),
    ] = "memstream"
    shards: Annotated[
        int,
        Meta(
            ge=1,
            le=1024,
            description=("Number of event streams; an agent's events always go to the same one. Fixed for the life of a log."),
        ),
    ] = 1
    spool_max_bytes: Annotated[
        int,
        Meta(
            ge=0,
            le=1 << 50,
            description=(
                "Bound on the local spool's unshipped bytes, per agent process: what it appended plus the "
                "dead processes' segments it adopted. Past it appends are refused, counted (`provider.stats()`, "
                "the shipper's log) and logged as `spool.full`."
            ),
        ),
    ] = 1 << 30
    spool_fsync: Annotated[
        str,
        Meta(
            description=(
                "Power-loss durability of the spool: `never`, `always` (fsync in the hook: slow), or seconds "
                "between fsyncs by the shipper thread."
            )
        ),
    ] = "1.0"
    max_text_bytes: Annotated[
        int,
        Meta(
            ge=64,
            le=1 << 30,
            description=(  # 64: room for the clip mark
                "Text fields longer than this (UTF-8 bytes) are clipped, counted and flagged in the event."
            ),
        ),
    ] = 256 * 1024
    ship_batch: Annotated[
        int,
        Meta(
            ge=1,
            le=100_000,
            description=(
                "Events per shipped batch (one atomic script call). The shipper hands the interpreter back to "
                "the agent's threads between batches: a batch's work is what a hook may wait for."
            ),
        ),
    ] = 32
    ship_replicas: Annotated[
        int,
        Meta(
            ge=0,
            le=100,
            description=(
                "Replicas that must confirm each shipped batch (Redis `WAIT`) before the shipper deletes it from "
                "the spool: a failover to a replica then loses no event (the batch is re-shipped, and the log's "
                "dedup appends it once). 0: no `WAIT` (a single server). A batch confirmed by fewer within "
                "`MEMSTREAM_SHIP_REPLICA_TIMEOUT_MS` stays in the spool, is counted (`unreplicated`) and "
                "retried later."
            ),
        ),
    ] = 0
    ship_replica_timeout_ms: Annotated[
        int,
        Meta(
            ge=1,
            le=600_000,
            description=("Milliseconds a shipped batch's `WAIT` for `MEMSTREAM_SHIP_REPLICAS` replicas may take."),
        ),
    ] = 1000
    shutdown_timeout: Annotated[
        float,
        Meta(
            ge=0.0,
            le=3600.0,
            description=(
                "Seconds the shipper goes on in the background after the last `shutdown()` of a gateway process "
                "(`shutdown()` itself waits for nothing); in Hermes's CLI and `hermes -z`, which exit right after it, "
                "the most the last `shutdown()` waits while it ships the spool and writes the last fleet report. What "
                "could not be shipped stays in the spool for the next start."
            ),
        ),
    ] = 2.0
    qdrant_url: Annotated[
        str,
        Meta(description=("Qdrant server for the projections. Empty: the embedded store (qdrant-edge) owned by `memstream up`.")),
    ] = ""
    embedder: Annotated[
        str,
        Meta(
            description=(
                "Embedder of new projection versions: `bge-small` (offline), `colbert-small` (offline: the late "
                "interaction's model makes the dense vector too, one model call a turn and a recall instead of two; "
                'BENCHMARKS.md, "One model for the dense vector and the late interaction"), `onnx-minilm` (offline, '
                "the default before bge-small), `hash` (tests), `openai[:MODEL]`, `ollama[:MODEL]`. A version keeps "
                "the embedder it was built with: changing this changes no existing version (`memstream replay NAME "
                "--embedder SPEC` does)."
            )
        ),
    ] = "bge-small"
    embed_url: Annotated[
        str,
        Meta(
            description=(
                "Base URL of a remote embedder. Empty: `https://api.openai.com/v1` (`openai`), "
                "`http://127.0.0.1:11434` (`ollama`)."
            )
        ),
    ] = ""
    embed_model: Annotated[
        str,
        Meta(
            description=(
                "Model of a remote embedder whose `MEMSTREAM_EMBEDDER` names none. Empty: "
                "`text-embedding-3-small` (`openai`), `nomic-embed-text` (`ollama`)."
            )
        ),
    ] = ""
    embed_api_key: Annotated[
        str,
        Meta(
            extra_json_schema=_SECRET,
            description=("API key of a remote embedder (a bearer token); `memstream doctor` shows it as `***`."),
        ),
    ] = ""
    embed_dim: Annotated[
        int,
        Meta(
            ge=0,
            le=65_536,
            description=("Vector size of a remote embedder. 0: known for the model, else learnt from its first answer."),
        ),
    ] = 0
    embed_threads: Annotated[
        int,
        Meta(
            ge=0,
            le=1024,
            description=(
                "Batches of one model call run side by side (each on one onnxruntime thread) by the local embedders "
                "(`bge-small`, `colbert-small`, `onnx-minilm`) and the late-interaction model "
                "(`MEMSTREAM_LATE_RERANK`), on the query side and in the dense stage alike; a question's call runs "
                "on the thread that asks. 0: the CPUs this "
                "process may use, at most 8. On a machine busy with other work, 1 leaves the cores to the recalls "
                '(BENCHMARKS.md, "The models\' batches side by side").'
            ),
        ),
    ] = 0
    query_threads: Annotated[
        int,
        Meta(
            ge=0,
            le=256,
            description=(
                "Threads of a query server (`memstream up`, each `memstream worker`) answering recall, search and "
                "the agent's tools. 0: the CPUs this process may use, at least 2 (one answers while another "
                "waits on Redis) and at most 8. A handler mostly holds the interpreter, so threads past the CPUs "
                "only queue: more answers a second need more processes (BENCHMARKS.md, reads)."
            ),
        ),
    ] = 0
    late_rerank: Annotated[
        str,
        Meta(
            pattern=f"^({'|'.join(LATE_RERANK_MODES)})$",
            description=(
                "Late interaction on the prefetch path: the dense stage stores each turn's and memory's token "
                "vectors (answerai-colbert-small-v1, from the `bge` extra's package), and a recall reorders its best "
                '20 by their match with the question (about 6 ms of CPU a recall; BENCHMARKS.md, "Late interaction '
                'on the prefetch path"). `auto`: on with a local model embedder (`bge-small`, `colbert-small`, '
                "`onnx-minilm`), off with `hash` and remote embedders; `on`; `off`."
            ),
        ),
    ] = "auto"
    late_shed_ms: Annotated[
        int,
        Meta(
            ge=0,
            le=60_000,
            description=(
                "When a recall of a query server's take waited longer than this (ms) on the query list, the take's "
                "recalls are answered without the late interaction (the ranking's order, as with "
                "`MEMSTREAM_LATE_RERANK=off`), and so are its searches without the rerank when one of them waited: a "
                "query process that is behind then spends one model call a recall instead of two, and its "
                "prefetches keep within their budget. The wait is read from the caller's "
                "clock, as a request's deadline is. 0: never. Counted as `late_shed` (BENCHMARKS.md, \"The late "
                'interaction shed when the query process is behind").'
            ),
        ),
    ] = 20
    recall_candidates: Annotated[
        int,
        Meta(
            ge=0,
            le=50,
            description=(
                "Dense and keyword candidates a recall (the prefetch) takes from each collection, never fewer than "
                "its k. 0 (the default): the ranking's own, 50, as a search takes. 30 costs x0.75-0.80 of a "
                "recall's CPU at 10,000 memories and a little of its recall (LoCoMo prefetch all@10 -0.7 points "
                "on dev, -1.0 on test; BENCHMARKS.md, \"The recall's candidates and the engine's calls\"): a "
                "fleet's setting where the query processes' CPU is what bends."
            ),
        ),
    ] = 0
    dense_index_from: Annotated[
        int,
        Meta(
            ge=0,
            le=100_000_000,
            description=(
                "On the embedded store, a scope (one agent's points of a collection) of this many points or more "
                "is searched by meaning through an approximate index (HNSW) over its vectors, built in the "
                "background and swapped in when ready (the exact scan answers until then), each candidate scored "
                "again exactly; smaller scopes are scanned exactly (the exact scan is cheaper below about 8,000 "
                'points when searches come in batches: BENCHMARKS.md, "An approximate index for large scopes"). '
                "0: every search exact (docs/scaling.md)."
            ),
        ),
    ] = 8000
    query_replicas: Annotated[
        int,
        Meta(
            ge=0,
            le=16,
            description=(
                "Read replicas `memstream up` runs beside its query process on the embedded store: each a "
                "supervised child process with a copy of the vector projections of its own "
                "(`data/qdrant-replica-N`), fed from the log through consumer groups of its own, answering the "
                "same request lists; one query process uses about one CPU, so more answers a second need more "
                "processes (docs/scaling.md). 0: none. Ignored with `MEMSTREAM_QDRANT_URL` (every "
                "`memstream worker` answers queries from the shared store)."
            ),
        ),
    ] = 0
    autostart: Annotated[
        bool,
        Meta(description=("Start the embedded service (`memstream up --detach`) when none is running and no Redis URL is set.")),
    ] = True
    prefetch_budget_ms: Annotated[
        int,
        Meta(
            ge=0,
            le=60_000,
            description=(
                "How long `prefetch()` may take: it waits for the fresh recall of the turn's message until "
                "2 ms before this budget ends (the thread's wake-up latency), then returns the freshest block "
                "already computed (or nothing)."
            ),
        ),
    ] = 150
    prefetch_tokens: Annotated[
        int,
        Meta(
            ge=50,
            le=1_000_000,
            description=("Token budget of the injected `<memory-context>` block (estimated at 4 characters a token)."),
        ),
    ] = 400
    tool_timeout: Annotated[
        float,
        Meta(
            ge=0.1,
            le=3600.0,
            description=("Seconds a memstream tool call waits for the service's answer before it returns an error."),
        ),
    ] = 5.0
    record_non_primary: Annotated[
        bool,
        Meta(
            description=(
                "Record the turns and writes of Hermes's cron jobs and subagents (an `agent_context` other than "
                "`primary`), each under an agent scope of its own (`AGENT#cron`, `AGENT#subagent`). Off: they "
                "write nothing (they still recall the agent's memory), as Hermes's contract asks."
            )
        ),
    ] = False
    stall_after_s: Annotated[
        float,
        Meta(
            ge=0.1,
            le=86_400.0,
            description=(
                "Seconds without progress, with entries waiting as long, before `memstream doctor` fails a "
                "projection and `memstream stats` calls it stalled."
            ),
        ),
    ] = 60.0
    dlq_max_letters: Annotated[
        int,
        Meta(
            ge=1,
            le=100_000_000,
            description=(
                "Dead letters the dead-letter stream keeps at most; past it an entry that fails is acked without "
                "one, counted in `memstream_dead_letters_dropped_total` (it stays in the log)."
            ),
        ),
    ] = 10_000
    embed_warn_points: Annotated[
        int,
        Meta(
            ge=1,
            le=1_000_000_000,
            description=(
                "Points waiting for their dense vector in one version's backlog past which `memstream doctor` "
                "warns (they are found by keywords meanwhile)."
            ),
        ),
    ] = 100_000
    embed_warn_s: Annotated[
        float,
        Meta(
            ge=0.1,
            le=86_400.0,
            description=(
                "Seconds the oldest point of a version's backlog may wait for its dense vector before "
                "`memstream doctor` warns (a dense stage behind or failing; with none reading the backlog it "
                "fails after `MEMSTREAM_STALL_AFTER_S`)."
            ),
        ),
    ] = 600.0
    projections: Annotated[
        str,
        Meta(
            description=(
                "Projections of your own, besides those installed through the `memstream.projections` entry "
                "point: comma-separated `module:Class` (see docs/concepts/projections.md)."
            )
        ),
    ] = ""
    projection_process: Annotated[
        bool,
        Meta(
            description=(
                "`memstream up` runs the projections that need no vector store (facts, sessions, yours without "
                "`VECTORS`) in a child process of their own, beside the one that owns the store: supervised "
                "(restarted with backoff when it dies), stopped with the service, and gone when the service is "
                "(it watches a pipe from it); its figures are in the service's metrics. With one usable CPU they "
                "stay threads of the service (a second process would only add its cost). `false`: always "
                "threads."
            )
        ),
    ] = True
    worker_projections: Annotated[
        str,
        Meta(
            description=(
                "The projections a `memstream worker` runs, comma-separated names (`memstream worker "
                "--projections` overrides it); empty: all. A worker without a vector projection needs no "
                "Qdrant server and opens no store."
            )
        ),
    ] = ""
    worker_index: Annotated[
        _Name,
        Meta(
            description=(
                "Suffix of a worker's consumer name, `HOST-INDEX`, when `memstream worker --name` gives none: "
                "give each worker process on a host its own."
            )
        ),
    ] = "0"
    metrics_addr: Annotated[
        str,
        Meta(
            description=(
                "Where `memstream up` and each `memstream worker` serve Prometheus metrics (`/metrics`) and the "
                "dashboard (`/`), `HOST:PORT` (`[IPv6]:PORT`). Empty: neither. Port `0`: a free port, logged and named in the "
                "service's run file. A port another process holds: a warning, and the process runs without "
                "metrics. Keep it on the loopback (see docs/reference/metrics.md)."
            )
        ),
    ] = "127.0.0.1:9464"
    report_every_s: Annotated[
        float,
        Meta(
            ge=0.0,
            le=3600.0,
            description=(
                "Seconds between an agent process's reports for the fleet's metrics (its spool backlog and "
                "refusals, its hooks' durations, its prefetch outcomes), written by its shipper thread to one "
                "field of one Redis hash (see docs/reference/metrics.md); 0: no reports. The processes that serve metrics "
                "count an agent active while its last report is at most 3 of their own intervals old."
            ),
        ),
    ] = 5.0
    metrics_top_agents: Annotated[
        int,
        Meta(
            ge=0,
            le=200,
            description=(
                "Agent processes the per-agent metrics name (spool backlog, refusals): the largest this many, the "
                "rest summed as `other`. At most 200: every name is a series of every scrape, and each process "
                "that enters the list is one more series for Prometheus to keep."
            ),
        ),
    ] = 20
    retention_turns_days: Annotated[
        float,
        Meta(
            ge=0.0,
            le=36_500.0,
            description=(
                "Days a turn (`turn.recorded`) is kept, counted from when the log received it; then the "
                "service's retention job erases it everywhere, as `memstream forget` does (see "
                "docs/operations/retention.md). 0: forever."
            ),
        ),
    ] = 0.0
    retention_memories_days: Annotated[
        float,
        Meta(ge=0.0, le=36_500.0, description=("Days a memory (`memory.written`, `memory.remembered`) is kept; 0: forever.")),
    ] = 0.0
    retention_delegations_days: Annotated[
        float,
        Meta(
            ge=0.0,
            le=36_500.0,
            description=("Days a delegation's task and result (`delegation.completed`) are kept; 0: forever."),
        ),
    ] = 0.0
    retention_sessions_days: Annotated[
        float,
        Meta(
            ge=0.0,
            le=36_500.0,
            description=(
                "Days a session's bookends (`session.ended`, `session.switched`: its title and end reason) are "
                "kept; 0: forever. Facts have no retention of their own: a fact goes with the turns and "
                "memories it was extracted from."
            ),
        ),
    ] = 0.0
    retention_every_s: Annotated[
        float,
        Meta(
            ge=1.0,
            le=86_400.0,
            description=(
                "Seconds between runs of the retention job (in `memstream up` and each `memstream worker`; "
                "one at a time across the fleet, the first at start). Each run reads only the log "
                "entries that expired since the last one."
            ),
        ),
    ] = 3600.0
    hot_days: Annotated[
        float,
        Meta(
            ge=0.0,
            le=36_500.0,
            description=(
                "The hot tier: turns and delegations that happened in the last this many days, every memory "
                "and the current facts. Prefetch injects only from the hot tier (within `prefetch_tokens`); "
                "search and the agent's tools reach every tier. 0 (the default): every turn is hot, as before tiers "
                "existed; a window is an operator's choice (an imported history is older than any window)."
            ),
        ),
    ] = 0.0
    problems: tuple[str, ...] = ()
    # (setting, where its value came from: the environment variable's name, the file's path,
    # or "given" by the caller) for each setting not left at its default; not a setting
    sources: tuple[tuple[str, str], ...] = ()

    @classmethod
    def load(cls, hermes_home: str | os.PathLike[str] | None = None, **overrides: object) -> Settings:
        """Defaults < ``$HERMES_HOME/memstream.json`` < environment < ``overrides``.

        ``overrides`` are field names (None: not given); any other name is a TypeError (a
        mistake in the calling code, not in the configuration)."""
        unknown = sorted(set(overrides) - set(_SPECS))
        if unknown:
            raise TypeError(f"Settings.load() got settings that do not exist: {', '.join(unknown)}")
        values: dict[str, object] = {}
        origins: dict[str, str] = {}
        problems: list[str] = []
        path = config_file_for(hermes_home or os.environ.get("HERMES_HOME"))
        if path is not None and path.exists():
            try:
                loaded = json.loads(path.read_text())
                if not isinstance(loaded, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                problems.append(f"{path}: ignored ({type(exc).__name__}: {_clip(str(exc), 200)})")
            else:
                for key, value in loaded.items():
                    if key in _SPECS:
                        values[key] = value
                        origins[key] = str(path)
                    else:
                        problems.append(f"{path}: {_brief(key)} is not a setting{_did_you_mean(key, 'file')}; ignored")
        for name, value in os.environ.items():
            if not name.startswith(ENV_PREFIX):
                continue
            attr = _BY_ENV.get(name)
            if attr is not None:
                values[attr] = value
                origins[attr] = name
            elif name not in OTHER_VARIABLES:
                problems.append(f"{_clip(name, 80)} is not a setting{_did_you_mean(name, 'env')}; ignored")
        values.update({k: v for k, v in overrides.items() if v is not None})
        origins.update({k: "given" for k, v in overrides.items() if v is not None})
        kwargs: dict[str, Any] = {}
        for attr, value in values.items():
            spec = _SPECS[attr]
            try:
                kwargs[attr] = spec.convert(value)
            except ValueError as exc:
                problems.append(
                    f"{spec.env}={_brief(spec.shown(value))} is not a valid {spec.kind} "
                    f"({_clip(str(exc), 60)}); using {spec.default!r}"
                )
        sources = tuple((attr, origins[attr]) for attr in _SPECS if attr in kwargs)  # a bad value: default
        home_text = str(kwargs.pop("home", _SPECS["home"].default))
        try:
            home = Path(home_text).expanduser()
        except RuntimeError:  # ~user of no known user, or no home directory at all
            problems.append(f"{ENV_PREFIX}HOME={_brief(home_text)}: cannot expand '~'; using it as given")
            home = Path(home_text)
        return cls(home=home, problems=tuple(problems), sources=sources, **kwargs).validated()

    def validated(self) -> Settings:
        """A copy with every value out of its bounds replaced by its default, each
        replacement (and each malformed URL, kept as given) a problem."""
        problems = list(self.problems)
        fixed: dict[str, object] = {}
        for spec in _SPECS.values():
            value = getattr(self, spec.attribute)
            why = spec.bounds_problem(value)
            if why:
                problems.append(why)
                fixed[spec.attribute] = spec.default
            elif spec.attribute.endswith("_url"):
                problem = _url_problem(spec.attribute, spec.env, value)
                if problem:
                    problems.append(problem)
        if _address(self.metrics_addr) is False:
            default = _SPECS["metrics_addr"].default
            problems.append(
                f"{ENV_PREFIX}METRICS_ADDR={_brief(self.metrics_addr)} is not HOST:PORT "
                f"(a port 0 to 65535, [IPv6]:PORT) nor empty; using {default}"
            )
            fixed["metrics_addr"] = default
        problems += _tls_problems(self)
        fsync = fixed.get("spool_fsync", self.spool_fsync)
        if _fsync_interval(fsync) is None and fsync not in ("never", "always"):
            default = _SPECS["spool_fsync"].default
            problems.append(f"spool_fsync={_brief(fsync)} is not never|always|SECONDS; using {default}")
            fixed["spool_fsync"] = default
        if fixed.get("ship_replicas", self.ship_replicas) and not self.redis_url:
            # the embedded Valkey has no replicas: every WAIT would fall short, nothing would ship
            problems.append(
                f"{ENV_PREFIX}SHIP_REPLICAS={self.ship_replicas} needs {ENV_PREFIX}REDIS_URL (the "
                "embedded Valkey has no replicas); using 0"
            )
            fixed["ship_replicas"] = 0
        from memstream.core.cluster_url import cluster_prefix, is_cluster_url

        if fixed.get("ship_replicas", self.ship_replicas) and is_cluster_url(self.redis_url):
            # one WAIT would confirm one node's writes: a batch spans several primaries there
            problems.append(
                f"{ENV_PREFIX}SHIP_REPLICAS={self.ship_replicas} is not supported on a Redis Cluster "
                "(a batch spans several primaries); using 0"
            )
            fixed["ship_replicas"] = 0
        tagged = {"stream_prefix": cluster_prefix(self.stream_prefix)} if is_cluster_url(self.redis_url) else {}
        return msgspec.structs.replace(
            self, **fixed, **tagged, problems=tuple(problems), sources=tuple((a, o) for a, o in self.sources if a not in fixed)
        )

    @property
    def fsync_interval(self) -> float | None:
        """Seconds between background fsyncs, or None for never/always."""
        return _fsync_interval(self.spool_fsync)

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """``metrics_addr`` as (host, port); None when metrics are off (or it is malformed)."""
        found = _address(self.metrics_addr)
        return found or None

    @property
    def query_server_threads(self) -> int:
        """``query_threads``, or when it is 0 ``usable_cpus()``, at least 2 and at most 8."""
        return self.query_threads or max(2, min(usable_cpus(), 8))

    def late_reranks(self, embedder: str | None = None) -> bool:
        """``late_rerank``, with ``auto`` on for a local model embedder (``LOCAL_EMBEDDERS``):
        ``embedder``, the configured one by default."""
        if self.late_rerank != "auto":
            return self.late_rerank == "on"
        return (embedder or self.embedder).split(":", 1)[0] in LOCAL_EMBEDDERS

    @property
    def projections_apart(self) -> bool:
        """``projection_process``, and at least 2 usable CPUs (``usable_cpus``)."""
        return self.projection_process and usable_cpus() >= 2

    @property
    def retention_days(self) -> dict[str, float]:
        """Per kind of event (turns, memories, delegations, sessions): its retention in days
        (0: forever)."""
        return {
            "turns": self.retention_turns_days,
            "memories": self.retention_memories_days,
            "delegations": self.retention_delegations_days,
            "sessions": self.retention_sessions_days,
        }

    @property
    def spool_dir(self) -> Path:
        return self.home / "spool"

    @property
    def run_file(self) -> Path:
        return self.home / "run" / "service.json"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def archive_path(self) -> Path:
        """``archive_dir`` (``~`` expanded), or ``home/archive`` when it is empty."""
        if not self.archive_dir:
            return self.home / "archive"
        try:
            return Path(self.archive_dir).expanduser()
        except RuntimeError:  # ~user of no known user: as given
            return Path(self.archive_dir)

    def public(self) -> dict[str, object]:
        """Settings as JSON-ready values, safe to show: every URL through ``mask_url``, a
        secret setting (``embed_api_key``) as ``***`` when it is set."""
        out: dict[str, object] = {}
        for spec in _SPECS.values():
            value = getattr(self, spec.attribute)
            if spec.attribute.endswith("_url"):
                value = mask_url(str(value))
            elif spec.secret and value:
                value = "***"
            out[spec.attribute] = str(value) if isinstance(value, Path) else value
        return out


# Variables named MEMSTREAM_* that are not settings, read where they are needed (no
# problem is reported for them): name -> meaning.
OTHER_VARIABLES: dict[str, str] = {
    "MEMSTREAM_DEBUG": "`1`: the command line prints the traceback of an unexpected error",
    "MEMSTREAM_READY_FD": "set by `memstream up --detach` for its child: the pipe the service says ready (or its error) on",
    "MEMSTREAM_BENCH_KEEP": "`1`: `memstream bench chaos` keeps its working directory",
    "MEMSTREAM_FUZZ_SCALE": "the test suite: multiplies the examples of its property-based tests",
    "MEMSTREAM_TEST_CACHE": "the test suite: where it keeps the Hermes environment it builds",
    "MEMSTREAM_TEST_LOG": "the test suite: where its Hermes drivers log",
}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")
_SECRET_NAME = re.compile(r"pass|pwd|token|secret|key|auth|cred|sig", re.IGNORECASE)  # in URLs


class Option(NamedTuple):
    """One setting as the configuration page (docs/reference/configuration.md) shows it."""

    attribute: str
    env: str
    default: object
    meaning: str


class _Spec:
    """What the loader knows of one field: read from its type annotation."""

    def __init__(self, attribute: str, hint: Any, default: object) -> None:
        self.attribute, self.default = attribute, default
        self.env = ENV_PREFIX + attribute.upper()
        base, metas = (get_args(hint)[0], get_args(hint)[1:]) if get_origin(hint) is Annotated else (hint, ())
        self.base = str if base is Path else base  # a path is read as text, then expanded
        self.kind = base.__name__
        self.meaning = " ".join(m.description for m in metas if m.description)
        self.secret = any((m.extra_json_schema or {}).get("writeOnly") for m in metas)
        bounds = [m for m in metas if m.ge is not None or m.le is not None or m.max_length is not None]
        self.bounded: Any = Annotated[(self.base, *bounds)] if bounds else None
        self.range = next(((m.ge, m.le) for m in bounds if m.ge is not None), None)
        self.max_length = next((m.max_length for m in bounds if m.max_length is not None), None)
        self.pattern = next((m.pattern for m in metas if m.pattern is not None), None)

    def shown(self, value: object) -> object:
        """``value`` as a problem message may show it."""
        if self.attribute.endswith("_url"):
            return mask_url(str(value))
        return "***" if self.secret else value

    def convert(self, value: object) -> object:
        """``value`` (text from the environment, JSON from the file, or an override) as
        this field's type, or ValueError saying why not (its bounds are checked later)."""
        if self.base is bool and not isinstance(value, bool):
            word = str(value).strip().lower()
            if word not in _TRUE + _FALSE:
                raise ValueError(f"not one of {'/'.join(_TRUE + _FALSE[:-1])}")
            return word in _TRUE
        if self.base is str and isinstance(value, (int, float, os.PathLike)) and not isinstance(value, bool):
            value = os.fspath(value) if isinstance(value, os.PathLike) else str(value)  # "spool_fsync": 2
        try:
            out = msgspec.convert(value, self.base, strict=False)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from None
        if isinstance(out, float) and not math.isfinite(out):
            raise ValueError("not finite")
        return out

    def bounds_problem(self, value: object) -> str | None:
        """Why ``value`` is outside this field's bounds (a range, a length, a pattern), or None."""
        if self.pattern is not None and not (isinstance(value, str) and re.search(self.pattern, value)):
            choices = re.fullmatch(r"\^\(([\w|-]+)\)\$", self.pattern)
            wanted = f"one of {', '.join(choices.group(1).split('|'))}" if choices else f"text matching {self.pattern}"
            return f"{self.attribute} must be {wanted} (got {_brief(value)}); using {self.default!r}"
        if self.max_length is not None:
            if not (isinstance(value, str) and value.strip() and len(value) <= self.max_length and value.isprintable()):
                return (
                    f"{self.attribute} must be 1 to {self.max_length} printable characters "
                    f"(got {_brief(value)}); using {self.default!r}"
                )
            return None
        if self.bounded is None:
            return None
        try:
            msgspec.convert(value, self.bounded, strict=False)
        except msgspec.ValidationError:  # nan too: it compares with nothing
            low, high = self.range or (None, None)
            return f"{self.attribute} must be between {low} and {high} (got {_brief(value)}); using {self.default}"
        return None


_SPECS: dict[str, _Spec] = {
    f.name: _Spec(f.name, f.type, f.default) for f in msgspec.structs.fields(Settings) if f.name not in ("problems", "sources")
}
_BY_ENV = {spec.env: name for name, spec in _SPECS.items()}
OPTIONS: tuple[Option, ...] = tuple(Option(s.attribute, s.env, s.default, s.meaning) for s in _SPECS.values())


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity where the system has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _did_you_mean(name: str, where: str) -> str:
    """`` (did you mean X?)`` with the setting closest to ``name``, or nothing."""
    if where == "env":
        known = list(_BY_ENV) + list(OTHER_VARIABLES)
        match = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.6)
    else:
        key = name.lower().removeprefix(ENV_PREFIX.lower())
        match = [key] if key in _SPECS else difflib.get_close_matches(key, list(_SPECS), n=1, cutoff=0.6)
        match = [repr(m) for m in match]
    return f" (did you mean {match[0]}?)" if match else ""


def _fsync_interval(spool_fsync: object) -> float | None:
    try:
        seconds = float(spool_fsync)  # type: ignore[arg-type]  # any value: float() refuses with TypeError
    except (TypeError, ValueError):
        return None
    return seconds if 0 < seconds < math.inf else None


def _address(text: str) -> tuple[str, int] | None | Literal[False]:
    """``HOST:PORT`` (``[IPv6]:PORT``) as (host, port); None for empty text; False when
    malformed (no host, a port that is not 0 to 65535, spaces or control characters)."""
    text = text.strip()
    if not text:
        return None
    host, colon, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    if not (colon and host and port.isascii() and port.isdigit() and int(port) <= 65535):
        return False
    if (":" in host and not bracketed) or any(c.isspace() or c in "[]/" or not c.isprintable() for c in host):
        return False
    return host, int(port)


def _brief(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (an env value may be megabytes)."""
    return _clip(repr(value), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def mask_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: the password of ``user:password@``
    (the whole user part when it has no password) and the value of every query parameter
    whose name looks secret (password, token, api_key, auth, ...). Works on malformed URLs
    too: everything before the last ``@`` after the scheme is taken as credentials."""
    from urllib.parse import unquote

    if not url:
        return url
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    at = url.rfind("@")
    if at >= start:
        user, colon, _ = url[start:at].partition(":")
        url = url[:start] + (f"{user}:***" if colon else "***") + url[at:]
    query_at = url.find("?", start)
    if query_at < 0:
        return url
    head, rest = url[: query_at + 1], url[query_at + 1 :]
    query, hash_, fragment = rest.partition("#")
    params = []
    for param in re.split(r"([&;])", query):
        name, eq, value = param.partition("=")
        if eq and value and _SECRET_NAME.search(unquote(name)):
            value = "***"
        params.append(name + eq + value)
    return head + "".join(params) + hash_ + ("***" if fragment else "")


def _url_problem(attr: str, env: str, url: str) -> str | None:
    """Why ``url`` cannot be the ``attr`` setting, or None if it can (no network)."""
    from urllib.parse import urlsplit

    if not url:
        return None
    if attr == "redis_url":
        expected = (
            "redis://[[user]:password@]host[:port][/db], rediss://..., unix:///path, "
            "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db] or "
            "redis+cluster://[[user]:password@]host[:port][,host[:port]...]"
        )
        schemes: tuple[str, ...] = ("redis", "rediss", "unix")
        from memstream.core.cluster_url import is_cluster_url, parse_cluster_url
        from memstream.core.sentinel_url import is_sentinel_url, parse_sentinel_url

        plain = not any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url)
        if is_cluster_url(url) and plain:
            try:
                parse_cluster_url(url)
            except ValueError as exc:  # its message never shows a password
                return (
                    f"{env}={_brief(mask_url(url))} {exc}; expected "
                    "redis+cluster://[[user]:password@]host[:port][,host[:port]...]"
                )
            return None
        if is_sentinel_url(url) and plain:
            try:
                parse_sentinel_url(url)
            except ValueError as exc:  # its message never shows a password
                return f"{env}={_brief(mask_url(url))} {exc}; expected {expected}"
            return None
    else:
        expected = "http(s)://host[:port]"
        schemes = ("http", "https")
    why = None
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        why = "contains whitespace or control characters"
    else:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
        except ValueError:
            parts, why = None, "is not a URL with a valid host and port"
        if parts is not None:
            if parts.scheme.lower() not in schemes:
                why = "has no supported scheme"
            elif parts.scheme.lower() == "unix":
                why = None if parts.path else "names no socket path"
            elif not parts.hostname:
                why = "names no host"
            elif attr == "redis_url":
                from redis.connection import parse_url

                try:
                    parse_url(url)
                except ValueError:
                    why = "has an invalid query parameter"
    if why is None:
        return None
    return f"{env}={_brief(mask_url(url))} {why}; expected {expected}"


def _tls_problems(settings: Settings) -> list[str]:
    """Why the TLS settings cannot apply as given (no file is opened: doctor and the
    connection report a file that cannot be read)."""
    tls = {
        "MEMSTREAM_REDIS_TLS_CA_FILE": settings.redis_tls_ca_file,
        "MEMSTREAM_REDIS_TLS_CERT_FILE": settings.redis_tls_cert_file,
        "MEMSTREAM_REDIS_TLS_KEY_FILE": settings.redis_tls_key_file,
    }
    given = [env for env, value in tls.items() if value]
    problems = []
    if given and not settings.redis_url.lower().startswith("rediss://"):
        problems.append(f"{', '.join(given)} set but MEMSTREAM_REDIS_URL is not a rediss:// URL: no TLS, the files are not used")
    if settings.redis_tls_key_file and not settings.redis_tls_cert_file:
        problems.append("MEMSTREAM_REDIS_TLS_KEY_FILE set without MEMSTREAM_REDIS_TLS_CERT_FILE: the key is not used")
    return problems


def config_file_for(hermes_home: str | os.PathLike[str] | None) -> Path | None:
    """Where ``save_config`` keeps non-secret settings inside a Hermes home."""
    if not hermes_home:
        return None
    return Path(hermes_home) / "memstream.json"
