"""What the provider's hooks record for the fleet report: every Hermes hook of the agent's
path its duration (a failing one too), ``prefetch`` its outcome, into the writer's tally."""

from __future__ import annotations

from provider_support import harness  # noqa: F401  (fixture)

from memstream.producers.report import HOOKS, ROW
from memstream.provider.provider import MemstreamProvider

# the MemoryProvider members Hermes calls (the Hermes contract, 0.19)
HERMES_METHODS = {
    "name",
    "is_available",
    "initialize",
    "get_tool_schemas",
    "system_prompt_block",
    "prefetch",
    "queue_prefetch",
    "sync_turn",
    "handle_tool_call",
    "shutdown",
    "on_turn_start",
    "on_session_end",
    "on_session_switch",
    "on_pre_compress",
    "on_memory_write",
    "on_delegation",
    "get_config_schema",
    "save_config",
    "backup_paths",
}
# called by Hermes's command line or once while it builds the agent, never on a turn
UNTIMED = {"name", "is_available", "get_tool_schemas", "get_config_schema", "save_config", "backup_paths"}


def test_the_timed_hooks_are_every_hermes_method_the_provider_has_on_the_agents_path():
    defined = {m for m in HERMES_METHODS if m in vars(MemstreamProvider)}
    assert set(HOOKS) == defined - UNTIMED


def test_every_timed_hook_records_its_duration_in_the_writers_tally(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "5")
    p = harness.provider(agent_identity="timed")
    tally = p.writer.tally
    p.system_prompt_block()
    p.on_turn_start(1, "hello")
    p.prefetch("hello")
    p.on_memory_write("add", "memory", "tea, no sugar", metadata={"session_id": "sess-1"})
    p.sync_turn("hello", "hi", session_id="sess-1")
    p.queue_prefetch("hello", session_id="sess-1")
    p.handle_tool_call("memstream_recent", {})
    p.on_delegation("summarise", "done", child_session_id="child-1")
    p.on_session_switch("sess-2", parent_session_id="sess-1", reset=True, reason="new_session")
    p.on_session_end([{"role": "user", "content": "hello"}])
    p.shutdown()  # the writer's tally stays the provider's: its own duration is kept too
    for hook in HOOKS:
        row = tally.hooks[hook]
        assert len(row) == ROW and sum(row[:-1]) == 1 and row[-1] > 0, hook
    assert tally.prefetch == {"fresh": 0, "cached": 0, "empty": 1}


def test_a_hook_that_fails_records_its_duration_and_still_returns_its_default(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "5")
    p = harness.provider()

    def broken(event):
        raise RuntimeError("spool on fire (test)")

    monkeypatch.setattr(p, "_emit", broken)
    assert p.on_memory_write("add", "memory", "x") is None
    assert p.stats()["hook_errors"] == 1
    assert sum(p.writer.tally.hooks["on_memory_write"][:-1]) == 1
