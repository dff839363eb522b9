"""Reading Hermes's history (``read_hermes``): what becomes an event, with which time, id
and scope, and every bad input rejected with its file and table, row or line."""

from __future__ import annotations

import os
import sqlite3
import uuid
from datetime import UTC, datetime

import pytest
from hermes_db import T0, StateDB, write_memories

from memstream.core import MAX_ID_BYTES
from memstream.core.ids import event_id_time_ms
from memstream.producers import (
    EVENT_TYPES,
    ImportFileError,
    MemoryWritten,
    SessionEnded,
    SessionSwitched,
    TurnRecorded,
    encode,
    read_hermes,
)
from memstream.workers import admission
from memstream.workers.admission import admit


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def of(history, cls):
    return [e for e in history.events if isinstance(e, cls)]


@pytest.fixture
def home(tmp_path):
    return tmp_path / "hermes-home"


@pytest.fixture
def db(home):
    state = StateDB(home)
    yield state
    state.close()


def test_each_answered_turn_is_a_turn_event_dated_by_its_answer_with_its_tool_calls(home, db):
    db.session(
        "s1", started_at=T0, source="telegram", user_id="u-1", ended_at=T0 + 100, end_reason="agent_close", message_count=7
    )
    db.turn("s1", "hello there", "ACK[hello there]", T0 + 1)
    db.message("s1", "user", "look it up", T0 + 10)
    db.message(
        "s1",
        "assistant",
        "",
        T0 + 11,
        tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "x"}'}}],
    )
    db.message("s1", "tool", "3 results", T0 + 12, tool_call_id="call_1", tool_name="web_search")
    db.message("s1", "assistant", "Found it.", T0 + 13)
    history = read_hermes(home, tenant="acme")
    turns = of(history, TurnRecorded)
    assert [(t.turn_index, t.user_text, t.assistant_text, t.occurred_at) for t in turns] == [
        (1, "hello there", "ACK[hello there]", at(T0 + 1.5)),
        (2, "look it up", "Found it.", at(T0 + 13)),
    ]
    [call] = turns[1].tool_calls
    assert (call.name, call.arguments, call.result, call.call_id) == ("web_search", '{"q": "x"}', "3 results", "call_1")
    assert {
        (t.scope.tenant, t.scope.app, t.scope.agent, t.scope.session_id, t.scope.platform, t.scope.user_id, t.author)
        for t in turns
    } == {("acme", "hermes", "default", "s1", "telegram", "u-1", "u-1")}
    [ended] = of(history, SessionEnded)
    assert (ended.occurred_at, ended.turn_count, ended.message_count) == (at(T0 + 100), 2, 7)
    assert (history.sessions, history.turns, history.session_ends, history.memories) == (1, 2, 1, 0)
    assert history.events == sorted(history.events, key=lambda e: e.occurred_at)


def test_ids_are_uuid7_carrying_the_original_time_and_the_same_on_every_read(home, db):
    db.session("s1", ended_at=T0 + 9)
    db.turn("s1", "hi", "hello", T0 + 1)
    write_memories(home, memory=["Deploys go out on Tuesdays"])
    first, again = read_hermes(home, tenant="acme"), read_hermes(home, tenant="acme")
    assert [e.id for e in first.events] == [e.id for e in again.events]
    assert len({e.id for e in first.events}) == 3
    for event in first.events:
        assert uuid.UUID(event.id).version == 7
        if not isinstance(event, MemoryWritten):
            assert event_id_time_ms(event.id) == int(event.occurred_at.timestamp() * 1000)
    # another tenant or agent: other events, other ids
    other = read_hermes(home, tenant="other")
    assert not {e.id for e in other.events} & {e.id for e in first.events}
    renamed = read_hermes(home, tenant="acme", agent="ops")
    assert {e.scope.agent for e in renamed.events} == {"ops"}
    assert not {e.id for e in renamed.events} & {e.id for e in first.events}


def test_the_agent_is_the_gateway_key_else_the_profile_else_default(home, db):
    db.session("gw", session_key="agent:main:telegram:dm:9", profile="work")
    db.session("prof", profile="work")
    db.session("plain")
    for sid in ("gw", "prof", "plain"):
        db.turn(sid, f"hi from {sid}", "hello", T0 + 1)
    agents = {t.scope.session_id: t.scope.agent for t in of(read_hermes(home, tenant="acme"), TurnRecorded)}
    assert agents == {"gw": "agent:main:telegram:dm:9", "prof": "work", "plain": "default"}


def test_rewound_messages_and_turns_without_an_answer_are_skipped_and_counted(home, db):
    db.session("s1")
    db.turn("s1", "taken back", "never mind", T0 + 1, active=0)  # rewound (/undo)
    db.turn("s1", "kept", "yes", T0 + 5)
    db.message("s1", "user", "interrupted", T0 + 8)  # no answer: interrupted
    db.turn("s1", "after", "fine", T0 + 9)
    db.message("s1", "user", "still running", T0 + 12)  # the last turn, in progress
    history = read_hermes(home, tenant="acme")
    assert [(t.turn_index, t.user_text) for t in of(history, TurnRecorded)] == [(1, "kept"), (3, "after")]
    assert history.skipped == {"rewound messages": 2, "turns without an answer (interrupted or in progress)": 2}


def test_a_compaction_summary_is_no_turn_and_the_turns_it_copied_are_read_once(home, db):
    db.session("s1")
    for i in range(4):  # archived by in-place compaction: history
        db.turn("s1", f"question {i}", f"answer {i}", T0 + 10 * i, active=0, compacted=1)
    db.message("s1", "user", "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted ...", T0 + 50)
    for i in (2, 3):  # the recent turns, copied after the summary
        db.turn("s1", f"question {i}", f"answer {i}", T0 + 51 + i)
    db.turn("s1", "question 4", "answer 4", T0 + 60)
    history = read_hermes(home, tenant="acme")
    assert [t.user_text for t in of(history, TurnRecorded)] == [f"question {i}" for i in range(5)]
    assert history.skipped == {"turns copied by compaction": 2}


def test_a_session_started_by_compression_switches_from_its_parent_and_its_copied_turns_are_read_once(home, db):
    db.session("old", started_at=T0, ended_at=T0 + 40, end_reason="compression")
    db.session("new", started_at=T0 + 41, parent="old")
    db.session("branch", started_at=T0 + 90, parent="new")
    for i in range(3):
        db.turn("old", f"q{i}", f"a{i}", T0 + 10 * i)
    db.message("new", "assistant", "[CONTEXT SUMMARY]: we talked", T0 + 41)
    db.turn("new", "q2", "a2", T0 + 42)  # the tail copied by the compression
    db.turn("new", "q3", "a3", T0 + 50)
    db.turn("branch", "q2", "a2", T0 + 91)  # not a compression child: a turn of its own
    history = read_hermes(home, tenant="acme")
    assert [(t.scope.session_id, t.user_text) for t in of(history, TurnRecorded)] == [
        ("old", "q0"),
        ("old", "q1"),
        ("old", "q2"),
        ("new", "q3"),
        ("branch", "q2"),
    ]
    switches = of(history, SessionSwitched)
    assert [(s.scope.session_id, s.parent_session_id, s.reason, s.reset, s.occurred_at) for s in switches] == [
        ("new", "old", "compression", False, at(T0 + 41)),
        ("branch", "new", "other", False, at(T0 + 90)),
    ]
    assert history.skipped == {"turns copied by compaction": 1}


def test_multimodal_content_is_read_as_its_text(home, db):
    db.session("s1")
    db.message("s1", "user", '\x00json:[{"type": "text", "text": "what is this?"}, {"type": "image_url"}]', T0)
    db.message("s1", "assistant", "a cat", T0 + 1)
    [turn] = of(read_hermes(home, tenant="acme"), TurnRecorded)
    assert turn.user_text.strip() == "what is this?"  # the text parts, joined as the provider joins them


def test_text_over_the_bound_is_clipped_and_flagged_as_the_hooks_do(home, db):
    db.session("s1")
    db.turn("s1", "x" * 5000, "short", T0)
    [turn] = of(read_hermes(home, tenant="acme", max_text_bytes=1000), TurnRecorded)
    assert turn.clipped == ["user_text"] and len(turn.user_text.encode()) <= 1000


def test_memory_entries_are_adds_dated_by_the_tool_call_that_wrote_them_else_by_the_file(home, db):
    db.session("s1", session_key="gw-1", source="telegram")
    db.memory_call(
        "s1", "call_7", T0 + 5, {"action": "add", "target": "user", "content": "User prefers green tea."}, {"success": True}
    )
    db.memory_call(
        "s1",
        "call_8",
        T0 + 6,
        {"target": "memory", "operations": [{"action": "add", "content": "Deploys go out on Tuesdays"}]},
        {"success": True},
    )
    db.memory_call(
        "s1", "call_9", T0 + 7, {"action": "add", "target": "memory", "content": "Staged only"}, {"success": True, "staged": True}
    )
    write_memories(
        home, memory=["Deploys go out on Tuesdays", "Staged only", "multi\nline entry"], user=["User prefers green tea."]
    )
    mtime = T0 + 1000
    for name in ("MEMORY.md", "USER.md"):
        os.utime(home / "memories" / name, (mtime, mtime))
    history = read_hermes(home, tenant="acme")
    memories = {(m.target, m.content): m for m in of(history, MemoryWritten)}
    assert set(memories) == {
        ("memory", "Deploys go out on Tuesdays"),
        ("memory", "Staged only"),
        ("memory", "multi\nline entry"),
        ("user", "User prefers green tea."),
    }
    tea = memories["user", "User prefers green tea."]
    assert (tea.action, tea.occurred_at, tea.tool_call_id, tea.scope.session_id, tea.scope.agent, tea.origin) == (
        "add",
        at(T0 + 5),
        "call_7",
        "s1",
        "gw-1",
        "hermes-import",
    )
    assert memories["memory", "Deploys go out on Tuesdays"].occurred_at == at(T0 + 6)
    for content in ("Staged only", "multi\nline entry"):  # no committed tool call: the file's time
        m = memories["memory", content]
        assert (m.occurred_at, m.tool_call_id, m.scope.session_id, m.scope.agent) == (at(mtime), "", "", "default")
    assert history.memories == 4
    assert all(event_id_time_ms(m.id) == 0 for m in memories.values())


def test_a_home_with_only_memory_files_imports_them(home):
    write_memories(home, user=["Name: Ada"])
    history = read_hermes(home, tenant="acme")
    assert not history.state_db and history.memories == 1 and history.sessions == 0


def test_every_event_read_is_admitted_by_the_projections(home, db):
    db.session("s1", ended_at=T0 + 50, parent=None)
    db.session("s2", started_at=T0 + 60, parent="s1")
    db.turn("s1", "é ünïcode ✓ \u200b", "ok", T0 + 1)
    db.turn("s2", "next", "ok", T0 + 61)
    write_memories(home, memory=["a note"])
    history = read_hermes(home, tenant="acme")
    assert {type(e) for e in history.events} == {TurnRecorded, SessionEnded, SessionSwitched, MemoryWritten}
    for event in history.events:
        tag = type(event).__struct_config__.tag
        assert tag in EVENT_TYPES
        verdict = admit({b"id": event.id.encode(), b"type": tag.encode(), b"data": encode(event)}, "g", 1 << 20)
        assert verdict.action == "apply", verdict.reason


def test_the_id_bound_is_admissions():
    assert MAX_ID_BYTES is admission.MAX_ID_BYTES  # one bound, core.ids's


# -- bad input: rejected with the file and the table, row or line -------------------------------
def test_a_file_that_is_no_database_is_rejected_naming_it(home):
    home.mkdir()
    (home / "state.db").write_bytes(b"not a database at all " * 100)
    with pytest.raises(
        ImportFileError,
        match=r"state\.db: table schema_version: unreadable: a corrupt or "
        r"non-SQLite file \(file is not a database\)",
    ):
        read_hermes(home, tenant="acme")


def test_a_database_corrupt_inside_is_rejected_naming_the_table(home, db):
    db.session("s1")
    for i in range(400):
        db.turn("s1", f"question {i} " + "x" * 200, "answer", T0 + i)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    page = 4096
    raw = bytearray((home / "state.db").read_bytes())
    assert len(raw) > 20 * page
    raw[10 * page : 20 * page] = b"\xa5" * (10 * page)  # pages in the middle: the messages' b-tree
    (home / "state.db").write_bytes(bytes(raw))
    with pytest.raises(ImportFileError, match=r"state\.db: table (sessions|messages): .*malformed"):
        read_hermes(home, tenant="acme")


def test_a_database_locked_by_another_process_is_rejected_naming_it(home, db):
    db.session("s1")
    db.conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.conn.execute("BEGIN IMMEDIATE")
    db.conn.execute("UPDATE sessions SET title = 'held' WHERE id = 's1'")
    db.conn.execute("COMMIT")  # in exclusive locking mode the lock stays held
    with pytest.raises(ImportFileError, match=r"state\.db: table schema_version: locked by another process"):
        read_hermes(home, tenant="acme", lock_wait=0.05)


@pytest.mark.parametrize(
    "version, says",
    [
        (23, "schema version 23 is not one memstream knows"),
        (0, "schema version 0 is not one memstream knows"),
        ("v22", "schema version 'v22' is not one memstream knows"),
        (None, "schema version None is not one memstream knows"),  # the table without its row
    ],
)
def test_an_unknown_schema_version_is_rejected_naming_the_table(home, version, says):
    db = StateDB(home, version=None)
    if version is not None:
        db.conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    db.close()
    with pytest.raises(ImportFileError, match=rf"state\.db: table schema_version: {says}"):
        read_hermes(home, tenant="acme")


def test_a_database_without_hermes_s_tables_or_columns_is_rejected_naming_the_table(home):
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    with pytest.raises(ImportFileError, match=r"table schema_version: missing"):
        read_hermes(home, tenant="acme")
    conn.execute("CREATE TABLE schema_version (version INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES (22)")
    conn.execute("CREATE TABLE sessions (id TEXT, source TEXT, started_at REAL)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, timestamp REAL)")
    conn.commit()
    conn.close()
    with pytest.raises(ImportFileError, match=r"table messages: has no column content"):
        read_hermes(home, tenant="acme")


def test_an_older_database_without_the_later_columns_is_read_with_their_defaults(home):
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.executescript("""
        CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (6);
        CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL, ended_at REAL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT,
                               timestamp REAL);
        INSERT INTO sessions VALUES ('s1', 'cli', 1790000000.0, NULL);
        INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'user', 'hi', 1790000001.0);
        INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'assistant', 'yo', 1790000002.0);
    """)
    conn.close()
    [turn] = of(read_hermes(home, tenant="acme"), TurnRecorded)
    assert (turn.user_text, turn.assistant_text, turn.scope.platform) == ("hi", "yo", "cli")


def test_a_row_with_a_value_of_the_wrong_type_is_rejected_naming_its_table_and_row(home, db):
    db.session("s1")
    db.turn("s1", "hi", "yo", T0)
    row = db.message("s1", "user", "when?", T0)
    db.conn.execute("UPDATE messages SET timestamp = 'yesterday' WHERE id = ?", (row,))
    with pytest.raises(ImportFileError, match=rf"table messages, row {row}: timestamp is 'yesterday', not a time"):
        read_hermes(home, tenant="acme")


def test_an_event_admission_would_refuse_is_rejected_naming_its_row(home, db):
    db.session("s" * (MAX_ID_BYTES + 1))
    db.turn("s" * (MAX_ID_BYTES + 1), "hi", "yo", T0)
    with pytest.raises(
        ImportFileError,
        match=r"table messages, row 1: its event would be refused by admission "
        rf"\(scope.session_id is over {MAX_ID_BYTES} bytes\)",
    ):
        read_hermes(home, tenant="acme")


def test_a_memory_file_that_is_not_utf8_is_rejected_naming_its_line(home):
    write_memories(home, memory=["fine"])
    (home / "memories" / "USER.md").write_bytes(b"first entry\n\xc2\xa7\nsecond \xff entry")
    with pytest.raises(ImportFileError, match=r"USER\.md: line 3: not UTF-8"):
        read_hermes(home, tenant="acme")
