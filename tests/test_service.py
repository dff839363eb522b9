"""The embedded service and the CLI, as a user runs them (real processes, real Valkey)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from producers import EventLog, Settings
from producers.connect import read_run_file

pytestmark = pytest.mark.valkey


def ms(home, *args, check=True, env=None, timeout=60):
    full_env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0",
                    MEMSTREAM_EMBEDDER="hash", **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "memstream", *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"memstream {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def service(tmp_path):
    home = tmp_path / "home"
    info = json.loads(ms(home, "up", "--detach", "--json").stdout)
    yield home, info
    ms(home, "down", check=False)


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met within deadline")


def test_up_detach_serves_a_real_valkey_with_aof_and_down_stops_it(service):
    home, info = service
    client = redis.Redis.from_url(info["url"])
    assert client.ping()
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert read_run_file(home / "run" / "service.json")["pid"] == info["pid"]
    # a second `up` finds the running service instead of starting another
    again = json.loads(ms(home, "up", "--detach", "--json").stdout)
    assert again["pid"] == info["pid"] and again["already_running"]
    assert json.loads(ms(home, "down", "--json").stdout)["stopped"]
    assert read_run_file(home / "run" / "service.json") is None
    with pytest.raises(redis.ConnectionError):
        client.ping()


def test_ctrl_c_stops_the_foreground_service_cleanly(tmp_path):
    """A terminal's Ctrl-C signals the whole process group: the workers must stop before the
    server, so nothing logs a lost connection, and no server is left behind."""
    home = tmp_path / "home"
    env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash")
    log_path = tmp_path / "up.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "memstream", "up"], env=env, text=True,
                                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "Ctrl-C stops it" in log_path.read_text(), timeout=60)
        client = redis.Redis.from_url(read_run_file(home / "run" / "service.json")["url"])
        assert _pings(client)
        os.killpg(proc.pid, signal.SIGINT)  # to the whole group, as the terminal does
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log_path.read_text()
    assert proc.returncode == 0, out
    assert "service.stopped" in out
    assert "transient_failure" not in out and "could not connect" not in out, out
    with pytest.raises(redis.ConnectionError):
        client.ping()


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_add_stats_export_round_trip_through_the_cli(service):
    home, info = service
    added = json.loads(ms(home, "add", "--sync", "--json", "--agent", "minion-7", "--target", "user",
                          "prefers tea over coffee").stdout)
    assert added["state"] == "searchable" and added["entry_id"]
    found = json.loads(ms(home, "search", "--json", "--agent", "minion-7", "tea or coffee").stdout)
    assert found["results"][0]["text"] == "prefers tea over coffee"
    assert found["results"][0]["id"] == added["id"]
    spooled = json.loads(ms(home, "add", "--json", "second memory").stdout)
    assert spooled["state"] == "logged"
    stats = json.loads(ms(home, "stats", "--json").stdout)
    assert stats["streams"][0]["length"] == 2
    assert stats["types"] == {"memory.written": 2}
    lines = [json.loads(l) for l in ms(home, "export").stdout.splitlines()]
    assert [l["content"] for l in lines] == ["prefers tea over coffee", "second memory"]
    assert lines[0]["scope"]["agent"] == "minion-7" and lines[0]["target"] == "user"
    assert lines[0]["id"] == added["id"]
    since = [json.loads(l) for l in ms(home, "export", "--since", lines[0]["entry_id"]).stdout.splitlines()]
    assert [l["content"] for l in since] == ["second memory"]
    bad = ms(home, "export", "--since", added["id"], check=False)  # an event id, not an entry id
    assert bad.returncode != 0 and "not a log entry id" in bad.stderr and "Traceback" not in bad.stderr
    memories = stats["projections"]["memories.v1"]
    assert (memories["lag"], memories["pending"], memories["dead_letters"]) == (0, 0, 0)
    assert memories["items_source"] == "store" and memories["items"] in (1, 2)  # the second may still ship
    assert memories["last_applied_at"] > 0


def test_doctor_is_ok_with_a_running_service_and_fails_without(service, tmp_path):
    home, info = service
    report = json.loads(ms(home, "doctor", "--json").stdout)
    assert report["ok"] is True, report
    assert report["checks"]["redis"]["ok"] and report["checks"]["redis"]["redis_version"] >= "7"
    assert set(report["checks"]) >= {"config", "redis", "streams", "spool", "hermes", "queries"}
    assert report["checks"]["queries"]["answering"] is True  # the service answers recall and tools
    down = ms(tmp_path / "empty-home", "doctor", "--json", check=False)
    assert down.returncode == 1
    assert json.loads(down.stdout)["checks"]["redis"]["ok"] is False


def test_add_sync_fails_clearly_when_the_log_is_unreachable(tmp_path):
    proc = ms(tmp_path / "nohome", "add", "--sync", "x", check=False,
              env={"MEMSTREAM_REDIS_URL": "redis://127.0.0.1:9/0"})
    assert proc.returncode == 1
    assert "cannot reach the log" in proc.stderr


def test_provider_starts_the_service_when_none_runs_and_ships_its_spool(tmp_path):
    """No Redis URL, no service: the provider spools, starts `memstream up` once, ships."""
    home = tmp_path / "auto"
    script = (
        "from provider import MemstreamProvider\n"
        "p = MemstreamProvider()\n"
        "p.initialize('s-auto', platform='cli', agent_identity='default')\n"
        "for i in range(50):\n"
        "    p.on_memory_write('add', 'memory', f'fact {i}', {'tool_call_id': f'c{i}'})\n"
        "ok = p.writer.flush(30)\n"
        "print('FLUSHED', ok, p.stats()['shipped'])\n"
        "p.shutdown()\n"
    )
    env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="1")
    env.pop("MEMSTREAM_REDIS_URL", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=90)
    try:
        assert "FLUSHED True 50" in out.stdout, out.stdout + out.stderr
        info = wait_for(lambda: read_run_file(home / "run" / "service.json"))
        log = EventLog(redis.Redis.from_url(info["url"]))
        contents = [log.decode_entry(f).content for _, _, f in log.entries()]
        assert contents == [f"fact {i}" for i in range(50)]
    finally:
        ms(home, "down", check=False)


def test_service_adopts_a_spool_left_by_a_dead_process(tmp_path):
    home = tmp_path / "adopt"
    script = (
        "import os\n"
        "from provider import MemstreamProvider\n"
        "p = MemstreamProvider()\n"
        "p.initialize('s-dead', platform='cli')\n"
        "for i in range(20):\n"
        "    p.on_memory_write('add', 'user', f'left behind {i}')\n"
        "print('HOOKS-RETURNED', flush=True)\n"
        "os._exit(0)\n"  # dies without shutdown(): nothing shipped, spool left behind
    )
    env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert "HOOKS-RETURNED" in out.stdout, out.stderr
    assert list((home / "spool").glob("*.seg"))
    info = json.loads(ms(home, "up", "--detach", "--json").stdout)
    try:
        log = EventLog(redis.Redis.from_url(info["url"]))
        wait_for(lambda: log.client.xlen("memstream:events:0") >= 20)
        contents = [log.decode_entry(f).content for _, _, f in log.entries()]
        assert contents == [f"left behind {i}" for i in range(20)]
        wait_for(lambda: not list((home / "spool").glob("*-*-*.seg"))
                 or all(p.stat().st_size == 0 for p in (home / "spool").glob("*.seg")))
    finally:
        ms(home, "down", check=False)
