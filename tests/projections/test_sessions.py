"""The sessions projection (memstream.projections.sessions) on whole batches: bookends, turn
counts and forgotten turns, in the order of the log."""

from __future__ import annotations

import msgspec
from pipeline_support import forgotten, turn

from memstream.producers import Scope
from memstream.projections import Delivery, SessionsProjection
from memstream.projections.counters import Counters


def _apply(projection: SessionsProjection, events: list) -> None:
    projection.apply([Delivery("s", f"{i}-0", {}, e) for i, e in enumerate(events, 1)])


def _in(session: str, event):
    return msgspec.structs.replace(event, scope=Scope(tenant="t1", agent="a1", session_id=session, platform="cli"))


def test_a_batch_records_every_session_and_forgets_a_bookend_named_later_in_it(redis_client):
    sessions = SessionsProjection(redis_client, "p")
    first = _in("s1", turn("Hello there", when=0, index=0))
    middle = _in("s1", turn("The middle", when=1, index=1))
    other = _in("s2", turn("Another session", when=5, index=0))
    _apply(sessions, [first, middle, other])
    last = _in("s1", turn("The last word", when=9, index=2))
    redis_client.script_flush()  # a server that forgot the scripts: the batch loads them again
    _apply(sessions, [last, forgotten(first.id), forgotten(middle.id)])

    recent = {r["session"]: r for r in sessions.index.recent("t1")}
    assert [r["session"] for r in sessions.index.recent("t1")] == ["s1", "s2"]
    assert (recent["s1"]["first"]["id"], recent["s1"]["first"]["user"]) == (first.id, "(forgotten)")
    assert (recent["s1"]["last"]["id"], recent["s1"]["last"]["user"], recent["s1"]["turns"]) == (last.id, "The last word", 2)
    assert recent["s2"]["first"]["user"] == recent["s2"]["last"]["user"] == "Another session"
    assert Counters(redis_client, "p", "sessions.v1").get() == {"turns": 4, "forgotten": 1}


def test_a_batch_delivered_again_changes_no_session(redis_client):
    sessions = SessionsProjection(redis_client, "p")
    events = [_in("s1", turn(f"turn {i}", when=i, index=i)) for i in range(5)]
    _apply(sessions, events)
    before = sessions.index.recent("t1")
    _apply(sessions, list(reversed(events)))

    assert sessions.index.recent("t1") == before
