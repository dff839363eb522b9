"""``memstream bench import``: how fast ``memstream import hermes`` brings a Hermes history
into a real Valkey.

The history is synthetic but shaped as Hermes keeps it: a ``state.db`` with Hermes's own
tables (``HERMES_SCHEMA_SQL``, hermes-agent 0.19.0), in WAL mode, of ``messages`` messages
in sessions of 25 turns; a turn is a user message and its answer, and every fourth turn
also an assistant tool call and its result (4 messages); every turn answered; texts of 20 to 80 words, some
non-ASCII. Each session ended. ``memories/MEMORY.md`` and ``USER.md`` hold 20 entries.

Each run imports into an empty log of a real Valkey (``ValkeyProcess``, AOF
``everysec``, flushed between runs) exactly as the command does: read and check the whole
history (``read_hermes``), read the ids the log holds (``existing_ids``), append the
events it lacks in atomic batches (``append_events``). Reported: messages of ``state.db``
per second of the whole import (median of the runs), and the median time of each part.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from memstream.bench.command import show
from memstream.bench.stats import machine
from memstream.core import argtypes
from memstream.producers import (
    HERMES_SCHEMA_SQL,
    HERMES_SCHEMA_VERSION,
    EventLog,
    append_events,
    existing_ids,
    new_events,
    read_hermes,
)
from memstream.service import ValkeyProcess

__all__ = ["import_bench", "format_import", "make_history", "add_arguments", "run"]

TURNS_PER_SESSION = 25
T0 = 1_790_000_000.0
_WORDS = (
    "deploy staging database postgres tuesday release migration cache latency budget review "
    "the a of to and is for with on café naïve 東京 München réunion metrics alert oncall"
).split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 80)))


def make_history(home: Path, messages: int, seed: int = 0) -> dict[str, int]:
    """A Hermes home under ``home`` with a ``state.db`` of ``messages`` messages and two
    memory files (see the module doc); the counts it holds."""
    rng = random.Random(seed)
    home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(home / "state.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(HERMES_SCHEMA_SQL)
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (HERMES_SCHEMA_VERSION,))
    conn.execute("BEGIN")
    written = turns = sessions = 0
    ts = T0
    while written < messages:
        sid = f"20260921_{sessions:06d}_{rng.randrange(16**6):06x}"
        started = ts
        rows: list[tuple[Any, ...]] = []
        for t in range(TURNS_PER_SESSION):
            room = messages - written - len(rows)
            if room <= 0:
                break
            ts += rng.uniform(5, 120)
            if room == 1:  # one message left: a follow-up of the last answer, no new turn
                rows.append((sid, "assistant", _text(rng), None, None, None, ts))
                break
            rows.append((sid, "user", _text(rng), None, None, None, ts))
            if t % 4 == 3 and room >= 4:
                call = f"call_{sessions}_{t}"
                calls = json.dumps(
                    [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "web_search", "arguments": json.dumps({"q": _text(rng)})},
                        }
                    ]
                )
                rows.append((sid, "assistant", "", None, calls, None, ts + 1))
                rows.append((sid, "tool", _text(rng), call, None, "web_search", ts + 2))
            rows.append((sid, "assistant", _text(rng), None, None, None, ts + 3))
            turns += 1
        conn.execute(
            "INSERT INTO sessions (id, source, started_at, ended_at, end_reason, message_count) "
            "VALUES (?, 'cli', ?, ?, 'cli_close', ?)",
            (sid, started, ts + 10, len(rows)),
        )
        conn.executemany(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, "
            "timestamp) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        written += len(rows)
        sessions += 1
        ts += 3600
    conn.execute("COMMIT")
    conn.close()
    folder = home / "memories"
    folder.mkdir(exist_ok=True)
    for name in ("MEMORY.md", "USER.md"):
        (folder / name).write_text("\n§\n".join(_text(rng)[:200] for _ in range(10)), encoding="utf-8")
    return {"messages": written, "sessions": sessions, "turns": turns, "memories": 20}


def _one_run(home: Path, eventlog: EventLog) -> dict[str, float | int]:
    t0 = time.perf_counter()
    history = read_hermes(home, tenant="bench")
    t1 = time.perf_counter()
    fresh = new_events(history.events, existing_ids(eventlog))
    t2 = time.perf_counter()
    appended = append_events(eventlog, fresh)
    t3 = time.perf_counter()
    return {"events": appended, "read_s": t1 - t0, "ids_s": t2 - t1, "append_s": t3 - t2, "total_s": t3 - t0}


def import_bench(messages: int = 10_000, runs: int = 5) -> dict[str, Any]:
    """Import a synthetic history of ``messages`` messages ``runs`` times (see the module doc)."""
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-import-"))
    started = machine()
    server = ValkeyProcess(root / "valkey").start()
    try:
        counts = make_history(root / "hermes-home", messages)
        client = redis.Redis.from_url(server.url)
        eventlog = EventLog(client, "benchimport")
        per_run = []
        for _ in range(runs):
            client.flushall()
            per_run.append(_one_run(root / "hermes-home", eventlog))
        again = _one_run(root / "hermes-home", eventlog)  # into the full log: every event already there
        client.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

    def median(key: str) -> float:
        return statistics.median(float(r[key]) for r in per_run)

    total = median("total_s")
    return {
        **counts,
        "runs": runs,
        "events": int(per_run[0]["events"]),
        "messages_per_s": round(counts["messages"] / total),
        "events_per_s": round(per_run[0]["events"] / total),
        "median_s": {k: round(median(k), 4) for k in ("read_s", "ids_s", "append_s", "total_s")},
        "per_run_messages_per_s": [round(counts["messages"] / float(r["total_s"])) for r in per_run],
        "again": {"appended": again["events"], "total_s": round(float(again["total_s"]), 4)},
        "machine": started,
    }


def format_import(result: dict[str, Any]) -> str:
    m = result["median_s"]
    return "\n".join(
        [
            f"import hermes: {result['messages']:,} messages in {result['sessions']} sessions -> {result['events']:,} "
            f"events, into an empty Valkey log, median of {result['runs']} runs:",
            f"  {result['messages_per_s']:,} messages/s ({result['events_per_s']:,} events/s); "
            f"per run: {', '.join(f'{x:,}' for x in result['per_run_messages_per_s'])}",
            f"  read+check {m['read_s'] * 1000:.0f} ms, log ids {m['ids_s'] * 1000:.0f} ms, "
            f"append {m['append_s'] * 1000:.0f} ms, total {m['total_s'] * 1000:.0f} ms",
            f"  again into the full log: {result['again']['appended']} appended in {result['again']['total_s'] * 1000:.0f} ms",
        ]
    )


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench import``'s arguments."""
    parser.add_argument(
        "--messages",
        type=argtypes.int_between(1, 10_000_000),
        default=10_000,
        help="messages of the synthetic Hermes state.db (default 10000)",
    )
    parser.add_argument("--runs", type=argtypes.int_between(1, 1000), default=5, help="imports per median (default 5)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = import_bench(messages=args.messages, runs=args.runs)
    return show(args, result, format_import(result))
