"""Hermes Agent's own history as events: the sessions and messages of its ``state.db`` and
the entries of its memory files (``memories/MEMORY.md``, ``memories/USER.md``).

What becomes what:

* each user turn of a session (a user message and what follows it up to the next one)
  whose final answer was given becomes a ``TurnRecorded``, dated by that answer, with
  the turn's tool calls in brief, as the provider records a live turn. Rewound messages
  (``active = 0``, not compacted) are left out; messages archived by compaction
  (``compacted = 1``) are history and read. A compaction summary is not a turn, and the
  turns a compaction copied (the leading turns after a summary, or of a session a
  compression started, that repeat the turns before) are read once;
* a session with a parent (compression, branch) gets a ``SessionSwitched`` at its start;
  an ended session a ``SessionEnded`` at its end;
* each entry of a memory file (entries separated by ``\\n§\\n`` as Hermes's memory tool
  writes them) becomes a ``MemoryWritten`` add, dated by the ``memory`` tool call of the
  transcript that wrote that text, else by the file's modification time.

Identity: every event's id is ``derived_event_id`` of what it imports (tenant, agent and
the item: a turn's session, the time and text of its user message; a session end's time;
a memory entry's file and text), so reading the same history again gives the same ids.
A memory entry has no time of its own: its id's time part is 0, and its id does not
change when the session that wrote it is deleted.

Guarantee: ``read_hermes`` reads everything first and raises ``ImportFileError`` naming
the file and the table (and row) or line of the first problem: a file that is no SQLite
database or is corrupt, a database locked longer than ``lock_wait`` seconds, a schema
version or shape this reader does not know, a value of the wrong type, a memory file that
is not UTF-8, an event admission would refuse. It opens ``state.db`` read-only, in one
read transaction (a consistent snapshot while Hermes runs), and writes nothing.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator

from memstream.core import derived_event_id
from memstream.producers.events import (
    Event,
    MemoryTarget,
    MemoryWritten,
    Scope,
    SessionEnded,
    SessionSwitched,
    SwitchReason,
    ToolCall,
    TurnRecorded,
)
from memstream.producers.importers.checks import ImportFileError, check_event
from memstream.producers.importers.hermes_schema import HERMES_SCHEMA_VERSION
from memstream.producers.transcript import message_text, tool_calls_of
from memstream.text import clean_text

__all__ = ["HermesHistory", "read_hermes", "HERMES_SCHEMA_VERSIONS", "STATE_DB", "MEMORY_FILES", "ENTRY_DELIMITER"]

STATE_DB = "state.db"
MEMORY_DIR = "memories"
MEMORY_FILES: tuple[tuple[str, MemoryTarget], ...] = (("MEMORY.md", "memory"), ("USER.md", "user"))
ENTRY_DELIMITER = "\n§\n"  # Hermes's tools/memory_tool.py
# the schema_version values of state.db this reader knows: every one up to hermes-agent
# 0.19.0's (a newer Hermes may change what the columns mean)
HERMES_SCHEMA_VERSIONS = range(1, HERMES_SCHEMA_VERSION + 1)
ORIGIN = "hermes-import"
_CONTENT_JSON_PREFIX = "\x00json:"  # Hermes's encoding of multimodal content (a JSON list)
# the first words of a compaction summary (agent/context_compressor.py), current and legacy
_SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
_SWITCH_REASONS: dict[str, SwitchReason] = {  # the parent's end_reason -> why the session switched
    "compression": "compression",
    "branched": "branch",
    "new_session": "new_session",
    "session_reset": "new_session",
    "resumed_other": "resume",
}
_MAX_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: datetime's bound

# columns read: (name, required). A column a database lacks and does not require reads
# as its default (an older Hermes created it later).
_SESSION_COLUMNS = (
    ("id", True),
    ("source", False),
    ("user_id", False),
    ("session_key", False),
    ("parent_session_id", False),
    ("started_at", True),
    ("ended_at", False),
    ("end_reason", False),
    ("message_count", False),
    ("profile_name", False),
)
_MESSAGE_COLUMNS = (
    ("id", True),
    ("session_id", True),
    ("role", True),
    ("content", True),
    ("tool_call_id", False),
    ("tool_calls", False),
    ("timestamp", True),
    ("active", False),
    ("compacted", False),
)
_DEFAULTS = {"active": "1", "compacted": "0"}


@dataclass
class HermesHistory:
    """What ``read_hermes`` found: the events (oldest first) and the counts."""

    events: list[Event] = field(default_factory=list)
    sessions: int = 0
    turns: int = 0
    memories: int = 0
    session_ends: int = 0
    session_switches: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    state_db: bool = False
    memory_files: list[str] = field(default_factory=list)

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n


@dataclass
class _Session:
    id: str
    source: str = ""
    user_id: str = ""
    session_key: str = ""
    parent: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    end_reason: str = ""
    message_count: int | None = None
    profile: str = ""


@dataclass
class _Message:
    id: int
    session_id: str
    role: str
    text: str
    tool_call_id: str
    tool_calls: list[Any]
    timestamp: float
    live: bool  # active, or archived by compaction: history; False: rewound

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.text, "tool_calls": self.tool_calls, "tool_call_id": self.tool_call_id}


@dataclass
class _Turn:
    user: _Message
    segment: int  # 0, then one more after each compaction summary
    span: list[_Message] = field(default_factory=list)

    @property
    def answer(self) -> _Message | None:
        for m in reversed(self.span):
            if m.role == "assistant" and m.text.strip():
                return m
        return None

    @property
    def key(self) -> tuple[str, str]:
        answer = self.answer
        return self.user.text, answer.text if answer is not None else ""


@dataclass(frozen=True)
class _Write:
    """A memory tool write found in a transcript: when, in which session, which call."""

    at: float
    session_id: str
    call_id: str


def read_hermes(
    home: str | Path,
    *,
    tenant: str,
    app: str = "hermes",
    agent: str | None = None,
    max_text_bytes: int = 262144,
    lock_wait: float = 5.0,
) -> HermesHistory:
    """The history under the Hermes home ``home`` as events for ``tenant`` (``app``);
    ``agent`` for every event, else each session's as the provider resolves it (the
    gateway's session key, else the profile, else ``default``). Text is clipped to
    ``max_text_bytes`` as the hooks clip it. See the module doc."""
    home = Path(home)
    out = HermesHistory()
    sessions: dict[str, _Session] = {}
    messages: list[_Message] = []
    db = home / STATE_DB
    if db.exists():
        out.state_db = True
        sessions, messages = _read_state_db(db, lock_wait)
    out.sessions = len(sessions)
    writes = _memory_writes(messages)
    builder = _Builder(tenant, app, agent, max_text_bytes)
    for session_events in _session_events(db, sessions, messages, builder, out):
        out.events.extend(session_events)
    for name, target in MEMORY_FILES:
        path = home / MEMORY_DIR / name
        if not path.exists():
            continue
        out.memory_files.append(str(path))
        for n, (entry, ordinal) in enumerate(_entries(path), 1):
            write = writes.get((target, entry))
            session = sessions.get(write.session_id) if write is not None else None
            at = write.at if write is not None else path.stat().st_mtime
            scope_agent = builder.agent_of(session) if session is not None else (agent or "default")
            text, problems = clean_text(entry, max_text_bytes)
            event = MemoryWritten(
                id=derived_event_id(0, "hermes", "memory", tenant, scope_agent, target, entry, ordinal),
                occurred_at=_utc(at),
                scope=builder.scope(session, scope_agent),
                clipped=["content"] if "clipped" in problems else [],
                action="add",
                target=target,
                content=text,
                tool_call_id=write.call_id if write is not None else "",
                origin=ORIGIN,
            )
            _checked(event, str(path), f"entry {n}")
            out.events.append(event)
            out.memories += 1
    out.events.sort(key=lambda e: e.occurred_at)  # stable: a session's own order is kept on ties
    return out


# -- state.db ----------------------------------------------------------------------------------
def _read_state_db(path: Path, lock_wait: float) -> tuple[dict[str, _Session], list[_Message]]:
    name = str(path)
    table = "schema_version"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=lock_wait, isolation_level=None)
    except sqlite3.Error as exc:
        raise ImportFileError(name, "", f"cannot open it ({exc})") from None
    try:
        conn.execute("BEGIN")  # one snapshot of every table, while Hermes may be writing
        _check_version(conn, name)
        table = "sessions"
        columns = _columns(conn, name, table, _SESSION_COLUMNS)
        sessions: dict[str, _Session] = {}
        for row in conn.execute(f"SELECT {columns} FROM sessions ORDER BY started_at, id"):
            session = _session(name, row)
            sessions[session.id] = session
        table = "messages"
        columns = _columns(conn, name, table, _MESSAGE_COLUMNS)
        messages = [_message(name, row) for row in conn.execute(f"SELECT {columns} FROM messages ORDER BY id")]
        conn.execute("COMMIT")
        return sessions, messages
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise ImportFileError(
                name,
                f"table {table}",
                f"locked by another process for over {lock_wait:g} s ({exc}): try again when Hermes is idle",
            ) from None
        raise ImportFileError(name, f"table {table}", f"cannot be read ({exc})") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        raise ImportFileError(name, f"table {table}", f"unreadable: a corrupt or non-SQLite file ({exc})") from None
    finally:
        conn.close()


def _check_version(conn: sqlite3.Connection, name: str) -> None:
    where = "table schema_version"
    known = f"{HERMES_SCHEMA_VERSIONS.start} to {HERMES_SCHEMA_VERSIONS.stop - 1}, Hermes up to 0.19.0"
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if exists is None:
        raise ImportFileError(name, where, f"missing: not a Hermes state.db of a schema memstream knows ({known})")
    row = conn.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
    version = row[0] if row is not None else None
    if isinstance(version, bool) or not isinstance(version, int) or version not in HERMES_SCHEMA_VERSIONS:
        raise ImportFileError(name, where, f"schema version {version!r} is not one memstream knows ({known})")


def _columns(conn: sqlite3.Connection, name: str, table: str, wanted: tuple[tuple[str, bool], ...]) -> str:
    have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    if not have:
        raise ImportFileError(name, f"table {table}", "missing: not a Hermes state.db")
    missing = [c for c, required in wanted if required and c not in have]
    if missing:
        raise ImportFileError(
            name, f"table {table}", f"has no column {', '.join(missing)}: not a Hermes state.db of a schema memstream knows"
        )
    return ", ".join(c if c in have else f"{_DEFAULTS.get(c, 'NULL')} AS {c}" for c, _ in wanted)


def _text(value: Any, name: str, where: str, column: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ImportFileError(name, where, f"{column} is {type(value).__name__}, not text")
    return value


def _time(value: Any, name: str, where: str, column: str, *, required: bool = True) -> float | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= _MAX_TIME):
        raise ImportFileError(name, where, f"{column} is {value!r}, not a time (seconds since 1970)")
    return float(value)


def _session(name: str, row: tuple[Any, ...]) -> _Session:
    sid, source, user_id, key, parent, started, ended, reason, count, profile = row
    where = f"table sessions, row {sid!r}"
    sid = _text(sid, name, where, "id", required=True)
    if not sid.strip():
        raise ImportFileError(name, where, "id is empty")
    return _Session(
        id=sid,
        source=_text(source, name, where, "source"),
        user_id=_text(user_id, name, where, "user_id"),
        session_key=_text(key, name, where, "session_key"),
        parent=_text(parent, name, where, "parent_session_id"),
        started_at=_time(started, name, where, "started_at", required=False),
        ended_at=_time(ended, name, where, "ended_at", required=False),
        end_reason=_text(reason, name, where, "end_reason"),
        message_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        profile=_text(profile, name, where, "profile_name"),
    )


def _message(name: str, row: tuple[Any, ...]) -> _Message:
    mid, sid, role, content, call_id, calls, ts, active, compacted = row
    where = f"table messages, row {mid}"
    if isinstance(mid, bool) or not isinstance(mid, int):
        raise ImportFileError(name, where, f"id is {mid!r}, not a row number")
    text = _text(content, name, where, "content")
    if text.startswith(_CONTENT_JSON_PREFIX):  # multimodal parts: their text
        try:
            text = message_text({"content": json.loads(text[len(_CONTENT_JSON_PREFIX) :])})
        except ValueError:
            pass  # Hermes reads such content as the raw string too
    try:
        parsed = json.loads(calls) if isinstance(calls, str) and calls else []
    except ValueError:
        parsed = []  # as Hermes reads it: unreadable tool calls are none
    timestamp = _time(ts, name, where, "timestamp")
    assert timestamp is not None  # required
    return _Message(
        id=mid,
        session_id=_text(sid, name, where, "session_id", required=True),
        role=_text(role, name, where, "role", required=True),
        text=text,
        tool_call_id=_text(call_id, name, where, "tool_call_id"),
        tool_calls=parsed if isinstance(parsed, list) else [],
        timestamp=timestamp,
        live=active is None or active == 1 or compacted == 1,
    )


def _memory_writes(messages: list[_Message]) -> dict[tuple[str, str], _Write]:
    """(target, text) -> the first successful ``memory`` tool call that added or replaced
    an entry with that text (every message: a rewind does not undo a memory write)."""
    pending: dict[str, tuple[_Message, list[tuple[str, str]]]] = {}
    writes: dict[tuple[str, str], _Write] = {}
    for m in messages:
        if m.role == "assistant":
            for call in m.tool_calls:
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or fn.get("name") != "memory" or not call.get("id"):
                    continue
                ops = _memory_ops(fn.get("arguments"))
                if ops:
                    pending[str(call["id"])] = (m, ops)
        elif m.role == "tool" and m.tool_call_id in pending:
            called, ops = pending.pop(m.tool_call_id)
            if not _succeeded(m.text):
                continue
            for key in ops:
                known = writes.get(key)
                if known is None or called.timestamp < known.at:
                    writes[key] = _Write(called.timestamp, called.session_id, m.tool_call_id)
    return writes


def _memory_ops(arguments: Any) -> list[tuple[str, str]]:
    """(target, text) of each add or replace of a ``memory`` tool call's arguments (one
    operation, or a batch of ``operations`` on one target)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return []
    if not isinstance(args, dict):
        return []
    target = args.get("target")
    if target not in ("memory", "user"):
        return []
    ops = args.get("operations")
    listed = ops if isinstance(ops, list) else [args]
    out = []
    for op in listed:
        if isinstance(op, dict) and op.get("action") in ("add", "replace") and isinstance(op.get("content"), str):
            if op["content"].strip():
                out.append((str(target), op["content"].strip()))
    return out


def _succeeded(result: str) -> bool:
    """Whether a memory tool result says the write was committed (not refused, not staged)."""
    try:
        answer = json.loads(result)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("success") is True and not answer.get("staged")


# -- turns and sessions -------------------------------------------------------------------------
def _turns(messages: list[_Message]) -> list[_Turn]:
    """The user turns of one session's messages (in row order)."""
    turns: list[_Turn] = []
    current: _Turn | None = None
    segment = 0
    for m in messages:
        if m.text.startswith(_SUMMARY_PREFIXES):
            current = None
            segment += 1
        elif m.role == "user":
            current = _Turn(m, segment)
            turns.append(current)
        elif current is not None:
            current.span.append(m)
    return turns


def _copied(before: list[tuple[str, str]], turns: list[_Turn]) -> int:
    """How many of ``turns``' leading turns repeat the last turns of ``before`` (a
    compaction's copy of the recent turns)."""
    if not before or not turns:
        return 0
    keys = [t.key for t in turns]
    best = 0
    for k in range(min(len(before), len(keys)), 0, -1):
        if before[-k] == keys[0] and before[-k:] == keys[:k]:
            best = k
            break
    return best


class _Builder:
    """Scopes and events of one import."""

    def __init__(self, tenant: str, app: str, agent: str | None, max_text_bytes: int) -> None:
        self.tenant, self.app, self.agent, self.max_text_bytes = tenant, app, agent, max_text_bytes

    def agent_of(self, session: _Session | None) -> str:
        if self.agent:
            return self.agent
        if session is None:
            return "default"
        return session.session_key.strip() or session.profile.strip() or "default"

    def scope(self, session: _Session | None, agent: str) -> Scope:
        if session is None:
            return Scope(tenant=self.tenant, app=self.app, agent=agent)
        return Scope(
            tenant=self.tenant, app=self.app, agent=agent, user_id=session.user_id, session_id=session.id, platform=session.source
        )


def _session_events(
    db: Path, sessions: dict[str, _Session], messages: list[_Message], b: _Builder, out: HermesHistory
) -> Iterator[list[Event]]:
    name = str(db)
    by_session: dict[str, list[_Message]] = {}
    for m in messages:
        if m.live:
            by_session.setdefault(m.session_id, []).append(m)
        else:
            out.skip("rewound messages")
    for sid in by_session:
        if sid not in sessions:  # messages of a session without its row: read with what they say
            sessions[sid] = _Session(id=sid)
    turns_of = {sid: _turns(msgs) for sid, msgs in by_session.items()}
    for session in sessions.values():
        agent = b.agent_of(session)
        scope = b.scope(session, agent)
        events: list[Event] = []
        turns = turns_of.get(session.id, [])
        parent = sessions.get(session.parent) if session.parent else None
        before = (
            [t.key for t in turns_of.get(parent.id, [])] if (parent is not None and parent.end_reason == "compression") else []
        )
        kept: list[_Turn] = []
        for segment in sorted({t.segment for t in turns}):
            part = [t for t in turns if t.segment == segment]
            copies = _copied(before, part)
            out.skip("turns copied by compaction", copies)
            kept += part[copies:]
            before = before + [t.key for t in part]
        if session.parent and session.started_at is not None:
            reason = _SWITCH_REASONS.get(parent.end_reason if parent is not None else "", "other")
            event: Event = SessionSwitched(
                id=derived_event_id(
                    _ms(session.started_at), "hermes", "session.switched", b.tenant, agent, session.id, session.parent
                ),
                occurred_at=_utc(session.started_at),
                scope=scope,
                reason=reason,
                parent_session_id=session.parent,
                reset=reason == "new_session",
            )
            _checked(event, name, f"table sessions, row {session.id!r}")
            events.append(event)
            out.session_switches += 1
        for index, turn in enumerate(kept, 1):
            answer = turn.answer
            if answer is None:
                out.skip("turns without an answer (interrupted or in progress)")
                continue
            user_text, p1 = clean_text(turn.user.text, b.max_text_bytes)
            answer_text, p2 = clean_text(answer.text, b.max_text_bytes)
            calls = [
                ToolCall(name=n, arguments=a, result=r, call_id=c)
                for n, a, r, c in tool_calls_of([m.as_dict() for m in turn.span])
            ]
            event = TurnRecorded(
                id=derived_event_id(
                    _ms(answer.timestamp),
                    "hermes",
                    "turn",
                    b.tenant,
                    agent,
                    session.id,
                    repr(turn.user.timestamp),
                    turn.user.text,
                ),
                occurred_at=_utc(answer.timestamp),
                scope=scope,
                clipped=[f for f, p in (("user_text", p1), ("assistant_text", p2)) if "clipped" in p],
                turn_index=index,
                user_text=user_text,
                assistant_text=answer_text,
                tool_calls=calls,
                author=session.user_id or "user",
            )
            _checked(event, name, f"table messages, row {turn.user.id}")
            events.append(event)
            out.turns += 1
        if session.ended_at is not None:
            event = SessionEnded(
                id=derived_event_id(
                    _ms(session.ended_at), "hermes", "session.ended", b.tenant, agent, session.id, repr(session.ended_at)
                ),
                occurred_at=_utc(session.ended_at),
                scope=scope,
                turn_count=len(kept),
                message_count=session.message_count if session.message_count is not None else len(by_session.get(session.id, [])),
            )
            _checked(event, name, f"table sessions, row {session.id!r}")
            events.append(event)
            out.session_ends += 1
        yield events


# -- memory files -------------------------------------------------------------------------------
def _entries(path: Path) -> list[tuple[str, int]]:
    """(entry, how many equal entries came before it) of a memory file, as Hermes splits it."""
    name = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFileError(name, "", f"cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportFileError(name, f"line {line}", f"not UTF-8 (invalid byte at offset {exc.start})") from None
    seen: dict[str, int] = {}
    out: list[tuple[str, int]] = []
    for entry in (e.strip() for e in text.split(ENTRY_DELIMITER)):
        if entry:
            out.append((entry, seen.get(entry, 0)))
            seen[entry] = seen.get(entry, 0) + 1
    return out


# -- helpers ------------------------------------------------------------------------------------
def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _ms(ts: float) -> int:
    return int(ts * 1000)


def _checked(event: Event, name: str, where: str) -> None:
    try:
        check_event(event)
    except ValueError as exc:
        raise ImportFileError(name, where, f"its event would be refused by admission ({exc})") from None
