"""The stream contract, run on fakeredis and on a real Valkey (the ``redis_client`` fixture)."""

from __future__ import annotations

import pytest
import redis
from writepath import logged_contents, logged_events, remembered

from memstream.core.ids import new_event_id
from memstream.producers.events import Scope, SessionEnded, utcnow
from memstream.producers.record import Record
from memstream.producers.stream import EntryDecodeError, EventLog, parse_entry_id, shard_of


def records(*contents: str, start: int = 1, **scope) -> list[Record]:
    return [Record.of(remembered(c, **scope), seq=start + i) for i, c in enumerate(contents)]


def test_a_batch_lands_whole_in_order_and_reports_each_entry_id(event_log):
    ids = event_log.append_batch(records("a", "b", "c"), segment="seg-1")
    assert all(ids) and len(ids) == 3
    assert [parse_entry_id(i) for i in ids] == sorted(parse_entry_id(i) for i in ids)
    assert logged_contents(event_log) == ["a", "b", "c"]
    assert event_log.last_shipped("seg-1", "t1") == 3


def test_a_resent_batch_adds_nothing(event_log):
    batch = records("a", "b", "c")
    event_log.append_batch(batch, segment="seg-1")
    again = event_log.append_batch(batch, segment="seg-1")
    assert again == [None, None, None]
    assert logged_contents(event_log) == ["a", "b", "c"]
    assert event_log.type_counts() == {"memory.remembered": 3}


def test_a_batch_overlapping_what_was_shipped_adds_only_the_new_records(event_log):
    event_log.append_batch(records("a", "b"), segment="seg-1")
    ids = event_log.append_batch(records("b", "c", "d", start=2), segment="seg-1")
    assert ids[0] is None and all(ids[1:])
    assert logged_contents(event_log) == ["a", "b", "c", "d"]
    assert event_log.last_shipped("seg-1", "t1") == 4


def test_sequence_numbers_of_different_segments_do_not_dedup_each_other(event_log):
    event_log.append_batch(records("a", "b"), segment="seg-1")
    event_log.append_batch(records("c", "d"), segment="seg-2")
    assert logged_contents(event_log) == ["a", "b", "c", "d"]
    assert event_log.last_shipped("seg-2", "t1") == 2
    assert event_log.last_shipped("never-seen", "t1") == -1


def test_forgetting_a_segment_drops_only_its_dedup_record(event_log):
    event_log.append_batch(records("a"), segment="seg-1")
    event_log.append_batch(records("b"), segment="seg-2")
    event_log.forget_segment("seg-1", ["t1"])
    assert event_log.last_shipped("seg-1", "t1") == -1
    assert event_log.last_shipped("seg-2", "t1") == 1


def test_records_without_a_segment_are_appended_every_time(event_log):
    event_log.append_batch(records("a"))
    event_log.append_batch(records("a"))
    assert logged_contents(event_log) == ["a", "a"]


def test_a_batch_that_cannot_land_whole_appends_nothing(redis_client):
    log = EventLog(redis_client, "ms", shards=4)
    # two agents on different streams; the second stream's key is clobbered by someone else
    a, b = "agent-1", "agent-2"
    assert shard_of("t1", a, 4) != shard_of("t1", b, 4)
    redis_client.set(log.stream_for("t1", b), "not a stream")
    batch = [Record.of(remembered("a", agent=a), seq=1), Record.of(remembered("b", agent=b), seq=2)]
    with pytest.raises(redis.ResponseError):
        log.append_batch(batch, segment="seg-1")
    assert redis_client.xlen(log.stream_for("t1", a)) == 0
    assert log.last_shipped("seg-1", "t1") == -1
    assert log.type_counts() == {}


def test_a_clobbered_counter_never_stops_an_append_nor_its_dedup_record(redis_client):
    """Anyone who may write a counter may put anything there (a tenant its own): the batch is
    appended once, its dedup record written, and the readers leave the garbage out."""
    log = EventLog(redis_client, "ms")
    redis_client.hset(log.types_key, mapping={"memory.remembered": "NaN", "other": "-5"})
    log.append_batch(records("a", "b"), segment="seg-1")
    log.append_batch(records("a", "b"), segment="seg-1")  # a re-send: the dedup record holds
    assert logged_contents(log) == ["a", "b"]
    assert log.last_shipped("seg-1", "t1") == 2
    assert log.counters("types") == ({}, 2)
    redis_client.delete(log.types_key)
    redis_client.set(log.types_key, "oops")  # another type altogether
    log.append_batch(records("c"), segment="seg-2")
    assert logged_contents(log) == ["a", "b", "c"]
    assert log.counters("types") == ({}, 1) and log.type_counts() == {}


def test_an_empty_batch_is_a_no_op(event_log):
    assert event_log.append_batch([], segment="seg-1") == []
    assert event_log.last_shipped("seg-1", "t1") == -1


def test_shard_of_is_stable_and_spreads_agents():
    # pinned values: crc32(tenant \0 agent) mod shards, the same on every host and version
    assert shard_of("t1", "a1", 4) == shard_of("t1", "a1", 4)
    assert [shard_of("default", f"agent-{i}", 4) for i in range(8)] == [_crc_shard("default", f"agent-{i}", 4) for i in range(8)]
    assert {shard_of("default", f"agent-{i}", 4) for i in range(64)} == {0, 1, 2, 3}
    assert shard_of("t1", "a1", 1) == 0 and shard_of("t1", "a1", 0) == 0
    assert shard_of("t1", "\ud800", 4) in range(4)  # lone surrogates do not raise


def _crc_shard(tenant: str, agent: str, shards: int) -> int:
    import zlib

    return zlib.crc32(f"{tenant}\x00{agent}".encode()) % shards


def test_pinned_shard_values_do_not_change():
    # a change here re-maps every existing agent to another stream: never change it
    assert [shard_of("default", n, 4) for n in ("default", "hermes", "agent:main:test:dm:chat-9", "agent-1", "agent-2")] == [
        0,
        0,
        3,
        2,
        0,
    ]
    assert shard_of("acme", "agent-1", 16) == 13


def test_with_four_shards_each_agent_stays_on_one_stream_in_order(redis_client):
    log = EventLog(redis_client, "ms", shards=4)
    agents = [f"agent-{i}" for i in range(8)]
    batch = []
    for n in range(5):
        for agent in agents:
            batch.append(Record.of(remembered(f"{agent}/{n}", agent=agent), seq=len(batch) + 1))
    log.append_batch(batch[:17], segment="seg")
    log.append_batch(batch[17:], segment="seg")
    used = set()
    for agent in agents:
        key = log.stream_for("t1", agent)
        used.add(key)
        assert key == f"ms:events:{shard_of('t1', agent, 4)}"
        in_stream = [EventLog.decode_entry(f).content for _, f in redis_client.xrange(key)]
        mine = [c for c in in_stream if c.startswith(agent + "/")]
        assert mine == [f"{agent}/{n}" for n in range(5)]
    assert len(used) > 1
    assert sum(info["length"] for info in log.stream_info()) == 40


def test_entries_merges_every_stream_oldest_first(redis_client):
    log = EventLog(redis_client, "ms", shards=3)
    placed = {0: ["1-1", "3-0", "5-0", "10-0"], 1: ["2-0", "4-0", "4-1"], 2: ["1-2", "6-0", "100-0"]}
    for shard, ids in placed.items():
        for entry_id in ids:
            redis_client.xadd(log.stream_key(shard), {"data": entry_id}, id=entry_id)
    expected = sorted((i for ids in placed.values() for i in ids), key=parse_entry_id)
    for page in (1, 2, 1000):  # small pages: refills interleave with the merge
        seen = list(log.entries(count=page))
        assert [entry_id for _, entry_id, _ in seen] == expected
        assert all(fields[b"data"].decode() == entry_id for _, entry_id, fields in seen)
        assert {key for key, _, _ in seen} == set(log.stream_keys)


def test_entries_yields_appended_events_per_agent_in_order_and_ids_never_go_back(redis_client):
    log = EventLog(redis_client, "ms", shards=4)
    for i in range(12):
        log.append_batch([Record.of(remembered(f"{i % 5}/{i}", agent=f"agent-{i % 5}"), seq=i + 1)], segment="s")
    seen = list(log.entries(count=2))
    ids = [parse_entry_id(i) for _, i, _ in seen]
    assert ids == sorted(ids)
    contents = [EventLog.decode_entry(f).content for _, _, f in seen]
    for agent in range(5):
        mine = [c for c in contents if c.startswith(f"{agent}/")]
        assert mine == [f"{agent}/{i}" for i in range(12) if i % 5 == agent]


def test_entries_since_an_id_starts_just_after_it(redis_client):
    log = EventLog(redis_client, "ms", shards=2)
    for shard, ids in {0: ["1-0", "3-0", "5-0"], 1: ["2-0", "4-0", "6-0"]}.items():
        for entry_id in ids:
            redis_client.xadd(log.stream_key(shard), {"data": entry_id}, id=entry_id)
    assert [i for _, i, _ in log.entries(since="3-0")] == ["4-0", "5-0", "6-0"]
    assert [i for _, i, _ in log.entries(since="2-0", count=1)] == ["3-0", "4-0", "5-0", "6-0"]
    assert list(log.entries(since="6-0")) == []
    assert len(list(log.entries(since="-"))) == len(list(log.entries(since="0"))) == 6


def test_entries_of_an_empty_log_is_empty(event_log):
    assert list(event_log.entries()) == []


def test_stream_info_reports_length_and_first_and_last_ids(redis_client):
    log = EventLog(redis_client, "ms", shards=2)
    assert log.stream_info() == [
        {"stream": "ms:events:0", "length": 0, "first_id": None, "last_id": None},
        {"stream": "ms:events:1", "length": 0, "first_id": None, "last_id": None},
    ]
    ids = log.append([remembered("a"), remembered("b"), remembered("c")])
    info = {i["stream"]: i for i in log.stream_info()}
    mine = info[log.stream_for("t1", "a1")]
    assert (mine["length"], mine["first_id"], mine["last_id"]) == (3, ids[0], ids[-1])


def test_type_counts_count_appended_events_by_tag(event_log):
    event_log.append(
        [remembered("a"), remembered("b"), SessionEnded(id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="t1"))]
    )
    assert event_log.type_counts() == {"memory.remembered": 2, "session.ended": 1}


def test_decode_entry_returns_the_event_that_was_appended(event_log):
    event = remembered("hello")
    event_log.append([event])
    assert logged_events(event_log) == [event]
    _, _, fields = next(event_log.entries())
    assert fields[b"id"].decode() == event.id and fields[b"type"] == b"memory.remembered"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {b"id": b"x", b"type": b"memory.remembered"},
        {b"data": b"not msgpack \xc1"},
        {b"data": b"\x81\xa4type\xa8no.such"},
        {"data": "plain text"},
    ],
    ids=["empty", "no-data", "garbage", "unknown-type", "str-garbage"],
)
def test_decode_entry_raises_entry_decode_error_on_a_malformed_entry(fields):
    with pytest.raises(EntryDecodeError):
        EventLog.decode_entry(fields)


def test_a_malformed_entry_written_by_someone_else_is_reported_not_skipped_silently(redis_client):
    log = EventLog(redis_client, "ms")
    log.append([remembered("a")])
    redis_client.xadd(log.stream_key(0), {"id": "x", "type": "memory.remembered", "data": b"\xc1"})
    log.append([remembered("b")])
    outcomes = []
    for _, _, fields in log.entries():
        try:
            outcomes.append(EventLog.decode_entry(fields).content)
        except EntryDecodeError:
            outcomes.append("malformed")
    assert outcomes == ["a", "malformed", "b"]


def test_keys_follow_the_configured_prefix(redis_client):
    log = EventLog(redis_client, "custom", shards=1)
    log.append_batch(records("a"), segment="seg")
    keys = {k.decode() for k in redis_client.keys("*")}
    assert keys == {"custom:events:0", "custom:t:t1:shipped", "custom:types"}


def test_entries_with_equal_ids_in_several_streams_come_in_stream_order(redis_client):
    log = EventLog(redis_client, "ms", shards=3)
    for shard in (2, 0, 1):
        redis_client.xadd(log.stream_key(shard), {"data": str(shard)}, id="7-0")
    seen = list(log.entries(count=1))
    assert [key for key, _, _ in seen] == list(log.stream_keys)
    assert {entry_id for _, entry_id, _ in seen} == {"7-0"}


def test_entries_reads_each_stream_a_page_at_a_time_as_the_merge_needs(redis_client, monkeypatch):
    log = EventLog(redis_client, "ms", shards=2)
    for i in range(1, 11):
        redis_client.xadd(log.stream_key(i % 2), {"data": str(i)}, id=f"{i}-0")
    calls = []
    real_xrange = redis_client.xrange
    monkeypatch.setattr(redis_client, "xrange", lambda *a, **kw: calls.append(kw["min"]) or real_xrange(*a, **kw))
    entries = log.entries(count=2)
    assert [next(entries)[1] for _ in range(3)] == ["1-0", "2-0", "3-0"]
    assert calls == ["-", "-"]  # one page of each stream so far
    assert next(entries)[1] == "4-0"
    assert calls == ["-", "-", "(3-0"]  # the odd stream's next page, once its first was used up
    assert [i for _, i, _ in entries] == [f"{i}-0" for i in range(5, 11)]


def test_memory_bytes_is_what_the_server_says_and_none_from_a_server_that_does_not_say(event_log):
    event_log.append([remembered("a note that takes some room")])
    key = event_log.stream_keys[0]
    used = event_log.memory_bytes(key)
    if event_log.client.connection_url is None:  # fakeredis: no MEMORY USAGE
        assert used is None
    else:
        assert isinstance(used, int) and used > 0 and event_log.memory_bytes(key, samples=5) > 0
        assert event_log.memory_bytes(f"{key}:none") is None
