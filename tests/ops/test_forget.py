"""``memstream forget`` on fakeredis and on a real Valkey: a unique token planted in a
turn, a memory, a fact, a dead letter, the archive, the embedding cache, the dense
backlog and the spool is, after forget, in no command's output, no projection, no
replayed history, and (on Valkey) in no file of the server's directory."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from pipeline_support import everything_in_redis, files_holding, forgotten, make_pipeline, memory, remembered, turn
from query_support import answer

from memstream import ops
from memstream.core import as_str, keys
from memstream.producers import Archive, EventLog, Record, Spool, history
from memstream.projections import EmbeddingCache, FactsTable, group_of, text_key
from memstream.workers import DeadLetters
from memstream.workers.erasure import wait_rewrite as _wait_rewrite


@pytest.fixture
def reach(event_log, monkeypatch):
    for module in ("memstream.ops.forget", "memstream.ops.export", "memstream.ops.archive", "memstream.ops.stats"):
        monkeypatch.setattr(sys.modules[module], "connect", lambda settings: event_log)
    return event_log


def test_forget_match_removes_the_text_from_every_place(tmp_path, reach, settings, redis_client):
    token = f"Qz{uuid.uuid4().hex[:12]}"
    log = reach
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    try:
        kept = turn("Deploys go out on Tuesdays", index=0)
        archived_memory = memory("add", f"The vault phrase is {token}")
        log.append([kept, archived_memory])
        pipeline.drain()
        assert ops.archive(settings)["archived"] == 2  # both: below every group's position
        fact_turn = turn(f"I live in {token} City", index=1)
        said = turn(f"the code word is {token}", "Understood.", index=2)
        kept_too = remembered("Prefers green tea")
        log.append([fact_turn, said, kept_too])
        pipeline.drain()
        facts = FactsTable(log.client, log.prefix)
        assert any(token in f.value for f in facts.query("t1", history=True))
        handlers = pipeline.reads.handlers()  # what the query server answers the tools and commands with
        assert token in repr(
            answer(handlers, {"op": "search", "tenant": "t1", "agent": "a1", "scope": "all", "query": f"code word {token}"})
        )
        assert answer(handlers, {"op": "exists", "tenant": "t1", "id": said.id}).get("exists") is True
        # copies: a dead letter of the raw entry, a backlog entry, a cache row, a spool record
        raw = log.client.xrange(log.stream_keys[0])[-2]
        DeadLetters(log.client, log.prefix).add("facts.v1", log.stream_keys[0], as_str(raw[0]), raw[1], "boom", 5)
        backlog = keys.embed_backlog(log.prefix, group_of("turns"))
        log.client.xadd(backlog, {"id": "p1", "key": "k", "tenant": "t1", "event": said.id, "text": f"unit: {said.user_text}"})
        log.client.xadd(
            backlog,
            {
                "id": "p2",
                "key": "k",
                "tenant": "t1",
                "event": kept.id,  # a later unit quoting it
                "text": f"earlier: {said.user_text}\nnow: {kept.user_text}",
            },
        )
        log.client.xadd(backlog, {"id": "p3", "key": "k", "tenant": "t1", "event": kept.id, "text": kept.user_text})
        cache_path = settings.data_dir / "embeddings.sqlite3"
        with EmbeddingCache(cache_path) as cache:
            cache.put_many(
                "hash",
                {
                    text_key(said.user_text): np.ones(4, dtype="<f4"),
                    text_key(f"unit: {said.user_text}"): np.ones(4, dtype="<f4"),
                    text_key("Prefers green tea"): np.ones(4, dtype="<f4"),
                },
            )
        spooled = remembered(f"spooled {token}")
        spool = Spool(settings.spool_dir)
        spool.append(Record.of(spooled).data)
        spool.append(Record.of(remembered("spooled, harmless")).data)
        spool.close()
        assert token.encode() in b"".join(p.read_bytes() for p in settings.spool_dir.glob("*.seg"))

        if redis_client.connection_url:  # the server wrote it to its append-only file
            directory = Path(as_str(log.client.config_get("dir")["dir"]))
            assert files_holding(directory, token.encode())
        assert files_holding(tmp_path / "pipe-home", token.encode())  # the store's write-ahead log has it
        plan = ops.forget(settings, ops.Selector(match=token), dry_run=True)
        assert set(plan["events"]) == {archived_memory.id, fact_turn.id, said.id}
        assert plan["removed"] == {
            "stream_entries": 2,
            "archive_entries": 1,
            "dead_letters": 1,
            "embed_backlog": 2,
            "embedding_cache": 0,
            "spool_records": 1,
        }
        assert token in json.dumps(list(ops.export(settings)))  # a dry run removes nothing

        done = ops.forget(settings, ops.Selector(match=token), wait=0)
        assert done["tombstones"] == 3 and done["removed"]["archive_entries"] == 1
        assert done["removed"]["embedding_cache"] == 2 and done["removed"]["spool_records"] == 1
        assert [as_str(e[1][b"id"]) for e in log.client.xrange(backlog)] == ["p3"]  # it never quoted the text
        pipeline.drain()  # the workers apply the tombstones

        exported = json.dumps(list(ops.export(settings)))
        assert token not in exported and kept.id in exported and kept_too.id in exported
        assert token not in repr(list(history(log, Archive(settings.archive_path))))
        assert Archive(settings.archive_path).verify()["events"] == 1  # the kept turn; the segment rewritten
        assert all(token not in f.value and token not in f.text for f in facts.query("t1", history=True))
        store = pipeline.store
        for name in ("turns", "memories"):
            found, offset = [], None
            while True:
                page, offset = store.scroll(store.collection_for_read(name), _all(), limit=256, offset=offset)
                found += page
                if offset is None:
                    break
            assert found and token not in repr([p.payload for p in found])
        for words in (token, f"code word {token}", f"vault phrase {token}", f"live in {token} City"):
            hits = pipeline.searcher.search(words, tenant="t1", agent="a1", scope="all", history=True)
            assert token not in repr(hits)
            for op in ("search", "recall"):
                answered = answer(handlers, {"op": op, "tenant": "t1", "agent": "a1", "scope": "all", "query": words})
                assert "error" not in answered and token not in repr(answered)
        for extra in ({"op": "facts", "history": True}, {"op": "recent"}):
            answered = answer(handlers, {**extra, "tenant": "t1", "agent": "a1", "scope": "all"})
            assert "error" not in answered and token not in repr(answered)
        for item in plan["events"]:
            assert answer(handlers, {"op": "exists", "tenant": "t1", "id": item}).get("exists") is False
        assert token not in everything_in_redis(log.client)
        # the raw entry's dead letter went; the planted backlog entry p3 (no real point) is dead-lettered
        # by the dense stage when the pipeline drains, and it never held the text
        left = DeadLetters(log.client, log.prefix).list(10)
        assert [d["stream"] for d in left] == [backlog], left
        with EmbeddingCache(cache_path) as cache:
            assert cache.count() == 1
        spool_bytes = b"".join(p.read_bytes() for p in settings.spool_dir.glob("*.seg"))
        assert token.encode() not in spool_bytes and b"spooled, harmless" in spool_bytes

        stats = ops.stats(settings)  # the log's holes (XDEL) leave the figures whole
        rows = list(stats["projections"].values())
        assert rows and all(r["lag"] == 0 and r["pending"] == 0 for r in rows), rows
        again = ops.forget(settings, ops.Selector(match=token), wait=0)
        assert again["events"] == [] and again["tombstones"] == 0 and not any(again["removed"].values())
        assert files_holding(tmp_path / "pipe-home", token.encode()) == []  # the embedded store's files
        assert files_holding(tmp_path / "pipe-home", b"Prefers green tea")  # which show what they hold
        if redis_client.connection_url:  # the server's files: the append-only file was rewritten
            assert again["aof"]["state"] == "rewritten"
            directory = Path(as_str(log.client.config_get("dir")["dir"]))
            assert files_holding(directory, token.encode()) == []
    finally:
        pipeline.stop()


def _all():
    from memstream.projections.stores.port import Filter

    return Filter(tenant="t1")


def test_tombstoned_erases_what_the_forget_tool_and_memory_remove_forgot(tmp_path, reach, settings):
    token = f"Qz{uuid.uuid4().hex[:12]}"
    log = reach
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    try:
        by_tool = remembered(f"the locker code is {token}")
        by_remove = memory("add", f"my spare key hides under {token}")
        kept = memory("add", "Prefers green tea")
        log.append([by_tool, by_remove, kept])
        pipeline.drain()
        assert files_holding(tmp_path / "pipe-home", b"spare key hides")
        remove = memory("remove", old_text=f"key hides under {token}")
        log.append([remove])  # Hermes's memory remove
        pipeline.drain()
        assert files_holding(tmp_path / "pipe-home", b"spare key hides") == []  # the store compacted after it
        log.append([forgotten(by_tool.id)])  # the forget tool
        pipeline.drain()
        assert token in json.dumps(list(ops.export(settings)))  # the tombstones hid it, the log still has it
        assert files_holding(tmp_path / "pipe-home", token.encode()) == []  # and after the tombstone

        plan = ops.forget(settings, ops.Selector(tombstoned=True), dry_run=True)
        assert set(plan["events"]) == {by_tool.id, by_remove.id, remove.id}  # the remove quotes the entry
        done = ops.forget(settings, ops.Selector(tombstoned=True), wait=5)
        assert done["tombstones"] == 2  # the tool's tombstone is in the log already
        assert done["projections"]["applied"] is False  # no worker runs here
        pipeline.drain()
        exported = json.dumps(list(ops.export(settings)))
        assert token not in exported and kept.id in exported
        assert token not in everything_in_redis(log.client)
        assert ops.forget(settings, ops.Selector(tombstoned=True), wait=0)["events"] == []
    finally:
        pipeline.stop()


def test_selectors_combine_and_every_other_event_is_kept(tmp_path, reach, settings):
    log = reach
    ours = turn("alpha one", tenant="t1", agent="a1")
    other_agent = turn("alpha two", tenant="t1", agent="a2")
    other_tenant = turn("alpha three", tenant="t2", agent="a1")
    log.append([ours, other_agent, other_tenant])
    plan = ops.forget(settings, ops.Selector(tenant="t1", agent="a1", match="ALPHA"), dry_run=True)
    assert plan["events"] == [ours.id]
    later = turn("alpha four", tenant="t1", agent="a1")  # matches the text, appended after the run: kept
    found = ops.forget(settings, ops.Selector(events=(ours.id,)), wait=0)
    log.append([later])
    assert found["events"] == [ours.id]
    exported = {e["id"] for e in ops.export(settings)}
    assert ours.id not in exported and {other_agent.id, other_tenant.id, later.id} <= exported
    from memstream.producers import Scope, SessionEnded, utcnow

    elsewhere = SessionEnded(
        id="0190aaaa-0000-7000-8000-00000000000a", occurred_at=utcnow(), scope=Scope(tenant="t1", agent="a1", session_id="s2")
    )
    log.append([elsewhere])
    by_session = ops.forget(settings, ops.Selector(session="s1", tenant="t1"), dry_run=True)["events"]
    assert other_agent.id in by_session and later.id in by_session and elsewhere.id not in by_session
    assert ops.forget(settings, ops.Selector(session="s2"), dry_run=True)["events"] == [elsewhere.id]
    assert ops.forget(settings, ops.Selector(agent="a2"), dry_run=True)["events"] == [other_agent.id]
    with pytest.raises(ops.CommandError, match="needs a selector"):
        ops.Selector()


def test_a_replay_after_forget_builds_versions_without_the_text(tmp_path, reach):
    from memstream.projections import Catalog

    token = f"Qz{uuid.uuid4().hex[:12]}"
    log = reach
    pipeline = make_pipeline(tmp_path / "pipe-home", log)
    own = pipeline.settings  # the pipeline's archive, spool and cache
    try:
        log.append(
            [
                turn(f"I live in {token} City", index=0),
                memory("add", f"vault phrase {token}"),
                turn("I work at Acme Corp", index=1),
            ]
        )
        pipeline.drain()
        assert ops.archive(own)["archived"] >= 2
        log.append([turn(f"the code word is {token}", index=2), remembered("Prefers green tea")])
        pipeline.drain()
        done = ops.forget(own, ops.Selector(match=token), wait=0)
        assert len(done["events"]) == 3 and done["removed"]["archive_entries"] == 2
        pipeline.drain()
        assert ops.archive(own)["archived"] >= 1  # the archiver carries on after the rewrite
        assert Archive(own.archive_path).verify()["events"] >= 2

        catalog = Catalog(log.client, log.prefix)
        for name in ("turns", "memories", "facts", "sessions"):
            catalog.add_build(name, archive=True)
        pipeline.sync_catalog()
        pipeline.drain()
        assert all(catalog.active(n).version == 2 for n in ("turns", "memories", "facts", "sessions"))
        assert FactsTable(log.client, log.prefix, version=2).query("t1", history=True)  # built, from the rest
        assert token not in everything_in_redis(log.client)
        for name in ("turns", "memories"):
            page, _ = pipeline.store.scroll(pipeline.store.collection_for_read(name), _all(), limit=1000)
            assert page and token not in repr([p.payload for p in page])
        assert files_holding(tmp_path / "pipe-home", token.encode()) == []
    finally:
        pipeline.stop()


def test_events_appended_while_forget_runs_are_never_removed_unless_it_read_them(tmp_path, reach, settings):
    import threading

    log = reach
    log.append([turn(f"alpha {i}", index=i) for i in range(200)])
    appended: list[str] = []
    stop = threading.Event()

    def append() -> None:
        i = 0
        while not stop.is_set() or i < 20:
            event = turn(f"alpha late {i}" if i % 2 else f"beta late {i}", index=1000 + i)
            log.append([event])
            appended.append(event.id)
            i += 1

    writer = threading.Thread(target=append)
    writer.start()
    try:
        done = ops.forget(settings, ops.Selector(match="alpha"), wait=0)
    finally:
        stop.set()
        writer.join()
    removed = set(done["events"])
    left = {e["id"] for e in ops.export(settings) if e["type"] == "turn.recorded"}
    assert len(removed) >= 200 and not removed & left  # what it read and matched is gone
    assert set(appended) - removed <= left  # everything else appended meanwhile is there


@pytest.mark.valkey
def test_a_later_rewrite_of_the_append_only_file_brings_no_forgotten_entry_back(valkey_server, settings, monkeypatch):
    """A deleted stream entry's bytes stay in the stream's node in memory; an RDB preamble
    would copy them to disk at Valkey's next rewrite. The embedded server writes commands."""
    import redis

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, settings.stream_prefix, settings.shards)
    monkeypatch.setattr(sys.modules["memstream.ops.forget"], "connect", lambda settings: log)
    token = f"Qz{uuid.uuid4().hex[:12]}"
    log.append([remembered(f"note {i}" if i != 10 else f"the pin is {token}") for i in range(20)])
    assert ops.forget(settings, ops.Selector(match=token), wait=0)["aof"]["state"] == "rewritten"
    directory = Path(as_str(client.config_get("dir")["dir"]))
    assert files_holding(directory, token.encode()) == []
    client.config_set("rdbcompression", "no")  # an RDB's strings uncompressed: what grep sees is all there is
    try:
        client.bgrewriteaof()  # as Valkey does by itself when the file has grown
        time.sleep(0.05)
        _wait_rewrite(client, 60)
        assert files_holding(directory, token.encode()) == []
    finally:
        client.config_set("rdbcompression", "yes")
        client.close()


def test_an_archiver_at_work_makes_forget_say_run_again_and_the_second_run_finishes(reach, settings):
    from memstream.producers import archive

    log = reach
    secret, other = remembered("the alarm code is 5512"), remembered("prefers tea")
    log.append([secret, other])
    store = Archive(settings.archive_path)
    archive(log, store, "99999999999999-0", trim=False)  # archived, and still in the stream
    with store.writing():  # an archiver holds the lock
        with pytest.raises(ops.CommandError, match="run forget again"):
            ops.forget(settings, ops.Selector(match="alarm code"), wait=0)
    assert "5512" not in repr(log.client.xrange(log.stream_keys[0]))  # the streams are done already
    assert "5512" in repr(list(store.entries()))
    again = ops.forget(settings, ops.Selector(match="alarm code"), wait=0)
    assert again["events"] == [secret.id] and again["tombstones"] == 0  # tombstoned by the first run
    assert again["removed"]["archive_entries"] == 1 and "5512" not in repr(list(store.entries()))
    assert [e["id"] for e in ops.export(settings) if e["type"] != "memory.forgotten"] == [other.id]


def test_an_entry_that_is_no_valid_event_goes_by_its_id_field_or_by_match(reach, settings):
    log = reach
    key = log.stream_keys[0]
    log.client.xadd(key, {"id": "bad-1", "type": "turn.recorded", "data": b"\xc1 not msgpack, pin 8812"})
    log.client.xadd(key, {"id": "bad-2", "type": "turn.recorded", "data": b"\xc1 not msgpack either"})
    ok = remembered("prefers tea")
    log.append([ok])
    assert ops.forget(settings, ops.Selector(match="PIN 8812"), wait=0)["removed"]["stream_entries"] == 1
    assert ops.forget(settings, ops.Selector(events=("bad-2",)), wait=0)["removed"]["stream_entries"] == 1
    left = log.client.xrange(key)
    assert len(left) == 1 and b"8812" not in repr(left).encode()


def test_forget_removes_the_cache_row_of_what_was_embedded_the_redacted_text(reach, settings):
    from memstream.text import redact

    log = reach
    pasted = "ghp_Zq8xR2vB7nK4mW1pT6yH3cJ9dF5gL0sA2eUu"  # made up, in GitHub's format
    raw_memory = memory("add", f"the CI token is {pasted}")  # appended raw, as before the log's door
    through_door = remembered(f"the deploy token is {pasted}")
    log.append_batch([Record.of(raw_memory)])
    log.append([through_door])
    embedded = [redact(raw_memory.content)[0], redact(through_door.content)[0]]  # what the memories projection embeds
    assert all(pasted not in t for t in embedded)
    with EmbeddingCache(settings.data_dir / "embeddings.sqlite3") as cache:
        cache.put_many("hash", {text_key(t): np.ones(4, dtype="<f4") for t in embedded})
    done = ops.forget(settings, ops.Selector(events=(raw_memory.id, through_door.id)), wait=0)
    assert done["removed"]["embedding_cache"] == 2


def test_forget_removes_the_cache_rows_of_a_turns_unit_found_by_the_event_it_was_embedded_for(reach, settings):
    from memstream.projections import CachedEmbedder, TurnsProjection
    from memstream.projections.base import Delivery
    from memstream.projections.embedders.factory import get_embedder
    from memstream.projections.stores.qdrant import QdrantStore
    from memstream.workers.embedding import EmbedConsumer

    log = reach
    cache_path = settings.data_dir / "embeddings.sqlite3"
    embedder = CachedEmbedder(get_embedder("hash"), cache_path)
    turns = TurnsProjection(QdrantStore(), embedder, log.client, log.prefix, inline=False)
    first = turn("The deploy window is Tuesday at noon", index=0)
    second = turn("We moved it to Wednesday because of the freeze", index=1)
    log.append([first, second])
    turns.apply([Delivery(stream="s", entry_id=f"{i + 1}-0", fields={}, event=e) for i, e in enumerate((first, second))])
    assert EmbedConsumer(log.client, turns, "w1").drain() == 2
    embedder.close()
    with EmbeddingCache(cache_path) as cache:
        assert cache.count() == 2  # each unit: its date, the turn, and the turn before it
    done = ops.forget(settings, ops.Selector(events=(second.id,)), wait=0)
    assert done["removed"]["embedding_cache"] == 1  # the unit embedded for it, not derivable from its text
    with EmbeddingCache(cache_path) as cache:
        assert cache.count() == 1


def _in_cache_file(path, name: str, dim: int, text: str) -> bool:
    with EmbeddingCache(path) as cache:  # a new cache: only the file answers
        return text_key(text) in cache.get_many(name, [text_key(text)], dim)[0]


def test_a_search_keeps_its_question_out_of_the_embedding_cache_file(tmp_path):
    """The read side embeds a question through the cache's memory only: the file holds what
    was embedded for events (which forget finds by the event), never a question someone
    typed, which no event names and forget could not reach."""
    import fakeredis
    from pipeline_support import pipeline_settings, wait_for

    from memstream.query import SearchRequest
    from memstream.workers import Pipeline, PipelineConfig

    log = EventLog(fakeredis.FakeRedis(), "ms", 1)
    stored = "The staging database listens on port 6543"
    log.append([remembered(stored)])
    settings = pipeline_settings(tmp_path / "home", stream_prefix=log.prefix, shards=log.shards, late_rerank="off")
    path = settings.data_dir / "embeddings.sqlite3"
    pipeline = Pipeline(settings, log, PipelineConfig(embedder="onnx-minilm", consumer="w1"))
    question = "what port is the staging database on"
    try:
        pipeline.drain()
        name, dim = pipeline.embedder.name, pipeline.embedder.dim
        # the write side keeps what it embedded for the event in the file
        wait_for(lambda: _in_cache_file(path, name, dim, stored), what="the memory's vector in the cache file")
        search = SearchRequest(tenant="t1", agent="a1", query=question, k=3, kind="memories")
        found = pipeline.reads.handlers().search(search)
        assert [r["text"] for r in found.results][:1] == [stored]
        again = pipeline.reads.handlers().search(search)  # the question's vector from memory
        assert [r["id"] for r in again.results] == [r["id"] for r in found.results]
    finally:
        pipeline.stop()
    assert not _in_cache_file(path, name, dim, question)
