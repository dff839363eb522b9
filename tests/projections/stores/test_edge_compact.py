"""``EdgeStore.compact``: the embedded store's files keep no deleted point's payload, and a
compaction stopped by a crash is finished (or dropped) when the store opens again."""

from __future__ import annotations

import shutil
import uuid

from store_support import fill_turns

from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.ids import point_id
from memstream.projections.stores.port import Filter, Point


def files_holding(directory, token: bytes) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and token in p.read_bytes()]


def fill(store: EdgeStore, token: str) -> str:
    return fill_turns(store, lambda i: token if i == 3 else f"deploy number {i}")


def test_after_compact_no_file_holds_a_deleted_points_payload_and_the_live_points_search_as_before(tmp_path):
    token = f"Qz{uuid.uuid4().hex[:12]}"
    store = EdgeStore(tmp_path / "store")
    try:
        collection = fill(store, token)
        store.delete(collection, [point_id("e3", 0)])
        store.optimize(collection)
        store.flush()
        assert files_holding(tmp_path / "store", token.encode())  # a delete only marks the point
        before = store.search(
            collection, dense=[0.1, 0.2, 0.3, 5.0], sparse=sparse_vector("deploy number 5"), filter=Filter(tenant="t1"), limit=3
        )
        assert store.compact(collection) == 11
        assert files_holding(tmp_path / "store", token.encode()) == []
        assert files_holding(tmp_path / "store", b"deploy number 5")  # payloads are greppable: the test can fail
        assert store.count(collection) == 11
        after = store.search(
            collection, dense=[0.1, 0.2, 0.3, 5.0], sparse=sparse_vector("deploy number 5"), filter=Filter(tenant="t1"), limit=3
        )
        assert after[0].id == before[0].id == point_id("e5", 0) and len(after) == 3
        kept = store.retrieve(collection, [point_id("e5", 0)], with_vectors=True)[0]
        assert kept.dense is not None and kept.sparse is not None and kept.payload["text"] == "deploy number 5"
        store.upsert(collection, [Point(id=point_id("e99", 0), dense=[1, 0, 0, 0], payload={"tenant": "t1"})])
        assert store.count(collection) == 12  # writable as before
    finally:
        store.close()
    reopened = EdgeStore(tmp_path / "store")
    try:
        assert reopened.count(reopened.collection_for_read("turns")) == 12
    finally:
        reopened.close()


def test_a_compaction_a_crash_stopped_is_finished_or_dropped_when_the_store_opens(tmp_path):
    base = tmp_path / "store"
    store = EdgeStore(base)
    collection = fill(store, "plain")
    store.close()
    # a crash after the old shard moved away, before the new one took its place
    shutil.copytree(base / collection, base / f"{collection}.compact")
    shutil.move(base / collection, base / f".tmp-drop-{collection}-0")
    store = EdgeStore(base)
    try:
        assert store.count(store.collection_for_read("turns")) == 12
        assert not (base / f"{collection}.compact").exists() and not list(base.glob(".tmp-*"))
    finally:
        store.close()
    # a crash before the swap: the old shard is whole and stays; the new one is dropped
    shutil.copytree(base / collection, base / f"{collection}.compact")
    store = EdgeStore(base)
    try:
        assert store.count(store.collection_for_read("turns")) == 12
        assert not (base / f"{collection}.compact").exists()
    finally:
        store.close()


def test_readers_and_writers_during_a_compaction_see_no_error(tmp_path):
    import threading

    store = EdgeStore(tmp_path / "store")
    errors: list[BaseException] = []
    written: list[str] = []
    stop = threading.Event()
    try:
        collection = fill(store, "plain")

        def read() -> None:
            while not stop.is_set():
                try:
                    store.search(collection, sparse=sparse_vector("deploy number 5"), filter=Filter(tenant="t1"), limit=3)
                    store.count(collection)
                except BaseException as exc:  # noqa: BLE001 - any error is the failure
                    errors.append(exc)

        def write() -> None:
            i = 100
            while not stop.is_set():
                try:
                    store.upsert(
                        collection,
                        [
                            Point(
                                id=point_id(f"w{i}", 0),
                                dense=[0.5, 0.5, 0.5, 0.5],
                                payload={"tenant": "t1", "text": f"written {i}"},
                            )
                        ],
                    )
                    written.append(point_id(f"w{i}", 0))
                    i += 1
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

        threads = [threading.Thread(target=read), threading.Thread(target=read), threading.Thread(target=write)]
        for t in threads:
            t.start()
        try:
            for _ in range(3):
                store.compact(collection)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == [] and written
        assert len(store.retrieve(collection, written)) == len(written)  # no write lost across the swaps
        assert store.count(collection) == 12 + len(written)
    finally:
        store.close()
