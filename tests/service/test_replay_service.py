"""Replay as an operator runs it: `memstream replay` against a running `memstream up`, a
SIGKILL of the service mid-build, and the resumed build equal to an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import redis
from pipeline_support import turn
from service_support import ms
from writepath import wait_for

from memstream.core.runfile import read_run_file
from memstream.producers.stream import EventLog
from memstream.projections import Catalog, open_store
from memstream.workers import group_progress

pytestmark = pytest.mark.valkey

TURNS = 4000


def up(home) -> dict:
    json.loads(ms(home, "up", "--detach", "--json").stdout)
    return read_run_file(home / "run" / "service.json")


def points_of(store, collection: str) -> dict:
    out, offset = {}, None
    from memstream.projections import Filter

    while True:
        page, offset = store.scroll(collection, Filter(tenant="t1"), limit=512, offset=offset)
        full = store.retrieve(collection, [p.id for p in page], with_vectors=True)
        out.update({p.id: (tuple(round(float(x), 6) for x in p.dense), sorted(p.payload.items())) for p in full})
        if offset is None:
            return out


def test_a_build_killed_mid_way_resumes_after_restart_and_equals_an_uninterrupted_one(tmp_path):
    home = tmp_path / "home"
    info = up(home)
    client = redis.Redis.from_url(info["url"])
    log = EventLog(client, "memstream")
    for i in range(0, TURNS, 500):
        log.append(
            [turn(f"note {n}: the fleet's host {n % 97} runs service {n % 13}", when=n, index=n) for n in range(i, i + 500)]
        )
    wait_for(lambda: group_progress(client, log.stream_keys, "turns.v1").done == TURNS, 120)

    started = json.loads(ms(home, "replay", "turns", "sessions", "--detach", "--json").stdout)
    assert [v["group"] for v in started["versions"]] == ["turns.v2", "sessions.v2"]
    # the service held still (SIGSTOP; its Valkey runs on): the build cannot finish, on a busy
    # machine, before the second replay is refused or before the kill lands mid-way
    os.kill(info["pid"], signal.SIGSTOP)
    refused = ms(home, "replay", "turns", "--detach", check=False)
    assert refused.returncode == 1 and "turns is already building version 2 (group turns.v2)" in refused.stderr

    os.kill(info["pid"], signal.SIGCONT)
    wait_for(lambda: group_progress(client, log.stream_keys, "turns.v2").done, 60)
    os.kill(info["pid"], signal.SIGSTOP)
    progress = group_progress(client, log.stream_keys, "turns.v2")  # read while it holds still
    os.kill(info["pid"], signal.SIGKILL)  # mid-build: the builds' groups hold their positions
    assert 0 < progress.done < TURNS, "the build finished before the kill: make TURNS larger"
    wait_for(lambda: read_run_file(home / "run" / "service.json") is None, 30)

    info = up(home)  # the same data (AOF): the builds resume from their groups
    client = redis.Redis.from_url(info["url"])
    catalog = Catalog(client, "memstream")
    wait_for(lambda: catalog.active("turns").version == 2 and catalog.active("sessions").version == 2, 120)

    # an uninterrupted build of the same log, attached, with JSON progress lines
    proc = ms(home, "replay", "turns", "--json", timeout=180)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    ticks = [x for x in lines if "progress" in x]
    assert ticks and ticks[-1]["progress"] == "turns.v3" and ticks[-1]["done"] == ticks[-1]["total"] == TURNS
    assert lines[-1]["versions"][0]["state"] == "active"

    listed = json.loads(ms(home, "projections", "--json").stdout)["projections"]
    turns = {r["version"]: r for r in listed if r["projection"] == "turns"}
    assert [turns[v]["state"] for v in (1, 2, 3)] == ["retired", "retired", "active"]
    assert turns[2]["items"] == turns[3]["items"] == TURNS and turns[3]["lag"] == 0
    assert turns[3]["embedder"] == "hash" and turns[3]["dim"] > 0

    assert ms(home, "projections", "drop", "turns", "3", check=False).returncode == 1  # the active one
    ms(home, "down")
    store = open_store(path=str(home / "data" / "qdrant"))
    try:
        resumed, whole = points_of(store, "turns_v2"), points_of(store, "turns_v3")
    finally:
        store.close()
    assert len(resumed) == TURNS and resumed == whole


def test_replay_of_an_unknown_projection_or_embedder_is_refused_and_adds_nothing(tmp_path):
    home = tmp_path / "home"
    info = up(home)
    try:
        proc = ms(home, "replay", "turn", check=False)
        assert proc.returncode == 1 and "no projection 'turn' (known: turns, memories, facts, sessions)" in proc.stderr
        proc = ms(home, "replay", "turns", "--embedder", "nope", check=False)
        assert proc.returncode == 1 and "embedder 'nope' cannot be loaded" in proc.stderr
        proc = ms(home, "replay", "facts", "--embedder", "hash", check=False)
        assert proc.returncode == 1 and "facts has no vectors" in proc.stderr
        client = redis.Redis.from_url(info["url"])
        catalog = Catalog(client, "memstream")
        assert all(len(catalog.versions(n)) == 1 for n in ("turns", "facts"))
        assert "nothing is building" in ms(home, "replay", "--status", "--detach").stdout
    finally:
        ms(home, "down", check=False)
    assert time.time()  # nothing to clean: the home is the test's


def test_ctrl_c_detaches_from_a_build_and_leaves_it_running(tmp_path):
    import queue
    import subprocess
    import sys
    import threading

    home = tmp_path / "home"
    info = up(home)
    stopped = False
    proc: subprocess.Popen[str] | None = None
    client = redis.Redis.from_url(info["url"])
    try:
        log = EventLog(client, "memstream")
        for i in range(0, TURNS, 500):
            log.append([turn(f"entry {n} of the deploy log", when=n, index=n) for n in range(i, i + 500)])
        wait_for(lambda: group_progress(client, log.stream_keys, "turns.v1").done == TURNS, 120)
        # the service (which builds turns in its own process) held still: the build is certain
        # to be running, not finished, when the Ctrl-C comes, however fast or loaded the machine
        os.kill(info["pid"], signal.SIGSTOP)
        stopped = True
        env = dict(
            os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash", PYTHONFAULTHANDLER="1"
        )
        errors = tmp_path / "replay.err"
        with open(errors, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "memstream", "replay", "turns", "--json"],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
        # its first progress line: the command has started the build and is watching it
        first = json.loads(lines.get(timeout=60))
        assert first["progress"] == "turns.v2" and first["state"] == "building", first
        proc.send_signal(signal.SIGINT)
        try:
            wait_for(lambda: proc.poll() is not None, 60, what="the command to end")
        except AssertionError:
            proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: where each of its threads is, on its stderr
            proc.wait(30)
            raise AssertionError(f"the command did not end after Ctrl-C: {errors.read_text()[-4000:]}") from None
        err = errors.read_text()
        assert proc.returncode == 0, err
        assert "detached; the build goes on (`memstream replay --status` re-attaches)" in err
        os.kill(info["pid"], signal.SIGCONT)
        stopped = False
        wait_for(lambda: Catalog(client, "memstream").active("turns").version == 2, 120)
        assert group_progress(client, log.stream_keys, "turns.v2").done == TURNS
    finally:
        if stopped:
            os.kill(info["pid"], signal.SIGCONT)
        ms(home, "down", check=False)
        if proc is not None:
            if proc.poll() is None:  # a check failed before the command ended
                proc.kill()
                proc.wait(30)
            assert proc.stdout is not None
            proc.stdout.close()
        client.close()
