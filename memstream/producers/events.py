"""The event contract: one msgspec tagged union, pinned tags, a schema version.

Rules for the life of the log (years): add fields only with defaults; never change a
field's type, tag or default; rename only the Python attribute with
``msgspec.field(name=...)``. A change of meaning is a new event type. Frozen samples
of every event live in ``tests/samples`` and are decoded on every test run.

Every event carries ``id`` (UUIDv7, time-ordered, the idempotency key), ``occurred_at``
(UTC) and a ``scope``; ``v`` is the schema version it was written with.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, Union, get_args

import msgspec

__all__ = [
    "SCHEMA_VERSION",
    "Scope",
    "ToolCall",
    "TurnAuthor",
    "TurnRecorded",
    "MemoryAction",
    "MemoryTarget",
    "SwitchReason",
    "MemoryWritten",
    "SessionEnded",
    "SessionSwitched",
    "DelegationCompleted",
    "MemoryRemembered",
    "MemoryForgotten",
    "Event",
    "EVENT_TYPES",
    "encode",
    "decode",
    "to_builtins",
    "utcnow",
]

SCHEMA_VERSION = 1

MemoryAction = Literal["add", "replace", "remove"]
MemoryTarget = Literal["memory", "user"]
SwitchReason = Literal["new_session", "resume", "branch", "compression", "rewind", "other"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class Scope(msgspec.Struct, frozen=True):
    """Who and where an event belongs to. ``agent`` is the agent identity ("theme").

    Resolution rules (see docs/concepts/log.md): tenant from configuration; agent from
    ``gateway_session_key`` > ``agent_identity`` (profile) > ``agent_workspace`` >
    ``"default"``.
    """

    tenant: str
    app: str = "hermes"
    agent: str = "default"
    user_id: str = ""
    session_id: str = ""
    run_id: str = ""
    platform: str = ""


class ToolCall(msgspec.Struct, frozen=True):
    """One tool call of a turn, in brief (arguments and result are clipped)."""

    name: str
    arguments: str = ""
    result: str = ""
    call_id: str = ""


class TurnAuthor(msgspec.Struct, frozen=True):
    """Who wrote the user side of one turn, as the host names them per turn (a shared
    session has several participants): the transport's id, a display name, a bot or not."""

    id: str = ""
    name: str = ""
    is_bot: bool = False


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    id: str
    occurred_at: datetime
    scope: Scope
    v: int = SCHEMA_VERSION
    # Names of text fields that were clipped at the configured size bound.
    clipped: list[str] = []


class TurnRecorded(_Event, tag="turn.recorded", frozen=True):
    """A completed user turn: what the user said, the final answer, the tools used."""

    turn_index: int
    user_text: str
    assistant_text: str
    tool_calls: list[ToolCall] = []
    author: str = ""
    # added after the first samples: the turn's own author when the host names one (Hermes 0.2x)
    turn_author: TurnAuthor | None = None


class MemoryWritten(_Event, tag="memory.written", frozen=True):
    """A committed write of Hermes's built-in memory tool (MEMORY.md / USER.md).

    ``replace`` and ``remove`` match an entry by the unique substring ``old_text``;
    ``content`` is empty for ``remove``.
    """

    action: MemoryAction
    target: MemoryTarget
    content: str = ""
    old_text: str = ""
    tool_call_id: str = ""
    origin: str = ""


class SessionEnded(_Event, tag="session.ended", frozen=True):
    """A session boundary (exit, /new, compression). Emitted once per distinct state."""

    turn_count: int = 0
    message_count: int = 0


class SessionSwitched(_Event, tag="session.switched", frozen=True):
    """The session id rotated (scope.session_id is the new one)."""

    reason: SwitchReason
    parent_session_id: str = ""
    reset: bool = False
    rewound: bool = False


class DelegationCompleted(_Event, tag="delegation.completed", frozen=True):
    """A subagent finished a delegated task for this agent."""

    task: str
    result: str = ""
    child_session_id: str = ""


class MemoryRemembered(_Event, tag="memory.remembered", frozen=True):
    """An explicit memory the agent asked to keep (memstream_remember)."""

    content: str
    target: MemoryTarget = "memory"


class MemoryForgotten(_Event, tag="memory.forgotten", frozen=True):
    """A tombstone: every projection removes the item ``forgotten_id`` names."""

    forgotten_id: str
    reason: str = ""


Event = Union[
    TurnRecorded,
    MemoryWritten,
    SessionEnded,
    SessionSwitched,
    DelegationCompleted,
    MemoryRemembered,
    MemoryForgotten,
]

EVENT_TYPES: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in get_args(Event)}

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Event] = msgspec.msgpack.Decoder(Event)


def encode(event: Event) -> bytes:
    """msgpack bytes of one event (the spool and stream payload). Raises on bad text."""
    return _encoder.encode(event)


def decode(data: bytes) -> Event:
    """One event from msgpack bytes; raises ``msgspec.ValidationError``/``DecodeError``."""
    return _decoder.decode(data)


def to_builtins(event: Event) -> dict[str, Any]:
    """A JSON-ready dict of the event, tag included."""
    built: dict[str, Any] = msgspec.to_builtins(event)
    return built
