"""memstream inside a real Hermes Agent (PyPI ``hermes-agent==0.19.0``), end to end.

Once per machine (cached in ``~/.cache/memstream/hermes-0.19.0-venv``, rebuilt if broken,
guarded by a file lock) a virtual environment gets Hermes and this checkout of memstream
(``pip install -e``, redone only when ``pyproject.toml`` or the checkout path change).
Then, the way a user does it: ``memstream install-hermes --home H`` puts the plugin into
a fresh Hermes home and selects it; a real Valkey holds the log; a scripted
OpenAI-compatible server on 127.0.0.1 plays the model; a real ``AIAgent`` runs three turns
(one calls the built-in ``memory`` tool) and the real interactive ``HermesCLI`` runs
``/new``. The tests read the events back from the Redis stream, and run
``hermes memstream doctor --json`` through the plugin's ``cli.py``.

Hermes silently falls back to its built-in memory when a provider fails to load, so the
first thing checked is that memstream really was the active, initialized provider.
Skipped only when no cached environment exists and pip cannot reach an index.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import redis
import yaml
from hermes_harness import (  # noqa: F401  (hermes_venv is a fixture)
    AGENT_PROMPTS,
    CLI_PROMPTS,
    GATEWAY_KEY,
    HERE,
    HERMES_VERSION,
    ROOT,
    TENANT,
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

from memstream.core import keys
from memstream.producers.events import MemoryWritten, SessionEnded, SessionSwitched, TurnRecorded
from memstream.producers.report import decode_report, unpack_row
from memstream.producers.stream import EventLog
from memstream.service.valkey import ValkeyProcess

pytestmark = pytest.mark.hermes


@pytest.fixture(scope="module")
def world(hermes_venv, tmp_path_factory):
    work = tmp_path_factory.mktemp("hermes-e2e")
    home = work / "hermes-home"
    home.mkdir()
    bin_dir = hermes_venv / "bin"
    llm = fake_llm.FakeLLM(reqlog=str(work / "requests.jsonl")).start()
    valkey = ValkeyProcess(work / "valkey").start()
    try:
        # A Hermes home as a user has it before installing memstream: a model configured.
        (home / "config.yaml").write_text(
            yaml.safe_dump(
                {**home_config(llm.url), "memory": {"memory_char_limit": 2200}},
                sort_keys=False,
            )
        )
        env = _clean_env(
            HERMES_HOME=str(home),
            MEMSTREAM_REDIS_URL=valkey.url,
            MEMSTREAM_TENANT=TENANT,
            MEMSTREAM_HOME=str(work / "memstream-home"),
            MEMSTREAM_AUTOSTART="0",
            MEMSTREAM_SPOOL_FSYNC="never",
            MEMSTREAM_SHUTDOWN_TIMEOUT="5",
            MEMSTREAM_TEST_LOG=str(work / "provider-log.jsonl"),
        )

        proc = _run([bin_dir / "memstream", "install-hermes", "--home", home, "--json"], 60, env=env, cwd=work)
        assert proc.returncode == 0, f"memstream install-hermes failed:\n{_tail(proc)}"
        installed = _last_json(proc.stdout)

        agent_spec = {
            "base_url": llm.url,
            "prompts": AGENT_PROMPTS,
            "agent_kwargs": {"platform": "telegram", "user_id": "u-123", "chat_id": "chat-9", "gateway_session_key": GATEWAY_KEY},
        }
        agent = _driver_result(
            _run([VENV_PY, HERE / "hermes_drive_agent.py", json.dumps(agent_spec)], 120, env=env, cwd=work), "the AIAgent driver"
        )
        cli = _driver_result(
            _run([VENV_PY, HERE / "hermes_drive_cli.py", json.dumps({"prompts": CLI_PROMPTS})], 120, env=env, cwd=work),
            "the HermesCLI driver",
        )
        doctor = _run([bin_dir / "hermes", "memstream", "doctor", "--json"], 60, env=env, cwd=work)

        client = redis.Redis.from_url(valkey.url)
        eventlog = EventLog(client)
        events = [eventlog.decode_entry(fields) for _, _, fields in eventlog.entries()]
        reports = dict(decode_report(name, data) for name, data in client.hgetall(keys.agent_reports("memstream")).items())
        client.close()
        log_path = work / "provider-log.jsonl"
        provider_log = [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.exists() else []
        yield SimpleNamespace(
            home=home,
            work=work,
            env=env,
            llm=llm,
            valkey=valkey,
            installed=installed,
            agent=agent,
            cli=cli,
            doctor=doctor,
            events=events,
            reports=reports,
            bin=bin_dir,
            provider_log=provider_log,
        )
    finally:
        valkey.stop()
        llm.stop()


def of_session(events, cls, session_id):
    return [e for e in events if isinstance(e, cls) and e.scope.session_id == session_id]


# -- the tests ---------------------------------------------------------------------------------
def test_install_hermes_installs_the_plugin_and_selects_it_keeping_the_config(world):
    result = world.installed
    plugin = world.home / "plugins" / "memstream"
    assert result["plugin_dir"] == str(plugin)
    assert sorted(p.name for p in plugin.iterdir() if p.is_file()) == ["__init__.py", "cli.py", "plugin.yaml"]
    assert result["provider_importable"] is True and result["hermes_version"] == HERMES_VERSION
    assert result["provider_importable_by_hermes"] is True and not result["warnings"]
    # Hermes 0.19: today's path (config.yaml written here), and Hermes itself says it loads memstream
    assert result["selected_by"] == "config.yaml" and result["hermes"]["current"] is False
    assert result["loads"] is True and result["verdict"].startswith(f"Hermes {HERMES_VERSION} will load memstream")
    config = yaml.safe_load((world.home / "config.yaml").read_text())
    assert config["memory"] == {"memory_char_limit": 2200, "provider": "memstream"}
    assert config["model"]["base_url"] == world.llm.url  # other keys kept


def test_memstream_really_is_the_active_initialized_provider(world):
    # Hermes falls back to built-in memory silently when a provider fails to load.
    for flow in (world.agent, world.cli):
        assert flow["providers"] == ["memstream"], flow
    assert world.agent["provider_class"] == ["memstream.provider.provider.MemstreamProvider"]
    assert world.agent["initialized"] == [True]
    assert world.agent["thread_spawner"] is None  # Hermes 0.19 has no context helper: plain threads
    assert world.agent["flushed"] is True
    stats = world.agent["stats"][0]
    problems = [r for r in world.provider_log if r.get("level") not in ("info", "debug")]
    assert not problems, problems
    assert not stats.get("hook_errors") and not stats.get("not_initialized") and not stats.get("refused"), stats
    assert [r["tenant"] for r in world.provider_log if r.get("event") == "provider.initialized"] == [TENANT] * 2
    assert "memory" in world.agent["tools"]
    assert world.events, "Hermes ran but nothing reached the log"
    assert all(e.scope.tenant == TENANT for e in world.events)


def test_each_hermes_process_left_its_fleet_report_of_the_hooks_hermes_called(world):
    def calls(report, hook: str) -> int:
        return sum(unpack_row(report.hooks[hook])[:-1]) if hook in report.hooks else 0

    assert len(world.reports) == 2, world.reports  # the AIAgent's process and the CLI's, each at its exit
    cli, agent = sorted(world.reports.values(), key=lambda r: calls(r, "on_turn_start"))
    assert calls(agent, "on_turn_start") == calls(agent, "sync_turn") == len(AGENT_PROMPTS)
    assert calls(agent, "on_memory_write") == calls(agent, "initialize") == calls(agent, "shutdown") == 1
    assert 1 <= agent.prefetch.fresh + agent.prefetch.cached + agent.prefetch.empty <= calls(agent, "prefetch")
    assert calls(cli, "on_turn_start") == len(CLI_PROMPTS) and calls(cli, "on_session_switch") >= 1
    for report in (agent, cli):
        assert (report.tenant, report.backlog, report.refused, report.invalid) == (TENANT, 0, 0, 0)


def test_every_turn_is_recorded_with_its_text_index_and_tool_calls(world):
    sid = world.agent["session_id"]
    assert world.agent["replies"] == [
        fake_llm.reply_for(AGENT_PROMPTS[0]),
        fake_llm.TOOL_DONE_REPLY,
        fake_llm.reply_for(AGENT_PROMPTS[2]),
    ]
    turns = sorted(of_session(world.events, TurnRecorded, sid), key=lambda e: e.turn_index)
    assert [(t.turn_index, t.user_text, t.assistant_text) for t in turns] == [
        (i + 1, prompt, reply) for i, (prompt, reply) in enumerate(zip(AGENT_PROMPTS, world.agent["replies"]))
    ]
    assert turns[0].tool_calls == [] and turns[2].tool_calls == []
    [call] = turns[1].tool_calls
    assert call.name == "memory" and call.call_id.startswith("call_fake_")
    assert json.loads(call.arguments) == {"action": "add", "target": "user", "content": fake_llm.REMEMBER_CONTENT}
    assert json.loads(call.result).get("success") is True
    assert turns[0].author == "u-123"


def test_the_memory_tool_write_is_mirrored_with_its_tool_call_id(world):
    sid = world.agent["session_id"]
    [write] = of_session(world.events, MemoryWritten, sid)
    [turn] = [t for t in of_session(world.events, TurnRecorded, sid) if t.tool_calls]
    assert (write.action, write.target, write.content) == ("add", "user", fake_llm.REMEMBER_CONTENT)
    assert write.tool_call_id == turn.tool_calls[0].call_id
    assert write.origin == "assistant_tool"
    # the same id the model produced
    tool_ids = {
        tc["id"]
        for r in world.llm.chat_requests()
        for m in r["messages"]
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or []
    }
    assert write.tool_call_id in tool_ids
    # Hermes's own store got it too
    assert fake_llm.REMEMBER_CONTENT in (world.home / "memories" / "USER.md").read_text()


def test_the_agent_session_ends_once_with_its_counts(world):
    sid = world.agent["session_id"]
    [ended] = of_session(world.events, SessionEnded, sid)
    assert ended.turn_count == 3 and ended.message_count == world.agent["message_count"]


def test_new_switches_the_session_with_its_parent_and_ends_the_old_one(world):
    old, new = world.cli["first_session_id"], world.cli["second_session_id"]
    assert old and new and old != new
    assert world.cli["replies"] == [fake_llm.reply_for(p) for p in CLI_PROMPTS]
    [switch] = [e for e in world.events if isinstance(e, SessionSwitched)]
    assert switch.scope.session_id == new
    assert (switch.reason, switch.parent_session_id, switch.reset) == ("new_session", old, True)
    # the old session: one turn, ended before the switch; the new one: turn numbering restarts
    [t1] = of_session(world.events, TurnRecorded, old)
    [t2] = of_session(world.events, TurnRecorded, new)
    assert (t1.turn_index, t1.user_text, t2.turn_index, t2.user_text) == (1, CLI_PROMPTS[0], 1, CLI_PROMPTS[1])
    [end_old] = of_session(world.events, SessionEnded, old)
    assert end_old.turn_count == 1
    assert world.events.index(end_old) < world.events.index(switch) < world.events.index(t2)
    # exit ends the new session
    assert [e.turn_count for e in of_session(world.events, SessionEnded, new)] == [1]


def test_scope_carries_tenant_agent_identity_platform_and_sessions(world):
    agent_events = [e for e in world.events if e.scope.session_id == world.agent["session_id"]]
    cli_sessions = {world.cli["first_session_id"], world.cli["second_session_id"]}
    cli_events = [e for e in world.events if e.scope.session_id in cli_sessions]
    assert len(agent_events) + len(cli_events) == len(world.events)
    assert {(e.scope.tenant, e.scope.app, e.scope.agent, e.scope.platform, e.scope.user_id) for e in agent_events} == {
        (TENANT, "hermes", GATEWAY_KEY, "telegram", "u-123")
    }
    # the interactive CLI passes no gateway key: the profile name is the identity
    assert {(e.scope.tenant, e.scope.agent, e.scope.platform) for e in cli_events} == {(TENANT, "default", "cli")}
    # one run id per provider instance (one per process here)
    assert len({e.scope.run_id for e in agent_events}) == 1
    assert len({e.scope.run_id for e in cli_events}) == 1
    assert {e.scope.run_id for e in agent_events} != {e.scope.run_id for e in cli_events}
    # event ids are unique
    assert len({e.id for e in world.events}) == len(world.events)


def test_hermes_memstream_doctor_runs_the_memstream_cli_through_the_plugin(world):
    proc = world.doctor
    assert proc.returncode == 0, _tail(proc)
    report = _last_json(proc.stdout)
    assert report["ok"] is True, report
    checks = report["checks"]
    assert checks["redis"]["ok"] and checks["redis"]["mode"] == "external"
    hermes = checks["hermes"]
    assert hermes["ok"] and hermes["plugin_installed"] and hermes["selected"] and hermes["plugin_current"]
    assert hermes["home"] == str(world.home) and hermes["hermes_version"] == HERMES_VERSION
    assert hermes["provider_importable"] is True
    assert hermes["loads"] is True and hermes["probe"]["found_at"] == str(world.home / "plugins" / "memstream")


def test_hermes_memstream_export_sees_the_same_log(world):
    proc = _run([world.bin / "hermes", "memstream", "export"], 60, env=world.env, cwd=world.work)
    assert proc.returncode == 0, _tail(proc)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [line["id"] for line in lines] == [e.id for e in world.events]
