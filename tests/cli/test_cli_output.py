"""The command line against a real log with no workers, as a person runs it: doctor's warnings
are neither ok nor failures, `dlq` alone lists the dead letters, a worker's log lines are
readable on a terminal and JSON otherwise."""

from __future__ import annotations

import json
import os
import re

import pytest
import redis
from pty_support import run_until
from service_support import ms

from memstream import cli
from memstream.core import keys
from memstream.core.settings import Settings
from memstream.workers import DeadLetters

pytestmark = pytest.mark.valkey


@pytest.fixture
def bare_log(valkey_server, tmp_path):
    """A real, empty Valkey with nothing serving queries; the environment that points at it."""
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    yield client, {"MEMSTREAM_REDIS_URL": valkey_server.url, "HERMES_HOME": str(tmp_path / "no-hermes")}
    client.close()


def test_doctor_warns_when_no_query_server_answers_and_still_exits_0(bare_log, tmp_path):
    _, env = bare_log
    shown = ms(tmp_path / "home", "doctor", env=env, check=False)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].endswith(": ok, with warnings")
    assert [line for line in lines if line.startswith("  [warn] ")] == [
        next(line for line in lines if line.startswith("  [warn] queries: no query server answered"))
    ]
    assert not [line for line in lines[1:] if re.fullmatch(r"  \[\w+\] \w+: ?", line)], lines  # none empty
    assert re.search(r"^  \[ok\] config: home \S+; from the environment: .*MEMSTREAM_REDIS_URL", shown.stdout, re.M)
    assert "  [ok] streams: 1 stream, no events yet" in lines
    report = json.loads(ms(tmp_path / "home", "doctor", "--json", env=env, check=False).stdout)
    assert (report["ok"], report["state"]) == (True, "warning")
    assert {k: report["checks"]["queries"][k] for k in ("ok", "state", "answering")} == {
        "ok": True,
        "state": "warning",
        "answering": False,
    }


def test_doctor_exits_1_when_a_check_fails_even_beside_warnings(tmp_path):
    shown = ms(tmp_path / "home", "doctor", check=False, env={"HERMES_HOME": str(tmp_path / "none")})
    assert shown.returncode == 1
    assert shown.stdout.splitlines()[0].endswith(": NOT OK")
    assert "  [FAIL] redis: no memstream service is running" in shown.stdout


def test_dlq_without_an_action_lists_the_dead_letters(bare_log, capsys, monkeypatch):
    client, env = bare_log
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["dlq"]) == 0
    assert capsys.readouterr().out == "no dead letters\n"
    DeadLetters(client, Settings.load().stream_prefix).add(
        "turns.v1", "memstream:events:0", "1-0", {b"type": b"turn.completed"}, "cannot apply", 5
    )
    assert cli.main(["dlq"]) == 0
    line = capsys.readouterr().out
    assert re.fullmatch(
        r"\d+-\d+ turns\.v1 memstream:events:0 1-0 turn\.completed deliveries=5 dead \d+s ago: cannot apply\n", line
    ), line
    assert cli.main(["dlq", "--json", "--group", "turns.v1"]) == 0
    assert [d["error"] for d in json.loads(capsys.readouterr().out)["dead_letters"]] == ["cannot apply"]


def _worker_env(tmp_path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    return dict(
        env,
        MEMSTREAM_REDIS_URL=url,
        MEMSTREAM_HOME=str(tmp_path / "worker-home"),
        MEMSTREAM_EMBEDDER="hash",
        MEMSTREAM_AUTOSTART="0",
    )


def test_a_worker_logs_readable_lines_on_a_terminal_and_json_lines_with_json(bare_log, tmp_path, valkey_server):
    env = _worker_env(tmp_path, valkey_server.url)
    code, text = run_until(["worker", "--embedded-store"], env, "pipeline.started", tty=True)
    assert code == 0, text
    assert re.search(r"^\S+Z \[info\s*\] pipeline\.started .*groups=", text, re.M), text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("{")], text
    code, text = run_until(["worker", "--embedded-store", "--json"], env, "pipeline.started", tty=True)
    assert code == 0, text
    started = [line for line in map(json.loads, filter(str.strip, text.splitlines())) if line.get("event") == "pipeline.started"]
    assert len(started) == 1 and started[0]["level"] == "info"


def test_tenant_list_says_how_long_ago_each_tenant_was_registered(bare_log, capsys, monkeypatch):
    client, env = bare_log
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["tenant", "add", "acme"]) == 0
    try:
        capsys.readouterr()
        assert cli.main(["tenant", "list"]) == 0
        assert re.fullmatch(r"acme \(user \S+, registered \d+s ago\)\n", capsys.readouterr().out)
        assert cli.main(["tenant", "list", "--json"]) == 0
        [row] = json.loads(capsys.readouterr().out)["tenants"]
        assert isinstance(row["created_at"], float)
    finally:
        assert cli.main(["tenant", "remove", "acme"]) == 0


def test_forget_lists_what_a_dry_run_would_remove_then_removes_it_and_needs_a_selector(bare_log, capsys, monkeypatch, tmp_path):
    from memstream.producers import EventLog, MemoryRemembered, Scope, utcnow

    client, env = bare_log
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path / "home"))
    settings = Settings.load()
    log = EventLog(client, settings.stream_prefix, settings.shards)
    secret = MemoryRemembered(
        id="0190aaaa-0000-7000-8000-000000000001", occurred_at=utcnow(), scope=Scope(tenant="t1"), content="the door code is 4417"
    )
    log.append(
        [
            secret,
            MemoryRemembered(
                id="0190aaaa-0000-7000-8000-000000000002", occurred_at=utcnow(), scope=Scope(tenant="t1"), content="prefers tea"
            ),
        ]
    )
    assert cli.main(["forget", "--match", "DOOR CODE", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "1 event matches" and "  would remove 1 stream entry" in out
    assert f"  event {secret.id}" in out
    assert cli.main(["forget", "--match", "door code", "--wait", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["events"] == [secret.id] and result["tombstones"] == 1 and result["aof"]["state"] == "rewritten"
    assert client.hget(keys.forget_counters(settings.stream_prefix), "stream_entries") == b"1"
    assert cli.main(["export"]) == 0
    exported = capsys.readouterr().out
    assert "4417" not in exported and "prefers tea" in exported
    assert cli.main(["forget"]) == 1
    assert "forget needs a selector" in capsys.readouterr().err
