"""The hot and cold tiers: prefetch (the ``recall`` op) reads the hot tier only (turns of
the last ``hot_days``, every memory), within the injected block's token budget; search
and the agent's tools reach the cold tier too; ``memstream stats`` shows what each holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from pipeline_support import pipeline_settings, remembered, scope, turn
from query_support import answer

from memstream import ops
from memstream.cli.output import stats_text
from memstream.core import new_event_id
from memstream.producers import TurnRecorded
from memstream.provider.block import format_block
from memstream.query import CountRequest
from memstream.text.tokens import prompt_tokens
from memstream.workers import Pipeline, PipelineConfig


def recent_turn(text: str, days_ago: float, index: int) -> TurnRecorded:
    return TurnRecorded(
        id=new_event_id(),
        occurred_at=datetime.now(UTC) - timedelta(days=days_ago),
        scope=scope(),
        turn_index=index,
        user_text=text,
        assistant_text="Noted.",
    )


@pytest.fixture
def tiered(tmp_path, event_log):
    settings = pipeline_settings(tmp_path / "pipe-home", stream_prefix=event_log.prefix, shards=event_log.shards, hot_days=30.0)
    p = Pipeline(settings, event_log, PipelineConfig(embedder="hash", consumer="w1"))
    yield p
    p.stop()


def test_prefetch_reads_the_hot_tier_within_its_budget_and_search_reaches_the_cold(tiered, event_log):
    cold = turn("The harbour crane Brackwater lifts forty tonnes", index=0)  # 2025: long before 30 days
    hot = [recent_turn(f"The harbour crane Brackwater moved to pier {i} with a {'long ' * 30}note", 2, i + 1) for i in range(8)]
    memory = remembered("The harbour crane Brackwater belongs to the port authority")  # memories are always hot
    event_log.append([cold, *hot, memory])
    tiered.drain()
    handlers = tiered.reads.handlers()
    request = {"tenant": "t1", "agent": "a1", "query": "harbour crane Brackwater", "k": 20}

    recalled = answer(handlers, {"op": "recall", **request})["items"]
    ids = {i["id"] for i in recalled}
    assert cold.id not in ids and memory.id in ids and {t.id for t in hot} <= ids
    block, injected = format_block(recalled, 120, set())
    assert injected and cold.id not in injected and prompt_tokens(block) <= 120
    assert len(injected) < len(recalled)  # the budget, not the hot tier, stopped it

    searched = answer(handlers, {"op": "search", **request})["results"]
    assert cold.id in {r["id"] for r in searched}  # the cold tier is still searched
    assert tiered.searcher.search("Brackwater forty tonnes", tenant="t1", agent="a1")[0]["id"] == cold.id

    tiered.reads.hot_days = 0.0  # no window (the default): every turn is hot
    assert cold.id in {i["id"] for i in answer(handlers, {"op": "recall", **request})["items"]}


def test_stats_shows_what_each_tier_holds(tiered, event_log, settings):
    event_log.append(
        [
            turn("an old turn about lighthouses", index=0),
            recent_turn("a new turn about ferries", 1, 1),
            remembered("a memory about tides"),
        ]
    )
    tiered.drain()
    counted = msgspec.to_builtins(tiered._count(CountRequest(tenant="t1")))  # what the query server answers `stats`
    assert counted["tiers"] == {"turns": {"hot": 1, "cold": 1}, "memories": {"hot": 1, "cold": 0}}
    shown = ops.tier_stats(msgspec.structs.replace(settings, tenant="t1", hot_days=30.0), counted)
    assert shown == {"tenant": "t1", "hot_days": 30.0, "tiers": counted["tiers"]}
    assert ops.tier_stats(settings, {"tiers": {"turns": {"hot": "x"}, "bad": 3}})["tiers"] == {}  # untrusted
    text = stats_text(
        {
            "streams": [],
            "types": {},
            "projections": {},
            "spool": {},
            "spool_losses": {},
            "tiers": shown,
            "retention": {
                "kinds": {
                    "turns": {"days": 90.0, "erased": 2, "next_expiry": None},
                    "memories": {"days": 0.0, "erased": 0, "next_expiry": None},
                },
                "every_s": 3600.0,
                "runs": 1,
                "last_run": None,
            },
        }
    )
    assert "turns 1 hot / 1 cold" in text and "memories 1 hot / 0 cold" in text
    assert "turns 90 days (2 erased, none pending)" in text and "memories forever" in text
