"""A dead letter no projection could read (a field name that is no UTF-8) blocks neither
``memstream forget`` (every selector) nor retention, and a retention job that fails is seen:
``memstream doctor`` fails its retention check. On fakeredis and a real Valkey (issue 26,
finding 3)."""

from __future__ import annotations

import sys
import time

import msgspec
import pytest
from pipeline_support import make_pipeline, remembered, turn

from memstream import ops
from memstream.core import keys
from memstream.ops.doctor import check_retention
from memstream.workers import DeadLetters, Retention, RetentionJob


@pytest.fixture
def reach(event_log, monkeypatch):
    for module in ("memstream.ops.forget", "memstream.ops.stats"):
        monkeypatch.setattr(sys.modules[module], "connect", lambda settings: event_log)
    return event_log


@pytest.fixture
def poisoned(tmp_path, reach):
    """A log with a good turn and memory, and an entry whose field name is no UTF-8,
    dead-lettered by every projection."""
    log = reach
    kept, gone = turn("the build server is called hopper", index=0), remembered("the datacenter is in Oslo")
    log.append([kept, gone])
    log.client.xadd(log.stream_keys[0], {b"\xff\xfename": b"v", "type": "turn.recorded", "id": "poison-1", "data": b"\x80"})
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    pipeline.drain()
    assert DeadLetters(log.client, log.prefix).count() >= 1
    yield log, pipeline, kept, gone
    pipeline.stop()


@pytest.mark.parametrize(
    "selector",
    [
        {"match": "Oslo"},
        {"events": ("EVENT",)},
        {"tenant": "t1"},
        {"agent": "a1"},
        {"session": "s1"},
        {"tombstoned": True},
    ],
    ids=lambda s: next(iter(s)),
)
def test_forget_by_every_selector_runs_past_a_dead_letter_that_is_not_utf8(poisoned, settings, selector):
    log, pipeline, kept, gone = poisoned
    if selector.get("events"):
        selector = {"events": (gone.id,)}
    result = ops.forget(settings, ops.Selector(**selector), wait=0.2, rewrite_aof=False)
    if not selector.get("tombstoned"):
        assert gone.id in result["events"]


def test_forget_by_the_id_field_of_the_undecodable_entry_removes_it_and_its_dead_letters(poisoned, settings):
    log, pipeline, kept, gone = poisoned
    result = ops.forget(settings, ops.Selector(events=("poison-1",)), wait=0.2, rewrite_aof=False)
    assert result["removed"]["stream_entries"] == 1 and result["removed"]["dead_letters"] >= 1
    assert DeadLetters(log.client, log.prefix).count() == 0
    pipeline.drain()  # a replay or a new group meets no such entry any more
    assert DeadLetters(log.client, log.prefix).count() == 0


def test_retention_erases_past_a_dead_letter_that_is_not_utf8(poisoned, settings):
    log, pipeline, kept, gone = poisoned
    time.sleep(0.05)
    settings = msgspec.structs.replace(settings, retention_turns_days=0.0000001)
    done = Retention(settings, log).run(wait=0.2, rewrite_aof=False)
    assert done["erased"]["turns"] == 2  # the turn and the entry whose type says turn
    assert DeadLetters(log.client, log.prefix).count() == 0


def test_a_retention_job_that_keeps_failing_fails_doctors_retention_check_until_a_run_succeeds(reach, settings):
    log = reach
    settings = msgspec.structs.replace(settings, retention_turns_days=1.0, retention_every_s=0.2)
    broken = {"on": True}

    def connect():
        if broken["on"]:
            log.client.hset(keys.retention_lock(log.prefix), "not", "a string")  # every run's SET NX fails: WRONGTYPE
        else:
            log.client.delete(keys.retention_lock(log.prefix))
        return log

    assert check_retention(log, settings)["ok"] is True
    job = RetentionJob(settings, connect).start()
    try:
        deadline = time.monotonic() + 30
        while check_retention(log, settings)["ok"] and time.monotonic() < deadline:
            time.sleep(0.05)
        check = check_retention(log, settings)
        assert check["ok"] is False and check["failures"] >= 2
        assert "the retention job failed its last" in check["error"] and "ResponseError" in check["error"]
        broken["on"] = False
        deadline = time.monotonic() + 30
        while not check_retention(log, settings)["ok"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert check_retention(log, settings)["failures"] == 0
    finally:
        job.stop()
