"""No password, token or URL with credentials in anything memstream shows: the commands'
output (text and JSON), their errors (authentication refused, connection refused, a malformed
URL, a store that cannot be reached), the logs of the service and of a worker, the dashboard
(its page, its assets and ``/api/summary``), ``memstream top`` and the metrics. Run as a user
does, in child processes, with a Redis URL and a Qdrant URL that carry credentials and an
embedder API key; every output is searched for each secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from service_support import ms
from writepath import wait_for

from memstream.core.runfile import read_run_file, stop_process
from memstream.service.valkey import free_port

pytestmark = pytest.mark.valkey

REDIS_PW = "redis-Pa55-wq8zK3"
WRONG_PW = "wrong-Pa55-y7Tn2"
QDRANT_PW = "qdrant-Pa55-Lm4x"
QDRANT_TOKEN = "qdrant-T0ken-9vXc"
EMBED_KEY = "sk-embed-K3y-51Pq"
SECRETS = (REDIS_PW, WRONG_PW, QDRANT_PW, QDRANT_TOKEN, EMBED_KEY)


def assert_hidden(what: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{what} shows a secret ({secret!r}):\n{text[-3000:]}"


@pytest.fixture
def secret_env(valkey_server, tmp_path):
    """A Redis user with a password, a Qdrant URL with a user, a password and an API key
    (a closed port: nothing answers), an embedder key."""
    root = redis.Redis.from_url(valkey_server.url)
    root.flushall()
    root.execute_command("ACL", "SETUSER", "ops", "reset", "on", f">{REDIS_PW}", "~*", "&*", "+@all")
    url = f"redis://ops:{REDIS_PW}@127.0.0.1:{valkey_server.port}/0"
    qdrant = f"http://quser:{QDRANT_PW}@127.0.0.1:{free_port()}/?api_key={QDRANT_TOKEN}"
    env = {
        "MEMSTREAM_REDIS_URL": url,
        "MEMSTREAM_QDRANT_URL": qdrant,
        "MEMSTREAM_EMBED_API_KEY": EMBED_KEY,
        "MEMSTREAM_METRICS_ADDR": "127.0.0.1:0",
        "MEMSTREAM_TENANT": "t1",
    }
    try:
        yield tmp_path / "home", env, valkey_server
    finally:
        root.execute_command("ACL", "DELUSER", "ops")
        root.close()


def _shown(proc: subprocess.CompletedProcess) -> str:
    """Everything a command showed: its exit code, stdout and stderr."""
    return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def _run(home, env, *args: str) -> str:
    return _shown(ms(home, *args, check=False, env=env))


def _run_all(home, runs: list[tuple[dict, tuple[str, ...]]]) -> list[subprocess.CompletedProcess]:
    """Each (env, args) run as ``memstream ARGS``, the commands started four at a time (each a
    child process of its own, as a user's would be), the finished processes in order."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda run: ms(home, *run[1], check=False, env=run[0]), runs))


def test_commands_and_their_errors_show_no_credentials(secret_env):
    home, env, server = secret_env
    commands = (
        ("doctor",),
        ("doctor", "--json"),
        ("stats",),
        ("stats", "--json"),
        ("add", "--json", "a note"),
        ("dlq",),
        ("projections", "--json"),
        ("tenant", "list"),
        ("acl", "recipe"),
        ("search", "--timeout", "0.5", "note"),
    )
    for args, proc in zip(commands, _run_all(home, [(env, args) for args in commands]), strict=True):
        assert_hidden(f"memstream {' '.join(args)}", _shown(proc))
        if args == ("doctor", "--json"):
            doctor = json.loads(proc.stdout)
            assert doctor["checks"]["redis"]["ok"] and "ops:***@" in doctor["checks"]["redis"]["url"]
    # refused: a wrong password, a closed port, a malformed URL, with the password in it
    port = server.port
    refused = [
        ({**env, "MEMSTREAM_REDIS_URL": url}, args)
        for url in (
            f"redis://ops:{WRONG_PW}@127.0.0.1:{port}/0",
            f"redis://ops:{REDIS_PW}@127.0.0.1:{free_port()}/0",
            f"redis://ops:{REDIS_PW}@127.0.0.1:notaport/0",
            f"rediss://ops:{REDIS_PW}@127.0.0.1:{port}/0",
            f"redis://:{REDIS_PW}@127.0.0.1:{free_port()}/0",
        )
        for args in (("stats",), ("doctor",), ("doctor", "--json"), ("export",), ("add", "--sync", "x"))
    ]
    # and the debug traceback of an unexpected error names no URL either
    debug = {**env, "MEMSTREAM_DEBUG": "1", "MEMSTREAM_REDIS_URL": f"redis://ops:{WRONG_PW}@127.0.0.1:{port}/0"}
    *outs, debug_out = _run_all(home, [*refused, (debug, ("stats",))])
    for (run_env, args), proc in zip(refused, outs, strict=True):
        assert proc.returncode != 0, _shown(proc)
        assert_hidden(f"memstream {' '.join(args)} with {run_env['MEMSTREAM_REDIS_URL'].split('@')[1]}", _shown(proc))
    assert_hidden("memstream stats with MEMSTREAM_DEBUG=1", _shown(debug_out))


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode("utf-8", "replace")


def _background(home, env, log_path, *args: str) -> subprocess.Popen:
    full = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash", **env)
    with open(log_path, "w") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "memstream", *args],
            env=full,
            text=True,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen) -> None:
    stop_process(proc, 30, group=True)


def test_the_service_its_logs_dashboard_and_metrics_show_no_credentials(secret_env, tmp_path):
    """``memstream up`` on the shared Redis, its store a Qdrant server that does not answer:
    the log lines (start, the store's failure), the dashboard and the metrics."""
    home, env, server = secret_env
    log_path = tmp_path / "up.log"
    proc = _background(home, env, log_path, "up")
    try:
        wait_for(
            lambda: (read_run_file(home / "run" / "service.json") or {}).get("metrics"),
            timeout=60,
            what="the service's metrics address",
        )
        base = read_run_file(home / "run" / "service.json")["metrics"].removesuffix("/metrics")
        ms(home, "add", "--json", "a note for the dashboard", env=env)
        wait_for(  # a sample or two of the dashboard's history
            lambda: len(json.loads(_fetch(base + "/api/summary"))["history"]["t"]) >= 2,
            timeout=60,
            what="two samples in the dashboard's history",
            every=0.5,
        )
        pages = {path: _fetch(base + path) for path in ("/", "/metrics", "/api/summary")}
        for asset in ("/static/dashboard.js", "/static/app.js", "/static/dashboard.css"):
            try:
                pages[asset] = _fetch(base + asset)
            except OSError:
                pass
        top = _run(home, env, "top", "--once", "--url", base)
        top_json = _run(home, env, "top", "--once", "--json", "--url", base)
    finally:
        _stop(proc)
    for path, text in pages.items():
        assert_hidden(f"the dashboard's {path}", text)
    json.loads(pages["/api/summary"])
    assert "memstream_" in pages["/metrics"]
    assert_hidden("memstream top --once", top)
    assert_hidden("memstream top --once --json", top_json)
    log = log_path.read_text()
    # it logged its start (the URL masked) and the store's failure
    assert "service.started" in log and "ops:***@" in log and "service.pipeline_failed" in log, log
    assert_hidden("memstream up's log", log)


def test_a_worker_that_cannot_reach_its_store_logs_no_credentials(secret_env, tmp_path):
    home, env, server = secret_env
    log_path = tmp_path / "worker.log"
    proc = _background(home, env, log_path, "worker", "--json", "--name", "w-secret")
    try:
        proc.wait(timeout=60)  # the store does not answer: it gives up, or runs until stopped
    except subprocess.TimeoutExpired:
        pass
    finally:
        _stop(proc)
    log = log_path.read_text()
    assert log.strip(), "the worker said nothing"
    assert_hidden("memstream worker's log", log)
    assert "cannot open the projections' store" in log, log
