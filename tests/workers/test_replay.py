"""Replay: a new version of a projection is built from the log beside the live one, holds
exactly what the log produces (the same items as live ingest), and readers switch to it
atomically once it has caught up."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from pipeline_support import (
    at,
    forgotten,
    make_pipeline,
    memory,
    points,
    remembered,
    turn,
)

from memstream.core import as_str, keys
from memstream.projections import Catalog, CatalogError, Point, physical_name, registered
from memstream.query import ActiveVersions
from memstream.workers import GroupProgress, build_progress, caught_up, group_progress

NAMES = ("turns", "memories", "facts", "sessions")


def history() -> list:
    """Events whose projection exercises every table: sessions of turns with context,
    memory writes that replace and remove, facts that supersede each other, a forget."""
    events = []
    for i, text in enumerate(
        [
            "I live in Berlin and work on the billing service",
            "The staging database runs Postgres 15",
            "Our deploys go out on Tuesdays after the standup",
            "I moved to Lisbon last month",
            "The staging database now runs Postgres 16",
        ]
    ):
        events.append(turn(text, f"Noted: {text.lower()}", when=i, index=i))
    events.append(memory("add", "User prefers short answers", when=6))
    events.append(memory("add", "Deploy window: Tuesday 10:00", when=7))
    events.append(memory("replace", "Deploy window: Wednesday 10:00", old_text="Deploy window: Tuesday 10:00", when=8))
    events.append(remembered("My manager is Dana", when=9))
    events.append(forgotten(events[2].id, when=10))
    events.append(turn("What do I work on?", "You work on billing.", agent="a2", when=11, index=0))
    return events


def snapshot(
    client,
    prefix: str,
    store,
    version: int,
    vectors: bool = True,
    families: tuple[str, ...] = ("facts", "fact_sources", "turn_context", "sessions", "session", "session_bookends"),
) -> dict:
    """Everything version ``version`` of the four projections holds, with the version taken
    out of its names, so two versions compare equal when they hold the same."""
    out: dict = {}
    for name in ("turns", "memories") if vectors else ():
        collection = physical_name(name, version)
        ids = [p.id for p in points(store, collection, "t1")]
        out[name] = sorted(
            (
                (p.id, tuple(round(float(x), 6) for x in p.dense), tuple(sorted(p.payload.items())))
                for p in store.retrieve(collection, ids, with_vectors=True)
            ),
            key=str,
        )
    for family in families:
        for key in sorted(as_str(k) for k in client.scan_iter(match=keys.version_pattern(prefix, family, version))):
            kind = as_str(client.type(key))
            value = {
                "hash": client.hgetall,
                "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
                "set": client.smembers,
                "string": client.get,
                "list": lambda k: client.lrange(k, 0, -1),
            }[kind](key)
            if isinstance(value, dict):
                value = sorted(value.items())
            elif isinstance(value, set):
                value = sorted(value)
            out[key.replace(f":v{version}:", ":vN:")] = value
    return out


def replay(pipeline, *names, **build):
    """What ``memstream replay`` adds: a building version, with the options every new version records."""
    catalog = Catalog(pipeline.events.client, pipeline.events.prefix)
    options = build.pop("options", {})
    started = [catalog.add_build(n, options={**registered(n).new_options, **options}, **build) for n in names]
    pipeline.sync_catalog()
    return started


def test_a_replayed_version_holds_the_same_items_as_live_ingest_and_readers_switch_to_it(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    events = history()
    for i in range(0, len(events), 3):  # live: applied as they arrive, a few at a time
        event_log.append(events[i : i + 3])
        pipeline.drain()
    live = snapshot(event_log.client, event_log.prefix, pipeline.store, 1)
    assert live["turns"] and live["memories"] and any(k.startswith("memstream:facts:") for k in live)

    started = replay(pipeline, *NAMES)
    assert [v.group for v in started] == [f"{n}.v2" for n in NAMES]
    catalog = Catalog(event_log.client, event_log.prefix)
    assert all(catalog.active(n).version == 1 for n in NAMES)  # nothing switches before it caught up
    pipeline.drain()

    assert snapshot(event_log.client, event_log.prefix, pipeline.store, 2) == live
    assert all(catalog.active(n).version == 2 for n in NAMES)
    assert {v.state for n in NAMES for v in catalog.versions(n) if v.version == 1} == {"retired"}
    assert pipeline.reads.facts.version == pipeline.reads.sessions.version == 2
    hits = pipeline.searcher.search("where does the user live", tenant="t1", agent="a1", k=3, kinds=("turns",))
    assert hits and pipeline.versions.collection("turns") == "turns_v2"


def test_a_rebuilt_version_holds_nothing_the_log_cannot_produce(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    planted = Point(
        id="00000000-0000-4000-8000-00000000beef",
        dense=[0.1] * pipeline.embedder.dim,
        payload={"tenant": "t1", "agent": "a1", "text": "planted by hand", "event_id": "x"},
    )
    pipeline.store.upsert("turns_v1", [planted])
    event_log.client.hset(keys.facts(event_log.prefix, 1, "t1"), "planted", "{}")

    replay(pipeline, "turns", "facts")
    pipeline.drain()

    assert planted.id in {p.id for p in points(pipeline.store, "turns_v1", "t1")}
    assert planted.id not in {p.id for p in points(pipeline.store, "turns_v2", "t1")}
    assert not event_log.client.hexists(keys.facts(event_log.prefix, 2, "t1"), "planted")


def test_a_second_replay_of_a_building_projection_is_refused_naming_the_build(tmp_path, event_log):
    make_pipeline(tmp_path / "home", event_log)
    catalog = Catalog(event_log.client, event_log.prefix)
    catalog.add_build("turns")
    with pytest.raises(CatalogError, match=r"turns is already building version 2 \(group turns.v2\)"):
        catalog.add_build("turns")
    assert catalog.add_build("facts").group == "facts.v2"  # another projection may build at once
    assert [v.state for v in catalog.versions("turns")] == ["active", "building"]


def test_a_manual_build_waits_for_its_activation_and_a_rollback_is_an_activation(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    replay(pipeline, "turns", activate="manual")
    pipeline.drain()
    catalog = Catalog(event_log.client, event_log.prefix)
    v2 = catalog.get("turns", 2)
    assert v2.state == "building" and v2.caught_up_at > 0 and catalog.active("turns").version == 1
    assert caught_up(event_log.client, event_log.stream_keys, "turns.v2")

    pipeline.activate("turns", 2)
    assert pipeline.versions.collection("turns") == "turns_v2"
    assert pipeline.store.active_version("turns") == 2
    catalog.activate("turns", 1)  # a rollback, from any process
    pipeline.versions.refresh()
    assert pipeline.versions.collection("turns") == "turns_v1"
    pipeline.sync_catalog()
    assert pipeline.store.active_version("turns") == 1  # the store's pointer follows the catalog


def test_dropping_a_version_removes_its_collection_keys_and_group_and_the_active_one_is_refused(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    replay(pipeline, "turns", "facts")
    pipeline.drain()
    catalog = Catalog(event_log.client, event_log.prefix)
    with pytest.raises(CatalogError, match="facts version 2 is active"):
        catalog.drop("facts", 2)
    assert any(event_log.client.scan_iter(match=keys.version_pattern(event_log.prefix, "facts", 1)))
    catalog.drop("facts", 1)
    catalog.drop("turns", 1)
    pipeline.sync_catalog()

    assert catalog.get("facts", 1) is None and catalog.get("turns", 1) is None
    assert not any(event_log.client.scan_iter(match=keys.version_pattern(event_log.prefix, "facts", 1)))
    assert not any(event_log.client.scan_iter(match=keys.version_pattern(event_log.prefix, "turn_context", 1)))
    assert 1 not in pipeline.store.versions("turns")
    groups = {as_str(g["name"]) for g in event_log.client.xinfo_groups(event_log.stream_keys[0])}
    assert "facts.v1" not in groups and "turns.v1" not in groups and "facts.v2" in groups
    assert "facts.v1" not in pipeline.runs and "turns.v2" in pipeline.runs


def test_a_cancelled_build_is_dropped_and_the_live_version_keeps_serving(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    catalog = Catalog(event_log.client, event_log.prefix)
    replay(pipeline, "turns", activate="manual")
    catalog.drop("turns", 2, cancel=True)
    pipeline.sync_catalog()
    assert catalog.get("turns", 2) is None and 2 not in pipeline.store.versions("turns")
    assert catalog.active("turns").version == 1 and pipeline.versions.collection("turns") == "turns_v1"
    with pytest.raises(CatalogError, match="turns version 1 is active"):
        catalog.drop("turns", 1, cancel=True)


def test_a_version_whose_embedder_cannot_be_loaded_fails_with_the_embedder_named(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    catalog = Catalog(event_log.client, event_log.prefix)
    catalog.add_build("turns", embedder="no-such-model", model="x", dim=7)
    pipeline.sync_catalog()
    v2 = catalog.get("turns", 2)
    assert v2.state == "failed"
    assert "embedder 'no-such-model' cannot be loaded in this process" in v2.error
    assert "choose one of onnx-minilm, bge-small, colbert-small, hash, openai[:MODEL], ollama[:MODEL]" in v2.error
    assert "turns.v2" not in pipeline.runs and catalog.active("turns").version == 1


def _replayed_with(spec: str, tmp_path, event_log):
    """A pipeline whose turns were projected with hash, then replayed with ``spec``: the
    pipeline, ``spec``'s embedder and the catalog."""
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    embedder = pipeline._load_embedder(spec)
    replay(pipeline, "turns", embedder=spec, model=embedder.name, dim=embedder.dim)
    pipeline.drain()
    return pipeline, embedder, Catalog(event_log.client, event_log.prefix)


def test_each_version_is_queried_with_the_embedder_it_was_built_with(tmp_path, event_log):
    pipeline, onnx, catalog = _replayed_with("onnx-minilm", tmp_path, event_log)
    assert catalog.active("turns").embedder == "onnx-minilm"
    some = points(pipeline.store, "turns_v2", "t1")[0]
    assert len(pipeline.store.retrieve("turns_v2", [some.id], with_vectors=True)[0].dense) == onnx.dim
    assert catalog.active("turns").model == onnx.name != pipeline.embedder.name
    # the read side asks each version's own model, through a view that keeps questions out of the cache's file
    queried = pipeline.versions.embedder("turns")
    assert queried.inner is onnx.inner and queried.cache is onnx.cache and queried.persist is False
    assert pipeline.versions.embedder("memories") is pipeline.embedder  # hash: not cached
    hits = pipeline.searcher.search("Which database runs on staging?", tenant="t1", agent="a1", k=2, kinds=("turns", "memories"))
    assert "Postgres" in hits[0]["text"]


def test_a_replay_to_colbert_small_embeds_shown_texts_and_questions_with_the_question_view(tmp_path, event_log):
    pipeline, colbert, catalog = _replayed_with("colbert-small", tmp_path, event_log)
    assert (catalog.active("turns").embedder, catalog.active("turns").model) == ("colbert-small", colbert.name)
    # a turn's vector is made from the text its point shows (one model call with its token vectors)
    some = pipeline.store.retrieve("turns_v2", [points(pipeline.store, "turns_v2", "t1")[0].id], with_vectors=True)[0]
    assert float(np.dot(some.dense, colbert.inner.embed([some.payload["text"]])[0])) > 0.999
    # questions go through the model's question view, kept out of the cache's file
    queried = pipeline.versions.embedder("turns")
    assert queried.name == colbert.name + ":query" and queried.persist is False and queried.cache is colbert.cache
    hits = pipeline.searcher.search("Which database runs on staging?", tenant="t1", agent="a1", k=2, kinds=("turns",))
    assert "Postgres" in hits[0]["text"]


def test_a_builds_progress_counts_the_log_and_resumes_from_its_group_after_a_restart(tmp_path, event_log):
    first = make_pipeline(tmp_path / "home", event_log)
    events = [turn(f"fact number {i} about the fleet", when=i, index=i) for i in range(40)]
    event_log.append(events)
    first.drain()
    replay(first, "sessions")
    run = first.runs["sessions.v2"]
    run.consumer.tuning = replace(run.consumer.tuning, batch=10)
    run.consumer.step(block=False)  # part of the log, then the process "dies"
    progress = group_progress(event_log.client, event_log.stream_keys, "sessions.v2")
    assert progress.length == 40 and 0 < progress.done < 40 and progress.lag is not None
    first.store.close()

    second = make_pipeline(tmp_path / "home", event_log)  # a restart: it finds the build in the catalog
    assert second.runs["sessions.v2"].consumer.low
    second.drain()
    assert group_progress(event_log.client, event_log.stream_keys, "sessions.v2").done == 40
    assert Catalog(event_log.client, event_log.prefix).active("sessions").version == 2
    sessions = ("sessions", "session", "session_bookends")
    rebuilt = snapshot(event_log.client, event_log.prefix, second.store, 2, vectors=False, families=sessions)
    assert rebuilt and rebuilt == snapshot(event_log.client, event_log.prefix, second.store, 1, vectors=False, families=sessions)


def test_active_versions_are_read_once_a_ttl_and_an_unreadable_record_is_never_trusted(redis_client):
    catalog = Catalog(redis_client, "p")
    catalog.ensure("facts", 1)
    catalog.add_build("facts")
    versions = ActiveVersions(redis_client, "p", lambda v: None, ttl=3600)
    assert versions.facts().version == 1
    catalog.activate("facts", 2)
    assert versions.facts().version == 1  # cached
    versions.refresh()
    assert versions.facts().version == 2
    redis_client.hset(keys.catalog("p", "facts"), "v3", b"\xff not json")
    redis_client.hset(keys.catalog("p", "facts"), "v4", b'{"name": "turns", "version": 4, "state": "active"}')
    states = {v.version: (v.state, v.error[:20]) for v in catalog.versions("facts")}
    assert states[3][0] == states[4][0] == "failed" and states[2] == ("active", "")
    assert at(0)  # the helpers' clock is the test's only time source


def test_a_replay_reads_the_archive_then_the_streams_and_equals_the_version_built_live(tmp_path, event_log):
    from memstream.producers import Archive, archive

    pipeline = make_pipeline(tmp_path / "home", event_log)
    events = history()
    event_log.append(events[:7])
    pipeline.drain()
    store = Archive(pipeline.settings.archive_path)
    done = archive(event_log, store, None, groups=[r.group for r in pipeline.runs.values()])
    assert store.segments() and event_log.client.xlen(event_log.stream_keys[0]) <= 1  # the cold part left Redis
    assert done
    event_log.append(events[7:])
    pipeline.drain()
    live = snapshot(event_log.client, event_log.prefix, pipeline.store, 1)

    replay(pipeline, *NAMES, archive=True)
    catalog = Catalog(event_log.client, event_log.prefix)
    assert pipeline.runs["turns.v2"].consumer.start_at == store.watermark()
    pipeline.drain()

    assert all(catalog.active(n).version == 2 for n in NAMES)
    v2 = catalog.get("facts", 2)
    assert v2.archive_done and v2.archive_applied == sum(s.count for s in store.segments())
    assert snapshot(event_log.client, event_log.prefix, pipeline.store, 2) == live
    assert not event_log.client.exists(keys.backfill_lock(event_log.prefix, "turns.v2"))


def test_an_unreadable_archive_fails_the_build_saying_why_and_the_live_version_serves_on(tmp_path, event_log):
    from memstream.producers import Archive, archive

    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    store = Archive(pipeline.settings.archive_path)
    archive(event_log, store, None, groups=[r.group for r in pipeline.runs.values()])
    segment = store.directory / store.segments()[0].file
    segment.write_bytes(b"not xz")
    catalog = Catalog(event_log.client, event_log.prefix)
    catalog.add_build("sessions", archive=True)
    pipeline.sync_catalog()
    pipeline.drain()
    v2 = catalog.get("sessions", 2)
    assert v2.state == "failed" and "the archive cannot be read" in v2.error and segment.name in v2.error
    assert catalog.active("sessions").version == 1


def test_an_activation_and_a_drop_from_elsewhere_in_one_look_switch_then_drop(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    event_log.append(history())
    pipeline.drain()
    replay(pipeline, "turns", activate="manual")
    pipeline.drain()
    catalog = Catalog(event_log.client, event_log.prefix)
    catalog.activate("turns", 2)  # `memstream projections activate`, from another process
    catalog.drop("turns", 1)  # then `drop`, before the service looked
    pipeline.sync_catalog()
    assert pipeline.store.active_version("turns") == 2 and 1 not in pipeline.store.versions("turns")
    assert catalog.get("turns", 1) is None and pipeline.versions.collection("turns") == "turns_v2"


def test_a_version_another_worker_dropped_stops_running_here(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    replay(pipeline, "sessions", activate="manual")
    assert "sessions.v2" in pipeline.runs
    run = pipeline.runs["sessions.v2"]
    Catalog(event_log.client, event_log.prefix).forget("sessions", 2)  # another worker finished its drop
    pipeline.sync_catalog()
    assert "sessions.v2" not in pipeline.runs and run.stop.is_set()


def test_a_builds_progress_counts_the_archive_whole_once_read_and_what_it_applied_of_it_before():
    streams = GroupProgress(length=10, lag=4, pending=1, position="")
    assert build_progress(streams, archived_total=100, archive_done=False, archive_applied=30) == (35, 110)
    assert build_progress(streams, archived_total=100, archive_done=True, archive_applied=30) == (105, 110)
    unknown = GroupProgress(length=10, lag=None, pending=0, position="")
    assert build_progress(unknown, archived_total=5, archive_done=True, archive_applied=0) == (None, 15)


def test_a_replay_of_facts_is_built_where_facts_run_and_the_readers_beside_the_store_switch(tmp_path, event_log):
    """``memstream up`` runs facts and sessions in a process of their own: the pipeline that
    runs them builds and activates facts.v2; the one beside the store never touches it, and
    its readers follow the catalog."""
    stored = make_pipeline(tmp_path / "home", event_log, projections=("turns", "memories"))
    apart = make_pipeline(tmp_path / "home", event_log, projections=("facts", "sessions"))
    assert apart._store is None and not (tmp_path / "home" / "data" / "qdrant" / "facts").exists()
    with pytest.raises(RuntimeError, match="no vector projection"):
        apart.queries.start()
    events = history()
    event_log.append(events)
    stored.drain()
    apart.drain()
    live = snapshot(event_log.client, event_log.prefix, None, 1, vectors=False)
    assert any(k.startswith("memstream:facts:") for k in live)

    assert [v.group for v in replay(stored, "facts")] == ["facts.v2"]
    assert "facts.v2" not in stored.runs  # not its projection
    apart.sync_catalog()
    assert "facts.v2" in apart.runs
    apart.drain()
    catalog = Catalog(event_log.client, event_log.prefix)
    assert catalog.active("facts").version == 2
    assert snapshot(event_log.client, event_log.prefix, None, 2, vectors=False, families=("facts", "fact_sources")) == {
        k: v for k, v in live.items() if ":fact" in k
    }
    stored.versions.refresh()
    assert stored.reads.facts.version == 2 and stored.reads.sessions.version == 1
    assert {c.group for c in stored.consumers} == {"turns.v1", "memories.v1"}
    stored.stop()
    apart.stop()
