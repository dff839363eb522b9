"""``memstream import``'s work (``import_hermes``, ``import_jsonl``) on fakeredis and a real
Valkey: what is appended, that a second import appends nothing, that a dry run writes
nothing, and that a rejected file appends nothing at all."""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import UTC, datetime

import fakeredis
import msgspec
import pytest
import redis
from hermes_db import T0, StateDB, write_memories

from memstream.ops import CommandError, export, import_hermes, import_jsonl
from memstream.producers import EventLog, MemoryWritten, Scope, SessionEnded, TurnRecorded, to_builtins


@pytest.fixture
def log_of(monkeypatch, event_log):
    """The commands' log is the test's ``event_log``."""
    monkeypatch.setattr("memstream.ops.imports.connect", lambda settings: event_log)
    monkeypatch.setattr(sys.modules["memstream.ops.export"], "connect", lambda settings: event_log)
    return event_log


def events_in(eventlog: EventLog) -> list:
    return [eventlog.decode_entry(fields) for _, _, fields in eventlog.entries()]


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "hermes-home"
    db = StateDB(home)
    db.session("s1", started_at=T0, ended_at=T0 + 30, end_reason="agent_close", message_count=4)
    db.turn("s1", "hello there", "ACK[hello there]", T0 + 1)
    db.turn("s1", "what do I like?", "green tea", T0 + 10)
    db.session("s2", started_at=T0 + 40)
    db.turn("s2", "next session", "ok", T0 + 41)
    db.close()
    write_memories(home, memory=["Deploys go out on Tuesdays"], user=["User prefers green tea."])
    return home


def test_hermes_history_is_appended_with_its_counts_and_a_second_import_appends_nothing(settings, log_of, home):
    progress = []
    result = import_hermes(settings, home, progress=lambda done, total: progress.append((done, total)))
    assert {
        k: result[k]
        for k in ("sessions", "turns", "memories", "session_ends", "session_switches", "events", "new", "appended", "skipped")
    } == {
        "sessions": 2,
        "turns": 3,
        "memories": 2,
        "session_ends": 1,
        "session_switches": 0,
        "events": 6,
        "new": 6,
        "appended": 6,
        "skipped": {},
    }
    assert progress[0] == (0, 6) and progress[-1] == (6, 6)
    events = events_in(log_of)
    assert [type(e) for e in events].count(TurnRecorded) == 3
    assert {type(e) for e in events} == {TurnRecorded, SessionEnded, MemoryWritten}
    assert [e.user_text for e in events if isinstance(e, TurnRecorded)] == ["hello there", "what do I like?", "next session"]
    assert all(e.scope.tenant == settings.tenant for e in events)
    again = import_hermes(settings, home)
    assert (again["new"], again["appended"], again["skipped"]) == (0, 0, {"already in the log": 6})
    assert events_in(log_of) == events


def test_only_what_the_log_lacks_is_appended_when_history_grew(settings, log_of, home):
    import_hermes(settings, home)
    db = StateDB.__new__(StateDB)  # the same database, one more turn
    db.conn = sqlite3.connect(home / "state.db", isolation_level=None)
    db.turn("s2", "one more", "sure", T0 + 50)
    db.close()
    result = import_hermes(settings, home)
    assert (result["turns"], result["appended"], result["skipped"]) == (4, 1, {"already in the log": 6})


def test_tenant_and_agent_given_scope_every_event(settings, log_of, home):
    import_hermes(settings, home, tenant="beta", agent="ops")
    assert {(e.scope.tenant, e.scope.agent) for e in events_in(log_of)} == {("beta", "ops")}


def test_a_dry_run_counts_and_writes_nothing(settings, log_of, home, redis_client):
    result = import_hermes(settings, home, dry_run=True)
    assert (result["dry_run"], result["events"], result["new"], result["appended"]) == (True, 6, 6, 0)
    assert redis_client.keys("*") == []


def _corrupt(home):
    (home / "state.db").write_bytes(b"garbage" * 1000)
    for side in ("state.db-wal", "state.db-shm"):
        (home / side).unlink(missing_ok=True)


def _unknown_schema(home):
    conn = sqlite3.connect(home / "state.db")
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()


def _bad_memory_file(home):
    (home / "memories" / "USER.md").write_bytes(b"ok\n\xc2\xa7\n\xfe")


@pytest.mark.parametrize(
    "damage, says",
    [
        (_corrupt, r"state\.db: table schema_version: unreadable"),
        (_unknown_schema, r"state\.db: table schema_version: schema version 99 is not one memstream knows"),
        (_bad_memory_file, r"USER\.md: line 3: not UTF-8"),
    ],
    ids=["corrupt", "unknown-schema", "memory-file"],
)
def test_a_rejected_file_appends_nothing_of_the_history(settings, log_of, home, damage, says):
    damage(home)
    with pytest.raises(CommandError, match=says + r".*; nothing was imported"):
        import_hermes(settings, home)
    assert events_in(log_of) == []


def test_a_locked_state_db_appends_nothing(settings, log_of, home, monkeypatch):
    from memstream.producers import importers

    real = importers.hermes.read_hermes
    monkeypatch.setattr(importers, "read_hermes", lambda *a, **kw: real(*a, **{**kw, "lock_wait": 0.05}))
    conn = sqlite3.connect(home / "state.db", isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE sessions SET title = 'held' WHERE id = 's1'")
    conn.execute("COMMIT")
    try:
        with pytest.raises(CommandError, match=r"state\.db: table schema_version: locked by another process"):
            import_hermes(settings, home)
    finally:
        conn.close()
    assert events_in(log_of) == []


def test_a_missing_home_or_one_without_history_is_a_command_error(settings, log_of, tmp_path):
    with pytest.raises(CommandError, match="no Hermes home at"):
        import_hermes(settings, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="nothing to import in"):
        import_hermes(settings, tmp_path / "empty")


# -- jsonl -----------------------------------------------------------------------------------------
@pytest.fixture
def other_log(redis_client, settings):
    """A second, empty log: another fakeredis server, or another database of the Valkey."""
    if redis_client.connection_url is None:
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(redis_client.connection_url.rsplit("/", 1)[0] + "/1")
    yield EventLog(client, settings.stream_prefix, settings.shards)
    client.close()


def _export_file(settings, path):
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in export(settings)), encoding="utf-8")
    return path


def test_an_export_imported_into_an_empty_log_gives_the_same_events_in_the_same_order(
    settings, log_of, home, other_log, tmp_path, monkeypatch
):
    import_hermes(settings, home)
    log_of.append(
        [
            TurnRecorded(
                id="hand-made-1",
                occurred_at=events_in(log_of)[0].occurred_at,
                scope=events_in(log_of)[0].scope,
                turn_index=9,
                user_text="by hand",
                assistant_text="ok",
            )
        ]
    )
    path = _export_file(settings, tmp_path / "export.jsonl")
    monkeypatch.setattr("memstream.ops.imports.connect", lambda settings: other_log)
    result = import_jsonl(settings, path)
    assert (result["events"], result["appended"], result["skipped"]) == (7, 7, {})

    def entries(eventlog):
        return [(fields[b"id"], fields[b"type"], fields[b"data"]) for _, _, fields in eventlog.entries()]

    assert entries(other_log) == entries(log_of)
    again = import_jsonl(settings, path)
    assert (again["appended"], again["skipped"]) == (0, {"already in the log": 7})


def test_a_jsonl_file_with_a_bad_line_appends_nothing(settings, log_of, home, other_log, tmp_path, monkeypatch):
    import_hermes(settings, home)
    path = _export_file(settings, tmp_path / "export.jsonl")
    path.write_text(path.read_text()[:-40])  # the last line cut short
    monkeypatch.setattr("memstream.ops.imports.connect", lambda settings: other_log)
    with pytest.raises(CommandError, match=r"export\.jsonl: line 6: cut short .*; nothing was imported"):
        import_jsonl(settings, path)
    assert events_in(other_log) == []


def test_a_jsonl_file_repeating_an_event_appends_it_once(settings, log_of, home, other_log, tmp_path, monkeypatch):
    import_hermes(settings, home)
    path = _export_file(settings, tmp_path / "export.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[:2]))
    monkeypatch.setattr("memstream.ops.imports.connect", lambda settings: other_log)
    result = import_jsonl(settings, path)
    assert (result["events"], result["appended"], result["skipped"]) == (8, 6, {"repeated in the input": 2})


# --- through the log's door: what an import appends is redacted and clipped -------------------

PASTED = "ghp_Zq8xR2vB7nK4mW1pT6yH3cJ9dF5gL0sA2eUu"  # made up, in GitHub's format


def _raw(eventlog: EventLog) -> bytes:
    return b"".join(v for _, _, fields in eventlog.entries() for v in fields.values() if isinstance(v, bytes))


def test_a_hermes_import_appends_its_turns_and_memory_files_redacted(log_of, settings, tmp_path):
    home = tmp_path / "hermes-secret"
    db = StateDB(home)
    db.session("s1", started_at=T0, ended_at=T0 + 30, end_reason="agent_close", message_count=2)
    db.turn("s1", f"deploy with token {PASTED} please", "done", T0 + 1)
    db.close()
    write_memories(home, memory=[f"The CI token is {PASTED}"], user=["mot de passe: x"])
    assert import_hermes(settings, home)["appended"] >= 2
    raw = _raw(log_of)
    assert PASTED.encode() not in raw and b"[REDACTED:github_token]" in raw


def test_an_export_file_import_appends_redacted_and_clipped_events(log_of, settings, tmp_path):
    small = msgspec.structs.replace(settings, max_text_bytes=200)
    event = MemoryWritten(
        id="0190c1a2-0000-7000-8000-000000000001",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        scope=Scope(tenant=settings.tenant, agent="a1"),
        action="add",
        target="memory",
        content=f"the npm token {PASTED} " + "and more " * 100,
    )
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps(to_builtins(event)) + "\n", encoding="utf-8")
    assert import_jsonl(small, path)["appended"] == 1
    [stored] = events_in(log_of)
    assert PASTED not in stored.content and "[REDACTED:github_token]" in stored.content
    assert len(stored.content.encode()) <= 200 and stored.clipped == ["content"]
    assert PASTED.encode() not in _raw(log_of)
