"""The event contract: frozen samples of every event type still decode, tags are pinned."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from memstream.core.ids import new_event_id
from memstream.producers.events import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    Event,
    MemoryWritten,
    Scope,
    SessionEnded,
    TurnRecorded,
    decode,
    encode,
    to_builtins,
    utcnow,
)

SAMPLES = Path(__file__).parent / "samples" / "events_v1.jsonl"

# Written by hand, independent of the sample file: what the frozen bytes must decode to.
AT = datetime(2026, 11, 22, 5, 3, 4, 567000, tzinfo=UTC)
SCOPE = Scope(
    tenant="acme",
    app="hermes",
    agent="agent:main:telegram:dm:42",
    user_id="u-123",
    session_id="20261122_050250_57e41d",
    run_id="019a8b7c-0000-7000-8000-000000000001",
    platform="telegram",
)
EXPECTED = {
    "turn.recorded": {
        "turn_index": 3,
        "user_text": "What's the weather in Zürich?",
        "assistant_text": "Sunny, 21 °C.",
        "author": "Ada",
        "clipped": ["assistant_text"],
        "tool_calls": [
            {"name": "web_search", "arguments": '{"q": "Zürich weather"}', "result": "sunny 21C", "call_id": "call_1"}
        ],
    },
    "memory.written": {
        "action": "replace",
        "target": "user",
        "content": "Ada prefers metric units",
        "old_text": "prefers imperial",
        "tool_call_id": "call_7",
        "origin": "assistant_tool",
        "clipped": ["content"],
    },
    "session.ended": {"turn_count": 5, "message_count": 17, "clipped": []},
    "session.switched": {"reason": "new_session", "parent_session_id": "20261121_230000_aaaaaa", "reset": True, "rewound": True},
    "delegation.completed": {
        "task": "summarise the report",
        "result": "three findings",
        "child_session_id": "20261122_050300_bbbbbb",
        "clipped": ["result"],
    },
    "memory.remembered": {"content": "the deploy key lives in vault", "target": "user"},
    "memory.forgotten": {"forgotten_id": "019a8b7c-1000-7000-8000-000000000006", "reason": "user asked"},
    "turn.recorded+turn_author": {
        "turn_index": 4,
        "author": "Lin",
        "turn_author": {"id": "bot:ops/deployer", "name": "Lin", "is_bot": True},
        "clipped": ["user_text"],
    },
}
# Fields added to a type after its first sample, with their defaults: a sample written
# before a field existed decodes to the default (and its JSON form gains the field).
ADDED = {"turn.recorded": {"turn_author": None}}


def _samples() -> list[dict]:
    return [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]


def _name(sample: dict) -> str:
    return sample.get("sample") or sample["type"]


def test_every_event_type_and_every_added_field_has_a_frozen_sample():
    tags = [s["type"] for s in _samples()]
    assert sorted(set(tags)) == sorted(EVENT_TYPES), (
        "every event type needs a frozen sample: run tests/samples/make_events_v1.py --append"
    )
    assert sorted(EXPECTED) == sorted(_name(s) for s in _samples())
    for tag, fields in ADDED.items():
        for field in fields:
            assert any(s["type"] == tag and s["json"].get(field) is not None for s in _samples()), (tag, field)


@pytest.mark.parametrize("sample", _samples(), ids=_name)
def test_frozen_msgpack_sample_still_decodes_to_its_recorded_values(sample):
    event = decode(bytes.fromhex(sample["msgpack_hex"]))
    assert type(event) is EVENT_TYPES[sample["type"]]
    assert event.v == SCHEMA_VERSION == 1
    assert event.occurred_at == AT
    assert event.scope == SCOPE
    assert to_builtins(event)["type"] == sample["type"]
    for name, value in EXPECTED[_name(sample)].items():
        assert to_builtins(event)[name] == value, name
    # the JSON form recorded with the bytes: every field, nothing renamed; a field added
    # since the sample was written decodes to its default
    added = {k: v for k, v in ADDED.get(sample["type"], {}).items() if k not in sample["json"]}
    assert json.loads(msgspec.json.encode(event)) == {**sample["json"], **added}


@pytest.mark.parametrize("sample", _samples(), ids=_name)
def test_frozen_json_sample_decodes_to_the_same_event_as_its_bytes(sample):
    from_json = msgspec.json.decode(json.dumps(sample["json"]).encode(), type=Event)
    assert from_json == decode(bytes.fromhex(sample["msgpack_hex"]))


def test_event_round_trips_through_msgpack_with_aware_utc_time():
    event = TurnRecorded(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="t"), turn_index=1, user_text="hi", assistant_text="hello"
    )
    back = decode(encode(event))
    assert back == event
    assert back.occurred_at.tzinfo is not None


def test_every_tag_is_pinned_by_hand_not_the_class_name():
    for tag, cls in EVENT_TYPES.items():
        assert tag != cls.__name__
        assert "." in tag and tag == tag.lower()


def test_an_unknown_event_type_is_a_validation_error_not_a_crash():
    raw = msgspec.msgpack.encode({"type": "turn.reimagined", "id": "x"})
    with pytest.raises(msgspec.ValidationError):
        decode(raw)


def test_an_event_missing_a_required_field_is_rejected():
    good = to_builtins(SessionEnded(id="e1", occurred_at=utcnow(), scope=Scope(tenant="t")))
    del good["scope"]
    with pytest.raises(msgspec.ValidationError):
        decode(msgspec.msgpack.encode(good))


def test_an_unknown_memory_action_does_not_decode():
    good = to_builtins(
        MemoryWritten(id="e1", occurred_at=utcnow(), scope=Scope(tenant="t"), action="add", target="memory", content="x")
    )
    good["action"] = "append"
    with pytest.raises(msgspec.ValidationError):
        decode(msgspec.msgpack.encode(good))


def test_events_are_frozen():
    event = SessionEnded(id="e1", occurred_at=utcnow(), scope=Scope(tenant="t"))
    with pytest.raises(AttributeError):
        event.turn_count = 3  # type: ignore[misc]
