"""``stats`` per projection: every registered group, with where its item count comes from."""

from __future__ import annotations

from pipeline_support import make_pipeline, memory, turn

from memstream.ops.stats import projection_stats
from memstream.projections import group_names, group_of


def test_every_registered_group_has_its_position_lag_and_items(tmp_path, event_log):
    pipeline = make_pipeline(tmp_path / "pipe-home", event_log)
    try:
        event_log.append([turn("The staging database runs Postgres 16"), memory("add", "Deploys go out on Tuesdays")])
        pipeline.drain()
        stats = projection_stats(event_log, 60.0)
    finally:
        pipeline.stop()
    assert list(stats) == list(group_names())
    for group, p in stats.items():
        assert p["exists"] and p["pending"] == 0 and p["dead_letters"] == 0, group
        assert p["last_applied_at"] and p["health"]["status"] in ("idle", "ok"), group
    sources = {group: p["items_source"] for group, p in stats.items()}
    assert sources == {
        group_of("turns"): "points written (no worker answered)",
        group_of("memories"): "points written (no worker answered)",
        group_of("facts"): "facts table",
        group_of("sessions"): "turns recorded",
    }
    assert stats[group_of("sessions")]["items"] == 1 and stats[group_of("memories")]["items"] == 1
    assert stats[group_of("turns")]["embedding"] == {"waiting": 0, "oldest_s": None, "dead_letters": 0}
    assert "embedding" not in stats[group_of("facts")]


def test_stats_show_the_points_that_wait_for_their_dense_vector(tmp_path, event_log, monkeypatch):
    monkeypatch.setattr("memstream.projections.vector.embeds_inline", lambda embedder: False)
    pipeline = make_pipeline(tmp_path / "pipe-home", event_log)
    try:
        event_log.append([turn("The staging database runs Postgres 16"), turn("Deploys go out on Tuesdays")])
        pipeline.runs[group_of("turns")].consumer.drain()  # keywords only: the model has not caught up
        waiting = projection_stats(event_log, 60.0)[group_of("turns")]["embedding"]
        assert waiting["waiting"] == 2 and waiting["oldest_s"] is not None and waiting["oldest_s"] >= 0
        pipeline.drain()
        assert projection_stats(event_log, 60.0)[group_of("turns")]["embedding"]["waiting"] == 0
        backlog = pipeline.runs[group_of("turns")].projection.backlog
        event_log.client.xadd(backlog, {"id": "not-a-point", "text": "x"})  # the shared Redis is untrusted
        pipeline.drain()
        turns = projection_stats(event_log, 60.0)[group_of("turns")]
        assert turns["embedding"] == {"waiting": 0, "oldest_s": None, "dead_letters": 1}
        assert turns["dead_letters"] == 1
        assert projection_stats(event_log, 60.0)[group_of("memories")]["embedding"]["dead_letters"] == 0
    finally:
        pipeline.stop()
