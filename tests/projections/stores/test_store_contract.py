"""One contract for every VectorStore backend: qdrant-client local mode, qdrant-edge, and
a real Qdrant server when MEMSTREAM_QDRANT_URL is set."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
import zlib

import numpy as np
import pytest

from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.backend import SET_DENSE_ATTEMPTS
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.factory import open_store
from memstream.projections.stores.ids import dense_key, point_id
from memstream.projections.stores.port import (
    DENSE_KEY,
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    Point,
    PointGone,
    Search,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    VectorStore,
)
from memstream.projections.stores.qdrant import QdrantStore

DIM = 8
SERVER_URL = os.environ.get("MEMSTREAM_QDRANT_URL", "")


def _scratch_dir(tmp_path):
    """A tmpfs directory when there is one: qdrant-edge fsyncs every segment it creates
    (about 0.5 s per collection on disk, 60 ms on tmpfs); close/reopen works the same."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return tempfile.mkdtemp(prefix="memstream-store-", dir="/dev/shm")
    return str(tmp_path)


class Backend:
    """Opens (and reopens) one kind of store; the edge and qdrant-path stores survive ``close``."""

    def __init__(self, kind: str, tmp_path) -> None:
        self.kind = kind
        self.scratch = _scratch_dir(tmp_path)
        self.path = os.path.join(self.scratch, "store")
        self.prefix = f"c{uuid.uuid4().hex[:10]}"  # unique names: a server is shared
        self.opened: list[VectorStore] = []

    def open(self) -> VectorStore:
        if self.kind == "edge":
            store: VectorStore = EdgeStore(self.path)
        elif self.kind == "qdrant-memory":
            store = QdrantStore()
        elif self.kind == "qdrant-path":
            store = QdrantStore(path=str(self.path))
        else:
            store = QdrantStore(SERVER_URL)
        self.opened.append(store)
        return store

    def name(self, base: str) -> str:
        return f"{self.prefix}_{base}"

    def cleanup(self) -> None:
        if self.kind == "qdrant-server":
            client = QdrantStore(SERVER_URL)._client
            for c in client.get_collections().collections:
                if c.name.startswith(self.prefix):
                    client.delete_collection(c.name)
        for store in self.opened:
            store.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture(
    params=[
        "qdrant-memory",
        "edge",
        pytest.param(
            "qdrant-server",
            marks=pytest.mark.skipif(not SERVER_URL, reason="set MEMSTREAM_QDRANT_URL to test against a Qdrant server"),
        ),
    ]
)
def backend(request, tmp_path):
    b = Backend(request.param, tmp_path)
    yield b
    b.cleanup()


@pytest.fixture(params=["qdrant-path", "edge"])
def persistent_backend(request, tmp_path):
    b = Backend(request.param, tmp_path)
    yield b
    b.cleanup()


@pytest.fixture
def store(backend) -> VectorStore:
    return backend.open()


def unit(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i % DIM] = 1.0
    return v


def pt(key: str, *, tenant="t1", agent="a1", kind="turn", session="s1", ts=0.0, dense=None, text="", **extra) -> Point:
    pid = point_id(tenant, key)
    payload = {
        "tenant": tenant,
        "agent": agent,
        "kind": kind,
        "session_id": session,
        "event_id": pid,
        "occurred_at_ts": ts,
        "key": key,
        **extra,
    }
    return Point(
        id=pid,
        dense=dense if dense is not None else unit(zlib.crc32(key.encode())),
        sparse=sparse_vector(text) if text else None,
        payload=payload,
    )


def keys(points) -> list[str]:
    return [p.payload["key"] for p in points]


def test_ensure_collection_is_idempotent_and_rejects_another_dim(backend, store):
    turns = backend.name("turns")
    assert store.ensure_collection(turns, 1, DIM) == f"{turns}_v1"
    store.upsert(f"{turns}_v1", [pt("x")])
    assert store.ensure_collection(turns, 1, DIM) == f"{turns}_v1"  # again: data kept
    assert store.count(f"{turns}_v1") == 1
    with pytest.raises(DimensionMismatch):
        store.ensure_collection(turns, 1, DIM + 1)
    assert store.versions(turns) == [1]
    assert store.active_version(turns) is None


def test_upserting_the_same_points_twice_keeps_one_copy_each(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    points = [pt(f"k{i}", text=f"message number {i}") for i in range(20)]
    store.upsert(c, points)
    store.upsert(c, points)  # a redelivered batch
    assert store.count(c) == 20
    assert store.count(c, Filter("t1")) == 20


def test_point_without_tenant_or_with_non_uuid_id_is_rejected(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    with pytest.raises(ValueError, match="tenant"):
        store.upsert(c, [Point(id=point_id("x"), dense=unit(0), payload={"agent": "a"})])
    with pytest.raises(ValueError, match="UUID"):
        store.upsert(c, [Point(id="evt-1", dense=unit(0), payload={"tenant": "t"})])
    with pytest.raises(ValueError, match="dims"):
        store.upsert(c, [Point(id=point_id("x"), dense=[1.0, 0.0], payload={"tenant": "t"})])
    with pytest.raises(ValueError, match="tenant"):
        Filter("")
    assert store.count(c) == 0


def test_filtered_dense_search_never_crosses_tenants_or_agents(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    same = unit(0)  # every point is an exact match: only the filter can separate them
    points = [pt(f"{t}-{a}-{i}", tenant=t, agent=a, dense=same) for t in ("t1", "t2") for a in ("a1", "a2") for i in range(5)]
    store.upsert(c, points)
    for t in ("t1", "t2"):
        hits = store.search(c, dense=same, filter=Filter(t), limit=50)
        assert len(hits) == 10 and {h.payload["tenant"] for h in hits} == {t}
        for a in ("a1", "a2"):
            hits = store.search(c, dense=same, filter=Filter(t, agent=a), limit=50)
            assert len(hits) == 5
            assert {(h.payload["tenant"], h.payload["agent"]) for h in hits} == {(t, a)}
    hits = store.search(
        c, dense=np.asarray(same, dtype=np.float32), filter=Filter("t1", agent=["a1", "a2"], session_id="s1"), limit=50
    )
    assert len(hits) == 10
    assert store.search(c, dense=same, filter=Filter("nobody"), limit=5) == []


CORPUS = {
    "ko": "내일서울역에서만나요",
    "ko-1": "서울에 가요",
    "ko-2": "부산역에서 기다릴게요",
    "zh": "我明天去北京大学看朋友",
    "zh-1": "北京的天气很好",
    "zh-2": "大学生活很有意思",
    "ja": "週末に東京タワーへ行きました",
    "ja-1": "東京駅で会いましょう",
    "ja-2": "タワーマンションに住んでいます",
    "en": "The deployment of the billing service failed twice",
    "en-1": "We played the piano at the party",
    "en-2": "Deep sea diving is a hobby of mine",
}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("서울역", "ko"),
        ("北京大学", "zh"),
        ("東京タワー", "ja"),
        ("deploying", "en"),
    ],
)
def test_sparse_search_finds_a_phrase_inside_unspaced_text_and_stemmed_words(backend, store, query, expected):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    store.upsert(c, [pt(k, text=text) for k, text in CORPUS.items()])
    hits = store.search(c, sparse=sparse_vector(query), filter=Filter("t1"), limit=3)
    assert hits and hits[0].payload["key"] == expected
    assert hits[0].score > (hits[1].score if len(hits) > 1 else 0.0)


def test_sparse_search_with_no_keywords_finds_nothing(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    store.upsert(c, [pt("a", text="hello world")])
    assert store.search(c, sparse=sparse_vector("the of and"), filter=Filter("t1")) == []


def test_hybrid_rrf_returns_the_union_of_dense_and_keyword_hits_ranked(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    opposite = [-x for x in unit(0)]
    store.upsert(
        c,
        [
            pt("dense-only", dense=unit(0), text="lunch plans for friday"),
            pt("both", dense=[0.9, 0.1] + [0.0] * (DIM - 2), text="invoice reconciliation report"),
            pt("sparse-only", dense=opposite, text="the invoice is overdue"),
            *[pt(f"filler-{i}", dense=unit(1 + i % (DIM - 1)), text=f"weather note {i}") for i in range(8)],
            pt("other-tenant", tenant="t2", dense=unit(0), text="invoice reconciliation"),
        ],
    )
    query = dict(dense=unit(0), sparse=sparse_vector("invoice reconciliation"), filter=Filter("t1"))
    dense_only = keys(store.search(c, dense=query["dense"], filter=query["filter"], limit=3))
    sparse_only = keys(store.search(c, sparse=query["sparse"], filter=query["filter"], limit=3))
    assert "sparse-only" not in dense_only and "dense-only" not in sparse_only
    fused = store.search(c, **query, limit=3)
    assert keys(fused) == ["both", "sparse-only", "dense-only"]
    assert fused[0].score > fused[1].score > fused[2].score
    dbsf = store.search(c, **query, limit=3, fusion="dbsf")
    assert keys(dbsf)[0] == "both" and "other-tenant" not in keys(dbsf)


def test_a_batch_of_searches_answers_each_as_the_same_search_alone(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    points = [
        pt(f"p{i}", tenant="t1" if i % 4 else "t2", agent=f"a{i % 3}", dense=unit(i % DIM), text=f"note {i % 5} invoice")
        for i in range(40)
    ]
    store.upsert(c, points)
    searches = [
        Search(filter=Filter("t1"), dense=unit(0), limit=7),
        Search(filter=Filter("t1", agent="a1"), sparse=sparse_vector("invoice note"), limit=5),
        Search(filter=Filter("t2"), dense=unit(3), sparse=sparse_vector("note"), limit=4),
        Search(filter=Filter("t1"), sparse=sparse_vector("the of and"), limit=5),  # no keywords: nothing
        Search(filter=Filter("nobody"), dense=unit(1), limit=5),
        Search(filter=Filter("t1", agent="a2"), dense=unit(2), sparse=sparse_vector("invoice"), limit=6, fusion="dbsf"),
    ]
    together = store.search_many(c, searches)
    alone = [store.search(c, dense=q.dense, sparse=q.sparse, filter=q.filter, limit=q.limit, fusion=q.fusion) for q in searches]

    # the same scores (equal scores may come in either order, and a tie at the limit keep either point)
    assert [sorted(round(h.score, 5) for h in hits) for hits in together] == [
        sorted(round(h.score, 5) for h in hits) for hits in alone
    ]
    for q, hits in zip(searches, together):  # each hit with its own payload, within its search's scope
        for h in hits:
            assert h.payload["key"] == {p.id: p.payload["key"] for p in points}[h.id]
            assert h.payload["tenant"] == q.filter.tenant and (q.filter.agent is None or h.payload["agent"] == q.filter.agent)
    assert together[0] and together[1] and together[2] and together[3] == [] and together[4] == []
    assert store.search_many(c, []) == []


def test_exclude_ids_and_time_range_narrow_a_search(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    points = [pt(f"k{i}", ts=float(i), dense=unit(0)) for i in range(10)]
    store.upsert(c, points)
    f = Filter("t1", since_ts=2.0, until_ts=6.0, exclude_ids=[points[3].id])
    assert sorted(keys(store.search(c, dense=unit(0), filter=f, limit=20))) == ["k2", "k4", "k5"]
    assert store.count(c, f) == 3


def test_delete_by_ids_and_by_filter_removes_only_those_points(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    points = [pt(f"{a}-{i}", agent=a) for a in ("a1", "a2") for i in range(5)]
    points.append(pt("other", tenant="t2", agent="a1"))
    store.upsert(c, points)
    store.delete(c, [points[0].id, points[1].id, point_id("never-existed")])
    store.delete(c, [points[0].id])  # idempotent
    assert store.count(c, Filter("t1", agent="a1")) == 3
    store.delete_where(c, Filter("t1", agent="a1"))
    assert store.count(c, Filter("t1", agent="a1")) == 0
    assert store.count(c, Filter("t1", agent="a2")) == 5
    assert store.count(c, Filter("t2")) == 1  # another tenant's a1 is untouched


def test_set_payload_merges_keys_and_ignores_unknown_ids(backend, store):
    c = store.ensure_collection(backend.name("memories"), 1, DIM)
    a, b = pt("a", kind="memory"), pt("b", kind="memory")
    store.upsert(c, [a, b])
    store.set_payload(c, [a.id, point_id("missing")], {"kind": "forgotten", "reason": "user"})
    got = {p.payload["key"]: p.payload for p in store.retrieve(c, [a.id, b.id])}
    assert got["a"]["kind"] == "forgotten" and got["a"]["reason"] == "user"
    assert got["a"]["agent"] == "a1"  # other keys kept
    assert got["b"]["kind"] == "memory" and "reason" not in got["b"]
    assert store.count(c, Filter("t1", kind="memory")) == 1


def keyword_only(key: str, text: str, **extra) -> Point:
    """A point written without its dense vector, its payload naming the text to embed."""
    p = pt(key, text=text, **extra)
    return Point(id=p.id, dense=None, sparse=p.sparse, payload={**p.payload, DENSE_KEY: dense_key(p.id, text)})


def test_a_point_without_its_dense_vector_is_found_by_keywords_and_not_by_meaning(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    late = keyword_only("late", "the billing deployment failed")
    store.upsert(c, [late, pt("full", dense=unit(0), text="billing invoices are due")])
    assert [h.payload["key"] for h in store.search(c, dense=unit(1), filter=Filter("t1"), limit=10)] == ["full"]
    found = store.search(c, sparse=sparse_vector("deployment"), filter=Filter("t1"), limit=10)
    assert [h.payload["key"] for h in found] == ["late"]
    fused = store.search(c, dense=unit(0), sparse=sparse_vector("deployment"), filter=Filter("t1"), limit=10)
    assert {h.payload["key"] for h in fused} == {"late", "full"}


def test_set_dense_gives_a_point_its_vector_and_keeps_its_payload_and_keywords(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    p = keyword_only("late", "the billing deployment failed")
    store.upsert(c, [p])
    assert store.set_dense(c, [(p.id, unit(2), p.payload[DENSE_KEY])]) == 1
    assert store.set_dense(c, [(p.id, unit(2), p.payload[DENSE_KEY])]) == 1  # again: the same state
    (full,) = store.retrieve(c, [p.id], with_vectors=True)
    assert np.allclose(full.dense, unit(2)) and sorted(full.sparse[0]) == sorted(p.sparse[0])
    assert full.payload == p.payload
    hits = store.search(c, dense=unit(2), filter=Filter("t1"), limit=5)
    assert [h.payload["key"] for h in hits] == ["late"]


def test_set_dense_never_creates_a_deleted_point_nor_dresses_a_reindexed_one(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    gone, changed, kept = (keyword_only(k, f"text of {k}") for k in ("gone", "changed", "kept"))
    store.upsert(c, [gone, changed, kept])
    store.delete(c, [gone.id])
    newer = keyword_only("changed", "the newer text of changed")
    store.upsert(c, [newer])
    assert (
        store.set_dense(
            c,
            [
                (gone.id, unit(1), gone.payload[DENSE_KEY]),
                (changed.id, unit(1), changed.payload[DENSE_KEY]),
                (kept.id, unit(1), kept.payload[DENSE_KEY]),
            ],
        )
        == 1
    )
    assert store.count(c) == 2
    got = {p.payload["key"]: p for p in store.retrieve(c, [gone.id, changed.id, kept.id], with_vectors=True)}
    assert set(got) == {"changed", "kept"}
    assert got["changed"].dense is None and np.allclose(got["kept"].dense, unit(1))
    assert store.set_dense(c, []) == 0


def _deleting_after_first_look(store, collection: str, doomed: str, monkeypatch) -> list:
    """``store.retrieve`` patched so that ``doomed`` is deleted (a forget applied meanwhile)
    right after the first look of ``set_dense``; returns the ids of every look."""
    real, looks = store.retrieve, []

    def retrieve(name, ids, **kwargs):
        found = real(name, ids, **kwargs)
        if not looks:
            store.delete(collection, [doomed])
        looks.append(ids)
        return found

    monkeypatch.setattr(store, "retrieve", retrieve)
    return looks


def test_set_dense_looks_again_when_a_point_is_deleted_between_its_look_and_its_write(backend, store, monkeypatch):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    a, b = keyword_only("a", "text of a"), keyword_only("b", "text of b")
    store.upsert(c, [a, b])
    looks = _deleting_after_first_look(store, c, a.id, monkeypatch)
    assert store.set_dense(c, [(a.id, unit(1), a.payload[DENSE_KEY]), (b.id, unit(2), b.payload[DENSE_KEY])]) == 1
    assert len(looks) == 2
    monkeypatch.undo()
    (only,) = store.retrieve(c, [a.id, b.id], with_vectors=True)
    assert only.id == b.id and np.allclose(only.dense, unit(2))


def test_set_dense_leaves_a_point_reindexed_between_its_look_and_its_write_without_a_vector(backend, store, monkeypatch):
    """The engine checks the key again as it writes (a conditional update; in qdrant-client's
    local mode too): the look saw the old key, the write finds the new one."""
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    a, b = keyword_only("a", "text of a"), keyword_only("b", "text of b")
    store.upsert(c, [a, b])
    newer = keyword_only("a", "the newer text of a")
    real = store.retrieve

    def retrieve(collection, ids, **kwargs):
        found = real(collection, ids, **kwargs)
        store.upsert(c, [newer])  # re-indexed meanwhile
        return found

    monkeypatch.setattr(store, "retrieve", retrieve)
    assert store.set_dense(c, [(a.id, unit(1), a.payload[DENSE_KEY]), (b.id, unit(2), b.payload[DENSE_KEY])]) == 2
    monkeypatch.undo()
    got = {p.id: p for p in store.retrieve(c, [a.id, b.id], with_vectors=True)}
    assert got[a.id].dense is None and got[a.id].payload[DENSE_KEY] == newer.payload[DENSE_KEY]
    assert np.allclose(got[b.id].dense, unit(2))
    assert [h.id for h in store.search(c, dense=unit(1), filter=Filter("t1"), limit=5)] == [b.id]


def test_set_dense_gives_up_when_its_points_keep_being_deleted_between_look_and_write(backend, store, monkeypatch):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    a = keyword_only("a", "text of a")
    real, looks = store.retrieve, []

    def retrieve(collection, ids, **kwargs):
        store.upsert(c, [a])  # written again, then forgotten again before the write
        found = real(collection, ids, **kwargs)
        store.delete(c, [a.id])
        looks.append(ids)
        return found

    monkeypatch.setattr(store, "retrieve", retrieve)
    with pytest.raises(PointGone):
        store.set_dense(c, [(a.id, unit(1), a.payload[DENSE_KEY])])
    assert len(looks) == SET_DENSE_ATTEMPTS
    monkeypatch.undo()
    assert store.count(c) == 0


def test_set_dense_refuses_a_vector_of_another_size_before_writing(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    a = keyword_only("a", "text of a")
    store.upsert(c, [a])
    with pytest.raises(ValueError, match="dims"):
        store.set_dense(c, [(a.id, [1.0] * (DIM + 1), a.payload[DENSE_KEY])])
    assert store.retrieve(c, [a.id], with_vectors=True)[0].dense is None


def test_retrieve_returns_existing_points_with_vectors_when_asked(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    p = pt("a", dense=unit(3), text="deploy service")
    store.upsert(c, [p])
    (plain,) = store.retrieve(c, [p.id, point_id("missing")])
    assert plain.id == p.id and plain.dense is None and plain.payload["key"] == "a"
    (full,) = store.retrieve(c, [p.id], with_vectors=True)
    assert np.allclose(full.dense, unit(3))
    assert sorted(full.sparse[0]) == sorted(p.sparse[0])


def test_scroll_pages_through_the_scope_once_each(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    store.upsert(c, [pt(f"k{i}", agent="a1" if i % 3 else "a2") for i in range(25)])
    seen, offset, pages = [], None, 0
    while True:
        page, offset = store.scroll(c, Filter("t1", agent="a1"), limit=4, offset=offset)
        seen += keys(page)
        pages += 1
        assert len(page) <= 4
        if offset is None:
            break
    assert len(seen) == len(set(seen)) == 16 and pages == 4
    assert all(int(k[1:]) % 3 for k in seen)


def test_count_with_a_filter_counts_only_the_scope(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    store.upsert(c, [pt(f"k{i}", agent=f"a{i % 2}", kind="turn" if i < 6 else "memory") for i in range(10)])
    assert store.count(c) == 10
    assert store.count(c, Filter("t1", agent="a0")) == 5
    assert store.count(c, Filter("t1", kind=["memory"])) == 4
    assert store.count(c, Filter("t1", agent="a1", kind="turn")) == 3
    assert store.count(c, Filter("t2")) == 0


def test_readers_of_the_logical_name_follow_a_version_switch(backend, store):
    turns = backend.name("turns")
    with pytest.raises(CollectionNotFound):
        store.collection_for_read(turns)
    with pytest.raises(CollectionNotFound):
        store.count(turns)
    v1 = store.ensure_collection(turns, 1, DIM)
    store.upsert(v1, [pt("old", text="old projection")])
    store.set_active_version(turns, 1)
    assert store.collection_for_read(turns) == v1
    v2 = store.ensure_collection(turns, 2, DIM)  # a replay builds v2 beside v1
    store.upsert(v2, [pt("new", text="new projection"), pt("new2", text="new projection")])
    assert store.count(turns) == 1 and keys(store.scroll(turns, Filter("t1"))[0]) == ["old"]
    store.set_active_version(turns, 2)
    assert store.active_version(turns) == 2 and store.collection_for_read(turns) == v2
    assert store.count(turns) == 2
    hits = store.search(turns, sparse=sparse_vector("projection"), filter=Filter("t1"))
    assert {h.payload["key"] for h in hits} == {"new", "new2"}
    with pytest.raises(StoreError):
        store.drop_collection(turns, 2)  # the active version
    store.drop_collection(turns, 1)
    store.drop_collection(turns, 1)  # idempotent
    assert store.versions(turns) == [2]
    with pytest.raises(CollectionNotFound):
        store.set_active_version(turns, 7)


def test_writer_and_readers_share_the_store_across_threads(backend, store):
    c = store.ensure_collection(backend.name("turns"), 1, DIM)
    store.upsert(c, [pt("seed", dense=unit(0), text="seed")])
    errors: list[BaseException] = []
    done = threading.Event()

    def write():
        try:
            for b in range(10):
                store.upsert(c, [pt(f"w{b}-{i}", dense=unit(i), text=f"batch {b}") for i in range(10)])
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)
        finally:
            done.set()

    def read():
        try:
            while not done.is_set():
                assert store.search(c, dense=unit(0), sparse=sparse_vector("batch"), filter=Filter("t1"), limit=5)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert store.count(c) == 101


def test_points_and_active_version_survive_close_and_reopen(persistent_backend):
    store = persistent_backend.open()
    turns = persistent_backend.name("turns")
    c = store.ensure_collection(turns, 1, DIM)
    store.upsert(c, [pt(f"k{i}", text="persisted text") for i in range(5)])
    store.set_active_version(turns, 1)
    store.close()
    store = persistent_backend.open()
    assert store.active_version(turns) == 1
    assert store.count(turns) == 5
    assert len(store.search(turns, sparse=sparse_vector("persisted"), filter=Filter("t1"))) == 5
    with pytest.raises(DimensionMismatch):
        store.ensure_collection(turns, 1, DIM * 2)


def test_a_second_open_of_an_embedded_store_is_refused(persistent_backend):
    persistent_backend.open()
    with pytest.raises(StoreLocked):
        persistent_backend.open()


def test_search_latency_reports_every_mode_and_exact_recall_on_a_plain_index(tmp_path):
    from memstream.bench.store import search_latency

    store = EdgeStore(tmp_path / "bench", auto_optimize=None)
    try:
        result = search_latency(store, 400, dim=16, queries=5, distribution="clustered")
    finally:
        store.close()
    assert result["selectivity"] == 0.1
    assert {"p50_ms", "p95_ms", "cpu_mean_ms"} <= set(result["hybrid"])
    assert result["dense_recall_at_k"] == 1.0  # no HNSW: filtered search is exact


def test_open_store_gives_the_embedded_store_for_a_path(tmp_path):
    edge = open_store(path=str(tmp_path / "vectors"))
    assert isinstance(edge, EdgeStore)
    edge.close()
    with pytest.raises(ValueError):
        open_store()


def test_an_unreachable_server_is_a_transient_error():
    store = QdrantStore("http://127.0.0.1:9", timeout=2, check_compatibility=False)
    with pytest.raises(StoreUnavailable):
        store.count("turns")
    store.close()


def test_edge_optimizer_rewrites_segments_without_losing_or_leaking_points(tmp_path, monkeypatch):
    import memstream.projections.stores.edge as edge_store

    # tiny thresholds so that 600 points go through appendable -> immutable -> merged
    monkeypatch.setattr(edge_store, "INDEXING_KB", 1)
    monkeypatch.setattr(edge_store, "MAX_SEGMENT_KB", 8)
    scratch = _scratch_dir(tmp_path)
    store = EdgeStore(scratch, auto_optimize=150)
    try:
        c = store.ensure_collection("turns", 1, DIM)
        for b in range(6):
            store.upsert(
                c, [pt(f"k{b}-{i}", tenant=f"t{i % 2}", agent=f"a{i % 5}", text=f"segment test {b}") for i in range(100)]
            )
        store.delete_where(c, Filter("t0", agent="a0"))
        assert store._shards[c].shard.info().segments_count > 1
        assert store.count(c) == 600 - 60
        assert store.count(c, Filter("t1", agent="a1")) == 60
        hits = store.search(c, dense=unit(0), sparse=sparse_vector("segment"), filter=Filter("t1", agent="a3"), limit=100)
        assert len(hits) == 60 and {h.payload["agent"] for h in hits} == {"a3"}
        seen, offset = [], None
        while True:
            page, offset = store.scroll(c, Filter("t0"), limit=64, offset=offset)
            seen += [p.id for p in page]
            if offset is None:
                break
        assert len(seen) == len(set(seen)) == 300 - 60
    finally:
        store.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _hits(store, c, query_vector, words, f, limit=300):
    """Every point in scope (no cut among equal scores), in a canonical order: the engine
    may order equal scores either way."""
    dense = store.search(c, dense=query_vector, filter=f, limit=limit)
    sparse = store.search(c, sparse=sparse_vector(words), filter=f, limit=limit)
    fused = store.search(c, dense=query_vector, sparse=sparse_vector(words), filter=f, limit=limit)
    return [sorted((-h.score, h.id, sorted(h.payload.items())) for h in hits) for hits in (dense, sparse, fused)]


def test_edge_search_answers_the_same_from_its_payload_cache_as_from_the_engine(tmp_path):
    scratch = _scratch_dir(tmp_path)
    try:
        store = EdgeStore(scratch, payload_cache=0)  # every payload read from the engine
        c = store.ensure_collection("turns", 1, DIM)
        store.upsert(
            c,
            [
                pt(
                    f"k{i}",
                    agent=f"a{i % 3}",
                    text=f"cache test {i % 7} words {i}",
                    dense=[float((i * j) % 5) + 0.5 for j in range(DIM)],
                )
                for i in range(200)
            ],
        )
        queries = [([float((q + j) % 4) + 0.1 for j in range(DIM)], f"cache words {q}") for q in range(8)]
        scopes = [Filter("t1"), Filter("t1", agent="a1")]
        engine = [_hits(store, c, v, w, f) for v, w in queries for f in scopes]
        store.close()
        store = EdgeStore(scratch, payload_cache=50)  # smaller than what the searches find
        cold = [_hits(store, c, v, w, f) for v, w in queries for f in scopes]
        warm = [_hits(store, c, v, w, f) for v, w in queries for f in scopes]
        assert cold == warm == engine
        assert len(store._shards[c].payloads._items) == 50
        store.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_edge_search_never_answers_a_payload_older_than_the_last_write_to_its_point(tmp_path):
    scratch = _scratch_dir(tmp_path)
    store = EdgeStore(scratch)
    try:
        c = store.ensure_collection("turns", 1, DIM)
        points = [pt(f"k{i}", text=f"secret number {i}", dense=unit(0), note=f"v{i}") for i in range(6)]
        store.upsert(c, points)
        f = Filter("t1")

        def notes() -> dict[str, str]:
            found = {h.payload["key"]: h.payload["note"] for h in store.search(c, dense=unit(0), filter=f, limit=10)}
            by_words = {
                h.payload["key"]: h.payload["note"] for h in store.search(c, sparse=sparse_vector("secret"), filter=f, limit=10)
            }
            assert by_words == found
            return found

        assert notes() == {f"k{i}": f"v{i}" for i in range(6)}  # now in the cache
        store.set_payload(c, [points[0].id], {"note": "redacted"})
        store.upsert(c, [pt("k1", text="secret number 1", dense=unit(0), note="rewritten")])
        store.delete(c, [points[2].id])
        assert notes() == {"k0": "redacted", "k1": "rewritten", "k3": "v3", "k4": "v4", "k5": "v5"}
        store.delete_where(c, Filter("t1", session_id="s1"))
        assert notes() == {}
        store.upsert(c, [pt("k9", text="secret again", dense=unit(0), note="v9")])
        hits = store.search(c, dense=unit(0), filter=f, limit=10)
        with pytest.raises(TypeError):  # a hit's payload is read-only: no caller changes what others read
            hits[0].payload["note"] = "changed by a caller"  # type: ignore[index]
        assert notes() == {"k9": "v9"}
    finally:
        store.close()
        shutil.rmtree(scratch, ignore_errors=True)


def test_edge_payload_cache_drops_what_it_read_before_a_write_came_in():
    from memstream.projections.stores.edge import _Payloads

    cache = _Payloads(size=3)
    read_at = cache.generation
    cache.forget(["a"])  # a write to "a" lands between a search's read and its keep
    cache.keep({"a": {"v": "old"}}, read_at)
    assert cache.get(["a"]) == {}
    cache.keep({"a": {"v": 1}, "b": {"v": 2}}, cache.generation)
    cache.keep({"c": {"v": 3}}, cache.generation)
    assert cache.get(["a"]) == {"a": {"v": 1}}  # found: the most recently found now
    cache.keep({"d": {"v": 4}}, cache.generation)
    assert set(cache.get(["a", "b", "c", "d"])) == {"a", "c", "d"}  # b was the least recent
    cache.forget(None)
    assert cache.get(["a", "c", "d"]) == {}


@pytest.mark.parametrize(
    "raised",
    [
        StoreUnavailable("No space left on device"),
        StoreLocked("open elsewhere"),
        CollectionNotFound("turns_v1 was closed"),
        StoreError("closed"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_embedded_store_translates_engine_errors_once_and_passes_its_own_through(raised):
    """A store error raised inside a translated call (also by a nested one) keeps its kind:
    an outage stays transient, a refusal permanent."""
    from memstream.projections.stores.edge import _translated

    with pytest.raises(type(raised)) as got:
        with _translated("turns_v1"):
            raise raised
    assert got.value is raised
    with pytest.raises(StoreUnavailable):
        with _translated("turns_v1"):
            raise Exception("No space left on device (os error 28)")


def test_a_server_answer_without_a_status_code_is_a_permanent_store_error():
    """qdrant-client types the status of an unexpected answer as optional: one without a
    status is refused as a store error, never a TypeError from comparing None."""
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    store = QdrantStore()
    try:
        with pytest.raises(StoreError) as got:
            with store._call("turns_v1"):
                raise UnexpectedResponse(None, "", b"", httpx.Headers())
        assert not isinstance(got.value, StoreUnavailable)
    finally:
        store.close()


def _as_server(store: QdrantStore, answers: list) -> list:
    """Make the local client of ``store`` answer ``update_vectors`` as a Qdrant server does:
    it applies the update locally (every point it holds, the condition checked), and where
    local mode raises KeyError for a point it does not hold, a server answers 404 ``No point
    with id ... found``; ``answers`` are further errors to raise before applying anything
    (popped, oldest first). Returns the calls made."""
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    real, calls = store._client.update_vectors, []

    def update_vectors(collection, points, **kwargs):
        calls.append([str(p.id) for p in points])
        if answers:
            raise answers.pop(0)
        try:
            return real(collection, points, **kwargs)
        except KeyError as exc:
            body = f'{{"status":{{"error":"Not found: No point with id {exc.args[0]} found"}}}}'.encode()
            raise UnexpectedResponse(404, "Not Found", body, httpx.Headers()) from None

    store._client.update_vectors = update_vectors  # type: ignore[method-assign]
    return calls


def test_set_dense_through_a_server_looks_again_after_a_404_for_a_point_deleted_meanwhile(tmp_path, monkeypatch):
    """The server path of ``QdrantStore.set_dense`` on local mode (``QdrantStore(path=...)``):
    the conditional update (``update_filter``) is evaluated by local mode as by a server;
    what a server answers for a point deleted since the look (404) is reproduced from local
    mode's KeyError. Not covered here: a server's own atomicity of check and write under
    concurrent writers (local mode serialises every call) and servers before 1.16 (no
    ``update_filter``): run the contract with MEMSTREAM_QDRANT_URL for those."""
    store = QdrantStore(path=str(tmp_path / "q"))
    try:
        c = store.ensure_collection("turns", 1, DIM)
        a, b = keyword_only("a", "text of a"), keyword_only("b", "text of b")
        store.upsert(c, [a, b])
        calls = _as_server(store, [])
        looks = _deleting_after_first_look(store, c, a.id, monkeypatch)
        assert store.set_dense(c, [(a.id, unit(1), a.payload[DENSE_KEY]), (b.id, unit(2), b.payload[DENSE_KEY])]) == 1
        assert len(looks) == 2 and len(calls) == 2 and calls[1] == [b.id]
        monkeypatch.undo()
        (only,) = store.retrieve(c, [a.id, b.id], with_vectors=True)
        assert only.id == b.id and np.allclose(only.dense, unit(2))
    finally:
        store.close()


def test_set_dense_through_a_server_passes_other_answers_on_as_their_errors(tmp_path):
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    store = QdrantStore(path=str(tmp_path / "q"))
    try:
        c = store.ensure_collection("turns", 1, DIM)
        a = keyword_only("a", "text of a")
        store.upsert(c, [a])
        vectors = [(a.id, unit(1), a.payload[DENSE_KEY])]
        gone = b'{"status":{"error":"Not found: Collection `turns_v1` doesn\'t exist!"}}'
        calls = _as_server(
            store,
            [
                UnexpectedResponse(404, "Not Found", gone, httpx.Headers()),
                UnexpectedResponse(503, "Unavailable", b"", httpx.Headers()),
            ],
        )
        with pytest.raises(CollectionNotFound):
            store.set_dense(c, vectors)
        with pytest.raises(StoreUnavailable):  # transient: the dense stage retries, spending no delivery
            store.set_dense(c, vectors)
        assert len(calls) == 2  # neither looked again
        assert store.set_dense(c, vectors) == 1
        assert np.allclose(store.retrieve(c, [a.id], with_vectors=True)[0].dense, unit(1))
    finally:
        store.close()
