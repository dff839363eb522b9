"""What the benchmarks feed and run: for the pipeline benchmarks (ingest, archive, crypto,
metrics, replay), texts from LoCoMo's turns or generated agent-style turns, ``TurnRecorded``
events of them, the settings of a pipeline under test, and which turns the turns projection
keeps; for the read benchmarks (prefetch, reads, noisy, fleet), generated memories of a
team's systems (``memory_text``, ``append_memories``) and questions about them
(``question``: 60 that repeat, ``fresh_question``: new each time); a pipeline answering
queries on a bench's own Valkey (``query_pipeline``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.core import Settings, new_event_id
from memstream.producers import EventLog, MemoryRemembered, Scope, TurnRecorded, utcnow

if TYPE_CHECKING:
    import redis

    from memstream.text import BoilerplateFilter
    from memstream.workers import Pipeline


DEFAULT_DATA = "/work/shared/datasets/locomo/locomo10_turns.jsonl"


def load_pairs(data: str | None) -> tuple[list[tuple[str, str]], str]:
    """(user, assistant) text pairs and where they came from."""
    path = Path(data) if data else Path(DEFAULT_DATA)
    if path.is_dir():
        path = path / "locomo10_turns.jsonl"
    if path.is_file():
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pairs = []
        for a, b in zip(rows[0::2], rows[1::2]):
            if a.get("sample_id") != b.get("sample_id"):
                continue
            pairs.append((str(a.get("text", "")), str(b.get("text", ""))))
        if pairs:
            return pairs, f"LoCoMo turns ({path.name}, consecutive turns paired user/assistant)"
    elif data:
        raise FileNotFoundError(f"--data {data}: no such file")
    from memstream.bench.stages import synthetic_turns

    turns = synthetic_turns(4000)
    return [(t["user"], t["assistant"]) for t in turns], "generated agent-style turns (memstream.bench.stages)"


def sample_texts(pairs: list[tuple[str, str]], n: int, salt: str) -> list[tuple[str, str]]:
    """``n`` pairs; beyond the data set, pairs repeat with a suffix so no text repeats
    (a repeated text would be served by the embedding cache and hide model cost)."""
    out = []
    for i in range(n):
        user, assistant = pairs[i % len(pairs)]
        if i >= len(pairs):
            user = f"{user} ({salt} {i // len(pairs)})"
        out.append((user, assistant))
    return out


def turn_events(pairs: list[tuple[str, str]], tenant: str = "bench") -> list[TurnRecorded]:
    out = []
    for i, (user, assistant) in enumerate(pairs):
        scope = Scope(tenant=tenant, agent=f"agent{i % 4}", session_id=f"s{i // 50}", platform="cli")
        out.append(
            TurnRecorded(
                id=new_event_id(), occurred_at=utcnow(), scope=scope, turn_index=i, user_text=user, assistant_text=assistant
            )
        )
    return out


def pipeline_settings(root: Path, url: str, prefix: str, embedder: str) -> Settings:
    """The defaults, but for the run's own place and ``MEMSTREAM_EMBED_THREADS`` (as the
    raw embedder has it)."""
    return Settings(
        redis_url=url,
        home=root,
        autostart=False,
        stream_prefix=prefix,
        embedder=embedder,
        embed_threads=Settings.load().embed_threads,
    ).validated()


def query_pipeline(
    root: Path, url: str, embedder: str, *, timeout: float = 30.0
) -> tuple[Settings, redis.Redis, EventLog, Pipeline]:
    """The settings (``root``'s home, the server at ``url``, ``embedder``), a client, the log
    and a pipeline (consumer ``bench``) of a read benchmark, its query server started."""
    from memstream.producers import redis_client
    from memstream.workers import Pipeline, PipelineConfig

    loaded = Settings.load(home=str(root / "home"), redis_url=url, autostart=False, embedder=embedder)
    client = redis_client(url, timeout=timeout)
    log = EventLog(client, loaded.stream_prefix, loaded.shards)
    pipeline = Pipeline(loaded, log, PipelineConfig(embedder=embedder, consumer="bench"))
    pipeline.queries.start()
    return loaded, client, log, pipeline


def substantive_turn(event: TurnRecorded, boilerplate: BoilerplateFilter) -> bool:
    from memstream.projections import TurnsProjection

    text, reason = TurnsProjection.turn_text(boilerplate, event)
    return reason is None and bool(text)


# -- the read benchmarks' memories and questions ------------------------------------------
SUBJECTS = [
    "the staging cluster",
    "the billing service",
    "Maria's team",
    "the mobile app",
    "the data lake",
    "the release train",
    "the on-call rota",
    "the design system",
    "the search index",
    "the CI runners",
    "the VPN",
    "the analytics dashboard",
    "the payments API",
    "the docs site",
    "the auth gateway",
]
VERBS = [
    "runs on",
    "moved to",
    "depends on",
    "is owned by",
    "was migrated to",
    "is blocked by",
    "switched to",
    "is documented in",
    "is monitored by",
    "deploys to",
]
OBJECTS = [
    "Postgres 16",
    "Kubernetes 1.31",
    "the Lisbon office",
    "Grafana",
    "a Hetzner box",
    "Terraform",
    "the platform group",
    "Redis 7",
    "an ARM fleet",
    "GitHub Actions",
    "Datadog",
    "S3 in eu-west-1",
    "the Berlin team",
    "Nomad",
    "ClickHouse",
    "Cloudflare",
    "the old Jenkins",
    "Vault",
]
WHEN = [
    "since March",
    "last week",
    "for the Q3 launch",
    "after the outage",
    "until further notice",
    "as of build {n}",
    "per ticket OPS-{n}",
    "on Thursdays",
    "in sprint {n}",
    "after review {n}",
]


def memory_text(rng: random.Random, n: int) -> str:
    """A memory of a subject, what it does with an object, and when (``n`` numbers it)."""
    when = rng.choice(WHEN).format(n=n)
    return f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {when}."


def question(rng: random.Random) -> str:
    """A question about a subject's memories (60 distinct ones: an embedding cache answers repeats)."""
    return f"What does {rng.choice(SUBJECTS)} {rng.choice(['run on', 'depend on', 'deploy to', 'use'])} now?"


def append_memories(log: EventLog, tenant: str, agent: str, count: int, rng: random.Random, start: int) -> None:
    """``count`` memories (``memory_text``, numbered from ``start``) remembered by ``agent`` of ``tenant``."""
    scope = Scope(tenant=tenant, agent=agent, session_id=f"{agent}-import", app="bench")
    batch = []
    for i in range(start, start + count):
        batch.append(
            MemoryRemembered(id=new_event_id(), occurred_at=utcnow(), scope=scope, content=memory_text(rng, i), target="memory")
        )
        if len(batch) == 1000:
            log.append(batch)
            batch = []
    if batch:
        log.append(batch)


def fresh_question(rng: random.Random) -> str:
    """A question nobody asked before (in practice): a subject, verb, object, time and number."""
    when = rng.choice(WHEN).format(n=rng.randrange(1, 10**6))
    verb = rng.choice(["run on", "depend on", "deploy to", "use", "still need", "talk to"])
    return f"Does {rng.choice(SUBJECTS)} {verb} {rng.choice(OBJECTS)} {when}, ticket {rng.randrange(10**7)}?"
