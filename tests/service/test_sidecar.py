"""The projections without vectors in a child process of their own (service/sidecar.py):
real processes on a real Valkey."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest
import redis
from pipeline_support import turn
from service_support import ms
from writepath import wait_for

from memstream.core import observe
from memstream.core.runfile import read_run_file
from memstream.core.settings import Settings, usable_cpus
from memstream.producers.stream import EventLog
from memstream.projections import FactsTable, SessionsIndex
from memstream.service.sidecar import RemoteConsumer, Sidecar, settings_from, settings_of
from memstream.workers import Pipeline, PipelineConfig, group_progress

pytestmark = pytest.mark.valkey

APART = ("facts", "sessions")


def _gone(pid: int) -> bool:
    """No such process, or only its zombie left."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


def _turns(n: int, salt: str = "", first: int = 0) -> list:
    cities = ["Paris", "Lisbon", "Osaka", "Lima", "Oslo"]
    return [
        turn(f"My name is Ann{salt}{i} and I live in {cities[i % 5]}. I work at Acme{i}.", "Noted.", agent=f"a{i % 3}", index=i)
        for i in range(first, first + n)
    ]


@pytest.fixture
def log_on_valkey(valkey_server, tmp_path):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    settings = Settings(redis_url=valkey_server.url, home=tmp_path / "home", embedder="hash", autostart=False, metrics_addr="")
    yield settings, EventLog(client, settings.stream_prefix, settings.shards)
    client.close()


def _caught_up(eventlog: EventLog, groups=("facts.v1", "sessions.v1")) -> bool:
    progress = [group_progress(eventlog.client, eventlog.stream_keys, g) for g in groups]
    return all(p.lag == 0 and p.pending == 0 for p in progress)


def _state(client: redis.Redis, prefix: str, tenant: str = "t1") -> tuple:
    """What facts and sessions hold for ``tenant``: fact ids, texts and event ids; sessions and their turns."""
    facts = sorted((f.id, f.text, tuple(f.event_ids)) for f in FactsTable(client, prefix).query(tenant, history=True))
    sessions = [(s.get("session"), s.get("turns")) for s in SessionsIndex(client, prefix).recent(tenant, limit=100)]
    return facts, sorted(sessions, key=str)


def _reference(settings: Settings, events: list) -> tuple:
    """The same events applied by one in-process pipeline of facts and sessions, under its own prefix."""
    client = redis.Redis.from_url(settings.redis_url)
    prefix = "reference"
    eventlog = EventLog(client, prefix, settings.shards)
    eventlog.append(events)
    ref = Settings(
        redis_url=settings.redis_url, home=settings.home / "ref", embedder="hash", autostart=False, stream_prefix=prefix
    )
    pipeline = Pipeline(ref, eventlog, PipelineConfig(projections=APART))
    try:
        pipeline.drain()
        return _state(client, prefix)
    finally:
        pipeline.stop()
        client.close()


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []

    def batch(self, group, stages, applied, at):
        self.batches.append((group, list(applied)))

    def embedded(self, group, texts, seconds):
        pass

    def answered(self, op, seconds):
        pass


def test_the_child_gets_the_parents_settings_on_the_log_it_is_given(tmp_path):
    settings = Settings(home=tmp_path / "h", embedder="hash", stream_prefix="p1", shards=3, metrics_addr="127.0.0.1:1")
    child = settings_from(json.loads(json.dumps(settings_of(settings))), "redis://127.0.0.1:1/0")
    assert (child.home, child.embedder, child.stream_prefix, child.shards) == (tmp_path / "h", "hash", "p1", 3)
    assert child.redis_url == "redis://127.0.0.1:1/0" and child.metrics_addr == ""


def test_remote_counters_never_go_down_across_children():
    c = RemoteConsumer("facts.v1")
    c.update(10, 1, 2)
    c.fold()  # the child exited
    c.update(3, 0, 1)  # a new one starts from zero
    assert (c.stats.applied, c.stats.dead_lettered, c.stats.redelivered) == (13, 1, 3)


def test_the_child_applies_facts_and_sessions_and_passes_its_figures_on(log_on_valkey):
    settings, eventlog = log_on_valkey
    events = _turns(40)
    recorder = Recorder()
    former = observe.install(recorder)
    sidecar = Sidecar(settings, settings.redis_url, APART, log_level="WARNING").start()
    try:
        assert sidecar.wait_ready(60)
        pid = sidecar.pid
        assert pid is not None and pid != os.getpid()
        eventlog.append(events)
        wait_for(lambda: _caught_up(eventlog), 60, "facts and sessions caught up")
        wait_for(
            lambda: {c.group: c.stats.applied for c in sidecar.consumers} == {"facts.v1": 40, "sessions.v1": 40},
            10,
            "the child's counters reported",
        )
        applied = {g: sum(len(ids) for grp, ids in recorder.batches if grp == g) for g in ("facts.v1", "sessions.v1")}
        assert applied == {"facts.v1": 40, "sessions.v1": 40}  # each batch reported once, to the parent's observer
        assert _state(eventlog.client, settings.stream_prefix) == _reference(settings, events)
        assert _state(eventlog.client, settings.stream_prefix)[0]  # facts were extracted
        assert not (settings.home / "data" / "qdrant").exists()  # the child opens no store
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "_multiarray_umath" not in maps and "onnxruntime" not in maps  # nor numpy, nor a model
        assert "_multiarray_umath" in Path("/proc/self/maps").read_text()  # which this process has: the check can fail
    finally:
        sidecar.stop()
        observe.install(former)
    assert _gone(pid) and sidecar.pid is None


def test_the_child_runs_this_checkouts_code_whatever_the_working_directory(log_on_valkey, tmp_path, monkeypatch):
    settings, eventlog = log_on_valkey
    shadow = tmp_path / "shadow"
    (shadow / "memstream").mkdir(parents=True)
    (shadow / "memstream" / "__init__.py").write_text("raise ImportError('the working directory holds another memstream')\n")
    monkeypatch.chdir(shadow)  # a service started inside another checkout
    sidecar = Sidecar(settings, settings.redis_url, APART, log_level="WARNING").start()
    try:
        assert sidecar.wait_ready(60)
        eventlog.append(_turns(3))
        wait_for(lambda: _caught_up(eventlog), 60, "facts and sessions caught up")
    finally:
        sidecar.stop()


def test_a_killed_child_is_started_again_and_loses_nothing(log_on_valkey):
    settings, eventlog = log_on_valkey
    events = _turns(600, salt="k")
    sidecar = Sidecar(settings, settings.redis_url, APART, log_level="WARNING").start()
    pids = []
    try:
        assert sidecar.wait_ready(60)
        first = sidecar.pid
        assert first is not None
        pids.append(first)
        for start in range(0, len(events), 50):
            eventlog.append(events[start : start + 50])
        wait_for(lambda: any(c.stats.applied for c in sidecar.consumers), 60, "the child applying")
        before = {c.group: c.stats.applied for c in sidecar.consumers}
        os.kill(first, signal.SIGKILL)  # in the middle of the work, most likely mid-batch
        wait_for(lambda: sidecar.pid not in (None, first) and sidecar.wait_ready(0), 60, "a new child")
        pids.append(sidecar.pid)
        assert sidecar.restarts == 1 and sidecar.last_exit == -signal.SIGKILL
        later = _turns(100, salt="after", first=600)  # work only the new child can do (the first may have done all)
        eventlog.append(later)
        events += later
        wait_for(lambda: _caught_up(eventlog), 90, "caught up after the restart")

        # the counters keep what the first child reported (what it applied after its last
        # report is not counted: a kill loses it; an entry it held and did not ack counts twice)
        def counted() -> dict[str, int]:
            return {c.group: c.stats.applied for c in sidecar.consumers}

        wait_for(lambda: sum(counted().values()) > sum(before.values()), 10, "the new child's counts")
        assert all(counted()[g] >= n for g, n in before.items())
        assert _state(eventlog.client, settings.stream_prefix) == _reference(settings, events)
    finally:
        sidecar.stop()
    assert all(_gone(p) for p in pids)


PARENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from memstream.core import configure
    from memstream.core.settings import Settings
    from memstream.service.sidecar import Sidecar
    configure("WARNING")  # log lines on stderr: stdout says the child's pid
    settings = Settings(redis_url=sys.argv[1], home=Path(sys.argv[2]), embedder="hash", autostart=False)
    sidecar = Sidecar(settings, sys.argv[1], ("facts", "sessions"), log_level="WARNING").start()
    assert sidecar.wait_ready(60)
    print(sidecar.pid, flush=True)
    time.sleep(600)
""")


def test_the_child_does_not_outlive_a_killed_parent(log_on_valkey, tmp_path):
    settings, eventlog = log_on_valkey
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, settings.redis_url, str(tmp_path / "p")], stdout=subprocess.PIPE, text=True
    )
    try:
        child = int(parent.stdout.readline())
        assert not _gone(child)
        parent.kill()  # SIGKILL: no clean stop of anything
        parent.wait(10)
        wait_for(lambda: _gone(child), 30, "the orphaned child exits")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        parent.stdout.close()


@pytest.mark.skipif(usable_cpus() < 2 or not os.path.isdir("/proc"), reason="the service keeps threads on 1 CPU")
def test_the_service_runs_facts_and_sessions_in_its_child_and_shows_their_figures(tmp_path):
    from metrics_support import value

    home = tmp_path / "home"
    info = json.loads(ms(home, "up", "--detach", "--json").stdout)
    pid, child = info["pid"], None
    try:
        run = read_run_file(home / "run" / "service.json")
        children = wait_for(
            lambda: [c for c in _children(pid) if "sidecar" in Path(f"/proc/{c}/cmdline").read_text()], 30, "the child"
        )
        child = children[0]
        ms(home, "add", "My name is Alice and I live in Paris.")

        def scrape() -> str:
            with urllib.request.urlopen(run["metrics"], timeout=10) as reply:
                return reply.read().decode()

        def applied(group: str) -> float | None:
            return value(scrape(), "memstream_projection_applied_total", group=group)

        wait_for(lambda: applied("facts.v1") == 1 and applied("memories.v1") == 1, 30, "facts applied in the child")
        text = scrape()
        assert value(text, "memstream_projection_freshness_seconds_count", group="facts.v1") == 1
        assert value(text, "memstream_projection_stage_seconds_count", group="sessions.v1", stage="apply") == 1
        assert value(text, "memstream_projection_consumers", group="facts.v1") == 1
        stats = json.loads(ms(home, "stats", "--json").stdout)
        assert stats["projections"]["facts.v1"]["health"]["consumers"]
        assert {c["pid"] for c in stats["projections"]["facts.v1"]["health"]["consumers"].values()} == {child}
        assert {c["pid"] for c in stats["projections"]["turns.v1"]["health"]["consumers"].values()} == {pid}
    finally:
        ms(home, "down")
    assert _gone(pid) and child is not None and _gone(child)


def test_without_the_setting_the_service_keeps_one_process(tmp_path):
    home = tmp_path / "home"
    info = json.loads(ms(home, "up", "--detach", "--json", env={"MEMSTREAM_PROJECTION_PROCESS": "false"}).stdout)
    try:
        ms(home, "add", "My name is Bob.")
        facts = wait_for(
            lambda: (lambda f: f if f["lag"] == 0 and f["health"]["consumers"] else None)(
                json.loads(ms(home, "stats", "--json").stdout)["projections"]["facts.v1"]
            ),
            30,
            "facts applied",
        )
        assert {c["pid"] for c in facts["health"]["consumers"].values()} == {info["pid"]}
        assert [c for c in _children(info["pid"]) if "sidecar" in Path(f"/proc/{c}/cmdline").read_text()] == []
    finally:
        ms(home, "down")
