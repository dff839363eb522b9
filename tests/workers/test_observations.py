"""What the workers report to the process's observer (``memstream.core.observe``): each
committed batch with the seconds of its stages and the entries applied, each embedding
call of a version's projection, the entries read again; and an observer never breaks a
batch."""

from __future__ import annotations

import numpy as np
from metrics_support import Recorder, observing
from pipeline_support import make_pipeline, remembered, turn
from query_support import answer

from memstream.core import observe
from memstream.producers.stream import parse_entry_id
from memstream.projections import get_embedder, group_of
from memstream.workers.consumer import Consumer
from memstream.workers.observed import ObservedEmbedder


class Collecting:
    """A projection that keeps the event ids it applied; refuses each id of ``flaky`` in the
    first delivery (in its batch, then alone), takes it in the next."""

    name = "collecting"
    version = 1

    def __init__(self, flaky=()):
        self.refusals = {event_id: 2 for event_id in flaky}
        self.applied: list[str] = []

    def apply(self, batch):
        for d in batch:
            if self.refusals.get(d.event.id):
                self.refusals[d.event.id] -= 1
                raise ValueError(f"not this time: {d.event.id}")
        self.applied += [d.event.id for d in batch]


def test_each_committed_batch_reports_its_stage_seconds_and_the_entries_it_applied(event_log):
    ids = event_log.append([remembered(f"note {i}") for i in range(3)])
    consumer = Consumer(event_log, Collecting(), "c1")
    with observing(Recorder()) as seen:
        consumer.drain()
    [(group, stages, applied, at)] = seen.batches
    assert group == consumer.group
    assert set(stages) == {"admit", "apply", "commit"} and all(s >= 0 for s in stages.values())
    assert applied == ids
    assert at >= max(parse_entry_id(i)[0] for i in ids) / 1000 - 1  # a commit time, not an event time


def test_an_observer_that_fails_never_fails_the_batch(event_log):
    class Broken(Recorder):
        def batch(self, *args):
            raise RuntimeError("observer on fire")

    event_log.append([remembered("still applied")])
    projection = Collecting()
    consumer = Consumer(event_log, projection, "c1")
    with observing(Broken()):
        consumer.drain()
    assert len(projection.applied) == 1 and consumer.stats.errors == 0
    assert event_log.client.xpending(event_log.stream_keys[0], consumer.group)["pending"] == 0


def test_entries_read_again_after_a_failure_count_as_redelivered(event_log):
    events = [remembered(f"note {i}") for i in range(3)]
    event_log.append(events)
    projection = Collecting(flaky=[events[1].id])
    consumer = Consumer(event_log, projection, "c1")
    with observing(Recorder()) as seen:
        consumer.drain()
    assert sorted(projection.applied) == sorted(e.id for e in events)
    assert consumer.stats.redelivered == 1 and consumer.stats.applied == 3
    assert sum(len(applied) for _, _, applied, _ in seen.batches) == 3  # each entry observed once applied


def test_each_embedding_call_of_a_version_is_reported_for_its_group_and_queries_are_not(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        event_log.append(
            [
                remembered("the release train leaves on Thursdays"),
                turn("Where is the staging database?", "On db-staging-2, read-only on Fridays."),
            ]
        )
        with observing(Recorder()) as seen:
            pipeline.drain()
            embedded = list(seen.embeds)
            answer(pipeline.reads.handlers(), {"op": "search", "tenant": "t1", "query": "release train"})
    finally:
        pipeline.stop()
    groups = {group for group, _, _ in embedded}
    assert groups == {group_of("memories"), group_of("turns")}
    assert all(texts >= 1 and seconds >= 0 for _, texts, seconds in embedded)
    assert seen.embeds == embedded  # the query embedded through the version's own embedder, unreported


def test_an_observed_embedder_gives_the_inner_ones_vectors_and_attributes():
    inner = get_embedder("hash", dim=32)
    observed = ObservedEmbedder(inner, "g.v1")
    with observing(Recorder()) as seen:
        vectors = observed.embed(["a", "b c"])
    assert np.array_equal(vectors, inner.embed(["a", "b c"]))
    assert (observed.name, observed.dim, observed.max_tokens) == (inner.name, inner.dim, inner.max_tokens)
    assert observed.count_tokens("a b") == inner.count_tokens("a b")
    assert observed.worth_caching is inner.worth_caching
    assert [(g, n) for g, n, _ in seen.embeds] == [("g.v1", 2)]


def test_installing_an_observer_returns_the_one_it_replaces():
    first, second = Recorder(), Recorder()
    with observing(first):
        assert observe.install(second) is first
        assert observe.current() is second
        observe.answered("search", 0.5)
    assert second.answers == [("search", 0.5)] and first.answers == []
