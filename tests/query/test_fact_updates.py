"""The query side after an update: prefetch and search show the newer value only; a question
about the past also gets the older one, labelled as superseded in the injected block."""

from __future__ import annotations

import pytest
from pipeline_support import make_pipeline, turn
from query_support import answer

from memstream.provider.block import format_block


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    yield p
    p.stop()


def _facts(pipeline, query: str) -> list[dict]:
    recalled = answer(pipeline.reads.handlers(), {"op": "recall", "tenant": "t1", "agent": "a1", "query": query, "k": 10})
    return [i for i in recalled["items"] if i["kind"] == "fact"]


def test_after_a_move_said_as_news_prefetch_shows_the_new_place_only(pipeline, event_log):
    event_log.append([turn("I live in Berlin.", when=0, index=0), turn("We're fully moved to Lisbon now.", when=1, index=1)])
    pipeline.drain()

    assert [(f["value"], f["valid_to"]) for f in _facts(pipeline, "where do I live Berlin Lisbon")] == [("Lisbon", None)]
    earlier = {f["value"]: f for f in _facts(pipeline, "where did I live before Berlin Lisbon")}
    assert earlier["Lisbon"]["valid_to"] is None and earlier["Berlin"]["valid_to"]
    block, _ = format_block(list(earlier.values()), 500, set())
    assert any("superseded" in line and "Berlin" in line for line in block.splitlines()), block


def test_a_tool_given_up_is_not_shown_as_used(pipeline, event_log):
    event_log.append([turn("I use Vim and Git.", when=0, index=0), turn("I no longer use Vim.", when=1, index=1)])
    pipeline.drain()

    assert sorted(f["value"] for f in _facts(pipeline, "which tools do I use Vim Git")) == ["Git"]
    assert "Vim" in {f["value"] for f in _facts(pipeline, "which editor did I use before Vim")}
