"""redact_event: the text fields of an event lose their secrets before the event leaves the
host; ids, names and the scope stay as they are. Made-up secrets."""

from __future__ import annotations

from writepath import remembered

from memstream.core.ids import new_event_id
from memstream.producers.events import (
    DelegationCompleted,
    MemoryForgotten,
    MemoryWritten,
    Scope,
    SessionEnded,
    ToolCall,
    TurnRecorded,
    decode,
    encode,
    to_builtins,
    utcnow,
)
from memstream.producers.redact import TEXT_FIELDS, redact_event

TOKEN = "ghp_Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jK"
SCOPE = Scope(tenant="t1", agent="a1", session_id="s1")


def _turn(**kw) -> TurnRecorded:
    base = dict(id=new_event_id(), occurred_at=utcnow(), scope=SCOPE, turn_index=1, user_text="hi", assistant_text="hello")
    return TurnRecorded(**(base | kw))


def test_every_text_field_of_a_turn_is_redacted_and_nothing_else_changes():
    turn = _turn(
        user_text=f"my token is {TOKEN}",
        assistant_text="use PGPASSWORD=Winter#1 then",
        tool_calls=[
            ToolCall(name="terminal", arguments=f"export GITHUB_TOKEN={TOKEN}", result="ok", call_id="c1"),
            ToolCall(name="read", arguments="README.md", result="plain", call_id="c2"),
        ],
    )
    out, n = redact_event(turn)
    assert n == 3
    blob = repr(to_builtins(out))
    assert TOKEN not in blob and "Winter#1" not in blob
    assert out.user_text == "my token is [REDACTED:github_token]"
    assert out.assistant_text == "use PGPASSWORD=[REDACTED:secret] then"
    assert out.tool_calls[0].arguments == "export GITHUB_TOKEN=[REDACTED:github_token]"
    assert out.tool_calls[1] is turn.tool_calls[1]
    assert (out.id, out.scope, out.occurred_at) == (turn.id, turn.scope, turn.occurred_at)
    assert decode(encode(out)) == out  # still a valid event


def test_memories_delegations_and_forget_reasons_are_redacted():
    events = [
        MemoryWritten(
            id=new_event_id(),
            occurred_at=utcnow(),
            scope=SCOPE,
            action="add",
            target="memory",
            content=f"deploy key {TOKEN}",
            old_text=f"old {TOKEN}",
        ),
        DelegationCompleted(
            id=new_event_id(),
            occurred_at=utcnow(),
            scope=SCOPE,
            task=f"clone with {TOKEN}",
            result="redis://:hunter2pass@cache:6379 works",
        ),
        MemoryForgotten(id=new_event_id(), occurred_at=utcnow(), scope=SCOPE, forgotten_id="m1", reason=f"it held {TOKEN}"),
        remembered(f"the token is {TOKEN}"),
    ]
    for event in events:
        out, n = redact_event(event)
        assert n >= 1, type(event).__name__
        blob = repr(to_builtins(out))
        assert TOKEN not in blob and "hunter2pass" not in blob


def test_an_event_without_a_secret_comes_back_as_the_same_object():
    for event in (
        _turn(),
        remembered("I prefer short answers"),
        SessionEnded(id=new_event_id(), occurred_at=utcnow(), scope=SCOPE),
    ):
        assert redact_event(event) == (event, 0)
        assert redact_event(event)[0] is event


def test_every_event_type_with_free_text_is_listed():
    from memstream.producers.events import EVENT_TYPES

    for tag, cls in EVENT_TYPES.items():
        text_fields = [
            f
            for f, t in cls.__annotations__.items()
            if t in ("str", str)
            and f
            not in ("id", "tool_call_id", "call_id", "forgotten_id", "parent_session_id", "child_session_id", "author", "origin")
        ]
        if text_fields:
            assert cls in TEXT_FIELDS, tag
