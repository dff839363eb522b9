"""What the pipeline benchmarks (ingest, archive, crypto, metrics, replay) feed and run: texts
from LoCoMo's turns or generated agent-style turns, ``TurnRecorded`` events of them, the
settings of a pipeline under test, and which turns the turns projection keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.core import Settings, new_event_id
from memstream.producers import Scope, TurnRecorded, utcnow

if TYPE_CHECKING:
    from memstream.text import BoilerplateFilter


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


def substantive_turn(event: TurnRecorded, boilerplate: BoilerplateFilter) -> bool:
    from memstream.projections import TurnsProjection

    text, reason = TurnsProjection.turn_text(boilerplate, event)
    return reason is None and bool(text)
