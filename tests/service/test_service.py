"""The embedded service and the CLI, as a user runs them (real processes, real Valkey)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from service_support import isolated, ms
from writepath import wait_for

from memstream.core.runfile import read_run_file, start_service
from memstream.core.settings import Settings
from memstream.producers.stream import EventLog
from memstream.service import stop_service

pytestmark = pytest.mark.valkey


def _up(home):
    printed = json.loads(ms(home, "up", "--detach", "--json").stdout)
    info = read_run_file(home / "run" / "service.json")  # the URL with its password is only there
    assert info["pid"] == printed["pid"] and printed["url"] != info["url"]
    return info


@pytest.fixture
def service(tmp_path):
    """A service of the test's own: for a test that writes to it or stops it."""
    home = tmp_path / "home"
    info = _up(home)
    yield home, info
    ms(home, "down", check=False)


@pytest.fixture(scope="module")
def watched_service(tmp_path_factory):
    """One service for the tests that only look at it (its log stays empty; a queue of rq's
    is the one thing a test adds, and only that test counts them), in the isolation every
    test has (``isolated``)."""
    root = tmp_path_factory.mktemp("watched")
    home = root / "home"
    with isolated(root):
        info = _up(home)
        try:
            yield home, info
        finally:
            ms(home, "down", check=False)


def test_the_service_serves_its_metrics_where_its_run_file_says(watched_service):
    import urllib.request

    from metrics_support import value

    home, info = watched_service
    assert info["metrics"].startswith("http://127.0.0.1:") and info["metrics"].endswith("/metrics")
    with urllib.request.urlopen(info["metrics"], timeout=10) as reply:
        text = reply.read().decode()
    assert value(text, "memstream_info", role="service") == 1
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_stream_entries", stream="memstream:events:0") == 0


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process identity comes from /proc")
def test_the_run_file_records_when_the_service_process_started(watched_service):
    from memstream.core.runfile import process_start

    _, info = watched_service
    assert isinstance(info["pid_start"], int) and info["pid_start"] == process_start(info["pid"])


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
        proc = subprocess.Popen(
            [sys.executable, "-m", "memstream", "up"],
            env=env,
            text=True,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
    added = json.loads(
        ms(home, "add", "--sync", "--json", "--agent", "minion-7", "--target", "user", "prefers tea over coffee").stdout
    )
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


def test_doctor_is_ok_with_a_running_service_and_fails_without(watched_service, tmp_path):
    home, info = watched_service
    report = json.loads(ms(home, "doctor", "--json").stdout)
    assert report["ok"] is True, report
    assert report["checks"]["redis"]["ok"] and report["checks"]["redis"]["redis_version"] >= "7"
    assert set(report["checks"]) >= {"config", "redis", "streams", "spool", "hermes", "queries"}
    assert report["checks"]["queries"]["answering"] is True  # the service answers recall and tools
    down = ms(tmp_path / "empty-home", "doctor", "--json", check=False)
    assert down.returncode == 1
    assert json.loads(down.stdout)["checks"]["redis"]["ok"] is False


def test_rq_info_shows_no_queue_and_no_worker_of_a_running_service_and_the_docs_name_its_own_lists(watched_service):
    """docs/reference/metrics.md (Queues): memstream's work is in its streams and request lists, not in
    rq queues; rq's own CLI, run against the service's Redis, says so."""

    from rq import Queue

    from memstream.core import keys

    home, info = watched_service
    rq = Path(sys.executable).with_name("rq")

    def rq_info() -> str:
        shown = subprocess.run([str(rq), "info", "--url", info["url"]], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout

    ms(home, "search", "anything")  # a query, answered by the service (exit 0)
    listed = rq_info()
    assert "0 queues" in listed and "0 workers" in listed, listed
    client = redis.Redis.from_url(info["url"])
    try:
        Queue("memstream", connection=client).enqueue("os.getpid")
        listed = rq_info()
        assert "1 queues, 1 jobs total" in listed and "0 workers" in listed, listed  # it runs nowhere
    finally:
        client.close()
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md").read_text()
    queues = page[page.index("**Queues.**") :].split("\n\n", 1)[0]
    assert f"`{keys.queries('memstream')}`" in queues
    assert f"`{keys.tenant_queries('memstream', 'TENANT')}`" in queues


def test_add_sync_fails_clearly_when_the_log_is_unreachable(tmp_path):
    proc = ms(tmp_path / "nohome", "add", "--sync", "x", check=False, env={"MEMSTREAM_REDIS_URL": "redis://127.0.0.1:9/0"})
    assert proc.returncode == 1
    assert "cannot reach the log" in proc.stderr


def test_provider_starts_the_service_when_none_runs_and_ships_its_spool(tmp_path):
    """No Redis URL, no service: the provider spools, starts `memstream up` once, ships."""
    home = tmp_path / "auto"
    script = (
        "from memstream.provider import MemstreamProvider\n"
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
        info = wait_for(lambda: read_run_file(home / "run" / "service.json"), 20, "the run file")
        log = EventLog(redis.Redis.from_url(info["url"]))
        contents = [log.decode_entry(f).content for _, _, f in log.entries()]
        assert contents == [f"fact {i}" for i in range(50)]
    finally:
        ms(home, "down", check=False)


def test_the_background_start_returns_at_once_and_collects_the_service_exit(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    settings = Settings.load(home=str(tmp_path / "bg"))
    started = start_service(settings, wait=None)  # as the producers' autostart calls it
    try:
        assert started["already_running"] is False
        info = wait_for(lambda: read_run_file(settings.run_file), 20, "the run file")
        assert info["pid"] == started["pid"]
        run_dir = settings.run_file.parent
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE((run_dir / "service.log").stat().st_mode) == 0o600
        again = start_service(settings, wait=None)
        assert again["already_running"] is True and again["pid"] == info["pid"]
    finally:
        stopped = stop_service(settings)
    assert stopped.stopped, stopped  # its exit was collected: no zombie passes for alive


def test_a_background_start_sets_the_variables_it_is_given_over_this_processs(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_METRICS_ADDR", "127.0.0.1:0")
    settings = Settings.load(home=str(tmp_path / "bg"))
    info = start_service(settings, wait=60.0, env={"MEMSTREAM_EMBEDDER": "hash", "MEMSTREAM_METRICS_ADDR": ""})
    try:
        assert info["already_running"] is False
        assert info["metrics"] is None  # the given empty address, not this process's 127.0.0.1:0
    finally:
        assert stop_service(settings).stopped


def test_service_adopts_a_spool_left_by_a_dead_process(tmp_path):
    home = tmp_path / "adopt"
    script = (
        "import os\n"
        "from memstream.provider import MemstreamProvider\n"
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
    ms(home, "up", "--detach", "--json")
    info = read_run_file(home / "run" / "service.json")
    try:
        log = EventLog(redis.Redis.from_url(info["url"]))
        wait_for(lambda: log.client.xlen("memstream:events:0") >= 20, 20, "the spooled events shipped")
        contents = [log.decode_entry(f).content for _, _, f in log.entries()]
        assert contents == [f"left behind {i}" for i in range(20)]
        wait_for(
            lambda: (
                not list((home / "spool").glob("*-*-*.seg")) or all(p.stat().st_size == 0 for p in (home / "spool").glob("*.seg"))
            ),
            20,
            "the spool emptied",
        )
    finally:
        ms(home, "down", check=False)


def _modes(root) -> dict[str, int]:
    """Mode bits of ``root`` and everything below it (links not followed). A running service
    writes its store meanwhile: a file gone between the listing and its look has no mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [None, *dirnames, *filenames]:
            path = dirpath if name is None else os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISLNK(st.st_mode):
                out[os.path.relpath(path, root)] = stat.S_IMODE(st.st_mode)
    return out


def test_the_embedded_service_keeps_its_home_owner_only_and_its_valkey_behind_a_password(service):
    home, info = service
    ms(home, "add", "--sync", "a private note")
    modes = _modes(home)
    for must in (".", "run/service.json", "data/valkey", "data/qdrant", "spool"):
        assert must in modes, sorted(modes)
    assert any(p.startswith("data/valkey/") and ("aof" in p) for p in modes), sorted(modes)
    loose = {p: oct(m) for p, m in modes.items() if m & 0o077}
    assert not loose, loose
    # the server refuses a client without the password; the run file's URL has it
    port = redis.connection.parse_url(info["url"])["port"]
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=port).get("x")
    assert redis.Redis.from_url(info["url"]).ping()
    password = redis.connection.parse_url(info["url"])["password"]
    assert len(password) >= 32
    # never on a command line (any local user reads /proc/PID/cmdline), never printed
    cmdline = Path(f"/proc/{info['valkey_pid']}/cmdline").read_bytes().decode(errors="replace")
    assert password not in cmdline
    for args in (("doctor", "--json"), ("stats", "--json"), ("up", "--detach", "--json")):
        shown = ms(home, *args, check=False)
        assert password not in shown.stdout + shown.stderr, args
    # nor in what the service itself logs (its output, kept in run/service.log when detached)
    service_log = (home / "run" / "service.log").read_text()
    assert "service.started" in service_log and password not in service_log


def test_looser_modes_left_in_the_home_are_tightened_at_start(tmp_path):
    home = tmp_path / "loose"
    (home / "data" / "valkey").mkdir(parents=True)
    os.chmod(home, 0o755)
    os.chmod(home / "data", 0o775)
    note = home / "data" / "old.log"
    note.write_text("left by an older version")
    os.chmod(note, 0o644)
    ms(home, "up", "--detach")
    try:
        modes = _modes(home)
        assert modes["."] == 0o700 and modes["data"] == 0o700 and modes["data/old.log"] == 0o600
        assert not {p: oct(m) for p, m in modes.items() if m & 0o077}
    finally:
        ms(home, "down", check=False)


def test_down_without_a_service_succeeds_and_one_that_outlives_the_wait_fails(tmp_path):
    from memstream import ops
    from memstream.service import Stopped

    result, ok = ops.stop_service(Settings.load(home=str(tmp_path / "none")))
    assert ok and result == {"stopped": False, "reason": "no memstream service is running"}
    late = Stopped(stopped=False, pid=12, reason="still running after 15.0s")
    assert not late.ok and late.as_dict() == {"stopped": False, "pid": 12, "reason": "still running after 15.0s"}


def test_down_right_after_a_background_start_stops_the_service_that_is_still_starting(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    settings = Settings.load(home=str(tmp_path / "early"))
    started = start_service(settings, wait=None)  # as `memstream add`'s autostart does
    assert read_run_file(settings.run_file) is None  # it has not written its run file yet
    stopped = stop_service(settings)
    assert stopped.stopped and stopped.pid == started["pid"], stopped
    assert read_run_file(settings.run_file) is None
    assert read_run_file(settings.run_file.parent / "service.starting") is None  # nothing left starting
