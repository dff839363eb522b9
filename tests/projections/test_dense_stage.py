"""The vector projections in two stages: a point is findable by its keywords as soon as its
event is applied, by meaning once the dense stage gave it its vector; the dense work waits
in the version's backlog, is applied once in effect, and never undoes a forget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstream.core import keys, new_event_id
from memstream.producers import MemoryForgotten, MemoryRemembered, Scope, TurnRecorded
from memstream.projections import (
    Filter,
    MemoriesProjection,
    TurnsProjection,
    backlog_entry,
    embeds_inline,
    point_id,
    sparse_vector,
)
from memstream.projections.base import Delivery
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.stores.port import DENSE_KEY
from memstream.projections.stores.qdrant import QdrantStore

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SCOPE = Scope(tenant="t1", agent="a1", session_id="s1", app="test")
TEXTS = (
    "I adopted a greyhound named Zephyr last spring.",
    "The billing deployment failed twice this morning.",
    "We should repaint the kitchen before the guests arrive.",
)


def _turns(texts=TEXTS, start: int = 1) -> list[Delivery]:
    return [
        Delivery(
            stream="s",
            entry_id=f"{i}-0",
            fields={},
            event=TurnRecorded(
                id=new_event_id(),
                occurred_at=START + timedelta(seconds=i),
                scope=SCOPE,
                turn_index=i,
                user_text=text,
                assistant_text="",
            ),
        )
        for i, text in enumerate(texts, start=start)
    ]


def _forget(event_id: str) -> Delivery:
    return Delivery(
        stream="s",
        entry_id="99-0",
        fields={},
        event=MemoryForgotten(id=new_event_id(), occurred_at=START, scope=SCOPE, forgotten_id=event_id),
    )


def _deferred(event_log, store=None, cls=TurnsProjection):
    return cls(store or QdrantStore(), get_embedder("hash"), event_log.client, event_log.prefix, inline=False)


def _backlog(projection) -> list:
    """The backlog's entries, oldest first, as the dense stage reads them."""
    return [backlog_entry(fields) for _, fields in projection.client.xrange(projection.backlog)]


def _by_meaning(projection, text: str) -> set[int]:
    dense = projection.embedder.embed([text])[0]
    hits = projection.store.search(projection.collection, dense=dense, filter=Filter("t1"), limit=10)
    return {int(h.payload["turn_index"]) for h in hits}


def _by_keyword(projection, word: str) -> set[int]:
    hits = projection.store.search(projection.collection, sparse=sparse_vector(word), filter=Filter("t1"), limit=10)
    return {int(h.payload["turn_index"]) for h in hits}


def test_a_cheap_embedder_embeds_in_the_same_write_and_a_model_in_a_second_stage(event_log):
    assert embeds_inline(get_embedder("hash"))

    class Model:
        name, dim, max_tokens = "model", 8, 256

    assert not embeds_inline(Model())
    store = QdrantStore()
    inline = TurnsProjection(store, get_embedder("hash"), event_log.client, event_log.prefix)
    assert inline.inline
    inline.apply(_turns())
    assert not event_log.client.exists(inline.backlog)
    assert _by_meaning(inline, TEXTS[0]) == {1, 2, 3}  # every point has its dense vector


def test_a_turn_is_found_by_keywords_before_the_dense_stage_and_by_meaning_after_it(event_log):
    turns = _deferred(event_log)
    assert turns.backlog == keys.embed_backlog(event_log.prefix, "turns.v1")
    turns.apply(_turns())
    assert _by_keyword(turns, "greyhound") == {1, 2}  # the unit quotes the turn before
    assert _by_meaning(turns, TEXTS[0]) == set()
    entries = _backlog(turns)
    assert len(entries) == 3 and all(e is not None and e[2] == "t1" for e in entries)
    assert turns.embed_backlog(entries) == 3
    assert _by_meaning(turns, TEXTS[0]) == {1, 2, 3}
    (point,) = turns.store.retrieve(turns.collection, [entries[0][0]], with_vectors=True)
    assert np.allclose(point.dense, turns.embedder.embed([entries[0][4]])[0], atol=1e-6)
    assert point.payload[DENSE_KEY] == entries[0][1]


def test_a_batch_redelivered_before_the_dense_stage_and_its_entries_leave_each_point_once_with_its_vector(
    event_log,
):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    turns.apply(batch)  # redelivered after a crash before its ack: no vector to keep yet, entries again
    entries = _backlog(turns)
    assert len(entries) == 6
    assert turns.embed_backlog(entries) == 3  # the same text twice is embedded once
    assert turns.embed_backlog(entries) == 3  # and again: the same state
    assert turns.store.count(turns.collection) == 3
    assert _by_meaning(turns, TEXTS[1]) == {1, 2, 3}


def test_a_batch_redelivered_after_the_dense_stage_keeps_every_vector_and_adds_no_entry(event_log):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    turns.embed_backlog(_backlog(turns))
    event_log.client.delete(turns.backlog)  # the dense stage deleted what it applied
    ids = [point_id(d.event.id, 0) for d in batch]
    before = {p.id: p for p in turns.store.retrieve(turns.collection, ids, with_vectors=True)}
    turns.apply(batch)  # redelivered: the keyword stage writes every point again
    assert _by_meaning(turns, TEXTS[1]) == {1, 2, 3}  # never hidden, not even until an entry is embedded
    assert _backlog(turns) == []
    after = {p.id: p for p in turns.store.retrieve(turns.collection, ids, with_vectors=True)}
    for pid in ids:
        assert np.allclose(after[pid].dense, before[pid].dense)
        assert after[pid].payload == before[pid].payload and after[pid].sparse == before[pid].sparse
    assert turns.store.count(turns.collection) == 3
    assert turns.counters.get()["dense_kept"] == 3


def test_a_rewrite_with_another_text_drops_the_old_vector_and_queues_the_new_one(event_log):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    turns.embed_backlog(_backlog(turns))
    event_log.client.delete(turns.backlog)
    turns.apply([_forget(batch[0].event.id)])  # turn 2 quoted turn 1: re-indexed without it
    (newer,) = _backlog(turns)
    points = {
        p.id: p for p in turns.store.retrieve(turns.collection, [point_id(d.event.id, 0) for d in batch], with_vectors=True)
    }
    assert points[newer[0]].dense is None and points[newer[0]].payload[DENSE_KEY] == newer[1]
    assert points[point_id(batch[2].event.id, 0)].dense is not None  # untouched
    turns.apply(batch[1:])  # and the batch redelivered: turn 2's new text is the one written, still no vector
    assert [e[0] for e in _backlog(turns)] == [newer[0], newer[0]]
    assert turns.store.retrieve(turns.collection, [newer[0]], with_vectors=True)[0].dense is None
    assert turns.embed_backlog(_backlog(turns)) == 1
    (point,) = turns.store.retrieve(turns.collection, [newer[0]], with_vectors=True)
    assert np.allclose(point.dense, turns.embedder.embed([newer[4]])[0], atol=1e-6)


def test_a_forgotten_turn_redelivered_after_the_dense_stage_stays_forgotten(event_log):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    turns.embed_backlog(_backlog(turns))
    turns.apply([_forget(batch[2].event.id)])
    turns.apply(batch)  # redelivered: the forgotten turn is left out, the others keep their vectors
    ids = [point_id(d.event.id, 0) for d in batch]
    left = {p.id: p for p in turns.store.retrieve(turns.collection, ids, with_vectors=True)}
    assert set(left) == set(ids[:2]) and all(p.dense is not None for p in left.values())


def test_a_forget_applied_between_the_stages_is_not_undone_by_the_dense_stage(event_log):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    turns.apply([_forget(batch[1].event.id)])
    turns.embed_backlog(_backlog(turns))
    ids = [point_id(d.event.id, 0) for d in batch]
    left = {p.id: p for p in turns.store.retrieve(turns.collection, ids, with_vectors=True)}
    assert ids[1] not in left  # never created again
    assert set(left) == {ids[0], ids[2]}
    assert all(p.dense is not None for p in left.values())
    assert turns.counters.get()["embed_skipped"] >= 1


def test_a_reindexed_turn_keeps_the_vector_of_its_newest_text_whatever_the_order(event_log):
    turns = _deferred(event_log)
    batch = _turns()
    turns.apply(batch)
    older = _backlog(turns)
    event_log.client.delete(turns.backlog)
    turns.apply([_forget(batch[0].event.id)])  # turn 2 quoted turn 1: it is re-indexed without it
    (newer,) = _backlog(turns)
    assert newer[0] == older[1][0] and newer[1] != older[1][1]
    assert turns.embed_backlog([newer]) == 1
    assert turns.embed_backlog(older) == 1  # only turn 3's: turn 1 is gone, turn 2 holds a newer text
    (point,) = turns.store.retrieve(turns.collection, [newer[0]], with_vectors=True)
    assert np.allclose(point.dense, turns.embedder.embed([newer[4]])[0], atol=1e-6)


def test_memories_are_found_by_keywords_at_once_and_by_meaning_after_the_dense_stage(event_log):
    memories = _deferred(event_log, cls=MemoriesProjection)
    event = MemoryRemembered(id=new_event_id(), occurred_at=START, scope=SCOPE, content="Ana prefers green tea in the afternoon")
    memories.apply([Delivery(stream="s", entry_id="1-0", fields={}, event=event)])
    f = Filter("t1")
    assert [
        h.payload["event_id"]
        for h in memories.store.search(memories.collection, sparse=sparse_vector("green tea"), filter=f, limit=5)
    ] == [event.id]
    dense = memories.embedder.embed(["Ana prefers green tea"])[0]
    assert memories.store.search(memories.collection, dense=dense, filter=f, limit=5) == []
    assert memories.embed_backlog(_backlog(memories)) == 1
    assert len(memories.store.search(memories.collection, dense=dense, filter=f, limit=5)) == 1


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {b"id": point_id("x").encode(), b"key": b"k", b"tenant": b"t1", b"event": b"e"},
        {b"id": b"not-a-uuid", b"key": b"k", b"tenant": b"t1", b"event": b"e", b"text": b"x"},
        {b"id": point_id("x").encode(), b"key": b"", b"tenant": b"t1", b"event": b"e", b"text": b"x"},
        {b"id": point_id("x").encode(), b"key": b"k", b"tenant": b"t1", b"event": b"e", b"text": b"\xff"},
    ],
)
def test_a_backlog_entry_that_does_not_decode_is_refused(fields):
    assert backlog_entry(fields) is None


def test_a_backlog_entry_decodes_from_bytes_or_text():
    pid = point_id("x")
    entry = (pid, "k", "t1", "e1", "some text")
    as_bytes = {k.encode(): v.encode() for k, v in zip(("id", "key", "tenant", "event", "text"), entry)}
    assert backlog_entry(as_bytes) == entry
    assert backlog_entry(dict(zip(("id", "key", "tenant", "event", "text"), entry))) == entry


def test_the_dense_stage_stores_the_token_vectors_of_what_each_point_shows_for_its_event(event_log, tmp_path):
    """With ``late`` (the prefetch's late interaction), the dense stage also stores the token
    vectors of each point's shown text, noted for its event (forget finds them by it); a
    forgotten turn's are never made, and a model that fails is counted, not raised."""
    from memstream.projections import EmbeddingCache, LateError, LatePassages, LateScorer, text_key

    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3", memory_items=0)
    try:
        turns = _deferred(event_log)
        turns.late = LatePassages(cache)
        batch = _turns()
        turns.apply(batch)
        turns.apply([_forget(batch[1].event.id)])
        assert turns.embed_backlog(_backlog(turns)) == 2
        shown = {
            p.payload["event_id"]: p.payload["text"]
            for p in turns.store.retrieve(turns.collection, [e[0] for e in _backlog(turns)])
        }
        assert set(shown) == {batch[0].event.id, batch[2].event.id}
        stored = cache.get_blobs(LateScorer.name, [text_key(t) for t in shown.values()])
        assert len(stored) == 2 and cache.count(LateScorer.name) == 2
        for event, text in shown.items():
            assert text_key(text) in cache.keys_of([event])
        assert cache.keys_of([batch[1].event.id]) == set()

        def broken() -> LateScorer:
            raise LateError("the late-interaction model is missing")

        turns.late = LatePassages(cache, broken)
        turns.apply(_turns(("A new turn about the greyhound's vet visit.",), start=4))
        assert turns.embed_backlog(_backlog(turns)[-1:]) == 1  # the dense vector is set all the same
        assert turns.counters.get()["late_failed"] == 1
    finally:
        cache.close()
