"""The spool: records round-trip; corruption is quarantined and counted; the bound refuses;
rotation and adoption of dead processes' segments ship everything once, in order."""

from __future__ import annotations

import os
import signal
import struct

import pytest
from writepath import Switchable, logged_contents, remembered, start_child

from memstream.producers.events import encode
from memstream.producers.shipper import Shipper
from memstream.producers.spool import HEADER, MAGIC, Spool, spool_usage
from memstream.producers.stream import EventLog


@pytest.fixture
def spool_dir(tmp_path):
    return tmp_path / "spool"


@pytest.fixture
def spool(spool_dir):
    s = Spool(spool_dir)
    yield s
    s.close()


def payload(label: str) -> bytes:
    return encode(remembered(label))


def offsets(path) -> list[tuple[int, int]]:
    """(offset, total length) of every record in a well-formed segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        _, length, _, _ = HEADER.unpack_from(data, pos)
        out.append((pos, HEADER.size + length))
        pos += HEADER.size + length
    return out


def write_and_leave(spool_dir, labels) -> os.PathLike:
    """Spool records as a process that then dies would: the segment stays, unlocked."""
    s = Spool(spool_dir)
    for label in labels:
        assert s.append(payload(label))
    path = s.segments[-1].path
    s.close()
    assert path.exists()
    return path


def ship_all(spool_dir, log: EventLog) -> tuple[Spool, Shipper]:
    """A new process's spool adopting what is there, shipped in one burst."""
    s = Spool(spool_dir)
    shipper = Shipper(s, lambda: log)
    shipper.ship_once()
    return s, shipper


# -- the record format -----------------------------------------------------------------


def test_records_read_back_in_order_with_increasing_sequence_numbers(spool):
    payloads = [payload(f"r{i}") for i in range(50)] + [payload("é" * 300), b"", os.urandom(70_000)]
    for data in payloads:
        assert spool.append(data)
    seg = spool.segments[-1]
    records, end = seg.read(spool.limit_of(seg), 1000, spool.quarantine)
    assert [r.payload for r in records] == payloads
    assert [r.seq for r in records] == list(range(1, len(payloads) + 1))
    assert end == spool.limit_of(seg) == seg.path.stat().st_size
    assert spool.appended == len(payloads) and seg.corrupt == 0


def test_a_record_is_header_magic_length_seq_crc_then_payload(spool):
    spool.append(b"hello")
    raw = spool.segments[-1].path.read_bytes()
    magic, length, seq, crc = HEADER.unpack_from(raw)
    import zlib

    assert (magic, length, seq) == (MAGIC, 5, 1)
    assert crc == zlib.crc32(b"hello", zlib.crc32(struct.pack(">Q", 1)))
    assert raw[HEADER.size :] == b"hello"


def test_reads_are_paged_by_max_records_and_resume_from_the_offset(spool):
    for i in range(10):
        spool.append(payload(str(i)))
    seg = spool.segments[-1]
    first, end = seg.read(spool.limit_of(seg), 4, spool.quarantine)
    assert [r.seq for r in first] == [1, 2, 3, 4]
    spool.shipped(seg, end, first[-1].seq)
    rest, _ = seg.read(spool.limit_of(seg), 100, spool.quarantine)
    assert [r.seq for r in rest] == list(range(5, 11))


def test_always_fsync_spool_appends_and_reads_back(spool_dir):
    s = Spool(spool_dir, fsync="always")
    try:
        data = payload("x")
        assert s.append(data)
        seg = s.segments[-1]
        assert [r.payload for r in seg.read(s.limit_of(seg), 10, s.quarantine)[0]] == [data]
    finally:
        s.close()


def test_append_after_close_is_refused_and_counted_not_raised(spool_dir):
    s = Spool(spool_dir)
    s.close()
    assert s.append(b"late") is False
    assert s.refused == 1


def test_the_records_are_the_same_whether_written_holding_the_interpreter_or_by_os_write(spool_dir, monkeypatch):
    """The append's write keeps the interpreter lock (libc's write through ctypes); where
    ctypes cannot load libc it falls back to os.write: the bytes on disk are the same."""
    from memstream.producers import spool as spool_module

    assert spool_module._c_write is not None  # Linux: the lock-holding write is in use
    files = []
    records = (payload("a"), b"", os.urandom(70_000), "é".encode() * 500)
    for c_write in (spool_module._c_write, None):
        monkeypatch.setattr(spool_module, "_c_write", c_write)
        s = Spool(spool_dir / ("c" if c_write else "os"))
        for data in records:
            assert s.append(data)
        files.append(s.segments[-1].path.read_bytes())
        s.close()
    assert files[0] == files[1] and len(files[0]) > 70_000


def test_a_failed_write_is_refused_and_counted_not_raised(spool_dir):
    s = Spool(spool_dir)
    try:
        os.close(s._wfd)  # the descriptor goes bad under the spool: EBADF
        assert s.append(payload("lost")) is False
        assert (s.refused, s.errors, s.appended) == (1, 1, 0)
    finally:
        s._wfd = -1
        s.close()


# -- the bound -------------------------------------------------------------------------


def test_the_bound_refuses_and_counts_then_accepts_again_once_shipped(spool_dir, event_log):
    record = HEADER.size + len(payload("0"))
    s = Spool(spool_dir, max_bytes=record * 5 + record // 2)
    shipper = Shipper(s, lambda: event_log)
    try:
        results = [s.append(payload(str(i))) for i in range(8)]
        assert results == [True] * 5 + [False] * 3
        assert (s.appended, s.refused) == (5, 3)
        assert s.unshipped_bytes == record * 5
        shipper.ship_once()
        assert s.unshipped_bytes == 0
        assert s.append(payload("after"))
        shipper.ship_once()
        assert logged_contents(event_log) == ["0", "1", "2", "3", "4", "after"]
        assert shipper.stats()["spool_refused"] == 3
        # reported once to the shared counters that `memstream stats` shows
        counters = event_log.client.hgetall(f"{event_log.prefix}:counters:spool")
        assert int(counters[b"refused"]) == 3
        shipper.ship_once()
        assert int(event_log.client.hget(f"{event_log.prefix}:counters:spool", "refused")) == 3
    finally:
        s.close()


def test_the_bound_counts_adopted_segments_so_restarts_do_not_grow_the_spool(spool_dir, event_log):
    record = HEADER.size + len(payload("0"))
    write_and_leave(spool_dir, ["0", "1", "2", "3"])  # a dead process's backlog: 4 records
    s = Spool(spool_dir, max_bytes=record * 5 + record // 2)
    shipper = Shipper(s, lambda: event_log)
    try:
        s.adopt_orphans()
        assert s.unshipped_bytes == record * 4
        assert [s.append(payload(x)) for x in ("4", "5")] == [True, False]  # one more fits
        assert s.refused == 1
        shipper.ship_once()
        assert s.unshipped_bytes == 0
        assert s.append(payload("6"))
        shipper.ship_once()
        assert logged_contents(event_log) == ["0", "1", "2", "3", "4", "6"]
    finally:
        s.close()


# -- corruption ------------------------------------------------------------------------


def test_a_corrupt_region_is_quarantined_counted_and_everything_else_ships(spool_dir, event_log):
    labels = [str(i) for i in range(10)]
    path = write_and_leave(spool_dir, labels)
    spots = offsets(path)
    data = bytearray(path.read_bytes())
    data[spots[2][0] + HEADER.size + 3] ^= 0xFF  # record "2": payload flipped, bad CRC
    data[spots[5][0] : spots[5][0] + 4] = b"XXXX"  # record "5": bad magic
    struct.pack_into(">I", data, spots[7][0] + 4, 1 << 20)  # record "7": length past the end
    del data[spots[9][0] + spots[9][1] // 2 :]  # record "9": torn tail of a dead writer
    path.write_bytes(bytes(data))

    s, shipper = ship_all(spool_dir, event_log)
    try:
        shipped = logged_contents(event_log)
        # record 8 follows the corrupt length of 7: the reader resyncs to its magic
        assert shipped == ["0", "1", "3", "4", "6", "8"]
        quarantined = sorted((spool_dir / "quarantine").glob("*.bad"))
        assert len(quarantined) == 4
        assert b"".join(q.read_bytes() for q in quarantined)  # the bytes are kept for a look
        stats = shipper.stats()
        assert stats["spool_corrupt"] == 4
        assert stats["shipped"] == 6
        assert not path.exists()  # fully handled: the adopted segment is deleted
        assert spool_usage(spool_dir)["quarantined"] == 4
    finally:
        s.close()


def test_a_torn_header_at_the_end_of_a_dead_writers_segment_is_quarantined(spool_dir, event_log):
    path = write_and_leave(spool_dir, ["a", "b"])
    with open(path, "ab") as f:
        f.write(MAGIC + b"\x00\x00")  # died inside the header of a third record
    s, shipper = ship_all(spool_dir, event_log)
    try:
        assert logged_contents(event_log) == ["a", "b"]
        assert shipper.stats()["spool_corrupt"] == 1
        assert not path.exists()
    finally:
        s.close()


def test_garbage_before_the_first_record_is_skipped_to_the_first_magic(spool_dir, event_log):
    path = write_and_leave(spool_dir, ["a", "b"])
    path.write_bytes(b"\x00garbage\xff" + path.read_bytes())
    s, shipper = ship_all(spool_dir, event_log)
    try:
        assert logged_contents(event_log) == ["a", "b"]
        assert shipper.stats()["spool_corrupt"] == 1
    finally:
        s.close()


def test_a_record_with_a_valid_crc_but_no_valid_event_is_quarantined_and_the_rest_ships(spool, event_log):
    shipper = Shipper(spool, lambda: event_log)
    spool.append(payload("a"))
    spool.append(b"\x81\xa4type\xa9not.event")  # well-formed record, not an event
    spool.append(b"\xc1")  # not even msgpack
    spool.append(payload("b"))
    shipper.ship_once()
    assert logged_contents(event_log) == ["a", "b"]
    stats = shipper.stats()
    assert stats["malformed"] == 2 and stats["shipped"] == 2
    assert len(list(spool.quarantine.glob("*.bad"))) == 2


# -- rotation --------------------------------------------------------------------------


def test_rotation_ships_every_segment_in_order_and_deletes_shipped_ones(spool_dir, event_log):
    s = Spool(spool_dir, rotate_bytes=400)
    link = Switchable(event_log, down=True)
    shipper = Shipper(s, link)
    try:
        labels = []
        for round_ in range(6):  # the log is down: segments pile up
            for i in range(5):
                labels.append(f"{round_}.{i}")
                assert s.append(payload(labels[-1]))
            shipper.ship_once()
        assert len(list(spool_dir.glob("*.seg"))) >= 5
        assert logged_contents(event_log) == []
        link.down = False
        shipper.ship_once()
        assert logged_contents(event_log) == labels
        assert [p.name for p in spool_dir.glob("*.seg")] == [s.segments[-1].path.name]
        assert len(s.segments) == 1
        assert list(spool_dir.glob("*.ckpt")) in ([], [s.segments[-1].ckpt_path])
        # the dedup records of deleted segments are dropped from the log too
        assert set(event_log.client.hkeys(event_log.shipped_key("t1"))) <= {s.segments[-1].id.encode()}
        assert s.unshipped_bytes == 0
    finally:
        s.close()


# -- adoption of a dead process's segments ----------------------------------------------


@pytest.mark.parametrize("death", ["exit", "sigkill"])
def test_a_segment_left_by_a_dead_process_is_adopted_and_shipped_once(spool_dir, event_log, death):
    proc, line = start_child("spool", str(spool_dir), "25", "exit" if death == "exit" else "wait", expect="WRITTEN")
    if death == "sigkill":
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close(), proc.stderr.close()
    orphan = spool_dir / f"{line.split()[1]}.seg"
    assert orphan.exists()

    s, shipper = ship_all(spool_dir, event_log)
    try:
        assert logged_contents(event_log) == [f"child/{i}" for i in range(25)]
        assert not orphan.exists()
        assert s.adopt_orphans() == []
        shipper.ship_once()
        assert len(logged_contents(event_log)) == 25
    finally:
        s.close()
    # and a third process finds nothing left to ship
    s3, _ = ship_all(spool_dir, event_log)
    s3.close()
    assert len(logged_contents(event_log)) == 25


def test_a_segment_of_a_live_process_is_not_adopted(spool_dir):
    proc, line = start_child("spool", str(spool_dir), "3", "wait", expect="WRITTEN")
    try:
        s = Spool(spool_dir)
        try:
            assert s.adopt_orphans() == []
        finally:
            s.close()
        assert (spool_dir / f"{line.split()[1]}.seg").exists()
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close(), proc.stderr.close()


def test_a_crash_after_shipping_part_of_a_segment_resumes_from_its_checkpoint(spool_dir, event_log):
    s = Spool(spool_dir)
    shipper = Shipper(s, lambda: event_log, batch=3)
    for i in range(4):
        s.append(payload(str(i)))
    shipper.ship_once()
    for i in range(4, 8):
        s.append(payload(str(i)))
    s.close()  # dies before shipping 4..7

    s2, _ = ship_all(spool_dir, event_log)
    s2.close()
    assert logged_contents(event_log) == [str(i) for i in range(8)]


def test_a_lost_checkpoint_means_a_resend_that_the_log_deduplicates(spool_dir, event_log):
    s = Spool(spool_dir)
    shipper = Shipper(s, lambda: event_log)
    for i in range(4):
        s.append(payload(str(i)))
    shipper.ship_once()
    for i in range(4, 6):
        s.append(payload(str(i)))
    seg = s.segments[-1]
    s.close()
    seg.ckpt_path.unlink()  # e.g. never reached the disk before a power loss

    s2, shipper2 = ship_all(spool_dir, event_log)
    s2.close()
    assert logged_contents(event_log) == [str(i) for i in range(6)]
    assert shipper2.stats()["duplicates_skipped"] == 4


def test_orphans_are_shipped_before_this_process_s_own_records(spool_dir, event_log):
    write_and_leave(spool_dir, ["old-0", "old-1"])
    s = Spool(spool_dir)
    try:
        s.append(payload("new-0"))
        Shipper(s, lambda: event_log).ship_once()
        assert logged_contents(event_log) == ["old-0", "old-1", "new-0"]
    finally:
        s.close()


def test_close_deletes_fully_shipped_segments_and_keeps_the_rest(spool_dir, event_log):
    s = Spool(spool_dir)
    Shipper(s, lambda: event_log).ship_once()
    shipped_path = s.segments[-1].path
    s.close()
    assert not shipped_path.exists()  # empty: nothing to leave behind
    kept = write_and_leave(spool_dir, ["x"])
    assert kept.exists()
    usage = spool_usage(spool_dir)
    assert (usage["segments"], usage["unshipped_bytes"]) == (1, kept.stat().st_size)


# -- the backlog in events (the fleet report's) --------------------------------------------


def test_the_backlog_counts_the_events_of_own_rotated_and_adopted_segments_until_they_ship(spool_dir, event_log):
    write_and_leave(spool_dir, ["dead 0", "dead 1", "dead 2"])  # a dead process's backlog
    s = Spool(spool_dir, rotate_bytes=400)
    link = Switchable(event_log, down=True)
    shipper = Shipper(s, link)
    try:
        assert s.unshipped_events == 0
        for round_ in range(3):  # the log is down: own segments rotate and pile up
            for i in range(5):
                assert s.append(payload(f"{round_}.{i}"))
            shipper.ship_once()
        s.adopt_orphans()
        assert len(s.segments) >= 3 and len(s.adopted) == 1
        assert s.unshipped_events == 15 + 3
        link.down = False
        shipper.ship_once()
        assert s.unshipped_events == 0 and len(logged_contents(event_log)) == 18
    finally:
        s.close()


def test_an_adopted_segment_shipped_in_part_counts_only_what_is_left_behind_its_checkpoint(spool_dir, event_log):
    s = Spool(spool_dir)
    Shipper(s, lambda: event_log).ship_once()
    for i in range(4):
        s.append(payload(str(i)))
    Shipper(s, lambda: event_log).ship_once()
    for i in range(4, 9):
        s.append(payload(str(i)))
    s.close()  # dies before shipping 4..8
    s2 = Spool(spool_dir)
    try:
        s2.adopt_orphans()
        assert s2.unshipped_events == 5
    finally:
        s2.close()


def test_a_torn_last_record_of_a_dead_writer_is_not_counted_in_the_backlog(spool_dir):
    path = write_and_leave(spool_dir, ["0", "1", "2"])
    with open(path, "ab") as f:  # the header of a fourth record, and half its payload
        f.write(HEADER.pack(MAGIC, 100, 4, 0) + b"x" * 50)
    s = Spool(spool_dir)
    try:
        s.adopt_orphans()
        assert s.unshipped_events == 3
    finally:
        s.close()


# -- erase_records: memstream forget on this host's spool --------------------------------------
def test_erase_rewrites_a_left_segment_without_the_records_and_shipping_resumes_after_its_checkpoint(spool_dir, event_log):
    from memstream.producers.spool import Segment, erase_records

    path = write_and_leave(spool_dir, ["a", "SECRET b", "c", "SECRET d", "e"])
    sizes = [size for _, size in offsets(path)]
    seg = Segment(path=path, fd=-1)
    seg.offset, seg.last_seq = sum(sizes[:3]), 3  # a, b and c were shipped
    seg.save_checkpoint()
    (spool_dir / "quarantine").mkdir()
    (spool_dir / "quarantine" / "x.0.bad").write_bytes(b"torn SECRET bytes")
    (spool_dir / "quarantine" / "y.0.bad").write_bytes(b"torn harmless bytes")

    doomed = lambda data: b"SECRET" in data  # noqa: E731
    assert erase_records(spool_dir, doomed, dry_run=True) == {"records": 2, "segments": 0, "quarantined": 1, "held": 0}
    assert b"SECRET" in path.read_bytes()
    assert erase_records(spool_dir, doomed) == {"records": 2, "segments": 1, "quarantined": 1, "held": 0}
    assert b"SECRET" not in path.read_bytes() and len(offsets(path)) == 3
    assert sorted(p.name for p in (spool_dir / "quarantine").iterdir()) == ["y.0.bad"]
    seg.load_checkpoint()
    assert (seg.offset, seg.last_seq) == (sizes[0] + sizes[2], 3)  # a and c before it: the shipped part
    assert erase_records(spool_dir, doomed) == {"records": 0, "segments": 0, "quarantined": 0, "held": 0}
    s, _ = ship_all(spool_dir, event_log)
    s.close()
    assert logged_contents(event_log) == ["e"]  # d is gone; a and c were shipped before


def test_erase_only_counts_the_records_of_a_segment_a_live_process_holds(spool_dir, spool):
    from memstream.producers.spool import erase_records

    assert spool.append(payload("SECRET live"))
    before = spool.segments[-1].path.read_bytes()
    assert erase_records(spool_dir, lambda data: b"SECRET" in data) == {"records": 0, "segments": 0, "quarantined": 0, "held": 1}
    assert spool.segments[-1].path.read_bytes() == before
