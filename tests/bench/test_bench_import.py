"""``memstream bench import`` on a tiny workload: the synthetic history is one the importer
reads whole, and the figures add up."""

import sqlite3

import pytest

from memstream.bench.imports import format_import, import_bench, make_history
from memstream.producers import TurnRecorded, read_hermes


@pytest.mark.parametrize("messages", [1, 2, 203, 204, 205])
def test_the_synthetic_history_has_the_messages_asked_for_and_reads_as_its_turns(tmp_path, messages):
    counts = make_history(tmp_path / "home", messages)
    conn = sqlite3.connect(tmp_path / "home" / "state.db")
    assert counts["messages"] == messages == conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    conn.close()
    history = read_hermes(tmp_path / "home", tenant="bench")
    assert (history.sessions, history.memories) == (counts["sessions"], counts["memories"])
    turns = [e for e in history.events if isinstance(e, TurnRecorded)]
    assert len(turns) == history.turns == counts["turns"] and history.skipped == {}
    assert any(t.tool_calls for t in turns) or messages < 10


def test_the_import_bench_appends_every_event_once_and_reports_a_rate():
    result = import_bench(messages=300, runs=2)
    assert result["events"] == result["turns"] + result["sessions"] + result["memories"]
    assert result["again"]["appended"] == 0
    assert result["messages_per_s"] > 0 and len(result["per_run_messages_per_s"]) == 2
    assert "messages/s" in format_import(result)
