"""``memstream archive``, ``export`` and ``stats`` from the command line, on a real Valkey."""

from __future__ import annotations

import json

import pytest
import redis
from pipeline_support import make_pipeline, turn

from memstream import cli
from memstream.core.settings import Settings
from memstream.producers.stream import EventLog
from memstream.projections import group_names

pytestmark = pytest.mark.valkey


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def log(valkey_server, monkeypatch, tmp_path):
    """The configured log (MEMSTREAM_REDIS_URL), with 20 turns every projection applied."""
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", valkey_server.url)
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    eventlog = EventLog(client, Settings.load().stream_prefix)
    pipeline = make_pipeline(tmp_path / "pipe-home", eventlog)
    try:
        eventlog.append([turn(f"The nightly backup of database {i} runs at 2am", index=i) for i in range(20)])
        pipeline.drain()
    finally:
        pipeline.stop()
    yield eventlog
    client.close()


def test_archive_reports_progress_and_what_it_did_and_export_reads_the_same_log(log, capsys):
    code, before, _ = run(capsys, "export")
    assert code == 0 and len(before.splitlines()) == 20
    code, out, err = run(capsys, "archive", "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-2] == {"progress": f"archive {log.stream_keys[0]}", "done": 20, "total": 20}
    result = lines[-1]
    assert result["archived"] == 20 and result["trimmed"] == 19 and result["segments"] == 1
    assert result["directory"] == str(Settings.load().archive_path)
    assert run(capsys, "export")[1] == before
    code, out, _ = run(capsys, "stats")
    assert code == 0
    assert f"{log.stream_keys[0]}: 1 event, " in out and "in Redis; archived 20 events" in out and "in 1 segment (" in out
    # the trim keeps the boundary entry: stats says it is in both, and counts what export does
    assert "; 1 entry in both, 20 events in all" in out
    code, out, _ = run(capsys, "archive", "--verify")
    assert code == 0 and "1 segment, 20 events" in out and "every file matches its sha256" in out


def test_export_since_counts_in_agreement(log, capsys):
    code, out, err = run(capsys, "export")
    assert code == 0 and err.strip() == "memstream export: 20 events"
    last_but_one = json.loads(out.splitlines()[-2])["entry_id"]
    code, out, err = run(capsys, "export", "--since", last_but_one)
    assert code == 0 and len(out.splitlines()) == 1 and err.strip() == "memstream export: 1 event"


def test_archive_to_a_directory_given(log, capsys, tmp_path):
    code, out, _ = run(capsys, "archive", "--to", str(tmp_path / "elsewhere"), "--before", "2999-01-01T00:00Z")
    assert code == 0 and out.startswith("archived 20 events into 1 new segment ") and str(tmp_path / "elsewhere") in out
    assert (tmp_path / "elsewhere" / "manifest.json").exists()


def test_a_lagging_projection_makes_archive_fail_naming_it_and_touch_nothing(log, capsys):
    log.append([turn("Not applied by any projection yet")])
    code, out, err = run(capsys, "archive", "--before", "2999-01-01")
    assert code == 1 and out == ""
    assert err.startswith("memstream archive: error: nothing archived: consumer group ")
    for group in group_names():  # every one of them is behind, each named with how far
        assert f"consumer group {group} on {log.stream_keys[0]} has not applied every entry" in err
    assert err.count("lag 1") == len(group_names())
    assert log.client.xlen(log.stream_keys[0]) == 21
    assert not (Settings.load().archive_path / "manifest.json").exists()


def test_a_point_that_is_no_id_or_date_is_a_usage_error(capsys):
    code, _, err = run(capsys, "archive", "--before", "last tuesday")
    assert code == 2 and "argument --before: 'last tuesday' is neither a log entry id" in err
