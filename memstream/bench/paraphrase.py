"""``memstream bench paraphrase``: a fleet's paraphrases in recall, collapsed or not.

Fifty agents of one tenant each remember the same five facts about a user in their own
words, and one fact of their own (``memstream.bench.paraphrase_set``: generated from
templates, deterministically; ``--part tuning`` is what the collapse threshold was chosen
on, ``held_out`` what the result is read on). Every memory goes in as a
``MemoryRemembered`` event through the real pipeline (the configured embedder, the
embedded store, a real Valkey); every question goes through prefetch's query path (op
``recall``, scope ``all``, k = 10) answered by the pipeline's query server, once per
collapse threshold asked (``--similarity``: 0 is no collapse, the tree before).

Reported per threshold: distinct facts among the top 10 (mean over the questions), the
tokens those 10 cost in the prefetch block (``format_block``, no budget), the distinct
facts that fit the default prefetch budget, the ``agree`` counts shown, how many items
shown say more agents agree than wrote their fact (a collapse of distinct facts), and the
recall latency.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.paraphrase_set import fleet_set
from memstream.bench.stats import machine, percentile
from memstream.bench.workload import query_pipeline
from memstream.core import new_event_id
from memstream.producers import MemoryRemembered, Scope
from memstream.service import ValkeyProcess

__all__ = ["add_arguments", "paraphrase", "run"]

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of numbers, got {text!r}") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"each in [0, 1], at least one, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench paraphrase``'s arguments."""
    parser.add_argument(
        "--part", default="held_out", choices=["tuning", "held_out"], help="which template set (default held_out)"
    )
    parser.add_argument("--agents", type=int, default=50, help="agents of the fleet (default 50)")
    parser.add_argument("--embedder", default="bge-small", help="embedder of the pipeline (default bge-small)")
    parser.add_argument(
        "--similarity",
        type=_floats,
        default=[0.0, 0.9],
        metavar="S[,S...]",
        help="collapse thresholds to ask with, 0 = no collapse (default 0,0.9)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked per threshold (default 3)")


def paraphrase(
    part: str = "held_out", agents: int = 50, embedder: str = "bge-small", similarity: list[float] | None = None, rounds: int = 3
) -> dict[str, Any]:
    """The benchmark (see the module docstring)."""
    from memstream.provider import format_block
    from memstream.query import RecallRequest, ask
    from memstream.text import prompt_tokens

    memories, questions = fleet_set(part, agents)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-paraphrase-"))
    server = ValkeyProcess(root / "valkey").start()
    out: dict[str, Any] = {
        "benchmark": "paraphrase",
        "part": part,
        "agents": agents,
        "memories": len(memories),
        "facts": len({m.fact for m in memories}),
        "embedder": embedder,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "runs": [],
    }
    try:
        settings, client, log, pipeline = query_pipeline(root, server.url, embedder, timeout=60)
        fact_of: dict[str, str] = {}
        writers = {m.fact: 0 for m in memories}
        events = []
        for i, m in enumerate(memories):
            eid = new_event_id()
            fact_of[eid] = m.fact
            writers[m.fact] += 1
            scope = Scope(tenant="bench", agent=m.agent, session_id=f"{m.agent}-s1", app="bench")
            events.append(MemoryRemembered(id=eid, occurred_at=START + timedelta(seconds=i), scope=scope, content=m.text))
        started = time.perf_counter()
        log.append(events)
        pipeline.drain()
        out["build_s"] = round(time.perf_counter() - started, 1)

        def fact(item: dict[str, Any]) -> str:
            ids = item.get("event_ids") or [item.get("id")]
            return next((fact_of[e] for e in ids if e in fact_of), "?")

        def recall(query: str) -> tuple[list[dict[str, Any]], float]:
            request = RecallRequest(tenant="bench", agent="agent-00", scope="all", query=query, k=10)
            t0 = time.perf_counter()
            answer = ask(client, settings.stream_prefix, request, timeout=30)
            took = (time.perf_counter() - t0) * 1000
            if "error" in answer:
                raise RuntimeError(f"recall failed: {answer['error']}")
            return list(answer["items"]), took

        for threshold in similarity if similarity is not None else [0.0, 0.9]:
            pipeline.searcher.similarity = threshold  # the query server's searcher: read per search
            latencies: list[float] = []
            per_question: list[dict[str, Any]] = []
            for q in questions:
                items: list[dict[str, Any]] = []
                for _ in range(rounds):
                    items, took = recall(q.text)
                    latencies.append(took)
                facts = [fact(i) for i in items]
                full, _ = format_block(items, 1_000_000, set())
                budget, ids = format_block(items, settings.prefetch_tokens, set())
                in_budget = {fact(i) for i in items if i["id"] in ids}
                per_question.append(
                    {
                        "question": q.text,
                        "distinct_at_10": len(set(facts)),
                        "tokens_at_10": prompt_tokens(full) if full else 0,
                        "distinct_in_budget": len(in_budget),
                        "answered": all(f in facts for f in q.facts),
                        "agree": [i.get("agree", 1) for i in items],
                        # shown with more agreeing agents than wrote its fact: distinct facts collapsed
                        "overcounted": sum(1 for i, f in zip(items, facts) if i.get("agree", 1) > writers.get(f, 0)),
                    }
                )
            lat = sorted(latencies)
            out["runs"].append(
                {
                    "similarity": threshold,
                    "distinct_at_10": round(statistics.mean(p["distinct_at_10"] for p in per_question), 2),
                    "tokens_at_10": round(statistics.mean(p["tokens_at_10"] for p in per_question), 1),
                    "distinct_in_budget": round(statistics.mean(p["distinct_in_budget"] for p in per_question), 2),
                    "answered": sum(p["answered"] for p in per_question),
                    "overcounted": sum(p["overcounted"] for p in per_question),
                    "latency_ms": {"p50": round(statistics.median(lat), 2), "p95": round(percentile(lat, 0.95), 2)},
                    "questions": per_question,
                }
            )
        pipeline.queries.stop()
        pipeline.stop()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def format_paraphrase(result: dict[str, Any]) -> str:
    lines = [
        f"paraphrase: {result['agents']} agents, {result['memories']} memories of {result['facts']} facts "
        f"({result['part']} templates, {result['embedder']}), {len(result['runs'][0]['questions'])} questions, k = 10",
        "similarity | distinct at 10 | tokens at 10 | distinct in the budget | answered | overcounted | p50 / p95 ms",
    ]
    for r in result["runs"]:
        lines.append(
            f"{r['similarity']:g} | {r['distinct_at_10']} | {r['tokens_at_10']} | {r['distinct_in_budget']} | "
            f"{r['answered']} | {r['overcounted']} | {r['latency_ms']['p50']} / {r['latency_ms']['p95']}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = paraphrase(args.part, args.agents, args.embedder, args.similarity, args.rounds)
    return show(args, result, format_paraphrase(result))
