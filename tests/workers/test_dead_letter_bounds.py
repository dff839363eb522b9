"""The dead letters are bounded (issue 26, finding 10): an entry admission refuses has one
letter, not one per projection, and a replay's new version never copies it again; past
``MEMSTREAM_DLQ_MAX_LETTERS`` an entry is acked without a letter and counted. On fakeredis
and a real Valkey."""

from __future__ import annotations

from pipeline_support import make_pipeline

from memstream.core import keys
from memstream.projections import all_registered
from memstream.workers.consumer import Consumer
from memstream.workers.deadletters import DeadLetters


def poison(log, n: int) -> list[str]:
    return [
        log.client.xadd(log.stream_keys[0], {"type": "turn.recorded", "id": f"bad-{i}", "data": b"\x80"}).decode()
        for i in range(n)
    ]


def test_an_entry_admission_refuses_has_one_letter_and_a_replay_adds_none(tmp_path, event_log):
    log = event_log
    entries = poison(log, 3)
    pipeline = make_pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
        dlq = DeadLetters(log.client, log.prefix)
        assert dlq.count() == 3  # not 3 x 4 projections
        assert {d["entry_id"] for d in dlq.list()} == set(entries)
        assert all(c.stats.dead_lettered == 3 for c in pipeline.consumers)  # every group met them
        assert all(log.client.xpending(log.stream_keys[0], c.group)["pending"] == 0 for c in pipeline.consumers)
        # a replay: a new version of facts reads the log from its start
        row = next(r for r in all_registered() if r.name == "facts")
        replay = Consumer(log, row.build(None, None, log.client, log.prefix, version=2), "w1")
        replay.drain()
        assert replay.stats.dead_lettered == 3 and dlq.count() == 3  # no new letter
        assert log.client.xpending(log.stream_keys[0], replay.group)["pending"] == 0
    finally:
        pipeline.stop()


def test_past_the_bound_an_entry_is_acked_without_a_letter_and_counted(tmp_path, event_log):
    log = event_log
    poison(log, 10)
    pipeline = make_pipeline(tmp_path / "home", log)
    for c in pipeline.consumers:
        c.dlq.max_letters = 4
    try:
        pipeline.drain()
        dlq = DeadLetters(log.client, log.prefix)
        assert dlq.count() == 4
        assert dlq.dropped() == 6
        assert int(log.client.hget(keys.dlq_counters(log.prefix), "dropped")) == 6
        assert all(log.client.xpending(log.stream_keys[0], c.group)["pending"] == 0 for c in pipeline.consumers)
    finally:
        pipeline.stop()


def test_the_dropped_letters_are_a_metric(tmp_path, event_log):
    from metrics_support import scrape, value
    from pipeline_support import pipeline_settings

    from memstream.service.metrics import Metrics

    log = event_log
    log.client.hincrby(keys.dlq_counters(log.prefix), "dropped", 7)
    text = scrape(Metrics(log, pipeline_settings(tmp_path / "home")))
    assert value(text, "memstream_dead_letters_dropped_total") == 7
