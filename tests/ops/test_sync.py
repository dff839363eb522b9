"""Read-your-writes: ``add --sync`` waits for the projections that make a memory write
searchable (``memory_write_groups``), and says when one gave up on it."""

from __future__ import annotations

import pytest
from pipeline_support import make_pipeline, memory

from memstream.ops import wait_projected
from memstream.projections import group_of, memory_write_groups


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log, max_deliveries=1)
    yield p
    p.stop()


def test_a_memory_write_not_yet_applied_is_logged_with_a_hint_at_the_deadline(event_log):
    event = memory("add", "Deploys go out on Tuesdays")
    entry = event_log.append([event])[0]
    assert wait_projected(event_log, event, entry, 0.05) == "logged (not yet projected: are the workers running?)"


def test_a_memory_write_is_searchable_once_the_memory_write_groups_applied_it_whatever_the_others(pipeline, event_log):
    event = memory("add", "Deploys go out on Tuesdays")
    entry = event_log.append([event])[0]
    for consumer in pipeline.consumers:
        if consumer.group in memory_write_groups(event_log.client, event_log.prefix):
            consumer.drain()
    assert group_of("turns") not in memory_write_groups(event_log.client, event_log.prefix)  # never saw it
    assert wait_projected(event_log, event, entry, 5.0) == "searchable"


def test_a_memory_write_a_projection_gave_up_on_names_its_group_and_error(pipeline, event_log, monkeypatch):
    def broken(batch):
        raise ValueError("cannot read this memory")

    monkeypatch.setattr(pipeline.projection("facts"), "apply", broken)
    event = memory("add", "Deploys go out on Tuesdays")
    entry = event_log.append([event])[0]
    pipeline.drain()
    assert wait_projected(event_log, event, entry, 5.0) == (
        f"dead-lettered in {group_of('facts')}: ValueError: cannot read this memory"
    )
