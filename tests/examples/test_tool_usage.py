"""The example projection of examples/tool_usage: registered by a setting, built from the
whole history as its first version, rebuilt by replay, dropped with its keys."""

from __future__ import annotations

from pipeline_support import at, forgotten, pipeline_settings, scope

from memstream.core import keys, new_event_id
from memstream.producers import ToolCall, TurnRecorded
from memstream.projections import Catalog, PluginError, plugins
from memstream.workers import Pipeline, PipelineConfig

SPEC = "memstream_tool_usage:ToolUsageProjection"


def tool_turn(agent: str, *tools: str, index: int = 0) -> TurnRecorded:
    return TurnRecorded(
        id=new_event_id(),
        occurred_at=at(index),
        scope=scope(agent=agent),
        turn_index=index,
        user_text="run it",
        assistant_text="done",
        tool_calls=[ToolCall(name=t, arguments="{}") for t in tools],
    )


def pipeline_with_the_example(home, event_log) -> Pipeline:
    settings = pipeline_settings(home, stream_prefix=event_log.prefix, projections=SPEC)
    return Pipeline(settings, event_log, PipelineConfig(embedder="hash", consumer="w1"))


def test_the_example_is_built_from_the_whole_history_before_readers_see_it(tmp_path, event_log):
    history = [
        tool_turn("a1", "terminal", "web_search", index=0),
        tool_turn("a1", "terminal", index=1),
        tool_turn("a2", "browser", index=0),
    ]
    event_log.append(history)
    pipeline = pipeline_with_the_example(tmp_path / "home", event_log)
    try:
        catalog = Catalog(event_log.client, event_log.prefix)
        assert catalog.versions("tool_usage")[0].state == "building"  # new to a log with a history
        pipeline.drain()
        assert catalog.active("tool_usage").version == 1
        usage = pipeline.runs["tool_usage.v1"].projection
        assert usage.usage("t1", "a1") == {"terminal": 2, "web_search": 1}
        assert usage.usage("t1", "a2") == {"browser": 1}

        event_log.append([forgotten(history[0].id)])
        pipeline.drain()
        assert usage.usage("t1", "a1") == {"terminal": 1}

        catalog.add_build("tool_usage")
        pipeline.sync_catalog()
        pipeline.drain()
        rebuilt = pipeline.runs["tool_usage.v2"].projection
        assert catalog.active("tool_usage").version == 2
        assert rebuilt.usage("t1", "a1") == usage.usage("t1", "a1") and rebuilt.usage("t1", "a2") == {"browser": 1}

        catalog.drop("tool_usage", 1)
        pipeline.sync_catalog()
        assert not list(event_log.client.scan_iter(match=keys.own_pattern(event_log.prefix, "tool_usage", 1)))
        assert list(event_log.client.scan_iter(match=keys.own_pattern(event_log.prefix, "tool_usage", 2)))

    finally:
        pipeline.stop()  # its store's files and lock closed


def test_a_projection_that_cannot_be_loaded_or_clashes_is_named_in_a_clear_error():
    import pytest

    with pytest.raises(PluginError, match="'no_such_module:Thing' cannot be loaded: ModuleNotFoundError"):
        plugins("no_such_module:Thing")
    with pytest.raises(PluginError, match="is not module:Class"):
        plugins("memstream_tool_usage")
    with pytest.raises(PluginError, match="a projection called 'turns' exists already"):
        plugins("memstream.projections:TurnsProjection")
    assert [row.name for row in plugins(SPEC)] == ["tool_usage"]
