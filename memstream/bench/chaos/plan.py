"""What a chaos run uses: its key prefix, the honest and the hostile tenant, the largest entry
id, and the malformed entries it puts in the log on purpose (``POISON``)."""

from __future__ import annotations

from typing import Any

PREFIX = "memstream"
HONEST, EVIL = "honest", "evil"
MAX_ID = "18446744073709551615-18446744073709551615"


def poison_entries() -> list[tuple[str, dict[Any, Any]]]:
    """(name, fields) of entries every projection must dead-letter."""
    from memstream.core import new_event_id
    from memstream.producers import (
        MemoryRemembered,
        Scope,
        TurnRecorded,
        encode,
        utcnow,
    )

    good_turn = TurnRecorded(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="default"), turn_index=0, user_text="u", assistant_text="a"
    )
    memory = MemoryRemembered(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="default"), content="a memory posing as a turn"
    )
    no_tenant = MemoryRemembered(id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant=""), content="whose is this")
    return [
        ("type_not_utf8", {"id": new_event_id(), "type": b"\xff\xfe", "data": encode(good_turn)}),
        ("field_name_not_utf8", {b"\xff\xfeid": b"x", "type": "turn.recorded", "data": encode(good_turn)}),
        ("data_not_msgpack", {"id": new_event_id(), "type": "turn.recorded", "data": b"\xc1\xc1\xc1"}),
        ("data_is_json", {"id": new_event_id(), "type": "turn.recorded", "data": b'{"id": "x"}'}),
        ("no_data", {"id": new_event_id(), "type": "turn.recorded"}),
        ("type_mismatch", {"id": memory.id, "type": "turn.recorded", "data": encode(memory)}),
        ("empty_tenant", {"id": no_tenant.id, "type": "memory.remembered", "data": encode(no_tenant)}),
    ]


POISON = ("type_not_utf8", "field_name_not_utf8", "data_not_msgpack", "data_is_json", "no_data", "type_mismatch", "empty_tenant")
