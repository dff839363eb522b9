"""Changing the model of a running install by replay (`memstream replay turns --embedder
bge-small`), on a real Valkey with the real models: the new version is built beside the
live one while searches keep answering from it, readers switch once the build has caught
up, and every search embeds its query with the model of the version it reads."""

from __future__ import annotations

import itertools
import threading
from typing import Any, Sequence

import numpy as np
import pytest
import redis
from pipeline_support import turn, wait_for

from memstream.core import Settings, keys
from memstream.ops.replay import start_replay
from memstream.producers import EventLog
from memstream.projections import Catalog, Version
from memstream.query import ActiveVersions, SearchRequest, ask
from memstream.workers import Pipeline, PipelineConfig

QUERY = "Which database version runs on staging?"
FILLER = [
    "Our deploys go out on Tuesdays after the standup",
    "I live in Berlin and work on the billing service",
    "The cat knocked the plant off the windowsill again",
    "Lunch was a bowl of ramen from the place on the corner",
    "We should rotate the API keys before the audit",
    "My sister is visiting next weekend with her kids",
    "The quarterly report is due at the end of the month",
    "I started learning the cello in the spring",
]


class Gated:
    """An embedder that holds every call until ``gate`` is set: the build cannot catch up
    before the test has seen searches answered during it."""

    def __init__(self, inner: Any, gate: threading.Event) -> None:
        self.inner, self.gate = inner, gate
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        assert self.gate.wait(120), "the test never opened the gate"
        return np.asarray(self.inner.embed(texts))

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))


def test_a_search_takes_its_collection_and_its_model_from_one_reading_of_the_catalog():
    import fakeredis

    built = [Version(name="turns", version=n, state="active", embedder=f"model-of-v{n}") for n in (1, 2)]
    versions = ActiveVersions(fakeredis.FakeRedis(), "memstream", lambda v: v.embedder, ttl=0)
    flips = itertools.cycle(built)  # every reading of the catalog sees the other version
    versions.catalog.active = lambda name: next(flips)  # type: ignore[method-assign]
    for _ in range(4):
        collection, model = versions.reader("turns")
        assert model == f"model-of-v{collection.rsplit('_v', 1)[1]}"
    # read apart, the two can belong to different versions: what reader() is for
    assert (versions.collection("turns"), versions.embedder("turns")) == ("turns_v1", "model-of-v2")


@pytest.mark.valkey
def test_a_replay_to_bge_small_switches_readers_once_caught_up_and_no_query_mixes_models(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    settings = Settings.load(home=str(tmp_path / "home"), redis_url=valkey_server.url, autostart=False, embedder="onnx-minilm")
    log = EventLog(client, settings.stream_prefix, settings.shards)
    pipeline = Pipeline(settings, log, PipelineConfig(embedder="onnx-minilm", consumer="w1"))
    catalog = Catalog(client, settings.stream_prefix)
    events = [turn(text, "Noted.", when=i, index=i) for i, text in enumerate(FILLER * 3)]
    events.insert(7, turn("The staging database runs Postgres 16 since the upgrade", "Noted.", when=7.5, index=99))
    log.append(events)

    seen: list[tuple[str, np.ndarray]] = []  # (collection read, the query vector it was searched with)
    store = pipeline.searcher.store
    search_many = store.search_many

    def recording_search_many(collection: str, searches: Any, *args: Any, **kwargs: Any) -> Any:
        for one in searches:  # every dense search the engine is asked: the collection and the vector
            if one.dense is not None:
                seen.append((collection, np.asarray(one.dense, dtype=np.float32).copy()))
        return search_many(collection, searches, *args, **kwargs)

    store.search_many = recording_search_many  # type: ignore[method-assign]
    gate = threading.Event()
    pipeline._embedders["bge-small"] = Gated(pipeline._load_embedder("bge-small"), gate)
    answers: list[tuple[int, list[str]]] = []  # (len(seen) after the answer, texts)
    errors: list[str] = []
    stop = threading.Event()

    def search() -> list[str]:
        request = SearchRequest(tenant="t1", agent="a1", query=QUERY, k=3, kind="turns")
        answer = ask(client, settings.stream_prefix, request, timeout=60)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return [r["text"] for r in answer["results"]]

    def reader() -> None:
        while not stop.is_set():
            try:
                texts = search()
            except Exception as exc:  # every failed search is a finding
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            answers.append((len(seen), texts))

    pipeline.start()
    try:
        wait_for(lambda: any("Postgres 16" in t for t in search()), timeout=120, what="v1 answering")
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        started = start_replay(settings, ["turns"], embedder="bge-small")
        assert [(v["group"], v["embedder"], v["dim"]) for v in started] == [("turns.v2", "bge-small", 384)]

        def read(collection: str) -> int:
            return sum(1 for c, _ in seen if c == collection)

        # the build cannot finish (its embedder waits): searches keep answering from v1
        wait_for(lambda: catalog.get("turns", 2) is not None and catalog.get("turns", 2).state == "building", timeout=60)
        during = read("turns_v1") + 5
        wait_for(lambda: read("turns_v1") >= during, timeout=60, what="searches answered during the build")
        assert catalog.active("turns").version == 1 and read("turns_v2") == 0
        gate.set()
        wait_for(lambda: catalog.active("turns").version == 2, timeout=180, what="v2 activated once caught up")
        wait_for(lambda: read("turns_v2") >= 5, timeout=60, what="searches answered by v2")
        assert pipeline.store.count("turns_v2") == pipeline.store.count("turns_v1") == len(events)
    finally:
        stop.set()
        gate.set()
        pipeline.stop()
    thread.join(timeout=60)

    assert errors == []
    assert answers and all(any("Postgres 16" in t for t in texts) for _, texts in answers)
    v1, v2 = catalog.get("turns", 1), catalog.get("turns", 2)
    assert (v1.embedder, v1.model) == ("onnx-minilm", "onnx-minilm:all-MiniLM-L6-v2-onnx-int8")
    assert (v2.embedder, v2.model, v2.state) == ("bge-small", "bge-small:bge-small-en-v1.5-onnx-int8", "active")

    # both models make 384-d vectors: the vector itself tells which model embedded the query
    expected = {
        "turns_v1": pipeline._load_embedder("onnx-minilm").embed([QUERY])[0],
        "turns_v2": pipeline._embedders["bge-small"].inner.embed([QUERY])[0],
    }
    assert float(expected["turns_v1"] @ expected["turns_v2"]) < 0.5
    collections = [c for c, _ in seen]
    assert set(collections) == {"turns_v1", "turns_v2"}
    first_v2 = collections.index("turns_v2")
    assert "turns_v1" not in collections[first_v2:]  # once switched, never back
    for collection, dense in seen:
        assert float(dense @ expected[collection]) > 0.999, f"a search of {collection} embedded its query with another model"


def test_an_upgrade_that_configures_another_model_leaves_each_existing_version_on_its_own(tmp_path, event_log):
    home = str(tmp_path / "home")
    before = Settings.load(home=home, autostart=False, embedder="onnx-minilm", stream_prefix=event_log.prefix)
    event_log.append([turn(text, "Noted.", when=i, index=i) for i, text in enumerate(FILLER)])
    old = Pipeline(before, event_log, PipelineConfig(consumer="w1"))
    old.drain()
    old.stop()
    catalog = Catalog(event_log.client, event_log.prefix)
    assert catalog.active("turns").embedder == "onnx-minilm"

    # the same install after an upgrade whose configured (or default) embedder is bge-small
    after = Settings.load(home=home, autostart=False, embedder="bge-small", stream_prefix=event_log.prefix)
    upgraded = Pipeline(after, event_log, PipelineConfig(consumer="w1"))
    try:
        assert upgraded.embedder.name.startswith("bge-small:")  # what a replay would build with
        assert (catalog.active("turns").embedder, catalog.active("turns").model) == (
            "onnx-minilm",
            "onnx-minilm:all-MiniLM-L6-v2-onnx-int8",
        )
        assert upgraded.versions.embedder("turns").name == "onnx-minilm:all-MiniLM-L6-v2-onnx-int8"
        assert upgraded.runs["turns.v1"].projection.embedder.name == "onnx-minilm:all-MiniLM-L6-v2-onnx-int8"
        event_log.append([turn("The staging database runs Postgres 16 since the upgrade", when=20, index=20)])
        upgraded.drain()
        hits = upgraded.searcher.search(QUERY, tenant="t1", agent="a1", k=3, kinds=("turns",))
        assert any("Postgres 16" in h["text"] for h in hits)
        assert [v.version for v in catalog.versions("turns")] == [1]  # nothing rebuilt behind the user's back
    finally:
        upgraded.stop()


def test_a_collection_projected_before_the_catalog_keeps_the_model_of_its_time(tmp_path, event_log):
    """An install last started before the catalog recorded embedders has collections of
    MiniLM vectors and no catalog: its first start after the upgrade records the default of
    that time for them, not today's (both are 384-d: the dimension would not tell)."""
    home = str(tmp_path / "home")
    before = Settings.load(home=home, autostart=False, embedder="onnx-minilm", stream_prefix=event_log.prefix)
    event_log.append([turn(text, "Noted.", when=i, index=i) for i, text in enumerate(FILLER)])
    old = Pipeline(before, event_log, PipelineConfig(consumer="w1"))
    old.drain()
    old.stop()
    for key in event_log.client.scan_iter(match=keys.catalog_pattern(event_log.prefix)):
        event_log.client.delete(key)  # as before the catalog existed
    after = Settings.load(home=home, autostart=False, stream_prefix=event_log.prefix)  # the default: bge-small
    assert after.embedder == "bge-small" and "embedder" not in dict(after.sources)
    upgraded = Pipeline(after, event_log, PipelineConfig(consumer="w1"))
    try:
        catalog = Catalog(event_log.client, event_log.prefix)
        assert catalog.active("turns").embedder == "onnx-minilm"
        assert upgraded.runs["turns.v1"].projection.embedder.name == "onnx-minilm:all-MiniLM-L6-v2-onnx-int8"
        assert upgraded.embedder.name.startswith("bge-small:")  # new versions: today's default
    finally:
        upgraded.stop()
