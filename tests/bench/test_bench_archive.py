"""`memstream bench archive` on a tiny workload: every figure is there and adds up. Timings
are reported by the benchmark, never asserted here."""

from __future__ import annotations

import pytest

from memstream.bench.archive import archive_bench, format_archive


@pytest.mark.valkey
def test_bench_archive_archives_every_event_frees_the_stream_and_reads_it_all_back():
    result = archive_bench(events=300)
    assert result["stream_read"]["events"] == 300
    assert result["archive"]["events"] == 300 and result["archive"]["trimmed"] == 299  # the last delivered stays
    assert result["redis"]["stream_length_after"] == 1
    assert result["redis"]["stream_after"] < result["redis"]["stream_before"]
    assert 0 < result["archive"]["disk_bytes"] < result["archive"]["raw_bytes"]
    assert result["history"] == {**result["history"], "events": 300, "matches": True}
    text = format_archive(result)
    assert "events/s" in text and "the ids appended, in order: yes" in text
