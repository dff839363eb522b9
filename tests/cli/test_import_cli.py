"""``memstream import hermes|jsonl`` on the command line: progress and the result as JSON
lines with ``--json``, counts for people without, a rejected file one error line (exit 1)."""

from __future__ import annotations

import json

import fakeredis
import pytest
from hermes_db import T0, StateDB, write_memories

from memstream import cli
from memstream.producers import EventLog


@pytest.fixture
def eventlog(monkeypatch):
    log = EventLog(fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    monkeypatch.setattr("memstream.ops.imports.connect", lambda settings: log)
    return log


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "hermes-home"
    db = StateDB(home)
    db.session("s1", ended_at=T0 + 30)
    db.turn("s1", "hello there", "ACK[hello there]", T0 + 1)
    db.close()
    write_memories(home, user=["User prefers green tea."])
    return home


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_hermes_json_prints_progress_lines_then_the_result(capsys, eventlog, home):
    code, out, err = run(capsys, "import", "hermes", "--home", str(home), "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0] == {"progress": "import hermes", "done": 0, "total": 3}
    assert {k: v for k, v in lines[-2].items() if k != "rate"} == {"progress": "import hermes", "done": 3, "total": 3}
    assert lines[-2]["rate"] > 0
    result = lines[-1]
    assert (result["turns"], result["memories"], result["session_ends"], result["appended"]) == (1, 1, 1, 3)


def test_import_hermes_says_what_it_appended_and_skipped_and_a_dry_run_that_it_wrote_nothing(capsys, eventlog, home):
    code, out, _ = run(capsys, "import", "hermes", "--home", str(home), "--dry-run")
    assert code == 0 and out.strip().endswith("would append 3 (dry run: nothing written)")
    assert list(eventlog.entries()) == []
    code, out, _ = run(capsys, "import", "hermes", "--home", str(home), "--agent", "ops", "--tenant", "beta")
    assert code == 0
    assert out.strip() == (f"{home}: 1 session, 1 turn, 1 memory, 1 session end, 0 session switches: 3 events; appended 3")
    code, out, _ = run(capsys, "import", "hermes", "--home", str(home), "--agent", "ops", "--tenant", "beta")
    assert out.strip().endswith("appended 0; skipped 3 already in the log")


def test_a_rejected_file_is_one_error_line_naming_it_and_nothing_is_appended(capsys, eventlog, tmp_path):
    bad = tmp_path / "export.jsonl"
    bad.write_text('{"type": "turn.recorded", "id": "x"\n')
    code, out, err = run(capsys, "import", "jsonl", str(bad))
    assert code == 1 and out == ""
    assert err.strip().startswith(f"memstream import: error: {bad}: line 1: ")
    assert err.strip().endswith("; nothing was imported") and len(err.strip().splitlines()) == 1
    assert list(eventlog.entries()) == []


def test_import_needs_its_source(capsys):
    code, _, err = run(capsys, "import")
    assert code == 2 and "hermes" in err and "jsonl" in err
