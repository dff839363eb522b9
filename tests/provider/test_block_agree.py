"""The prefetch block says how many agents agree on a collapsed item (``agree``), and
shows nothing for a count that is not one."""

from __future__ import annotations

import pytest

from memstream.provider.block import HEADER, MAX_AGREE, format_block
from memstream.query.protocol import AGREE


def _item(**kw):
    return {"id": "m1", "kind": "memory", "text": "Dana prefers dark mode", "agent": "a7", "occurred_at": "2026-01-05", **kw}


def test_a_collapsed_item_says_how_many_agents_agree_in_its_frame():
    block, ids = format_block([_item(**{AGREE: 5})], 400, set())
    assert ids == ["m1"]
    assert block.splitlines() == [HEADER, "- [2026-01-05 · memory · agent a7 (5 agents agree)] Dana prefers dark mode"]


def test_a_fact_and_a_turn_say_it_too():
    items = [
        {"id": "f1", "kind": "fact", "text": "Dana: theme = dark", "agent": "a1", "occurred_at": "2026-01-05", AGREE: 3},
        _item(id="t1", kind="turn", session="s1", **{AGREE: 2}),
    ]
    block, _ = format_block(items, 400, set())
    lines = block.splitlines()[1:]
    assert lines[0].startswith("- [2026-01-05 · fact · agent a1 (3 agents agree)]")
    assert lines[1].startswith("- [2026-01-05 · turn · agent a7, session s1 (2 agents agree)]")


@pytest.mark.parametrize("value", [None, 1, 0, -4, True, "5", 2.5, [5], {"n": 5}])
def test_a_count_that_is_not_two_or_more_agents_shows_nothing(value):
    block, _ = format_block([_item(**{AGREE: value})], 400, set())
    assert "agree" not in block
    assert block.splitlines()[1] == "- [2026-01-05 · memory · agent a7] Dana prefers dark mode"


def test_a_huge_count_is_bounded():
    block, _ = format_block([_item(**{AGREE: 10**30})], 400, set())
    assert f"({MAX_AGREE}+ agents agree)" in block
