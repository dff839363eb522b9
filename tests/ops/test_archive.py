"""``memstream archive``, ``export`` and ``stats`` with an archive, on fakeredis and on a
real Valkey: the projections applied the log, then its cold part moved to files."""

from __future__ import annotations

import sys

import pytest
from pipeline_support import make_pipeline, memory, turn

from memstream import ops
from memstream.producers import Archive
from memstream.projections import group_names


@pytest.fixture
def applied(tmp_path, event_log, monkeypatch):
    """A log of 12 events every projection group has applied, reached by the operations."""
    for module in ("memstream.ops.archive", "memstream.ops.export", "memstream.ops.stats"):
        # sys.modules: ``memstream.ops.archive`` as an attribute is the operation of that name
        monkeypatch.setattr(sys.modules[module], "connect", lambda settings: event_log)
    pipeline = make_pipeline(tmp_path / "pipe-home", event_log)
    try:
        event_log.append([turn(f"Deploy number {i} went out on a Tuesday", index=i) for i in range(8)])
        event_log.append([memory("add", f"Prefers green tea, note {i}") for i in range(4)])
        pipeline.drain()
    finally:
        pipeline.stop()
    return event_log


def test_export_after_archiving_is_export_before(applied, settings):
    before = list(ops.export(settings))
    calls = []
    result = ops.archive(settings, progress=lambda task, done, total: calls.append((task, done, total)))
    assert result["archived"] == 12 and result["directory"] == str(settings.archive_path)
    assert calls and calls[-1] == (f"archive {applied.stream_keys[0]}", 12, 12)
    assert applied.client.xlen(applied.stream_keys[0]) == 1  # strictly below the groups' position: the last stays
    assert list(ops.export(settings)) == before
    assert list(ops.export(settings, since=before[5]["entry_id"])) == before[6:]


def test_stats_show_each_streams_bytes_in_redis_and_in_the_archive(applied, settings, redis_client):
    ops.archive(settings)
    stats = ops.stats(settings)
    stream = stats["streams"][0]
    assert stream["archive"]["events"] == 12 and stream["archive"]["segments"] == 1
    assert stream["archive"]["bytes"] == stats["archive"]["bytes"] > 0
    assert stats["archive"]["events"] == 12 and stats["archive"]["directory"] == str(settings.archive_path)
    if redis_client.connection_url:  # a real server says how much memory the stream takes
        assert isinstance(stream["memory_bytes"], int) and stream["memory_bytes"] > 0
    else:
        assert stream["memory_bytes"] is None


def test_a_projection_that_has_not_applied_the_point_is_refused_by_name(applied, settings):
    applied.append([turn("Applied by nobody yet")])
    with pytest.raises(ops.CommandError, match=f"consumer group {group_names()[0]} on .* has not applied"):
        ops.archive(settings, before="2999-01-01")
    assert Archive(settings.archive_path).segments() == []
    assert applied.client.xlen(applied.stream_keys[0]) == 13


def test_the_default_point_leaves_what_a_projection_has_not_applied(applied, settings):
    applied.append([turn("Applied by nobody yet")])
    assert ops.archive(settings)["archived"] == 12
    assert ops.archive(settings)["archived"] == 0


def test_a_point_that_is_no_id_or_date_is_a_command_error(applied, settings):
    with pytest.raises(ops.CommandError, match="--before: 'soon' is neither a log entry id"):
        ops.archive(settings, before="soon")


def test_verify_names_a_corrupt_segment(applied, settings):
    with pytest.raises(ops.CommandError, match="no archive at"):
        ops.verify_archive(settings)
    ops.archive(settings)
    assert ops.verify_archive(settings)["events"] == 12
    seg = Archive(settings.archive_path).segments()[0]
    path = settings.archive_path / seg.file
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(ops.CommandError, match=f"archive segment {path} is corrupt"):
        ops.verify_archive(settings)
    with pytest.raises(ops.CommandError, match=str(path)):
        list(ops.export(settings))
