"""Generate ``events_v1.jsonl``: one frozen sample of every event type of schema v1.

Run once, by hand, when a new event type, a new field (or a new schema version) is added:

    .venv/bin/python tests/samples/make_events_v1.py            # refuses to overwrite
    .venv/bin/python tests/samples/make_events_v1.py --append   # add missing samples only

A field added to a type after its first sample gets a sample of its own (``ADDED``,
written with ``"sample": NAME``): the first one keeps proving that bytes written before
the field existed still decode (to the field's default).

The test suite never regenerates this file: it only decodes the frozen bytes. An
existing line must never be edited; a new schema version gets a new file.
Every field is set to a non-default value, so a changed type or name shows up.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memstream.producers.events import (
    EVENT_TYPES,
    DelegationCompleted,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    Scope,
    SessionEnded,
    SessionSwitched,
    ToolCall,
    TurnAuthor,
    TurnRecorded,
    encode,
)

OUT = Path(__file__).with_name("events_v1.jsonl")

SCOPE = Scope(
    tenant="acme",
    app="hermes",
    agent="agent:main:telegram:dm:42",
    user_id="u-123",
    session_id="20261122_050250_57e41d",
    run_id="019a8b7c-0000-7000-8000-000000000001",
    platform="telegram",
)
AT = datetime(2026, 11, 22, 5, 3, 4, 567000, tzinfo=UTC)


def samples() -> list:
    return [
        TurnRecorded(
            id="019a8b7c-1000-7000-8000-000000000001",
            occurred_at=AT,
            scope=SCOPE,
            clipped=["assistant_text"],
            turn_index=3,
            user_text="What's the weather in Zürich?",
            assistant_text="Sunny, 21 °C.",
            tool_calls=[ToolCall(name="web_search", arguments='{"q": "Zürich weather"}', result="sunny 21C", call_id="call_1")],
            author="Ada",
        ),
        MemoryWritten(
            id="019a8b7c-1000-7000-8000-000000000002",
            occurred_at=AT,
            scope=SCOPE,
            clipped=["content"],
            action="replace",
            target="user",
            content="Ada prefers metric units",
            old_text="prefers imperial",
            tool_call_id="call_7",
            origin="assistant_tool",
        ),
        SessionEnded(id="019a8b7c-1000-7000-8000-000000000003", occurred_at=AT, scope=SCOPE, turn_count=5, message_count=17),
        SessionSwitched(
            id="019a8b7c-1000-7000-8000-000000000004",
            occurred_at=AT,
            scope=SCOPE,
            reason="new_session",
            parent_session_id="20261121_230000_aaaaaa",
            reset=True,
            rewound=True,
        ),
        DelegationCompleted(
            id="019a8b7c-1000-7000-8000-000000000005",
            occurred_at=AT,
            scope=SCOPE,
            clipped=["result"],
            task="summarise the report",
            result="three findings",
            child_session_id="20261122_050300_bbbbbb",
        ),
        MemoryRemembered(
            id="019a8b7c-1000-7000-8000-000000000006",
            occurred_at=AT,
            scope=SCOPE,
            content="the deploy key lives in vault",
            target="user",
        ),
        MemoryForgotten(
            id="019a8b7c-1000-7000-8000-000000000007",
            occurred_at=AT,
            scope=SCOPE,
            forgotten_id="019a8b7c-1000-7000-8000-000000000006",
            reason="user asked",
        ),
    ]


def added() -> dict:
    """Samples of fields added after their type's first sample, by sample name."""
    return {
        "turn.recorded+turn_author": TurnRecorded(
            id="019a8b7c-1000-7000-8000-000000000008",
            occurred_at=AT,
            scope=SCOPE,
            clipped=["user_text"],
            turn_index=4,
            user_text="Deploy it when Grace approves",
            assistant_text="Waiting for Grace.",
            tool_calls=[],
            author="Lin",
            turn_author=TurnAuthor(id="bot:ops/deployer", name="Lin", is_bot=True),
        ),
    }


def line(event, name: str = "") -> str:
    return json.dumps(
        {
            "type": type(event).__struct_config__.tag,
            **({"sample": name} if name else {}),
            "msgpack_hex": encode(event).hex(),
            "json": json.loads(msgspec.json.encode(event)),
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def main() -> None:
    have = set()
    if OUT.exists():
        if "--append" not in sys.argv:
            sys.exit(f"{OUT} exists and is frozen; use --append to add missing samples only")
        have = {(lambda d: d.get("sample") or d["type"])(json.loads(x)) for x in OUT.read_text().splitlines() if x.strip()}
    new = [("", e) for e in samples() if type(e).__struct_config__.tag not in have]
    new += [(name, e) for name, e in added().items() if name not in have]
    missing = set(EVENT_TYPES) - have - {type(e).__struct_config__.tag for _, e in new}
    if missing:
        sys.exit(f"write a sample for: {sorted(missing)}")
    with OUT.open("a") as f:
        for name, event in new:
            f.write(line(event, name) + "\n")
    print(f"{OUT}: {len(new)} sample(s) added")


if __name__ == "__main__":
    main()
