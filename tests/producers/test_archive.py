"""The archive of the log's cold part, run on fakeredis and on a real Valkey (the
``redis_client`` fixture): what it writes, what it trims, and the history read back."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from datetime import UTC, date, datetime

import pytest
import redis
from writepath import remembered

from memstream.core import keys
from memstream.producers.archive import (
    Archive,
    ArchiveBusy,
    ArchiveError,
    ArchiveGap,
    CorruptSegment,
    GroupBehind,
    archive,
    entry_id_of,
    history,
)
from memstream.producers.stream import EventLog, parse_entry_id

FAR = "99999999999999-0"  # above every entry id of the tests


@pytest.fixture
def log(redis_client) -> EventLog:
    return EventLog(redis_client, "ms", shards=3)


def fill(log: EventLog, n: int, label: str = "m") -> list[tuple[str, str, dict]]:
    """``n`` events spread over the shards; the whole log as ``EventLog.entries`` reads it."""
    log.append([remembered(f"{label}{i}", agent=f"agent-{i % 5}") for i in range(n)])
    return list(log.entries())


def only_stream(log: EventLog) -> tuple[str, list[str]]:
    """The key of the one stream holding entries of a one-agent log, and its entry ids."""
    for key in log.stream_keys:
        ids = [entry[0].decode() for entry in log.client.xrange(key)]
        if ids:
            return key, ids
    raise AssertionError("the log is empty")


def deliver(client, key: str, group: str, n: int) -> list[str]:
    """Deliver the next ``n`` entries of ``key`` to ``group`` (created from the start): pending until acked."""
    try:
        client.xgroup_create(key, group, id="0")
    except redis.ResponseError:
        pass
    got = client.xreadgroup(group, "c1", {key: ">"}, count=n)
    return [entry_id.decode() for entry_id, _ in got[0][1]] if got else []


def lengths(log: EventLog) -> list[int]:
    return [log.client.xlen(key) for key in log.stream_keys]


# -- the round trip ------------------------------------------------------------------------------
def test_archiving_then_reading_the_history_gives_the_original_log_byte_for_byte(log, tmp_path):
    odd = {b"id": b"x", b"type": b"turn.recorded", b"data": b"\xff\xfe not msgpack", b"extra": b""}
    log.client.xadd(log.stream_keys[1], odd)  # fields no event has, bytes no text is: kept as they are
    original = fill(log, 40)
    store = Archive(tmp_path / "archive")
    result = archive(log, store, FAR)
    assert result["archived"] == result["trimmed"] == 41
    assert lengths(log) == [0, 0, 0]  # no group reads these streams: every archived entry is trimmed
    assert list(history(log, store)) == original
    assert list(store.entries()) == original
    assert [fields for key, _, fields in original if fields.get(b"extra") == b""] == [odd]
    last: dict[str, str] = {}
    for key, entry_id, _ in original:
        last[key] = entry_id
    assert store.watermark() == last


def test_history_after_since_and_entries_of_some_streams_read_only_what_was_asked(log, tmp_path):
    original = fill(log, 30)
    store = Archive(tmp_path / "archive")
    archive(log, store, original[14][1])  # half archived, half still in the streams
    since = original[9][1]
    # streams may hold the same id (one millisecond, one sequence each): "after" is by id
    assert list(history(log, store, since=since)) == [e for e in original if parse_entry_id(e[1]) > parse_entry_id(since)]
    wanted = log.stream_keys[2]
    assert list(store.entries(streams=[wanted])) == [e for e in original[:14] if e[0] == wanted]


def test_a_second_archive_writes_only_what_the_first_did_not(log, tmp_path):
    first = fill(log, 20)
    store = Archive(tmp_path / "archive")
    assert archive(log, store, FAR)["archived"] == 20
    segments = store.segments()
    whole = first + fill(log, 12, label="n")
    again = archive(log, store, FAR)
    assert again["archived"] == 12 and again["trimmed"] == 12
    assert store.segments()[: len(segments)] != [] and set(segments) < set(store.segments())
    assert sum(s.count for s in store.segments()) == 32
    assert list(history(log, store)) == whole
    assert archive(log, store, FAR)["archived"] == 0  # nothing new: nothing written


def test_segments_close_at_their_bound_and_read_back_in_order(log, tmp_path, monkeypatch):
    # the module (``memstream.producers.archive`` is the function of that name)
    monkeypatch.setattr(sys.modules["memstream.producers.archive"], "SEGMENT_ENTRIES", 4)
    original = fill(log, 30)
    store = Archive(tmp_path / "archive")
    archive(log, store, FAR)
    assert max(s.count for s in store.segments()) == 4 and len(store.segments()) >= 30 // 4
    assert list(history(log, store)) == original


def test_the_point_can_be_a_date_or_a_time(log, tmp_path):
    original = fill(log, 5)
    store = Archive(tmp_path / "archive")
    assert archive(log, store, date(2000, 1, 1))["archived"] == 0
    assert archive(log, store, datetime(2999, 1, 1, tzinfo=UTC))["archived"] == 5
    assert list(history(log, store)) == original


@pytest.mark.parametrize(
    "given, means",
    [
        ("1795398237060", "1795398237060-0"),
        ("1795398237060-7", "1795398237060-7"),
        ("2026-11-01", "1793491200000-0"),
        ("2026-11-01T12:00:00Z", "1793534400000-0"),
        ("2026-11-01T13:00:00+01:00", "1793534400000-0"),
        ("2026-11-01T12:00:00", "1793534400000-0"),  # no zone: UTC
        (date(2026, 11, 1), "1793491200000-0"),
    ],
)
def test_a_point_is_an_entry_id_or_a_date_or_time_in_utc(given, means):
    assert entry_id_of(given) == means


@pytest.mark.parametrize("given", ["yesterday", "1-2-3", "", "1969-12-31", f"{1 << 64}-0"])
def test_a_point_that_is_neither_an_id_nor_a_date_is_refused_saying_what_was_expected(given):
    with pytest.raises(ValueError, match="entry id|1970"):
        entry_id_of(given)


# -- the trim: nothing a group has not applied ------------------------------------------------------
def test_the_trim_keeps_every_entry_a_group_has_not_acknowledged(log, tmp_path):
    log.append([remembered(f"x{i}") for i in range(10)])  # one agent: one stream
    original = list(log.entries())
    key, ids = only_stream(log)
    delivered = deliver(log.client, key, "g1", 6)
    log.client.xack(key, "g1", *delivered[:4])  # 4 applied, 2 pending
    store = Archive(tmp_path / "archive")
    result = archive(log, store)  # default: what every group has applied
    assert result["streams"][key]["archived"] == 4
    assert [entry_id for _, entry_id, _ in store.entries()] == ids[:4]
    assert [e[0].decode() for e in log.client.xrange(key)] == ids[4:]  # the pending ones stay, and all after
    assert list(history(log, store)) == original


def test_the_trim_keeps_the_last_entry_a_group_was_delivered(log, tmp_path):
    log.append([remembered(f"x{i}") for i in range(8)])
    original = list(log.entries())
    key, ids = only_stream(log)
    log.client.xack(key, "g1", *deliver(log.client, key, "g1", 5))
    store = Archive(tmp_path / "archive")
    result = archive(log, store)
    assert result["streams"][key]["archived"] == 5  # every applied entry is archived ...
    assert [e[0].decode() for e in log.client.xrange(key)] == ids[4:]  # ... and trimmed strictly below the position
    assert list(history(log, store)) == original  # the entry both archived and kept comes once


def test_a_pending_entry_stays_in_the_stream_until_it_is_acknowledged(log, tmp_path):
    log.append([remembered(f"x{i}") for i in range(6)])
    original = list(log.entries())
    key, ids = only_stream(log)
    delivered = deliver(log.client, key, "g1", 6)
    log.client.xack(key, "g1", *(d for d in delivered if d != ids[2]))
    store = Archive(tmp_path / "archive")
    archive(log, store)
    assert [e[0].decode() for e in log.client.xrange(key)] == ids[2:]
    log.client.xack(key, "g1", ids[2])
    assert archive(log, store)["streams"][key]["archived"] == 4
    assert [e[0].decode() for e in log.client.xrange(key)] == ids[5:]
    assert list(history(log, store)) == original


def test_a_group_behind_the_point_is_refused_and_nothing_is_written_or_trimmed(log, tmp_path):
    log.append([remembered(f"x{i}") for i in range(10)])
    key, ids = only_stream(log)
    log.client.xack(key, "turns.v1", *deliver(log.client, key, "turns.v1", 3))
    deliver(log.client, key, "turns.v1", 2)  # two more pending
    store = Archive(tmp_path / "archive")
    with pytest.raises(GroupBehind) as refused:
        archive(log, store, FAR)
    message = str(refused.value)
    assert "consumer group turns.v1" in message and key in message
    assert f"the first it has not is {ids[3]}" in message and "2 pending" in message and f"last delivered {ids[4]}" in message
    assert log.client.xlen(key) == 10
    assert store.segments() == [] and not list((tmp_path / "archive" / "segments").iterdir())
    assert not log.client.exists(keys.archived(log.prefix))
    assert archive(log, store, ids[3])["archived"] == 3  # below the group's position: archived


def test_a_projection_group_missing_from_a_stream_has_applied_none_of_it(log, tmp_path):
    log.append([remembered(f"x{i}") for i in range(4)])
    key, ids = only_stream(log)
    store = Archive(tmp_path / "archive")
    with pytest.raises(GroupBehind, match=f"consumer group facts.v1 does not exist on {key}"):
        archive(log, store, FAR, groups=["facts.v1"])
    assert archive(log, store, groups=["facts.v1"])["archived"] == 0  # the default point: nothing
    assert log.client.xlen(key) == 4


def test_a_stream_no_group_reads_keeps_everything_by_default(log, tmp_path):
    fill(log, 6)
    assert archive(log, Archive(tmp_path / "archive"))["archived"] == 0
    assert sum(lengths(log)) == 6


# -- crash safety and concurrency -----------------------------------------------------------------
def test_a_crash_between_the_write_and_the_trim_leaves_a_history_without_duplicates(log, tmp_path, monkeypatch):
    original = fill(log, 25)
    store = Archive(tmp_path / "archive")

    def crash(*args, **kwargs):
        raise redis.ConnectionError("the archiver died here")

    monkeypatch.setattr(log.client, "xtrim", crash)
    with pytest.raises(redis.ConnectionError):
        archive(log, store, FAR)
    monkeypatch.undo()
    assert sum(lengths(log)) == 25 and sum(s.count for s in store.segments()) == 25  # both places
    assert list(history(log, store)) == original
    again = archive(log, store, FAR)  # the next run writes nothing again and trims
    assert again["archived"] == 0 and again["trimmed"] == 25
    assert list(history(log, store)) == original


def test_archiving_without_the_trim_writes_and_records_only(log, tmp_path):
    original = fill(log, 9)
    store = Archive(tmp_path / "archive")
    result = archive(log, store, FAR, trim=False)
    assert result["archived"] == 9 and result["trimmed"] == 0 and sum(lengths(log)) == 9
    recorded = {k.decode(): v.decode() for k, v in log.client.hgetall(keys.archived(log.prefix)).items()}
    assert recorded == store.watermark()
    assert list(history(log, store)) == original


def test_a_history_read_while_an_archiver_trims_reads_the_trimmed_entries_from_the_archive(log, tmp_path):
    original = fill(log, 40)
    store = Archive(tmp_path / "archive")
    reading = history(log, store, count=2)
    head = [next(reading) for _ in range(5)]
    assert archive(log, store, FAR)["trimmed"] == 40  # everything leaves Redis mid-read
    assert head + list(reading) == original


def test_a_history_from_an_archive_that_lacks_what_the_log_archived_is_refused(log, tmp_path):
    fill(log, 10)
    archive(log, Archive(tmp_path / "a"), FAR)
    elsewhere = Archive(tmp_path / "b")
    with pytest.raises(ArchiveGap, match=str(tmp_path / "b")):
        list(history(log, elsewhere))


def test_one_archiver_at_a_time(log, tmp_path):
    fill(log, 3)
    store = Archive(tmp_path / "archive")
    with store.writing():
        with pytest.raises(ArchiveBusy, match="being written by pid"):
            archive(log, Archive(tmp_path / "archive"), FAR)
    assert archive(log, store, FAR)["archived"] == 3


def test_files_half_written_by_a_run_that_died_are_removed_and_whole_ones_rewritten(log, tmp_path, monkeypatch):
    original = fill(log, 5)
    store = Archive(tmp_path / "archive")
    archive(log, store, original[2][1])
    stray = store.segments_dir / "ms_events_0-00000000.1-0.xz.tmp"
    stray.write_bytes(b"half a segment")
    writer = sys.modules["memstream.producers.archive"]._Writer
    monkeypatch.setattr(writer, "add", lambda self, seg: None)  # died after each file, before the manifest
    archive(log, store, FAR, trim=False)
    monkeypatch.undo()
    unnamed = {p.name for p in store.segments_dir.iterdir()} - {s.file.split("/")[1] for s in store.segments()}
    assert unnamed and not stray.exists()
    archive(log, store, FAR)
    assert not stray.exists()
    assert {p.name for p in store.segments_dir.iterdir()} == {s.file.split("/")[1] for s in store.segments()}
    assert list(history(log, store)) == original


# -- the files --------------------------------------------------------------------------------------
def test_verify_names_the_corrupt_segment_and_reading_it_fails_the_same_way(log, tmp_path):
    fill(log, 30)
    store = Archive(tmp_path / "archive")
    archive(log, store, FAR)
    segments = store.segments()
    assert len(segments) > 1
    assert store.verify() == {"segments": len(segments), "events": 30, "bytes": sum(s.bytes for s in segments)}
    seg = segments[1]
    path = store.directory / seg.file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSegment, match=f"archive segment {path} is corrupt: its sha256"):
        store.verify()
    with pytest.raises(CorruptSegment, match=str(path)):
        list(history(log, store))
    path.unlink()
    with pytest.raises(CorruptSegment, match=f"archive segment {path} is missing"):
        store.verify()


def test_the_manifest_lists_every_segment_with_its_checksum(log, tmp_path):
    fill(log, 12)
    store = Archive(tmp_path / "archive")
    archive(log, store, FAR)
    manifest = json.loads(store.manifest_path.read_text())
    assert manifest["format"] == 1
    for row in manifest["segments"]:
        assert set(row) >= {"file", "stream", "first_id", "last_id", "count", "bytes", "sha256", "created"}
        content = (store.directory / row["file"]).read_bytes()
        assert row["bytes"] == len(content) and row["sha256"] == hashlib.sha256(content).hexdigest()
    assert sum(row["count"] for row in manifest["segments"]) == 12


def test_an_invalid_manifest_is_an_error_naming_it(tmp_path):
    store = Archive(tmp_path / "archive")
    assert store.segments() == [] and store.watermark() == {}  # no archive yet: nothing, nothing created
    assert not store.directory.exists()
    store.directory.mkdir()
    store.manifest_path.write_text('{"format": 1, "segments": [{"file": "../../etc/passwd"}]}')
    with pytest.raises(ArchiveError, match=str(store.manifest_path)):
        store.segments()


def test_the_archive_is_owner_only(log, tmp_path):
    fill(log, 3)
    store = Archive(tmp_path / "archive")
    archive(log, store, FAR)
    for path in [store.directory, store.segments_dir]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for path in [store.manifest_path, store.lock_path, *store.segments_dir.iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


# -- erase: memstream forget's rewrite of segments ----------------------------------------------
def test_erase_rewrites_segments_without_the_entries_and_the_manifest_stays_consistent(log, tmp_path):
    from memstream.producers.archive import erase

    fill(log, 30)
    store = Archive(tmp_path / "archive")
    archive(log, store, FAR, trim=False)
    before = store.segments()
    whole = list(history(log, store))
    doomed: dict[str, set[str]] = {}
    for stream, entry_id, _ in whole[::4]:
        doomed.setdefault(stream, set()).add(entry_id)
    gone = {(s, e) for s, ids in doomed.items() for e in ids}
    # one stream loses every entry: its segment stays, empty, and keeps the log's range
    emptied = before[0].stream
    doomed[emptied] = {e for s, e, _ in whole if s == emptied}
    gone |= {(emptied, e) for e in doomed[emptied]}

    done = erase(store, doomed)
    assert done["entries"] == len(gone) and done["segments"] == len(before)
    after = store.segments()
    assert [(s.stream, s.first_id, s.last_id) for s in after] == [(s.stream, s.first_id, s.last_id) for s in before]
    assert store.watermark() == {s.stream: s.last_id for s in before}
    assert sum(s.erased for s in after) == len(gone) and store.verify()["events"] == 30 - len(gone)
    assert [(s, e) for s, e, _ in store.entries()] == [(s, e) for s, e, _ in whole if (s, e) not in gone]
    assert sorted(p.name for p in store.segments_dir.iterdir()) == sorted(s.file.split("/")[1] for s in after)
    assert erase(store, doomed) == {"segments": 0, "entries": 0}  # idempotent
    # the archiver carries on: it trims what it archived, and the history reads through
    archive(log, store, FAR)
    assert [(s, e) for s, e, _ in history(log, store)] == [(s, e) for s, e, _ in whole if (s, e) not in gone]
