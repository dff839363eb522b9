"""The CLI against a real detached service (embedded Valkey, the pipeline in-process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis
from pipeline_support import wait_for

from memstream.cli import main
from memstream.core.runfile import read_run_file, stop_process, stop_processes
from memstream.core.settings import Settings
from memstream.workers.positions import is_applied

GROUPS = ("turns.v1", "memories.v1", "facts.v1", "sessions.v1")


def _run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1]) if out else {}


def _ms(*args: str) -> subprocess.CompletedProcess:
    """The service starts and stops from a separate process, as a user runs it (the
    service must not be a child of the test process, or it lingers as a zombie)."""
    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, MEMSTREAM_EMBEDDER="hash"),
    )


@pytest.fixture
def service(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    up = _ms("up", "--detach", "--json")
    assert up.returncode == 0, up.stderr
    client = redis.Redis.from_url(read_run_file(Settings.load().run_file)["url"])
    try:
        yield client
    finally:
        client.close()
        down = _ms("down", "--json")
        assert down.returncode == 0 and json.loads(down.stdout)["stopped"], down.stdout + down.stderr


@pytest.mark.valkey
def _stop(worker: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM, as a supervisor stops a worker; its exit code (killed if it does not exit in 30 s)
    and the end of its stderr, its pipes closed."""
    code = stop_process(worker, 30)
    with worker.stdout, worker.stderr:
        return code, worker.stderr.read()[-2000:]


def test_add_sync_is_searchable_at_once_and_dlq_list_retry_drop_work_on_a_live_service(service, capsys):
    code, added = _run(capsys, "add", "--sync", "--json", "The release train leaves every second Thursday")
    assert code == 0 and added["state"] == "searchable"
    code, found = _run(capsys, "search", "--json", "release train Thursday")
    assert code == 0
    assert added["id"] in [r["id"] for r in found["results"]]

    key = f"{Settings.load().stream_prefix}:events:0"
    bad = service.xadd(key, {"id": "x", "type": "turn.recorded", "data": b"\xc1 not msgpack"}).decode()

    def dead_letters() -> list[dict]:
        return _run(capsys, "dlq", "list", "--json")[1]["dead_letters"]

    wait_for(lambda: len(dead_letters()) == 1, what="the malformed entry's one dead letter")
    wait_for(lambda: all(is_applied(service, key, g, bad) for g in GROUPS), what="every group past the malformed entry")
    [dead] = dead_letters()  # admission's verdict is every group's: one letter, shared
    assert dead["entry_id"] == bad and dead["error"].startswith("malformed") and dead["every_group"] == "1"
    assert len(dead_letters()) == 1

    code, retried = _run(capsys, "dlq", "retry", dead["dlq_id"], "--json")
    assert code == 0
    new_entry = retried["retry"][dead["dlq_id"]]
    wait_for(lambda: all(is_applied(service, key, g, new_entry) for g in GROUPS), what="the retry to be read")
    again = [d for d in dead_letters() if d["entry_id"] == new_entry]
    assert len(again) == 1 and again[0]["every_group"] == "1"  # read by every group, dead once more

    for d in dead_letters():
        assert _run(capsys, "dlq", "drop", d["dlq_id"], "--json")[0] == 0
    assert dead_letters() == []
    assert _run(capsys, "dlq", "drop", dead["dlq_id"], "--json")[0] == 1
    assert read_run_file(Settings.load().run_file)


# -- memstream worker ------------------------------------------------------------------------------
def _worker_env(tmp_path, url: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    return dict(
        env,
        **{
            "MEMSTREAM_REDIS_URL": url,
            "MEMSTREAM_HOME": str(tmp_path / "worker-home"),
            "MEMSTREAM_EMBEDDER": "hash",
            "MEMSTREAM_AUTOSTART": "0",
            "MEMSTREAM_METRICS_ADDR": "127.0.0.1:0",
            **extra,
        },
    )


@pytest.mark.valkey
def test_worker_needs_a_shared_qdrant_unless_told_to_own_the_embedded_store(tmp_path, valkey_server):
    env = _worker_env(tmp_path, valkey_server.url)
    refused = subprocess.run([sys.executable, "-m", "memstream", "worker"], capture_output=True, text=True, timeout=60, env=env)
    assert refused.returncode == 1 and "MEMSTREAM_QDRANT_URL" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.valkey
def test_a_worker_on_an_embedded_store_another_process_holds_is_one_clear_error(tmp_path, valkey_server):
    """The store's lock refused (``StoreLocked``, transient, not a ``StoreError``) is still
    the command's one-line error, not a traceback."""
    from memstream.projections.stores.edge import EdgeStore

    env = _worker_env(tmp_path, valkey_server.url)
    data_dir = Settings.load(home=env["MEMSTREAM_HOME"], autostart=False).data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    holder = EdgeStore(data_dir / "qdrant")
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "memstream", "worker", "--embedded-store"], capture_output=True, text=True, timeout=60, env=env
        )
    finally:
        holder.close()
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "cannot open the projections' store" in refused.stderr and "another process" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.valkey
def test_a_worker_projects_answers_search_and_exits_cleanly_on_sigterm(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    env = _worker_env(tmp_path, valkey_server.url)
    worker = subprocess.Popen(
        [sys.executable, "-m", "memstream", "worker", "--embedded-store", "--name", "w1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        added = subprocess.run(
            [sys.executable, "-m", "memstream", "add", "--sync", "--json", "The blue-green switch runs at 02:00 UTC"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert added.returncode == 0, added.stderr
        event_id = json.loads(added.stdout)["id"]
        found = subprocess.run(
            [sys.executable, "-m", "memstream", "search", "--json", "blue-green switch"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert found.returncode == 0, found.stderr
        assert event_id in [r["id"] for r in json.loads(found.stdout)["results"]]
        groups = {g["name"].decode(): g for g in client.xinfo_groups("memstream:events:0")}
        assert set(groups) == set(GROUPS)
        assert all(c["name"].decode() == "w1" for g in GROUPS for c in client.xinfo_consumers("memstream:events:0", g))
    finally:
        client.close()
        code, stderr = _stop(worker)
    assert code == 0, stderr


@pytest.mark.valkey
def test_a_worker_serves_its_metrics_and_a_second_one_on_the_same_port_runs_without(tmp_path, valkey_server):
    import urllib.request

    from metrics_support import value

    from memstream.service import free_port

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    address = f"127.0.0.1:{free_port()}"
    workers = []
    logs = {name: tmp_path / f"{name}.log" for name in ("w1", "w2")}
    try:
        for name in ("w1", "w2"):  # each its own home, hence its own embedded store
            env = _worker_env(tmp_path / name, valkey_server.url, MEMSTREAM_METRICS_ADDR=address)
            with open(logs[name], "w") as err:  # a file, read while it runs (a pipe could fill and block it)
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "memstream", "worker", "--embedded-store", "--name", name],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        text=True,
                    )
                )
            if name == "w1":

                def served() -> str | None:
                    try:
                        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as reply:
                            return reply.read().decode()
                    except OSError:
                        return None

                text = wait_for(served, timeout=60, what="the first worker's metrics")
                assert value(text, "memstream_info", role="worker") == 1
        wait_for(
            lambda: len(client.xinfo_consumers("memstream:events:0", GROUPS[0])) == 2,
            timeout=60,
            what="the second worker to consume",
        )
        # a worker consumes before it binds its metrics: stopping the first one before the second
        # has tried would free the port for it
        wait_for(lambda: "metrics.not_served" in logs["w2"].read_text(), timeout=60, what="the second worker's metrics warning")
        assert workers[1].poll() is None  # no metrics, and running all the same
        assert value(served() or "", "memstream_info", role="worker") == 1  # the first one serves still
    finally:
        codes = stop_processes(workers, 30)
        client.close()
    second = logs["w2"].read_text()
    assert codes == [0, 0], second[-2000:]
    assert "metrics.serving" not in second and "metrics.serving" in logs["w1"].read_text()


@pytest.mark.valkey
def test_a_worker_of_the_projections_without_vectors_needs_no_qdrant_and_runs_only_those(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    env = _worker_env(tmp_path, valkey_server.url)
    unknown = subprocess.run(
        [sys.executable, "-m", "memstream", "worker", "--projections", "facts,nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert unknown.returncode == 1 and "'nosuch'" in unknown.stderr and "known: turns" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    with_vectors = subprocess.run(
        [sys.executable, "-m", "memstream", "worker", "--projections", "turns"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert with_vectors.returncode == 1 and "MEMSTREAM_QDRANT_URL" in with_vectors.stderr
    # the setting names them; no --embedded-store and no Qdrant server: none is needed
    worker = subprocess.Popen(
        [sys.executable, "-m", "memstream", "worker", "--name", "w2"],
        env=dict(env, MEMSTREAM_WORKER_PROJECTIONS="sessions,facts"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        added = subprocess.run(
            [sys.executable, "-m", "memstream", "add", "--json", "My name is Carol."],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert added.returncode == 0, added.stderr

        def groups() -> dict:
            return {g["name"].decode(): g for g in client.xinfo_groups("memstream:events:0")}

        wait_for(
            lambda: (
                set(groups()) == {"facts.v1", "sessions.v1"}
                and all(g["lag"] == 0 and g["pending"] == 0 for g in groups().values())
            ),
            60,
        )
        assert not (tmp_path / "worker-home" / "data" / "qdrant").exists()  # it opened no store
    finally:
        client.close()
        code, stderr = _stop(worker)
    assert code == 0, stderr
