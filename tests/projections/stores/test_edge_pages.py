"""The embedded store gives back the file pages a shard's load read through
(``release_file_pages``): a store opened again holds little of its files resident, and
answers and writes as before."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import qdrant_edge as qe
from store_support import fill_turns

from memstream.core.memory import release_file_pages
from memstream.projections.sparse import sparse_vector
from memstream.projections.stores.edge import EdgeStore
from memstream.projections.stores.ids import point_id
from memstream.projections.stores.port import Filter, Point

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def resident_kb(directory: Path) -> int:
    """This process's resident kB of the files it has mapped under ``directory``."""
    prefix = os.path.join(os.path.realpath(directory), "")
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:  # a mapping's header line
            inside = len(parts) >= 6 and parts[5].startswith(prefix)
        elif inside and parts[:1] == ["Rss:"]:
            total += int(parts[1])
    return total


def fill(store: EdgeStore) -> str:
    collection = fill_turns(store)
    store.flush()
    return collection


def test_a_reopened_store_holds_few_of_its_files_pages_and_answers_and_writes_as_before(tmp_path):
    path = tmp_path / "store"
    store = EdgeStore(path)
    collection = fill(store)
    store.close()

    # the engine's own load reads every page of each payload index: what the store gives back
    engine = qe.EdgeShard.load(str(path / collection))
    try:
        loaded_kb = resident_kb(path / collection)
    finally:
        engine.close()
    assert loaded_kb > 8 * 1024  # the test can fail: the load alone holds megabytes

    store = EdgeStore(path)
    try:
        assert store.count(collection) == 12
        assert resident_kb(path) < loaded_kb / 4
        hits = store.search(
            collection, dense=[0.1, 0.2, 0.3, 5.0], sparse=sparse_vector("deploy number 5"), filter=Filter(tenant="t1"), limit=3
        )
        assert hits[0].id == point_id("e5", 0) and hits[0].payload["text"] == "deploy number 5"
        store.upsert(collection, [Point(id=point_id("e99", 0), dense=[1, 0, 0, 0], payload={"tenant": "t1", "agent": "a1"})])
        assert store.count(collection, Filter(tenant="t1", agent="a1")) == 7
        store.flush()
    finally:
        store.close()
    store = EdgeStore(path)
    try:
        assert store.count(collection) == 13  # what was written after the pages were given back is on disk
        assert store.retrieve(collection, [point_id("e3", 0)])[0].payload["text"] == "deploy number 3"
    finally:
        store.close()


def test_release_file_pages_asks_only_for_the_directorys_mappings(tmp_path):
    mapped = tmp_path / "mapped"
    mapped.mkdir()
    data = mapped / "f.bin"
    data.write_bytes(b"\1" * (1 << 20))
    import mmap

    with data.open("r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        assert sum(m[i] for i in range(0, len(m), 4096)) == 256  # every page read
        assert release_file_pages(tmp_path / "elsewhere") == 0
        assert release_file_pages(mapped) == 1 << 20
        m[0] = 7  # still mapped and writable
        m.flush()
    assert data.read_bytes()[:2] == b"\7\1"
    assert release_file_pages(mapped, maps=tmp_path / "no-such-maps") == 0
