"""The agent's tools and the provider's hooks with any arguments: a tool always answers a
strict JSON string (a clear ``{"error": ...}`` for arguments its schema does not allow),
and no hook raises into the agent loop."""

from __future__ import annotations

import json
import math

import pytest
from fuzzing import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_support import harness  # noqa: F401  (fixture)

from memstream.producers.events import (
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    TurnRecorded,
)
from memstream.provider.provider import MemstreamProvider
from memstream.provider.tools import (
    TOOL_NAMES,
    TOOL_SCHEMAS,
    ToolError,
    tool_args,
)
from memstream.text.facts.kinds import FACT_KINDS


def strict(text: str):
    """``json.loads`` that refuses NaN and Infinity (not JSON; strict parsers reject them)."""

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def call(p: MemstreamProvider, name, args) -> dict:
    out = p.handle_tool_call(name, args)
    assert isinstance(out, str)
    answer = strict(out)
    assert isinstance(answer, dict)
    return answer


# -- the checks, one by one -----------------------------------------------------------------
def test_facts_with_a_kind_the_extractor_does_not_produce_is_an_error_listing_the_kinds():
    with pytest.raises(ToolError) as raised:
        tool_args("memstream_facts", {"kind": "favourite"})
    message = str(raised.value)
    assert "kind must be one of" in message and "'favourite'" in message
    assert all(kind in message for kind in FACT_KINDS)
    assert tool_args("memstream_facts", {"kind": "preference"}).kind == "preference"
    assert tool_args("memstream_facts", {"kind": ""}).kind is None  # blank: every kind


def test_the_enums_of_the_schemas_are_the_lists_the_checks_use():
    schemas = {s["name"]: s["parameters"]["properties"] for s in TOOL_SCHEMAS}
    assert schemas["memstream_facts"]["kind"]["enum"] == list(FACT_KINDS)
    for kind in schemas["memstream_search"]["kind"]["enum"]:
        assert tool_args("memstream_search", {"query": "q", "kind": kind}).kind == kind
    for target in schemas["memstream_remember"]["target"]["enum"]:
        assert tool_args("memstream_remember", {"content": "c", "target": target}).target == target


@pytest.mark.parametrize(
    ("name", "args", "error"),
    [
        ("memstream_search", {"query": "x", "tenant": "t1"}, "memstream_search has no argument 'tenant'; it takes query"),
        ("memstream_search", {"query": "x", "top_k": 3}, "has no argument 'top_k'"),
        ("memstream_recent", {"limit": 3, "agent": "other"}, "has no argument 'agent'"),
        ("memstream_remember", {"content": "x", "tags": ["a"]}, "has no argument 'tags'"),
        ("memstream_forget", {"id": "x", "tenant": "t2"}, "has no argument 'tenant'"),
        ("memstream_search", ["query", "x"], "takes a JSON object of arguments, got ['query', 'x']"),
        ("memstream_recent", None, "takes a JSON object of arguments"),
        ("memstream_search", {"query": "x", "limit": 3.0}, "limit must be an integer, got 3.0"),
        ("memstream_search", {"query": "x", "limit": "²"}, "limit must be an integer, got '²'"),
        ("memstream_search", {"query": "x", "limit": "9" * 5000}, "limit must be an integer, got '999"),
        ("memstream_search", {"query": "x", "limit": True}, "limit must be an integer, got True"),
        ("memstream_search", {"query": "x", "limit": float("nan")}, "limit must be an integer, got nan"),
        ("memstream_search", {"query": "x" * 2001}, "query must be at most 2000 characters, got 2001"),
        ("memstream_search", {"query": "x", "scope": ["all"]}, "scope must be a non-empty string, got ['all']"),
        ("memstream_context", {"id": "i" * 201}, "id must be at most 200 characters"),
        ("memstream_facts", {"history": "true"}, "history must be true or false, got 'true'"),
        ("memstream_facts", {"subject": {"a": 1}}, "subject must be a non-empty string"),
        ("memstream_remember", {"content": "x", "target": ""}, None),  # blank: the default target
        ("memstream_remember", {"content": "x", "target": "users"}, "target must be one of memory, user; got 'users'"),
        ("memstream_remember", {"content": "x", "target": 0}, "target must be a non-empty string, got 0"),
        ("memstream_remember", {"content": 42}, "content must be a non-empty string, got 42"),
        ("memstream_forget", {"id": "x", "reason": 0}, "reason must be a string, got 0"),
        ("memstream_forget", {"id": "x", "reason": "r" * 501}, "reason must be at most 500 characters, got 501"),
        ("memstream_forget", {"id": " "}, "id must be a non-empty string"),
    ],
)
def test_arguments_the_schema_does_not_allow_are_clear_errors(harness, name, args, error):
    p = harness.provider()
    answer = call(p, name, args)
    if error is None:
        assert answer["ok"] is True and answer["target"] == "memory"
        return
    assert error in answer["error"] and len(answer["error"]) < 400
    assert p.stats()["tool_errors"] == 1 and "hook_errors" not in p.stats()


def test_unknown_tool_names_of_any_type_are_errors(harness):
    p = harness.provider()
    for name in ("memstream_nope", None, 42, ["memstream_search"], "x" * 10_000):
        answer = call(p, name, {})
        assert "memstream has no tool named" in answer["error"] and len(answer["error"]) < 400


def test_remember_says_when_it_clipped_the_content(harness):
    p = harness.provider()
    answer = call(p, "memstream_remember", {"content": "x" * (p.settings.max_text_bytes + 10)})
    assert answer["ok"] is True and "only its start was kept" in answer["clipped"]
    assert "clipped" not in call(p, "memstream_remember", {"content": "short"})


def test_a_service_answer_that_is_not_strict_json_is_made_strict(harness, monkeypatch):
    p = harness.provider()
    monkeypatch.setattr(p.recall, "ask", lambda request, timeout: {"results": [{"score": math.nan}, {"score": math.inf}]})
    assert call(p, "memstream_search", {"query": "x"}) == {"results": [{"score": None}, {"score": None}]}
    monkeypatch.setattr(p.recall, "ask", lambda request, timeout: ["not", "an", "object"])
    assert "malformed answer" in call(p, "memstream_search", {"query": "x"})["error"]


# -- any arguments at all -------------------------------------------------------------------
_TEXT = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(exclude_categories=()), max_size=10),
    st.sampled_from(
        ["", " ", "all", "current", "session", "facts", "user", "memory", "note", "10", "-1", "²", "9" * 30, "true", "x" * 2500]
    ),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_KEYS = sorted({k for s in TOOL_SCHEMAS for k in s["parameters"]["properties"]} | {"tenant", "agent"})
_ARGS = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(_KEYS), _TEXT), _JSON, max_size=5),
    st.builds(
        lambda known, extra: {**extra, **known},
        st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=5),
        st.dictionaries(_TEXT, _JSON, max_size=1),
    ),
    _JSON,
)
_NAMES = st.one_of(st.sampled_from(TOOL_NAMES), _JSON)
_FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@_FUZZ
@given(name=_NAMES, args=_ARGS)
def test_any_tool_call_answers_strict_json_without_a_service(harness, name, args):
    """No service runs: every call is answered, an error or (remember/forget) a spooled event."""
    p = harness.providers[0] if harness.providers else harness.provider()
    answer = call(p, name, args)
    assert set(answer) >= {"ok"} or isinstance(answer.get("error"), str), answer
    if "error" in answer:
        assert answer["error"] and len(answer["error"]) <= 500


# every hook Hermes calls, with its usual arguments; the fuzz replaces any of them
_HOOKS = {
    "on_turn_start": (1, "hello"),
    "prefetch": ("hello",),
    "queue_prefetch": ("hello",),
    "sync_turn": ("hello", "hi there"),
    "on_memory_write": ("add", "memory", "a note"),
    "on_session_end": ([],),
    "on_session_switch": ("sess-2",),
    "on_delegation": ("a task", "its result"),
    "on_pre_compress": ([],),
    "system_prompt_block": (),
    "shutdown": (),
}
_RETURNS = {"prefetch": str, "system_prompt_block": str}


@_FUZZ
@given(hook=st.sampled_from(sorted(_HOOKS)), data=st.data())
def test_no_hook_raises_whatever_it_is_given(harness, hook, data):
    p = harness.providers[0] if harness.providers else harness.provider()
    args = list(_HOOKS[hook])
    # replace some arguments, maybe add more, and any keyword arguments
    for i in range(len(args)):
        if data.draw(st.booleans(), label=f"replace {i}"):
            args[i] = data.draw(_JSON, label=f"arg {i}")
    args += data.draw(st.lists(_JSON, max_size=2), label="extra args")
    kwargs = data.draw(
        st.dictionaries(
            st.sampled_from(
                ["session_id", "messages", "metadata", "reason", "parent_session_id", "reset", "rewound", "child_session_id"]
            )
            | st.text(max_size=8),
            _JSON,
            max_size=3,
        ),
        label="kwargs",
    )
    method = getattr(p, hook, None)
    if method is None:  # a hook this provider leaves to the base class
        return
    out = method(*args, **kwargs)
    if hook in _RETURNS:
        assert isinstance(out, _RETURNS[hook])
    if hook == "shutdown":  # start again for the next example
        p.initialize("sess-1", platform="cli", agent_context="primary")


def test_after_any_hook_input_the_provider_still_records_what_it_is_given(harness):
    """Bad input is dropped (and counted), nothing else is lost."""
    p = harness.provider()

    @_FUZZ
    @given(sync=st.tuples(_JSON, _JSON, _JSON), write=st.tuples(_JSON, _JSON, _JSON, _JSON), start=st.tuples(_JSON, _JSON))
    def bad_input(sync, write, start):
        p.on_turn_start(*start)
        p.sync_turn(sync[0], sync[1], messages=sync[2])
        p.on_memory_write(*write)
        p.handle_tool_call("memstream_forget", {"id": sync[0]})

    bad_input()
    p.on_turn_start(7, "the good turn")
    p.sync_turn("the good turn", "answered", session_id="sess-1")
    p.on_memory_write("add", "user", "likes green tea", {"tool_call_id": "call-good"})
    assert call(p, "memstream_remember", {"content": "the good memory"})["ok"] is True
    assert call(p, "memstream_forget", {"id": "the-good-id", "reason": "asked"})["ok"] is True
    events = harness.events(p)
    turns = [e for e in events if isinstance(e, TurnRecorded) and e.user_text == "the good turn"]
    assert [t.turn_index for t in turns] == [7]
    assert any(isinstance(e, MemoryWritten) and e.tool_call_id == "call-good" for e in events)
    assert any(isinstance(e, MemoryRemembered) and e.content == "the good memory" for e in events)
    assert any(isinstance(e, MemoryForgotten) and e.forgotten_id == "the-good-id" for e in events)
    assert p.initialized


@pytest.mark.valkey
def test_any_tool_call_answers_strict_json_from_a_running_service(tmp_path, valkey_server):
    """The same with the service answering (real Valkey, the pipeline's query server)."""
    import redis

    from memstream.core.settings import Settings
    from memstream.producers import writer as writer_module
    from memstream.producers.stream import EventLog
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    base = dict(redis_url=valkey_server.url, autostart=False, embedder="hash", tool_timeout=5.0)
    settings_ = Settings.load(home=str(tmp_path / "svc"), **base)
    log = EventLog(client, settings_.stream_prefix, settings_.shards)
    pipeline = Pipeline(settings_, log, PipelineConfig(embedder="hash", consumer="w1")).start()
    p = MemstreamProvider(Settings.load(home=str(tmp_path / "h"), tenant="t1", **base))
    p.initialize("s1", platform="cli", agent_identity="minion-1")
    try:
        p.sync_turn("The build server is called hopper", "Noted: hopper.", session_id="s1")
        assert call(p, "memstream_remember", {"content": "The user prefers green tea"})["ok"] is True
        assert p.writer.flush(10)
        answered = []

        @settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(name=st.sampled_from(TOOL_NAMES[:4]), args=_ARGS)
        def any_call(name, args):
            answer = call(p, name, args)
            if "error" not in answer:
                answered.append(name)
            else:
                assert "no answer within" not in answer["error"], answer  # the service kept answering

        any_call()
        assert answered  # some calls were valid and answered, not only refused
        assert call(p, "memstream_search", {"query": "build server"})["results"]
        assert call(p, "memstream_facts", {"kind": "preference", "subject": "user", "history": True})["facts"] is not None
    finally:
        p.shutdown()
        for w in list(writer_module._registry.values()):
            w.close(timeout=0.5)
        writer_module._registry.clear()
        pipeline.stop()
        client.close()
