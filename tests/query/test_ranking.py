"""Pieces of the query side (memstream.query.ranking)."""

from __future__ import annotations


def test_fact_ids_are_the_point_ids_the_facts_projection_gives():
    from memstream.query.ranking import MAX_FACTS_PER_EVENT, fact_ids
    from memstream.projections.stores.port import point_id

    for event_id in ("01a206c3-66eb-715d-a5e8-90c910201b07", 'odd "id" é\\n'):
        assert fact_ids(event_id) == [point_id("fact", event_id, i) for i in range(1, MAX_FACTS_PER_EVENT + 1)]
