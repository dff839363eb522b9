"""memstream tried as a new user does (issue 26, finding 11): starting the service from any
directory, a dead service's error on the terminal, `add` starting one, clear errors for ids
that name nothing, each subcommand's own usage. Real processes, real Valkey."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from service_support import isolated, ms

from memstream.core.runfile import last_error_line, read_run_file

pytestmark = pytest.mark.valkey


def memstream_in(cwd, home, *args, env=None, timeout=90):
    """``memstream ARGS`` by its console script, run in ``cwd``."""
    script = os.path.join(os.path.dirname(sys.executable), "memstream")
    full = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_EMBEDDER="hash", **(env or {}))
    return subprocess.run([script, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


def test_up_detach_from_a_directory_holding_a_memstream_folder_starts_the_installed_package(tmp_path):
    cwd = tmp_path / "project"
    (cwd / "memstream").mkdir(parents=True)
    (cwd / "memstream" / "__init__.py").write_text("raise ImportError('a memstream folder of the user, not the package')\n")
    home = tmp_path / "home"
    proc = memstream_in(cwd, home, "up", "--detach")
    try:
        assert proc.returncode == 0, proc.stderr
        assert "running" in proc.stdout
        assert read_run_file(home / "run" / "service.json")
    finally:
        ms(home, "down", check=False)


def test_a_service_that_exits_at_start_says_why_on_the_terminal(tmp_path):
    home = tmp_path / "home"
    proc = memstream_in(tmp_path, home, "up", "--detach", env={"MEMSTREAM_REDIS_URL": "redis://127.0.0.1:9/0"})
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("memstream up: error: the service exited with 1: ")
    assert "Connection refused" in line or "connecting to 127.0.0.1:9" in line  # the child's own error, not "see the log"
    assert "service.log" in line


def test_the_last_error_line_of_a_log_is_a_tracebacks_last_line(tmp_path):
    log = tmp_path / "service.log"
    log.write_text(
        '{"event": "service.started", "level": "info"}\n'
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 189, in _run_module_as_main\n'
        "ImportError: cannot import name 'main' from 'memstream.cli'\n"
        '{"error": "Address already in use", "event": "metrics.not_served", "level": "warning"}\n'
    )
    assert last_error_line(log) == "ImportError: cannot import name 'main' from 'memstream.cli'"
    assert last_error_line(tmp_path / "none.log") == ""


def test_add_that_starts_a_service_says_so_in_words_not_a_json_log_line(tmp_path):
    home = tmp_path / "home"
    proc = memstream_in(tmp_path, home, "add", "the build server is hopper", env={"MEMSTREAM_AUTOSTART": "1"})
    try:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("added ")
        assert "started one in the background" in proc.stderr
        for line in proc.stderr.splitlines():
            assert not line.lstrip().startswith("{"), proc.stderr  # no raw JSON log line
    finally:
        ms(home, "down", check=False)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One service for the module's tests that ask a running one (each asks of it only what
    no other changes), in the isolation every test has (``isolated``)."""
    root = tmp_path_factory.mktemp("new-user")
    home = root / "home"
    with isolated(root):
        ms(home, "up", "--detach")
        try:
            yield home
        finally:
            ms(home, "down", check=False)


@pytest.mark.parametrize("action", ["retry", "drop"])
def test_dlq_retry_and_drop_of_an_unknown_id_say_there_is_no_such_dead_letter(service, action):
    proc = ms(service, "dlq", action, "999-0", check=False)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "999-0: no such dead letter (`memstream dlq list` shows them)"
    assert "None" not in proc.stdout and "False" not in proc.stdout
    as_json = json.loads(ms(service, "dlq", action, "999-0", "--json", check=False).stdout)
    assert as_json[action] == {"999-0": None} and as_json["missing"] == ["999-0"]


def aof_rewrites(home) -> int:
    import redis

    info = read_run_file(home / "run" / "service.json")
    persistence = redis.Redis.from_url(info["url"]).info("persistence")
    return int(persistence.get("aof_rewrites", 0))


def test_forget_of_an_id_that_names_no_event_fails_clearly_and_rewrites_nothing(service):
    before = aof_rewrites(service)
    for event_id in ("not-an-id", "01a21e38-bd36-709c-aef6-30990211b073"):
        proc = ms(service, "forget", "--event", event_id, check=False)
        assert proc.returncode == 1, proc.stdout
        assert f"no event with the id {event_id!r} was found" in proc.stderr
    assert "event ids look like" in ms(service, "forget", "--event", "not-an-id", check=False).stderr
    assert aof_rewrites(service) == before


def test_forget_that_finds_nothing_rewrites_no_append_only_file(service):
    ms(service, "add", "--sync", "the datacenter is in Oslo")
    before = aof_rewrites(service)
    proc = ms(service, "forget", "--match", "nothing holds this text", "--json")
    result = json.loads(proc.stdout)
    assert result["events"] == [] and result["tombstones"] == 0
    assert result["aof"]["state"] == "not needed"
    assert aof_rewrites(service) == before
    forgot = json.loads(ms(service, "forget", "--match", "Oslo", "--json").stdout)
    assert len(forgot["events"]) == 1 and forgot["aof"]["state"] == "rewritten"


@pytest.mark.parametrize("command, args", [("stats", ()), ("doctor", ()), ("dlq", ()), ("forget", ()), ("search", ("q",))])
def test_a_bad_flag_prints_the_subcommands_own_usage(tmp_path, command, args):
    proc = ms(tmp_path / "home", command, *args, "--bogus", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"usage: memstream {command} ")
    assert f"memstream {command}: error: unrecognized arguments: --bogus" in proc.stderr


def test_the_run_file_names_the_restarted_valkey_not_the_dead_one(service):
    import signal
    import time

    from memstream.core.runfile import pid_alive

    run_file = service / "run" / "service.json"
    first = read_run_file(run_file)
    os.kill(first["valkey_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = read_run_file(run_file)
        if info and info["valkey_pid"] != first["valkey_pid"] and pid_alive(info["valkey_pid"]):
            break
        time.sleep(0.1)
    info = read_run_file(run_file)
    assert info["valkey_pid"] != first["valkey_pid"] and pid_alive(info["valkey_pid"])
    assert info["pid"] == first["pid"]
    assert ms(service, "stats").returncode == 0  # the service serves through it
