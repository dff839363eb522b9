"""A point's identity and the tenant (issue 26, finding 4): an event of one tenant that
reuses another tenant's event id never replaces that tenant's point. A version built since
tenant ids exist (``NEW_OPTIONS``) gives the two events two points; a version recorded
before keeps computing the ids it did and leaves the other tenant's point as it is (counted
``foreign_ids``); ``memstream replay`` builds a version with tenant ids from the log."""

from __future__ import annotations

import msgspec
import pytest
from pipeline_support import forgotten, make_pipeline, remembered

from memstream.core import derived_event_id
from memstream.producers import MemoryRemembered
from memstream.projections import (
    Catalog,
    Filter,
    MemoriesProjection,
    TurnsProjection,
    item_point_id,
    point_id,
    registered,
)
from memstream.projections.base import Delivery
from memstream.projections.embedders.factory import get_embedder
from memstream.projections.stores.qdrant import QdrantStore

SHARED = derived_event_id(1_700_000_000_000, "hermes", "memory", "globex", "a1", "memory", "the vault code", 0)


def _delivery(event: MemoryRemembered, n: int) -> Delivery:
    return Delivery(stream="s", entry_id=f"{n}-0", fields={}, event=event)


def _events() -> tuple[MemoryRemembered, MemoryRemembered]:
    theirs = msgspec.structs.replace(remembered("globex vault code is 4711", tenant="globex"), id=SHARED)
    mine = msgspec.structs.replace(remembered("acme says the vault code is 0000", tenant="acme"), id=SHARED)
    return theirs, mine


def _texts(p: MemoriesProjection) -> dict[str, str]:
    out = {}
    for tenant in ("globex", "acme"):
        found, _ = p.store.scroll(p.collection, Filter(tenant=tenant), limit=100)
        assert len(found) <= 1
        out.update({pt.payload["tenant"]: pt.payload["text"] for pt in found})
    return out


@pytest.mark.parametrize("cls", [MemoriesProjection, TurnsProjection])
def test_every_vector_projection_records_tenant_ids_for_new_versions_and_defaults_to_the_ids_it_had(cls):
    assert cls.OPTIONS["tenant_ids"] is False  # what a version recorded before the option computes
    assert cls.NEW_OPTIONS == {"tenant_ids": True}
    assert cls.validate_options(cls.NEW_OPTIONS)["tenant_ids"] is True
    assert item_point_id("t", "e", 0, scoped=False) == point_id("e", 0)
    assert item_point_id("a", "e", 0, scoped=True) != item_point_id("b", "e", 0, scoped=True)


def test_a_version_with_tenant_ids_keeps_both_tenants_items(redis_client):
    p = MemoriesProjection(QdrantStore(), get_embedder("hash"), redis_client, "ms", options={"tenant_ids": True})
    theirs, mine = _events()
    p.apply([_delivery(theirs, 1)])
    p.apply([_delivery(mine, 2)])
    assert _texts(p) == {"globex": "globex vault code is 4711", "acme": "acme says the vault code is 0000"}
    p.apply([_delivery(forgotten(SHARED, tenant="acme"), 3)])  # acme forgets its own: globex's stays
    assert _texts(p) == {"globex": "globex vault code is 4711"}


def test_a_version_recorded_before_never_replaces_another_tenants_point(redis_client):
    p = MemoriesProjection(QdrantStore(), get_embedder("hash"), redis_client, "ms")  # no option recorded
    theirs, mine = _events()
    p.apply([_delivery(theirs, 1)])
    p.apply([_delivery(mine, 2)])
    assert _texts(p) == {"globex": "globex vault code is 4711"}
    assert p.counters.get()["foreign_ids"] == 1
    assert p.store.retrieve(p.collection, [point_id(SHARED, 0)])  # the id it always computed


def test_a_new_log_records_tenant_ids_and_a_replay_of_an_older_version_migrates_through_the_log(tmp_path, event_log):
    theirs, mine = _events()
    event_log.append([theirs, mine])
    # a log projected before versions recorded tenant ids: its first version recorded none
    catalog = Catalog(event_log.client, event_log.prefix)
    catalog.ensure("memories", 1, embedder="hash", model="hash", dim=384)
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        pipeline.drain()
        v1 = pipeline.projection("memories")
        assert v1.tenant_ids is False and _texts(v1) == {"globex": "globex vault code is 4711"}
        catalog.add_build("memories", options=registered("memories").new_options)  # what `memstream replay` records
        pipeline.sync_catalog()
        pipeline.drain()
        v2 = pipeline.projection("memories")
        assert v2.version == 2 and v2.tenant_ids is True
        assert _texts(v2) == {"globex": "globex vault code is 4711", "acme": "acme says the vault code is 0000"}
        assert catalog.get("memories", 1).options == {}  # the old version keeps its ids
        assert catalog.get("turns", 1).options == {}  # a log with a history: its first version stands for what was
    finally:
        pipeline.stop()


def test_a_new_logs_first_versions_record_tenant_ids(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "home", event_log)
    try:
        catalog = Catalog(event_log.client, event_log.prefix)
        assert catalog.get("turns", 1).options == catalog.get("memories", 1).options == {"tenant_ids": True}
        assert catalog.get("facts", 1).options == {}  # no point ids there
    finally:
        pipeline.stop()
