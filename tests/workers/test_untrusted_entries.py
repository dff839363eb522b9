"""Stream entries are untrusted input: whatever a client XADDs to an event stream, every
projection dead-letters or skips it alike, with a reason and the entry's raw bytes, and the
next good event flows. Runs on fakeredis and a real Valkey (``event_log``)."""

from __future__ import annotations

import json

import hypothesis.strategies as st
import msgspec
import pytest
from fuzzing import examples
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from pipeline_support import make_pipeline, memory, points, scope, turn, wait_for

from memstream.cli import main
from memstream.core.ids import new_event_id
from memstream.producers.events import MemoryWritten, Scope, TurnRecorded, encode
from memstream.producers.stream import EventLog
from memstream.projections.facts_table import FactsTable
from memstream.text.clean import CLIPPED_MARK
from memstream.workers.admission import admit
from memstream.workers.consumer import Consumer
from memstream.workers.deadletters import DeadLetters
from memstream.workers.loop import Tuning
from memstream.workers.pipeline import Pipeline

GROUPS = ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")


def good_events(tag: str = "") -> tuple[TurnRecorded, MemoryWritten]:
    return (
        turn(f"My name is Ana and I live in Lisbon {tag}".strip(), index=1),
        memory("add", f"The datacenter is in Oslo {tag}".strip()),
    )


def assert_projected_everywhere(pipeline: Pipeline, t: TurnRecorded, m: MemoryWritten) -> None:
    """The turn reached turns, facts and sessions; the memory reached memories and facts."""
    client, prefix = pipeline.events.client, pipeline.events.prefix
    assert t.id in {p.payload["event_id"] for p in points(pipeline.store, "turns", "t1")}
    assert m.id in {p.payload["event_id"] for p in points(pipeline.store, "memories", "t1")}
    fact_events = {e for f in FactsTable(client, prefix).query("t1", history=True) for e in f.event_ids}
    assert t.id in fact_events
    sessions = pipeline.projection("sessions").index.recent("t1")
    assert t.id in {s["last"]["id"] for s in sessions}


def dead_by_entry(event_log: EventLog) -> dict[str, dict[str, dict]]:
    """entry id -> group -> its dead letter (as ``DeadLetters.list`` shows it)."""
    out: dict[str, dict[str, dict]] = {}
    for d in DeadLetters(event_log.client, event_log.prefix).list(count=10_000):
        out.setdefault(d["entry_id"], {})[d["group"]] = d
    return out


def one_shared(letters: dict[str, dict]) -> bool:
    """One dead letter for the entry, which every group shares (admission's verdict is
    every projection's): never a copy per group."""
    return len(letters) == 1 and next(iter(letters.values())).get("every_group") == "1" and set(letters) <= set(GROUPS)


def raw_dead_letters(event_log: EventLog) -> list[dict]:
    return [fields for _, fields in event_log.client.xrange(f"{event_log.prefix}:dlq")]


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    yield p
    p.stop()


# -- not UTF-8 ------------------------------------------------------------------------------------
POISON = {
    "type": ({"id": "x", "type": b"\xff\xfe", "data": b"\x80"}, "malformed: field 'type' is not UTF-8"),
    "id": ({"id": b"\xc3\x28", "type": "turn.recorded", "data": b"\x80"}, "malformed: field 'id' is not UTF-8"),
    "name": (
        {b"\xff\xfename": b"v", "type": "turn.recorded", "data": b"\x80"},
        "malformed: field name b'\\xff\\xfename' is not UTF-8",
    ),
    "retry_of": (
        {"retry_of": b"\xed\xa0\x80", "type": "turn.recorded", "data": b"\x80"},
        "malformed: field 'retry_of' is not UTF-8",
    ),
    "data": ({"id": "x", "type": "turn.recorded", "data": b"\xff\xfe\xfd"}, "malformed: "),
}


def test_entries_that_are_not_utf8_are_dead_lettered_by_every_projection_with_their_raw_bytes(pipeline, event_log):
    key = event_log.stream_keys[0]
    before = turn("The build server is called hopper", index=0)
    event_log.append([before])
    poison = {name: event_log.client.xadd(key, fields).decode() for name, (fields, _) in POISON.items()}
    # a valid event whose msgpack text is not UTF-8 (a byte patched after encoding)
    body = bytearray(encode(memory("add", "Zq7 marker")))
    at = body.index(b"Zq7")
    body[at : at + 3] = b"\xff\xfe\xfd"
    poison["data-text"] = event_log.client.xadd(key, {"id": "y", "type": "memory.written", "data": bytes(body)}).decode()
    # a retry whose group name is not UTF-8 names no group: every projection skips it
    event_log.client.xadd(key, {"only_group": b"\xff", "type": b"\xff", "data": b"\x80"})
    t, m = good_events()
    event_log.append([t, m])

    pipeline.drain()

    dead = dead_by_entry(event_log)
    assert set(dead) == set(poison.values())
    for name, entry in poison.items():
        assert one_shared(dead[entry]), name  # every projection alike: one letter
        reason = POISON[name][1] if name in POISON else "malformed: "
        assert all(d["error"].startswith(reason) for d in dead[entry].values()), (name, dead[entry])
    assert all(c.stats.applied == 3 for c in pipeline.consumers)
    assert_projected_everywhere(pipeline, t, m)
    assert all(event_log.client.xpending(key, g)["pending"] == 0 for g in GROUPS)

    # the dead letters keep the entry byte for byte, names included
    raws = raw_dead_letters(event_log)
    assert {r[b"f:type"] for r in raws if r[b"entry_id"].decode() == poison["type"]} == {b"\xff\xfe"}
    assert all(r[b"f:\xff\xfename"] == b"v" for r in raws if r[b"entry_id"].decode() == poison["name"])
    assert all(r[b"f:id"] == b"\xc3\x28" for r in raws if r[b"entry_id"].decode() == poison["id"])
    # list shows them as escapes, JSON-safe
    (shown,) = dead[poison["type"]].values()  # the one letter, written by whichever group met it first
    assert shown["type"] == "\\xff\\xfe"
    json.dumps(DeadLetters(event_log.client, event_log.prefix).list())


def test_take_and_retry_of_a_dead_letter_that_is_not_utf8_keep_its_bytes(pipeline, event_log):
    key = event_log.stream_keys[0]
    event_log.client.xadd(key, POISON["name"][0])
    event_log.client.xadd(key, POISON["type"][0])
    pipeline.drain()
    dlq = DeadLetters(event_log.client, event_log.prefix)
    items = dlq.list()
    assert len(items) == 2  # one per entry, not one per group
    for item in items:
        record = dlq.take(item["dlq_id"])
        assert record is not None and record["group"].decode() == item["group"]
        new_entry = dlq.retry(item["dlq_id"])
        assert new_entry
        [(_, fields)] = event_log.client.xrange(key, min=new_entry, max=new_entry)
        assert b"only_group" not in fields  # a shared letter goes back to every group
        assert fields[b"retry_of"] == item["entry_id"].encode()
        original = POISON["name"][0] if b"\xff\xfename" in fields else POISON["type"][0]
        for name, value in original.items():
            name = name if isinstance(name, bytes) else name.encode()
            assert fields[name] == (value if isinstance(value, bytes) else value.encode())
    assert dlq.count() == 0

    pipeline.drain()  # each retry is read by every group, and dead-lettered again: once
    again = dlq.list()
    assert len(again) == 2 and all(d["every_group"] == "1" for d in again)
    assert all(d["error"].startswith("malformed: ") for d in again)


@pytest.mark.valkey
def test_memstream_dlq_list_shows_entries_that_are_not_utf8(tmp_path, valkey_server, monkeypatch, capsys):
    import redis

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", valkey_server.url)
    log = EventLog(client, "memstream")
    log.client.xadd(log.stream_keys[0], {b"\xff": b"\xfe", "type": b"\x80", "data": b"\x81"})
    consumer = Consumer(log, make_pipeline(tmp_path / "h", log).projection("facts"), "w1")
    consumer.drain()

    assert main(["dlq", "list"]) == 0
    text = capsys.readouterr().out
    assert "facts.v1" in text and "malformed: field name b'\\xff' is not UTF-8" in text
    assert main(["dlq", "list", "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["dead_letters"]
    assert item["group"] == "facts.v1"
    # a group anyone created on the stream, named in bytes that are not UTF-8
    client.xgroup_create(log.stream_keys[0], b"\xff\xfe", id="0")
    assert main(["stats", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["streams"][0]["groups"]
    assert "\\xff\\xfe" in {g["name"] for g in shown}
    assert main(["doctor", "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checks"]["streams"]["ok"] is True
    client.close()


# -- a poison entry left pending ----------------------------------------------------------------
@pytest.mark.valkey
def test_a_poison_entry_left_pending_by_a_dead_worker_does_not_stop_the_restarted_pipeline(tmp_path, valkey_server):
    import redis

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    key = log.stream_keys[0]
    home = tmp_path / "home"
    first = make_pipeline(home, log)
    for c in first.consumers:  # the groups, as a first `memstream up` made them
        c.ensure_groups()
    first.stop()
    entry = client.xadd(key, POISON["type"][0]).decode()
    for g in GROUPS:  # a worker of the old code read it, died on it, and left it pending
        client.xreadgroup(g, "w1", {key: ">"})
        assert client.xpending(key, g)["pending"] == 1

    pipeline = make_pipeline(home, log).start()
    try:
        t, m = good_events()
        log.append([t, m])
        wait_for(lambda: all(c.stats.applied >= 2 for c in pipeline.consumers), 30, "the good events")
        assert all(t.is_alive() for t in pipeline._threads)
        assert one_shared(dead_by_entry(log)[entry])
        assert all(client.xpending(key, g)["pending"] == 0 for g in GROUPS)
        assert_projected_everywhere(pipeline, t, m)
    finally:
        pipeline.stop()
        client.close()


# -- size limit and required fields --------------------------------------------------------------
def test_eight_mib_of_content_appended_around_the_producer_is_clipped_by_every_projection(tmp_path, event_log, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_MAX_TEXT_BYTES", str(64 * 1024))
    huge = "The archive holds quarterly reports. " * (8 * 1024 * 1024 // 37 + 1)
    big_memory = memory("add", huge)
    big_turn = turn("Tell me about the archive", huge, index=1)
    event_log.append([big_memory, big_turn])
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        pipeline.drain()
        assert all(c.max_text_bytes == 64 * 1024 for c in pipeline.consumers)
        assert all(c.stats.clipped == 2 and c.stats.applied == 2 for c in pipeline.consumers)
        [stored] = points(pipeline.store, "memories", "t1")
        assert len(stored.payload["text"].encode()) <= 64 * 1024
        assert stored.payload["text"].endswith(CLIPPED_MARK)
        turn_text = "".join(p.payload["text"] for p in points(pipeline.store, "turns", "t1"))
        assert "clipped by memstream" in turn_text
        assert 0 < len(turn_text.encode()) <= 2 * 64 * 1024  # chunks may overlap a little; not 8 MiB
    finally:
        pipeline.stop()


def test_clipping_reuses_the_producer_clip_and_flags_every_clipped_field():
    from memstream.producers.events import ToolCall
    from memstream.text.clean import clean_text

    long = "é" * 40_000  # 80,000 bytes
    event = TurnRecorded(
        id=new_event_id(),
        occurred_at=turn("x").occurred_at,
        scope=scope(),
        turn_index=1,
        user_text=long,
        assistant_text="short",
        clipped=["user_text"],
        tool_calls=[ToolCall(name="read", result=long)],
    )
    fields = {b"id": event.id.encode(), b"type": b"turn.recorded", b"data": encode(event)}
    verdict = admit(fields, "turns.v1", 10_000)
    assert verdict.action == "apply"
    assert verdict.event.user_text == clean_text(long, 10_000)[0]
    assert verdict.event.tool_calls[0].result == clean_text(long, 10_000)[0]
    assert verdict.event.assistant_text == "short"
    assert verdict.event.clipped == ["user_text", "tool_calls"]  # flagged once each
    assert verdict.clipped == ("user_text", "tool_calls")
    assert admit(fields, "turns.v1", 1 << 20).event == event  # within the bound: untouched


@pytest.mark.parametrize("tenant", ["", "   "])
def test_an_event_without_a_tenant_is_dead_lettered_by_all_four_projections_alike(pipeline, event_log, tenant):
    key = event_log.stream_keys[0]
    orphan_turn = TurnRecorded(
        id=new_event_id(),
        occurred_at=turn("x").occurred_at,
        scope=Scope(tenant=tenant),
        turn_index=1,
        user_text="My name is Bob and I live in Porto",
        assistant_text="ok",
    )
    orphan_memory = MemoryWritten(
        id=new_event_id(),
        occurred_at=turn("x").occurred_at,
        scope=Scope(tenant=tenant),
        action="add",
        target="memory",
        content="The backup runs at 2 am",
    )
    ids = event_log.append([orphan_turn, orphan_memory])
    t, m = good_events()
    event_log.append([t, m])

    pipeline.drain()

    dead = dead_by_entry(event_log)
    assert set(dead) == set(ids)
    for entry in ids:
        assert one_shared(dead[entry])
        assert {d["error"] for d in dead[entry].values()} == {
            "rejected: scope.tenant is empty (every projection keys its data by tenant)"
        }
    assert_projected_everywhere(pipeline, t, m)
    assert all(event_log.client.xpending(key, g)["pending"] == 0 for g in GROUPS)


def test_an_entry_whose_type_field_disagrees_with_its_body_is_dead_lettered_and_not_applied(pipeline, event_log):
    key = event_log.stream_keys[0]
    disguised = memory("add", "The vault code is in the red binder")
    entry = event_log.client.xadd(key, {"id": disguised.id, "type": "turn.recorded", "data": encode(disguised)}).decode()
    t, m = good_events()
    event_log.append([t, m])

    pipeline.drain()

    dead = dead_by_entry(event_log)
    assert set(dead) == {entry} and one_shared(dead[entry])
    assert {d["error"] for d in dead[entry].values()} == {
        "rejected: type field 'turn.recorded' does not match the event body 'memory.written'"
    }
    assert disguised.id not in {p.payload["event_id"] for p in points(pipeline.store, "memories", "t1")}
    assert_projected_everywhere(pipeline, t, m)


def test_an_entry_whose_id_field_disagrees_with_its_body_is_dead_lettered(pipeline, event_log):
    key = event_log.stream_keys[0]
    event = memory("add", "The spare keys are in the drawer")
    entry = event_log.client.xadd(key, {"id": new_event_id(), "type": "memory.written", "data": encode(event)}).decode()
    pipeline.drain()
    dead = dead_by_entry(event_log)
    assert one_shared(dead[entry])
    assert all("does not match the event body's id" in d["error"] for d in dead[entry].values())


# -- property: any fields -------------------------------------------------------------------------
class _Recorder:
    name, version = "prop", 1

    def __init__(self):
        self.applied: list[str] = []

    def apply(self, batch):
        self.applied += [d.event.id for d in batch]


def _valid_fields() -> dict[bytes, bytes]:
    e = memory("add", "The staging database is called pelican")
    return {b"id": e.id.encode(), b"type": b"memory.written", b"data": encode(e)}


_blob = st.binary(max_size=40)
_tags = st.sampled_from(
    [
        b"turn.recorded",
        b"memory.written",
        b"session.ended",
        b"memory.forgotten",
        b"memory.remembered",
        b"delegation.completed",
        b"session.switched",
        b"later.type",
        b"",
        b"\xff",
    ]
)


@st.composite
def _mutated(draw) -> dict[bytes, bytes]:
    fields = _valid_fields()
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["value", "drop", "add", "rename", "tag", "flip", "cut", "body"]))
        name = draw(st.sampled_from(sorted(fields))) if fields else b"data"
        if how == "value":
            fields[name] = draw(_blob)
        elif how == "drop" and len(fields) > 1:
            fields.pop(name)
        elif how == "add":
            fields[draw(st.sampled_from([b"only_group", b"retry_of", b"x", b"\xff"]) | _blob)] = draw(_blob)
        elif how == "rename" and name in fields:
            fields[draw(_blob)] = fields.pop(name)
        elif how == "tag":
            fields[b"type"] = draw(_tags)
        elif how in ("flip", "cut") and fields.get(b"data"):
            data = bytearray(fields[b"data"])
            i = draw(st.integers(0, len(data) - 1))
            if how == "flip":
                data[i] ^= draw(st.integers(1, 255))
            else:
                del data[i:]
            fields[b"data"] = bytes(data)
        elif how == "body":
            tenant = draw(st.sampled_from(["", " ", "t1", "x" * 2000]))
            body = msgspec.msgpack.encode(
                {
                    "type": draw(_tags).decode("latin-1"),
                    "id": draw(st.text(max_size=5)),
                    "occurred_at": "2025-03-01T12:00:00Z",
                    "scope": {"tenant": tenant},
                    "action": "add",
                    "target": "memory",
                    "content": draw(st.text()),
                }
            )
            fields[b"data"] = body
    return fields or {b"x": b"y"}


@hyp_settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.dictionaries(_blob, _blob, min_size=1, max_size=6) | _mutated())
def test_any_stream_entry_is_applied_skipped_or_dead_lettered_and_the_next_good_event_flows(fields):
    import fakeredis

    log = EventLog(fakeredis.FakeRedis(), "prop")
    key = log.stream_keys[0]
    recorder = _Recorder()
    consumer = Consumer(log, recorder, "w1", tuning=Tuning(claim_every=3600))
    consumer.ensure_groups()
    bad = log.client.xadd(key, fields).decode()
    good = memory("add", "The release is on Friday")
    log.append([good])

    consumer.drain()  # never raises

    dlq = DeadLetters(log.client, log.prefix)
    dead = [d for d in dlq.list() if d["entry_id"] == bad]
    verdict = admit(fields, consumer.group, consumer.max_text_bytes)
    if verdict.action == "dead":
        assert len(dead) == 1 and dead[0]["error"] == verdict.reason and verdict.reason
        assert dead[0]["error"].split(":")[0] in ("malformed", "rejected")
        assert consumer.stats.dead_lettered == 1
    elif verdict.action == "skip":
        assert not dead and verdict.reason
        assert recorder.applied == [good.id]
    else:  # still a valid event (e.g. an extra field): applied like any other
        assert not dead and recorder.applied[0] == verdict.event.id
    assert recorder.applied[-1] == good.id
    assert log.client.xpending(key, consumer.group)["pending"] == 0
    for d in dlq.list():  # what the DLQ keeps can be shown, taken and retried
        json.dumps(d)
        assert dlq.take(d["dlq_id"]) is not None
        assert dlq.retry(d["dlq_id"])
    consumer.drain()
    assert recorder.applied.count(good.id) == 1
    assert log.client.xpending(key, consumer.group)["pending"] == 0
