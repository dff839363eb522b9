"""Retention on fakeredis and on a real Valkey: a turn older than its retention is erased
from the streams, the archive, the dead letters, every projection, search and (on Valkey)
the server's files, through forget's path; a turn within retention, a memory kept forever
and a tombstone stay; a second run reads nothing it read before."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pytest
from pipeline_support import everything_in_redis, files_holding, make_pipeline, remembered, turn

from memstream import ops
from memstream.core import as_str, keys
from memstream.producers import Archive, history, parse_entry_id
from memstream.projections.stores.port import Filter
from memstream.workers import DeadLetters, Retention, RetentionJob

DAY_MS = 86_400_000


@pytest.fixture
def reach(event_log, monkeypatch):
    for module in ("memstream.ops.export", "memstream.ops.archive", "memstream.ops.stats"):
        monkeypatch.setattr(sys.modules[module], "connect", lambda settings: event_log)
    return event_log


def _payloads(pipeline, name: str) -> str:
    store = pipeline.store
    found, offset = [], None
    while True:
        page, offset = store.scroll(store.collection_for_read(name), Filter(tenant="t1"), limit=256, offset=offset)
        found += [p.payload for p in page]
        if offset is None:
            return repr(found)


def test_an_expired_turn_is_erased_everywhere_and_what_is_within_retention_stays(tmp_path, reach, settings, redis_client):
    old_a, old_b, young = (f"Qz{uuid.uuid4().hex[:12]}" for _ in range(3))
    keep = f"Mq{uuid.uuid4().hex[:12]}"
    log = reach
    settings = msgspec.structs.replace(settings, retention_turns_days=90.0)  # memories: forever
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    try:
        archived_turn = turn(f"the old locker code is {old_a}", index=0)
        kept_memory = remembered(f"my favourite tea is {keep}")
        log.append([archived_turn, kept_memory])
        pipeline.drain()
        assert ops.archive(settings)["archived"] == 2  # both in the archive, trimmed from the stream
        streamed_turn = turn(f"the old door code is {old_b}", index=1)
        log.append([streamed_turn, remembered("a memory in the expired range, kept forever")])
        pipeline.drain()
        stream = log.stream_keys[0]
        raw = log.client.xrange(stream)[-2]
        DeadLetters(log.client, log.prefix).add("facts.v1", stream, as_str(raw[0]), raw[1], "boom", 5)
        cutoff_ms = parse_entry_id(as_str(log.client.xrange(stream)[-1][0]))[0]  # the last expired millisecond
        time.sleep(0.01)  # the next entry's id is in a later millisecond
        young_turn = turn(f"the new gate code is {young}", index=2)
        log.append([young_turn])
        pipeline.drain()
        assert old_b in _payloads(pipeline, "turns")

        now_ms = cutoff_ms + 90 * DAY_MS  # 90 days after the old turns: they expire, the young one not
        retention = Retention(settings, log)
        done = retention.run(now_ms=now_ms, wait=0)
        assert done["erased"] == {"turns": 2} and done["tombstones"] == 2
        assert done["removed"]["archive_entries"] == 1 and done["removed"]["dead_letters"] == 1
        pipeline.drain()  # the workers apply the tombstones

        exported = json.dumps(list(ops.export(settings)))
        everything = repr(list(history(log, Archive(settings.archive_path))))
        for token in (old_a, old_b):
            assert token not in exported and token not in everything
            assert token not in _payloads(pipeline, "turns")
            assert token not in everything_in_redis(log.client)
            hits = pipeline.searcher.search(f"code {token}", tenant="t1", agent="a1", scope="all", history=True)
            assert token not in repr(hits)
        assert young in exported and keep in exported  # within retention; memories are kept forever
        assert young in _payloads(pipeline, "turns") and keep in _payloads(pipeline, "memories")
        assert DeadLetters(log.client, log.prefix).count() == 0
        assert files_holding(tmp_path / "pipe-home", old_a.encode()) == []  # the embedded store's files
        assert files_holding(tmp_path / "pipe-home", keep.encode())

        # the next run reads no entry it read before: the cursors moved to the cutoff
        read: list[int] = []
        xrange = log.client.xrange

        def counted(name, *args, **kwargs):
            page = xrange(name, *args, **kwargs)
            if as_str(name) in log.stream_keys:
                read.append(len(page))
            return page

        log.client.xrange = counted
        again = retention.run(now_ms=now_ms, wait=0)
        del log.client.xrange
        assert again["erased"] == {"turns": 0} and again["tombstones"] == 0 and sum(read) == 0
        assert "kept forever" in exported
        if redis_client.connection_url:  # the projections applied since: the file is rewritten again
            assert again["aof"]["state"] == "rewritten"
            directory = Path(as_str(log.client.config_get("dir")["dir"]))
            for token in (old_a, old_b):
                assert files_holding(directory, token.encode()) == []
            assert files_holding(directory, young.encode())

        # stats: the settings, what was erased, when the next turn expires
        shown = ops.stats(settings)["retention"]
        assert shown["kinds"]["turns"]["days"] == 90.0 and shown["kinds"]["turns"]["erased"] == 2
        assert shown["kinds"]["memories"] == {"days": 0.0, "erased": 0, "next_expiry": None}
        young_ms = parse_entry_id(as_str(log.client.xrange(stream)[0][0]))[0]
        assert shown["kinds"]["turns"]["next_expiry"] == pytest.approx(young_ms / 1000 + 90 * 86_400)
        assert shown["runs"] == 2 and shown["last_run"]
        assert int(log.client.hget(keys.retention_counters(log.prefix), "turns")) == 2
    finally:
        pipeline.stop()


def test_nothing_expires_without_a_retention_and_one_process_runs_it_at_a_time(reach, settings):
    log = reach
    log.append([turn("a turn kept forever")])
    assert Retention(settings, log).run(now_ms=10**13)["skipped"].startswith("no retention")
    assert not RetentionJob(settings, lambda: log).enabled
    settings = msgspec.structs.replace(settings, retention_turns_days=1.0)
    log.client.set(keys.retention_lock(log.prefix), "elsewhere:1")
    skipped = Retention(settings, log).run(now_ms=10**13, wait=0)
    assert "another process" in skipped["skipped"] and skipped["erased"] == {"turns": 0}
    assert len(log.client.xrange(log.stream_keys[0])) == 1
    log.client.delete(keys.retention_lock(log.prefix))
    assert Retention(settings, log).run(now_ms=10**13, wait=0)["erased"] == {"turns": 1}
    assert log.client.get(keys.retention_lock(log.prefix)) is None  # released


def test_the_job_runs_in_its_thread_and_counts_what_it_erased(reach, settings):
    log = reach
    log.append([turn("expires at once")])
    settings = msgspec.structs.replace(settings, retention_turns_days=0.00001)  # about a second
    time.sleep(1.0)
    job = RetentionJob(settings, lambda: log).start()
    try:
        deadline = time.monotonic() + 30
        while job.last is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        job.stop()
    assert job.last is not None and job.last["erased"] == {"turns": 1}
    assert int(log.client.hget(keys.retention_counters(log.prefix), "turns")) == 1


def test_a_failed_run_is_retried_and_never_ends_the_job(reach, settings):
    log = reach
    log.append([turn("expires at once")])
    settings = msgspec.structs.replace(settings, retention_turns_days=0.00001, retention_every_s=1.0)
    calls = []

    def connect():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the log is down")
        return log

    time.sleep(1.0)
    job = RetentionJob(settings, connect).start()
    try:
        deadline = time.monotonic() + 30
        while job.last is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        job.stop()
    assert len(calls) == 2 and job.last is not None and job.last["erased"] == {"turns": 1}
