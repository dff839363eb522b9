"""The turns projection's options choose what a version indexes; its version names where."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstream.core import keys, new_event_id
from memstream.producers import Scope, TurnRecorded
from memstream.projections import Filter, TurnsProjection, group_name, sparse_vector
from memstream.projections.base import Delivery
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.stores.qdrant import QdrantStore

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SESSION = (
    "Caroline: I adopted a greyhound named Zephyr last spring.",
    "Melanie: That sounds lovely, how is the training going?",
    "Caroline: Slowly, he still pulls on the lead every morning.",
)


def _turns(texts=SESSION) -> list[Delivery]:
    scope = Scope(tenant="t1", agent="a1", session_id="s1", app="test")
    return [
        Delivery(
            stream="s",
            entry_id=f"{i}-0",
            fields={},
            event=TurnRecorded(
                id=new_event_id(),
                occurred_at=START + timedelta(seconds=i),
                scope=scope,
                turn_index=i,
                user_text=text,
                assistant_text="",
                author=text.split(":")[0],
            ),
        )
        for i, text in enumerate(texts, start=1)
    ]


def _build(event_log, store, **kwargs) -> TurnsProjection:
    return TurnsProjection(store, get_embedder("hash"), event_log.client, event_log.prefix, **kwargs)


def _keyword_hits(projection: TurnsProjection, word: str) -> set[int]:
    hits = projection.store.search(projection.collection, sparse=sparse_vector(word), filter=Filter(tenant="t1"), limit=10)
    return {int(h.payload["turn_index"]) for h in hits}


def test_the_default_options_are_the_unit_indexed_so_far(event_log):
    assert TurnsProjection.validate_options(None) == TurnsProjection.OPTIONS
    assert TurnsProjection.OPTIONS == {
        "context_turns": 1,
        "context_chars": 300,
        "keyword_context_turns": 0,
        "date": True,
        "tenant_ids": False,  # what versions recorded before it computed; new ones record True
    }
    store = QdrantStore()
    v1 = _build(event_log, store)
    v1.apply(_turns())
    # the previous turn is quoted, the one before it is not
    assert _keyword_hits(v1, "greyhound") == {1, 2}
    assert _keyword_hits(v1, "training") == {2, 3}


def test_keyword_context_turns_let_the_keyword_side_see_the_turns_before_the_quoted_one(event_log):
    store = QdrantStore()
    v1 = _build(event_log, store)
    v2 = _build(event_log, store, version=2, options={"keyword_context_turns": 1})
    batch = _turns()
    v1.apply(batch)
    v2.apply(batch)
    assert _keyword_hits(v1, "greyhound") == {1, 2}
    assert _keyword_hits(v2, "greyhound") == {1, 2, 3}
    # the dense side is what it was: the same unit, so the same vector
    a = store.retrieve(
        v1.collection,
        [h.id for h in store.search(v1.collection, sparse=sparse_vector("lead"), filter=Filter(tenant="t1"), limit=1)],
    )
    query = get_embedder("hash").embed(["Caroline: Slowly, he still pulls on the lead every morning."])[0]
    d1 = store.search(v1.collection, dense=query, filter=Filter(tenant="t1"), limit=3)
    d2 = store.search(v2.collection, dense=query, filter=Filter(tenant="t1"), limit=3)
    assert a and [round(h.score, 6) for h in d1] == [round(h.score, 6) for h in d2]


def test_no_context_turns_index_each_turn_alone(event_log):
    alone = _build(event_log, QdrantStore(), options={"context_turns": 0})
    alone.apply(_turns())
    assert _keyword_hits(alone, "greyhound") == {1}
    assert _keyword_hits(alone, "training") == {2}
    assert not event_log.client.exists(keys.turn_context(event_log.prefix, 1, "t1", "s1"))


def test_without_the_date_option_a_question_naming_the_date_no_longer_matches_by_it(event_log):
    store = QdrantStore()
    dated = _build(event_log, store)
    undated = _build(event_log, store, version=2, options={"date": False})
    batch = _turns()
    dated.apply(batch)
    undated.apply(batch)
    assert _keyword_hits(dated, "May") == {1, 2, 3}
    assert _keyword_hits(undated, "May") == set()


def test_forgetting_a_turn_reindexes_every_turn_whose_keyword_side_quoted_it(event_log):
    from memstream.producers import MemoryForgotten

    projection = _build(event_log, QdrantStore(), options={"keyword_context_turns": 1})
    batch = _turns()
    projection.apply(batch)
    first = batch[0].event
    projection.apply(
        [
            Delivery(
                stream="s",
                entry_id="9-0",
                fields={},
                event=MemoryForgotten(
                    id=new_event_id(), occurred_at=START + timedelta(minutes=1), scope=first.scope, forgotten_id=first.id
                ),
            )
        ]
    )
    assert _keyword_hits(projection, "greyhound") == set()
    assert _keyword_hits(projection, "training") == {2, 3}


@pytest.mark.parametrize(
    "options, named",
    [
        ({"colour": 1}, "colour"),
        ({"context_turns": True}, "context_turns"),  # a bool is not an int
        ({"context_turns": "1"}, "context_turns"),
        ({"date": 1}, "date"),
        ({"context_chars": 0}, "context_chars"),
        ({"keyword_context_turns": 99}, "keyword_context_turns"),
    ],
)
def test_an_unknown_option_or_a_wrong_value_is_refused_naming_the_option(event_log, options, named):
    with pytest.raises(ValueError, match=named):
        TurnsProjection.validate_options(options)
    with pytest.raises(ValueError, match=named):
        _build(event_log, QdrantStore(), options=options)


@pytest.mark.parametrize("version", [0, -1, True, "2"])
def test_a_version_that_is_not_a_positive_int_is_refused(event_log, version):
    with pytest.raises(ValueError, match="version"):
        _build(event_log, QdrantStore(), version=version)


def test_two_versions_write_to_their_own_collection_group_and_context(event_log):
    store = QdrantStore()
    v1 = _build(event_log, store)
    v2 = _build(event_log, store, version=2, options={"keyword_context_turns": 1})
    assert (v1.version, v2.version, TurnsProjection.version) == (1, 2, 1)
    assert (v1.collection, v2.collection) == ("turns_v1", "turns_v2")
    assert group_name(v1) != group_name(v2) == f"{TurnsProjection.name}.v2"
    v2.apply(_turns())
    assert store.count(v2.collection) == 3 and store.count(v1.collection) == 0
    assert store.active_version("turns") == 1  # building v2 does not switch the readers
    assert event_log.client.exists(keys.turn_context(event_log.prefix, 2, "t1", "s1"))
    assert not event_log.client.exists(keys.turn_context(event_log.prefix, 1, "t1", "s1"))
