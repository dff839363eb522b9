"""A Hermes home for the import tests without running Hermes: a ``state.db`` with Hermes's
own tables (``HERMES_SCHEMA_SQL``, what hermes-agent 0.19.0 creates) filled row by row, and
memory files written as Hermes's memory tool writes them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from memstream.producers import HERMES_SCHEMA_SQL, HERMES_SCHEMA_VERSION
from memstream.producers.importers import ENTRY_DELIMITER

T0 = 1_790_000_000.0  # 2026-09-21, a time every test starts from


class StateDB:
    """``state.db`` under ``home``, WAL as Hermes keeps it; rows as Hermes writes them."""

    def __init__(self, home: Path, version: int | None = HERMES_SCHEMA_VERSION) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.path = home / "state.db"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(HERMES_SCHEMA_SQL)
        if version is not None:
            self.conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    def session(
        self,
        sid: str,
        *,
        started_at: float = T0,
        source: str = "cli",
        ended_at: float | None = None,
        end_reason: str | None = None,
        parent: str | None = None,
        session_key: str | None = None,
        profile: str | None = None,
        user_id: str | None = None,
        message_count: int = 0,
    ) -> str:
        self.conn.execute(
            "INSERT INTO sessions (id, source, user_id, session_key, parent_session_id, started_at, ended_at, "
            "end_reason, message_count, profile_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, source, user_id, session_key, parent, started_at, ended_at, end_reason, message_count, profile),
        )
        return sid

    def message(
        self,
        sid: str,
        role: str,
        content: object,
        ts: float,
        *,
        tool_calls: list | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        active: int = 1,
        compacted: int = 0,
    ) -> int:
        cur = self.conn.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
            "active, compacted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, role, content, tool_call_id, json.dumps(tool_calls) if tool_calls else None, tool_name, ts, active, compacted),
        )
        return int(cur.lastrowid or 0)

    def turn(self, sid: str, user: str, answer: str, ts: float, **flags: int) -> tuple[int, int]:
        """A user message at ``ts`` and its answer half a second later; their row ids."""
        return self.message(sid, "user", user, ts, **flags), self.message(sid, "assistant", answer, ts + 0.5, **flags)

    def memory_call(self, sid: str, call_id: str, ts: float, args: dict, result: dict) -> None:
        """An assistant message calling Hermes's ``memory`` tool at ``ts``, and its result."""
        self.message(
            sid,
            "assistant",
            "",
            ts,
            tool_calls=[{"id": call_id, "type": "function", "function": {"name": "memory", "arguments": json.dumps(args)}}],
        )
        self.message(sid, "tool", json.dumps(result), ts + 0.01, tool_call_id=call_id, tool_name="memory")

    def close(self) -> None:
        self.conn.close()


def write_memories(home: Path, memory: list[str] | None = None, user: list[str] | None = None) -> None:
    """``memories/MEMORY.md`` and ``USER.md`` with these entries, joined as Hermes joins them."""
    folder = home / "memories"
    folder.mkdir(parents=True, exist_ok=True)
    for name, entries in (("MEMORY.md", memory), ("USER.md", user)):
        if entries is not None:
            (folder / name).write_text(ENTRY_DELIMITER.join(entries), encoding="utf-8")
