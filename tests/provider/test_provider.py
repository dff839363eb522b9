"""The Hermes provider's hooks: what each one appends, and that none of them raises."""

from __future__ import annotations

import json
import socket
import threading
import uuid

import pytest
from provider_support import harness  # noqa: F401  (fixture)

from memstream.producers.events import (
    DelegationCompleted,
    MemoryWritten,
    SessionEnded,
    SessionSwitched,
    TurnRecorded,
)
from memstream.provider import provider as provider_module
from memstream.provider.provider import MemstreamProvider, resolve_agent


def of(kind, events):
    return [e for e in events if isinstance(e, kind)]


# A Hermes transcript as sync_turn receives it (OpenAI chat messages), two turns.
def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TURN_1 = [
    {"role": "user", "content": "find the report"},
    {"role": "assistant", "content": "", "tool_calls": [call("c1", "web_search", '{"q": "report"}')]},
    {"role": "tool", "tool_call_id": "c1", "content": "found report.pdf"},
    {"role": "assistant", "content": "It is report.pdf"},
]
TURN_2 = [
    {"role": "user", "content": "summarise it"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c2", "read_file", '{"path": "report.pdf"}'), call("c3", "terminal", '{"cmd": "wc -w"}')],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "three findings"},
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "1200 words"}]},
    {"role": "assistant", "content": "Three findings, 1200 words."},
]
SYSTEM = [{"role": "system", "content": "You are Hermes."}]


def brief(turn: TurnRecorded) -> list[tuple[str, str, str, str]]:
    return [(c.name, c.arguments, c.result, c.call_id) for c in turn.tool_calls]


TURN_1_CALLS = [("web_search", '{"q": "report"}', "found report.pdf", "c1")]
TURN_2_CALLS = [
    ("read_file", '{"path": "report.pdf"}', "three findings", "c2"),
    ("terminal", '{"cmd": "wc -w"}', "1200 words", "c3"),
]


# -- scope --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "agent"),
    [
        (
            {"gateway_session_key": "agent:main:tg:dm:9", "agent_identity": "coder", "agent_workspace": "hermes"},
            "agent:main:tg:dm:9",
        ),
        ({"agent_identity": "coder", "agent_workspace": "hermes"}, "coder"),
        ({"agent_workspace": "hermes"}, "hermes"),
        ({}, "default"),
        ({"gateway_session_key": "  ", "agent_identity": None, "agent_workspace": "ws"}, "ws"),
        ({"gateway_session_key": 42, "agent_identity": "  coder "}, "coder"),
    ],
)
def test_agent_identity_is_gateway_key_then_profile_then_workspace_then_default(kwargs, agent):
    assert resolve_agent(kwargs) == agent


def test_every_event_carries_the_scope_resolved_at_initialize(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_TENANT", "acme")
    p = harness.provider(
        "20261122_050250_57e41d",
        platform="telegram",
        user_id="u-123",
        user_name="Ada",
        chat_id="chat-9",
        gateway_session_key="agent:main:test:dm:chat-9",
        agent_identity="default",
        agent_workspace="hermes",
    )
    p.on_memory_write("add", "user", "Ada likes tea", {"session_id": "20261122_050250_57e41d"})
    p.sync_turn("hi", "hello", session_id="20261122_050250_57e41d")
    p.on_delegation("task", "done", child_session_id="child-1")
    events = harness.events()
    assert len(events) == 3
    scopes = {e.scope for e in events}
    assert len(scopes) == 1
    scope = scopes.pop()
    assert (scope.tenant, scope.app, scope.agent, scope.user_id, scope.session_id, scope.platform) == (
        "acme",
        "hermes",
        "agent:main:test:dm:chat-9",
        "u-123",
        "20261122_050250_57e41d",
        "telegram",
    )
    assert uuid.UUID(scope.run_id).version == 7
    assert of(TurnRecorded, events)[0].author == "Ada"


def test_each_initialization_gets_its_own_run_id_and_shares_the_writer(harness):
    a = harness.provider("s-a", agent_identity="one")
    b = harness.provider("s-b", agent_identity="two")
    assert a.writer is b.writer
    a.on_session_end([])
    b.on_session_end([])
    events = harness.events()
    assert {e.scope.agent for e in events} == {"one", "two"}
    assert len({e.scope.run_id for e in events}) == 2


def test_memory_write_scope_follows_the_session_in_its_metadata(harness):
    p = harness.provider("sess-1")
    p.on_memory_write("add", "memory", "x", {"session_id": "sess-other"})
    p.on_memory_write("add", "memory", "y")
    assert [e.scope.session_id for e in harness.events()] == ["sess-other", "sess-1"]


# -- sync_turn -----------------------------------------------------------------------------


def test_sync_turn_takes_only_this_turns_tool_calls_from_the_whole_transcript(harness):
    p = harness.provider()
    p.on_turn_start(1, "find the report")
    p.sync_turn("find the report", "It is report.pdf", session_id="sess-1", messages=SYSTEM + TURN_1)
    p.on_turn_start(2, "summarise it")
    p.sync_turn("summarise it", "Three findings, 1200 words.", session_id="sess-1", messages=SYSTEM + TURN_1 + TURN_2)
    turns = of(TurnRecorded, harness.events())
    assert [t.turn_index for t in turns] == [1, 2]
    assert [brief(t) for t in turns] == [TURN_1_CALLS, TURN_2_CALLS]
    assert (turns[1].user_text, turns[1].assistant_text) == ("summarise it", "Three findings, 1200 words.")


def test_a_late_sync_of_turn_n_after_turn_n_plus_1_started_gets_turn_n(harness):
    p = harness.provider()
    p.on_turn_start(1, "find the report")
    p.on_turn_start(2, "summarise it")  # Hermes's sync worker is behind: turn 2 already runs
    in_flight = SYSTEM + TURN_1 + TURN_2[:2]  # turn 2's first tool call has no result yet
    p.sync_turn("find the report", "It is report.pdf", session_id="sess-1", messages=in_flight)
    p.sync_turn("summarise it", "Three findings, 1200 words.", session_id="sess-1", messages=SYSTEM + TURN_1 + TURN_2)
    turns = of(TurnRecorded, harness.events())
    assert [(t.turn_index, t.user_text) for t in turns] == [(1, "find the report"), (2, "summarise it")]
    assert [brief(t) for t in turns] == [TURN_1_CALLS, TURN_2_CALLS]


def test_a_repeated_user_text_is_matched_to_the_right_turn(harness):
    p = harness.provider()
    again = [dict(m) for m in TURN_1]
    again[1] = {"role": "assistant", "tool_calls": [call("c9", "web_search", '{"q": "again"}')]}
    again[2] = {"role": "tool", "tool_call_id": "c9", "content": "found it again"}
    p.sync_turn("find the report", "It is report.pdf", messages=TURN_1)
    p.sync_turn("find the report", "It is report.pdf", messages=TURN_1 + again)
    turns = of(TurnRecorded, harness.events())
    assert [[c.call_id for c in t.tool_calls] for t in turns] == [["c1"], ["c9"]]


def test_after_compression_the_turn_is_found_in_the_compacted_transcript(harness):
    p = harness.provider("sess-1")
    long_history = SYSTEM + TURN_1 + TURN_2
    p.on_turn_start(1, "find the report")
    p.sync_turn("find the report", "It is report.pdf", messages=SYSTEM + TURN_1)
    p.on_turn_start(2, "summarise it")
    p.sync_turn("summarise it", "Three findings, 1200 words.", messages=long_history)
    # Hermes compresses in place: session end, then a switch to the same id
    p.on_session_end(long_history)
    p.on_session_switch("sess-1", parent_session_id="sess-1", reason="compression")
    turn_3 = [
        {"role": "user", "content": "email it to Bob"},
        {"role": "assistant", "tool_calls": [call("c7", "send_email", '{"to": "bob"}')]},
        {"role": "tool", "tool_call_id": "c7", "content": "sent"},
        {"role": "assistant", "content": "Sent."},
    ]
    # the compacted transcript keeps turn 2 verbatim, and turn 4 already started (late sync)
    compacted = (
        SYSTEM
        + [{"role": "user", "content": "[Summary of turn 1: report found]"}, {"role": "assistant", "content": "Understood."}]
        + TURN_2
        + turn_3
        + [{"role": "user", "content": "thanks"}]
    )
    assert len(compacted) > len(long_history)  # the old watermark now points into turn 3
    p.on_turn_start(3, "email it to Bob")
    p.on_turn_start(4, "thanks")
    p.sync_turn("email it to Bob", "Sent.", messages=compacted)
    events = harness.events()
    turns = of(TurnRecorded, events)
    assert [(t.turn_index, brief(t)) for t in turns][-1] == (3, [("send_email", '{"to": "bob"}', "sent", "c7")])
    switch = of(SessionSwitched, events)[0]
    assert (switch.reason, switch.reset, switch.parent_session_id, switch.scope.session_id) == (
        "compression",
        False,
        "sess-1",
        "sess-1",
    )
    ended = of(SessionEnded, events)
    assert [(e.turn_count, e.message_count) for e in ended] == [(2, len(long_history))]


def test_sync_turn_without_messages_records_the_turn_without_tool_calls(harness):
    p = harness.provider()
    p.sync_turn("hi", "hello")
    p.sync_turn("hi", "hello", messages=[])
    p.sync_turn("hi", "hello", messages=[{"role": "assistant", "content": "no user message"}, "junk"])
    turns = of(TurnRecorded, harness.events())
    assert [t.tool_calls for t in turns] == [[], [], []]
    assert [t.turn_index for t in turns] == [1, 2, 3]


def test_turn_index_follows_on_turn_start_and_counts_on_without_it(harness):
    p = harness.provider()
    p.on_turn_start(7, "resumed question")  # --resume continues the count
    p.sync_turn("resumed question", "a")
    p.sync_turn("no turn start seen", "b")
    p.on_turn_start(9, "interrupted")  # never synced (interrupted turn)
    p.on_turn_start(10, "next")
    p.sync_turn("next", "c")
    assert [t.turn_index for t in of(TurnRecorded, harness.events())] == [7, 8, 10]


def test_turn_index_restarts_after_new_and_the_switch_is_recorded(harness):
    p = harness.provider("old-sess")
    p.on_turn_start(1, "a")
    p.sync_turn("a", "A")
    p.on_turn_start(2, "b")
    p.sync_turn("b", "B")
    p.on_turn_start(3, "never synced")
    p.on_session_end(SYSTEM)
    p.on_session_switch("new-sess", parent_session_id="old-sess", reset=True, reason="new_session")
    p.sync_turn("never synced", "stale turn start must not be used")
    p.on_turn_start(2, "d")
    p.sync_turn("d", "D")
    events = harness.events()
    turns = of(TurnRecorded, events)
    assert [(t.turn_index, t.scope.session_id) for t in turns] == [
        (1, "old-sess"),
        (2, "old-sess"),
        (1, "new-sess"),
        (2, "new-sess"),
    ]
    switch = of(SessionSwitched, events)[0]
    assert (switch.reason, switch.reset, switch.parent_session_id, switch.scope.session_id) == (
        "new_session",
        True,
        "old-sess",
        "new-sess",
    )
    assert of(SessionEnded, events)[0].scope.session_id == "old-sess"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"reset": True}, "new_session"),
        ({"rewound": True}, "rewind"),
        ({"reason": "resume"}, "resume"),
        ({"reason": "branch"}, "branch"),
        ({"reason": "something-new"}, "other"),
        ({}, "other"),
    ],
)
def test_session_switch_reason_is_taken_from_hermes_or_derived(harness, kwargs, reason):
    p = harness.provider("s1")
    p.on_session_switch("s2", parent_session_id="s1", **kwargs)
    [switch] = of(SessionSwitched, harness.events())
    assert switch.reason == reason


# -- on_session_end -----------------------------------------------------------------------


def test_session_end_fired_twice_with_the_same_state_is_recorded_once(harness):
    p = harness.provider()
    p.on_turn_start(1, "find the report")
    p.sync_turn("find the report", "It is report.pdf", messages=TURN_1)
    p.on_session_end(TURN_1)  # e.g. /new queued on the worker …
    p.on_session_end(list(TURN_1))  # … and the exit path, same state
    p.sync_turn("summarise it", "Three findings", messages=TURN_1 + TURN_2)
    p.on_session_end(TURN_1 + TURN_2)  # a new state: recorded
    p.on_session_end(None)
    ended = of(SessionEnded, harness.events())
    assert [(e.turn_count, e.message_count) for e in ended] == [(1, len(TURN_1)), (2, len(TURN_1 + TURN_2)), (2, 0)]


# -- on_memory_write -----------------------------------------------------------------------

METADATA = {
    "write_origin": "assistant_tool",
    "execution_context": "foreground",
    "session_id": "sess-1",
    "platform": "cli",
    "tool_name": "memory",
    "task_id": "t-1",
    "tool_call_id": "call_42",
}


def test_memory_writes_add_replace_and_remove_are_mirrored(harness):
    p = harness.provider("sess-1")
    p.on_memory_write("add", "user", "Ada prefers tea", dict(METADATA))
    p.on_memory_write("replace", "memory", "deploys on Fridays", {**METADATA, "old_text": "deploys on Mondays"})
    p.on_memory_write("remove", "user", "", {**METADATA, "old_text": "prefers tea"})
    p.on_memory_write("remove", "memory", "stray content", {**METADATA, "old_text": "Fridays"})
    writes = of(MemoryWritten, harness.events())
    assert [(w.action, w.target, w.content, w.old_text) for w in writes] == [
        ("add", "user", "Ada prefers tea", ""),
        ("replace", "memory", "deploys on Fridays", "deploys on Mondays"),
        ("remove", "user", "", "prefers tea"),
        ("remove", "memory", "", "Fridays"),  # a remove carries no content
    ]
    assert {(w.tool_call_id, w.origin) for w in writes} == {("call_42", "assistant_tool")}


def test_memory_write_accepts_metadata_positionally_by_keyword_or_not_at_all(harness):
    p = harness.provider("sess-1")
    p.on_memory_write("add", "memory", "a", METADATA)
    p.on_memory_write("add", "memory", "b", metadata=METADATA)
    p.on_memory_write("add", "memory", "c")
    p.on_memory_write("add", "memory", "d", "not a dict")
    writes = of(MemoryWritten, harness.events())
    assert [(w.content, w.tool_call_id) for w in writes] == [("a", "call_42"), ("b", "call_42"), ("c", ""), ("d", "")]


def test_delegation_is_recorded_with_the_child_session(harness):
    p = harness.provider()
    p.on_delegation("summarise the report", "three findings", child_session_id="child-7")
    [d] = of(DelegationCompleted, harness.events())
    assert (d.task, d.result, d.child_session_id) == ("summarise the report", "three findings", "child-7")


# -- no hook raises ----------------------------------------------------------------------


def _boom(*args, **kwargs):
    raise RuntimeError("injected failure")


EVENT_HOOKS = {
    "sync_turn": lambda p: p.sync_turn("u", "a", messages=TURN_1),
    "on_memory_write": lambda p: p.on_memory_write("add", "memory", "x", METADATA),
    "on_session_end": lambda p: p.on_session_end(TURN_1),
    "on_session_switch": lambda p: p.on_session_switch("s2", reset=True),
    "on_delegation": lambda p: p.on_delegation("t", "r"),
}


@pytest.mark.parametrize("hook", sorted(EVENT_HOOKS))
def test_a_hook_that_fails_inside_does_not_raise_and_is_counted(harness, monkeypatch, hook):
    p = harness.provider()
    monkeypatch.setattr(p, "_scope", _boom)
    assert EVENT_HOOKS[hook](p) is None
    assert p.stats()["hook_errors"] == 1


@pytest.mark.parametrize("hook", sorted(EVENT_HOOKS))
def test_a_hook_whose_spool_write_fails_does_not_raise_and_is_counted(harness, monkeypatch, hook):
    p = harness.provider()
    monkeypatch.setattr(p.writer, "emit", _boom)
    EVENT_HOOKS[hook](p)
    assert p.stats()["hook_errors"] == 1


def test_on_turn_start_with_a_bad_turn_number_does_not_raise(harness):
    p = harness.provider()
    p.on_turn_start("not a number", "hi")
    assert p.stats()["hook_errors"] == 1


def test_initialize_that_fails_does_not_raise_and_later_hooks_are_dropped_quietly(monkeypatch):
    monkeypatch.setattr(provider_module.Settings, "load", _boom)
    p = MemstreamProvider()
    p.initialize("s1", platform="cli")
    assert p.initialized is False and p.writer is None
    p.sync_turn("u", "a")
    p.on_memory_write("add", "memory", "x")
    stats = p.stats()
    assert stats["hook_errors"] == 1 and stats["not_initialized"] == 2
    p.shutdown()


@pytest.mark.parametrize(
    "kwargs, method",
    [({}, "release"), ({"platform": "telegram"}, "detach"), ({"gateway_session_key": "agent:main:cli:dm:1"}, "detach")],
)
def test_shutdown_that_fails_does_not_raise(harness, monkeypatch, kwargs, method):
    # Hermes's CLI exits right after shutdown: its provider ships and reports (release); a gateway's waits for nothing
    p = harness.provider(**kwargs)
    monkeypatch.setattr(p.writer, method, _boom)
    p.shutdown()
    assert p.stats()["hook_errors"] == 1


def test_hooks_after_shutdown_are_dropped_and_counted_not_raised(harness):
    p = harness.provider()
    p.on_memory_write("add", "memory", "kept")
    writer = p.writer
    assert writer.flush(10)
    p.shutdown()
    p.shutdown()  # idempotent
    p.on_memory_write("add", "memory", "late")
    p.sync_turn("late", "late")
    assert p.stats()["not_initialized"] == 2
    assert [w.content for w in of(MemoryWritten, __import__("writepath").logged_events(harness.log))] == ["kept"]


# -- availability and the read-side stubs ------------------------------------------------


def test_is_available_reads_configuration_only(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", "redis://10.255.255.1:6379/0")

    def no_network(*args, **kwargs):
        raise AssertionError("is_available() must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    threads_before = {t.name for t in threading.enumerate()}
    p = MemstreamProvider()
    assert p.is_available() is True
    assert p.writer is None
    assert {t.name for t in threading.enumerate()} <= threads_before
    assert not (tmp_path / "ms-home").exists()  # not even the spool directory


def test_read_side_hooks_answer_nothing_when_no_service_runs(harness):
    p = harness.provider()
    assert p.name == "memstream"
    schemas = p.get_tool_schemas()
    assert [s["name"] for s in schemas] == [
        "memstream_search",
        "memstream_context",
        "memstream_recent",
        "memstream_facts",
        "memstream_remember",
        "memstream_forget",
    ]
    assert all(s["parameters"]["type"] == "object" and s["description"] for s in schemas)
    assert p.get_tool_schemas() == schemas  # deterministic: Hermes calls it several times
    assert p.prefetch("anything") == "" and p.queue_prefetch("q") is None
    assert p.stats()["prefetch_empty"] == 1
    assert "memstream_search" in p.system_prompt_block()
    assert "query is required" in json.loads(p.handle_tool_call("memstream_search", {}))["error"]
    assert "unavailable" in json.loads(p.handle_tool_call("memstream_search", {"query": "x"}))["error"]
    assert {f["env_var"] for f in p.get_config_schema()} >= {"MEMSTREAM_REDIS_URL", "MEMSTREAM_TENANT"}


def test_the_setup_schema_offers_the_settings_own_defaults_and_variables():
    from memstream.core.settings import Settings

    defaults = Settings()
    for item in MemstreamProvider(defaults).get_config_schema():
        assert item["env_var"] == "MEMSTREAM_" + item["key"].upper()
        assert item.get("default", "") == str(getattr(defaults, item["key"])), item


def test_hooks_do_not_raise_when_the_log_output_is_broken(harness, monkeypatch):
    import io

    import structlog

    p = harness.provider()
    closed = io.StringIO()
    closed.close()  # e.g. Hermes's stdout/stderr closed or a broken pipe
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(closed))
    try:
        p.on_memory_write("append", "memory", "rejected: warns")
        p.sync_turn(42, "coerced: warns")
        monkeypatch.setattr(p, "_scope", _boom)
        p.on_session_end([])  # fails inside: warns
    finally:
        structlog.reset_defaults()
    stats = p.stats()
    assert (stats["rejected"], stats["coerced"], stats["hook_errors"]) == (1, 1, 1)


def test_a_secret_said_to_the_agent_reaches_the_log_redacted(harness):
    """The hooks spool the raw text; the shipper redacts it before the append, so the shared
    log never holds it (made-up credentials)."""
    token = "ghp_Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jK"
    p = harness.provider("s-secret")
    p.sync_turn(f"my token is {token}", "the cache is redis://:hunter2pass@cache.internal:6379/0", session_id="s-secret")
    p.on_memory_write("add", "memory", "the db password is Winter#2024!", {"session_id": "s-secret"})
    events = harness.events()
    turn = of(TurnRecorded, events)[0]
    assert turn.user_text == "my token is [REDACTED:github_token]"
    assert turn.assistant_text == "the cache is redis://:[REDACTED:url_password]@cache.internal:6379/0"
    assert of(MemoryWritten, events)[0].content == "the db password is [REDACTED:secret]"
    raw = b"".join(repr(fields).encode() for _, _, fields in harness.log.entries())
    assert token.encode() not in raw and b"hunter2pass" not in raw and b"Winter#2024!" not in raw
