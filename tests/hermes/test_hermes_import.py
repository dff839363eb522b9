"""``memstream import hermes`` of a history the real Hermes Agent (``hermes-agent==0.19.0``)
wrote: a Hermes home without memstream, where a real ``AIAgent`` runs three turns (one
calls the built-in ``memory`` tool, so USER.md gets an entry) and the real ``HermesCLI``
runs two sessions around ``/new``, against the scripted model. Then ``memstream import
hermes`` (the Hermes venv's command, as a user runs it) brings that history into a real
Valkey, twice. The tests compare the events with what Hermes's own ``state.db`` holds.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
import redis
import yaml
from hermes_harness import (  # noqa: F401  (hermes_venv is a fixture)
    AGENT_PROMPTS,
    CLI_PROMPTS,
    HERE,
    VENV_PY,
    _clean_env,
    _driver_result,
    _last_json,
    _run,
    _tail,
    fake_llm,
    hermes_venv,
    home_config,
)

from memstream.core.ids import event_id_time_ms
from memstream.producers import HERMES_SCHEMA_SQL, HERMES_SCHEMA_VERSION, EventLog, encode
from memstream.producers.events import MemoryWritten, SessionEnded, TurnRecorded
from memstream.service.valkey import ValkeyProcess
from memstream.workers.admission import admit

pytestmark = pytest.mark.hermes

TENANT = "acme"


@pytest.fixture(scope="module")
def world(hermes_venv, tmp_path_factory):
    work = tmp_path_factory.mktemp("hermes-import")
    home = work / "hermes-home"
    home.mkdir()
    llm = fake_llm.FakeLLM().start()
    valkey = ValkeyProcess(work / "valkey").start()
    try:
        # a Hermes home as a user has it before memstream: a model, Hermes's built-in memory
        (home / "config.yaml").write_text(yaml.safe_dump(home_config(llm.url), sort_keys=False))
        env = _clean_env(HERMES_HOME=str(home), MEMSTREAM_TEST_LOG=str(work / "driver-log.jsonl"))
        agent_spec = {"base_url": llm.url, "prompts": AGENT_PROMPTS, "agent_kwargs": {"platform": "telegram", "user_id": "u-123"}}
        agent = _driver_result(
            _run([VENV_PY, HERE / "hermes_drive_agent.py", json.dumps(agent_spec)], 120, env=env, cwd=work), "the AIAgent driver"
        )
        cli = _driver_result(
            _run([VENV_PY, HERE / "hermes_drive_cli.py", json.dumps({"prompts": CLI_PROMPTS})], 120, env=env, cwd=work),
            "the HermesCLI driver",
        )
        assert agent["providers"] == [] and cli["providers"] == []  # Hermes's built-in memory only

        ms_env = _clean_env(
            MEMSTREAM_REDIS_URL=valkey.url,
            MEMSTREAM_TENANT=TENANT,
            MEMSTREAM_AUTOSTART="0",
            MEMSTREAM_HOME=str(work / "memstream-home"),
        )
        memstream = hermes_venv / "bin" / "memstream"
        runs = [_run([memstream, "import", "hermes", "--home", home, "--json"], 120, env=ms_env, cwd=work) for _ in range(2)]
        for proc in runs:
            assert proc.returncode == 0, _tail(proc)

        client = redis.Redis.from_url(valkey.url)
        eventlog = EventLog(client)
        entries = [fields for _, _, fields in eventlog.entries()]
        client.close()
        db = sqlite3.connect(f"{(home / 'state.db').as_uri()}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        sessions = {r["id"]: dict(r) for r in db.execute("SELECT * FROM sessions")}
        messages = [dict(r) for r in db.execute("SELECT * FROM messages ORDER BY id")]
        version = db.execute("SELECT version FROM schema_version").fetchone()[0]
        columns = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in ("sessions", "messages")}
        db.close()
        yield SimpleNamespace(
            home=home,
            agent=agent,
            cli=cli,
            results=[_last_json(p.stdout) for p in runs],
            entries=entries,
            events=[EventLog.decode_entry(f) for f in entries],
            sessions=sessions,
            messages=messages,
            version=version,
            columns=columns,
        )
    finally:
        valkey.stop()
        llm.stop()


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def test_the_real_state_db_has_the_schema_memstream_reads(world, tmp_path):
    assert world.version == HERMES_SCHEMA_VERSION
    ours = sqlite3.connect(tmp_path / "ours.db")
    ours.executescript(HERMES_SCHEMA_SQL)
    for table, columns in world.columns.items():
        assert [r[1] for r in ours.execute(f"PRAGMA table_info({table})")] == columns, table


def test_the_import_counts_what_hermes_stored(world):
    first = world.results[0]
    ended = sum(1 for s in world.sessions.values() if s["ended_at"] is not None)
    assert (first["sessions"], first["turns"], first["memories"], first["session_ends"]) == (
        len(world.sessions),
        len(AGENT_PROMPTS) + len(CLI_PROMPTS),
        1,
        ended,
    )
    assert first["appended"] == first["events"] == len(world.events) and first["skipped"] == {}


def test_a_second_import_appends_nothing(world):
    second = world.results[1]
    assert (second["new"], second["appended"]) == (0, 0)
    assert second["skipped"] == {"already in the log": world.results[0]["events"]}


def test_every_turn_has_its_text_its_answer_s_time_and_an_id_of_that_time(world):
    replies = {
        world.agent["session_id"]: world.agent["replies"],
        world.cli["first_session_id"]: world.cli["replies"][:1],
        world.cli["second_session_id"]: world.cli["replies"][1:],
    }
    prompts = {
        world.agent["session_id"]: AGENT_PROMPTS,
        world.cli["first_session_id"]: CLI_PROMPTS[:1],
        world.cli["second_session_id"]: CLI_PROMPTS[1:],
    }
    for sid, said in prompts.items():
        turns = sorted(
            (e for e in world.events if isinstance(e, TurnRecorded) and e.scope.session_id == sid), key=lambda t: t.turn_index
        )
        assert [(t.turn_index, t.user_text, t.assistant_text) for t in turns] == [
            (i, p, r) for i, (p, r) in enumerate(zip(said, replies[sid]), 1)
        ]
        answers = [m for m in world.messages if m["session_id"] == sid and m["role"] == "assistant" and m["content"]]
        assert [t.occurred_at for t in turns] == [at(m["timestamp"]) for m in answers]
        for t in turns:
            assert event_id_time_ms(t.id) == int(t.occurred_at.timestamp() * 1000)
            assert (t.scope.tenant, t.scope.agent, t.scope.platform) == (TENANT, "default", world.sessions[sid]["source"])


def test_the_memory_tool_s_entry_is_a_memory_dated_by_the_call_that_wrote_it(world):
    [memory] = [e for e in world.events if isinstance(e, MemoryWritten)]
    assert (memory.action, memory.target, memory.content) == ("add", "user", fake_llm.REMEMBER_CONTENT)
    assert fake_llm.REMEMBER_CONTENT in (world.home / "memories" / "USER.md").read_text()
    [turn] = [e for e in world.events if isinstance(e, TurnRecorded) and e.tool_calls]
    [call] = turn.tool_calls
    assert call.name == "memory" and memory.tool_call_id == call.call_id
    [calling] = [m for m in world.messages if m["tool_calls"] and call.call_id in m["tool_calls"]]
    assert memory.occurred_at == at(calling["timestamp"]) and memory.scope.session_id == world.agent["session_id"]


def test_ended_sessions_end_at_hermes_s_time_with_their_turns(world):
    ends = {e.scope.session_id: e for e in world.events if isinstance(e, SessionEnded)}
    assert set(ends) == {sid for sid, s in world.sessions.items() if s["ended_at"] is not None}
    for sid, end in ends.items():
        assert end.occurred_at == at(world.sessions[sid]["ended_at"])
        assert end.turn_count == sum(1 for e in world.events if isinstance(e, TurnRecorded) and e.scope.session_id == sid)


def test_every_imported_entry_is_admitted_by_the_projections(world):
    for fields, event in zip(world.entries, world.events):
        assert fields[b"data"] == encode(event)
        verdict = admit(fields, "turns", 1 << 20)
        assert verdict.action == "apply", verdict.reason
