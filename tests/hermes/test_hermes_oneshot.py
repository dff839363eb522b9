"""A one-shot ``hermes -z`` (real ``hermes-agent==0.19.0``, offline against the scripted
model) against a running memstream service: the process appears as an agent on the
service's dashboard (``/api/summary``) once it has exited, its turn in the log.

Hermes's one-shot path calls the provider's ``shutdown`` and then ends the process with
``os._exit``, past ``atexit`` and every thread: what the provider does not ship and report
inside ``shutdown`` never leaves the host (its spool waits for whoever adopts it).
"""

from __future__ import annotations

import json
import subprocess

import pytest
import redis
import yaml
from hermes_harness import (  # noqa: F401  (hermes_venv is a fixture)
    TENANT,
    _clean_env,
    _last_json,
    _run,
    _tail,
    fake_llm,
    hermes_venv,
    home_config,
)
from service_support import ms
from writepath import wait_for

from memstream.core.runfile import read_run_file
from memstream.ops import fetch_summary
from memstream.producers.events import TurnRecorded
from memstream.producers.stream import EventLog

pytestmark = [pytest.mark.hermes, pytest.mark.valkey]

PROMPT = "one question, one answer"


@pytest.fixture
def service(tmp_path):
    home = tmp_path / "service-home"
    # active for the dashboard while its last report is 3 of the service's intervals old: wide
    ms(home, "up", "--detach", env={"MEMSTREAM_REPORT_EVERY_S": "60"})
    info = read_run_file(home / "run" / "service.json")
    assert info and info["metrics"] and info["url"]
    try:
        yield info
    finally:
        ms(home, "down", check=False)


def test_a_one_shot_hermes_run_appears_on_the_dashboard_with_its_turn_shipped(hermes_venv, service, tmp_path):
    llm = fake_llm.FakeLLM().start()
    try:
        home = tmp_path / "hermes-home"
        home.mkdir()
        (home / "config.yaml").write_text(yaml.safe_dump(home_config(llm.url), sort_keys=False))
        env = _clean_env(
            HERMES_HOME=str(home),
            MEMSTREAM_REDIS_URL=service["url"],
            MEMSTREAM_TENANT=TENANT,
            # a spool of its own: the service does not adopt it, only this process ships it
            MEMSTREAM_HOME=str(tmp_path / "agent-home"),
            MEMSTREAM_AUTOSTART="0",
            MEMSTREAM_SPOOL_FSYNC="never",
            MEMSTREAM_SHUTDOWN_TIMEOUT="20",
        )
        proc = _run([hermes_venv / "bin" / "memstream", "install-hermes", "--home", home, "--json"], 60, env=env, cwd=tmp_path)
        assert proc.returncode == 0, _tail(proc)
        assert _last_json(proc.stdout)["loads"] is True

        hermes = subprocess.Popen(
            [str(hermes_venv / "bin" / "hermes"), "-z", PROMPT],
            env=env,
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = hermes.communicate(timeout=180)
        assert hermes.returncode == 0, f"hermes -z exited {hermes.returncode}:\n{out[-3000:]}\n{err[-3000:]}"
        assert fake_llm.reply_for(PROMPT) in out
    finally:
        llm.stop()

    # the turn is in the log, shipped by the process itself before it exited
    client = redis.Redis.from_url(service["url"])
    try:
        eventlog = EventLog(client)
        turns = [e for e in (eventlog.decode_entry(f) for _, _, f in eventlog.entries()) if isinstance(e, TurnRecorded)]
    finally:
        client.close()
    assert [(t.user_text, t.scope.tenant, t.scope.platform) for t in turns] == [(PROMPT, TENANT, "cli")]

    # and the process is an agent on the dashboard: its last report names it (HOST:PID:NONCE)
    base = service["metrics"][: -len("/metrics")]
    seen: dict = {}

    def reported() -> bool:
        summary = fetch_summary(base)
        seen["summary"] = summary
        fleet = summary.get("fleet") or {}
        names = [a["agent"] for a in (fleet.get("spool_backlog") or {}).get("agents", [])]
        return any(f":{hermes.pid}:" in name for name in names) and (fleet.get("hooks") or {}).get("sync_turn", {}).get("count")

    try:
        wait_for(reported, timeout=60, what="the one-shot process's report on /api/summary")
    except AssertionError:
        raise AssertionError(
            f"hermes -z (pid {hermes.pid}) is not on /api/summary: {json.dumps(seen.get('summary', {}).get('fleet'))}"
        ) from None
    fleet = seen["summary"]["fleet"]
    assert fleet["spool_backlog"]["total"] == 0  # everything it spooled was shipped
    assert fleet["hooks"]["initialize"]["count"] == 1 and fleet["hooks"]["on_turn_start"]["count"] == 1
