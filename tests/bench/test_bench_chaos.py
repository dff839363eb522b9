"""The chaos bench's accounting: a turn still in an agent's spool at the end is counted
as spooled, not lost (the bench's report tells the two apart)."""

from __future__ import annotations

from memstream.bench.chaos.measure import _spooled
from memstream.core import new_event_id
from memstream.producers import MemoryRemembered, Scope, Spool, TurnRecorded, encode, utcnow


def turn(marker: str) -> bytes:
    return encode(
        TurnRecorded(
            id=new_event_id(),
            occurred_at=utcnow(),
            scope=Scope(tenant="honest"),
            turn_index=0,
            user_text=f"{marker}: the deploy moved",
            assistant_text=f"Noted {marker}.",
        )
    )


def test_the_turns_past_a_segments_checkpoint_are_the_spooled_ones(tmp_path):
    spool = Spool(tmp_path / "agent-0" / "spool")
    for marker in ("chaos-agent-0-a", "chaos-agent-0-b", "chaos-agent-0-c"):
        assert spool.append(turn(marker))
    other = MemoryRemembered(id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="honest"), content="chaos-x: no turn")
    assert spool.append(encode(other))
    seg = spool.ship_order()[0]
    records, _ = seg.read(spool.limit_of(seg), 1, spool.quarantine)
    spool.shipped(seg, records[0].end, records[0].seq)  # the first one reached the log
    assert _spooled(tmp_path, ["agent-0", "agent-1"]) == ["chaos-agent-0-b", "chaos-agent-0-c"]
    records, end = seg.read(spool.limit_of(seg), 1000, spool.quarantine)
    spool.shipped(seg, end, records[-1].seq)
    assert _spooled(tmp_path, ["agent-0"]) == []
    spool.close()


def test_a_dead_agents_segment_without_a_checkpoint_is_spooled_from_its_start(tmp_path):
    spool = Spool(tmp_path / "agent-1" / "spool")
    assert spool.append(turn("chaos-agent-1-a"))
    spool.close()
    again = Spool(tmp_path / "agent-1" / "spool")  # a new process: a second, empty segment
    assert again.append(turn("chaos-agent-1-b"))
    assert sorted(_spooled(tmp_path, ["agent-1"])) == ["chaos-agent-1-a", "chaos-agent-1-b"]
    again.close()
