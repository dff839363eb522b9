"""The run file names a live service only while that very process runs: a pid reused by
another process (after a crash, a reboot) makes it stale."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstream.core.runfile import process_start, read_run_file

linux_only = pytest.mark.skipif(not os.path.isdir("/proc"), reason="process identity comes from /proc")


def write(path, **info):
    path.write_text(json.dumps({"url": "redis://127.0.0.1:1", **info}))
    return path


@linux_only
def test_a_run_file_naming_this_very_process_is_live(tmp_path):
    me = write(tmp_path / "service.json", pid=os.getpid(), pid_start=process_start(os.getpid()))
    assert read_run_file(me)["pid"] == os.getpid()


@linux_only
def test_a_live_pid_with_another_start_time_is_a_reused_pid_and_the_run_file_is_stale(tmp_path):
    reused = write(tmp_path / "service.json", pid=os.getpid(), pid_start=process_start(os.getpid()) - 1)
    assert read_run_file(reused) is None


@linux_only
@pytest.mark.skipif(os.geteuid() != 0, reason="starting another user's process needs root")
def test_a_live_pid_of_another_user_is_not_ours_and_the_run_file_is_stale(tmp_path):
    other = subprocess.Popen(["sleep", "30"], user=65534, cwd="/")
    try:
        stale = write(tmp_path / "service.json", pid=other.pid, pid_start=process_start(other.pid))
        assert read_run_file(stale) is None
    finally:
        other.kill()
        other.wait()


def test_a_run_file_from_before_start_times_were_recorded_still_counts_while_its_pid_lives(tmp_path):
    assert read_run_file(write(tmp_path / "service.json", pid=os.getpid()))["pid"] == os.getpid()


def test_a_dead_pid_or_a_malformed_run_file_is_stale(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert read_run_file(write(tmp_path / "dead.json", pid=child.pid)) is None
    assert read_run_file(write(tmp_path / "bad.json", pid="not a pid")) is None
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_run_file(tmp_path / "list.json") is None
    assert read_run_file(tmp_path / "absent.json") is None


@linux_only
def test_the_start_time_of_a_process_is_stable_and_differs_from_a_later_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_start(os.getpid()) == process_start(os.getpid()) <= process_start(child.pid)
    finally:
        child.kill()
        child.wait()
    assert process_start(child.pid) is None


# -- one spawner of the background service --------------------------------------------------
PACKAGE = Path(__file__).resolve().parents[2] / "memstream"


def _starts_the_service(tree: ast.AST) -> bool:
    """Whether a list literal names ``memstream`` and ``up`` (``[..., "-m", "memstream", "up"]``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if "memstream" in words and "up" in words:
                return True
    return False


def test_only_the_run_file_module_starts_the_service_in_the_background():
    starters = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if _starts_the_service(ast.parse(path.read_text(), str(path)))
    )
    assert starters == ["core/runfile.py"]


def test_stop_process_by_stdin_lets_the_child_end_its_input_and_kills_one_that_does_not():
    import signal

    from memstream.core import stop_process

    reads = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert stop_process(reads, 30, by_stdin=True) == 0
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    deaf = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert deaf.stdout is not None and deaf.stdout.readline() == b"ready\n"
    assert stop_process(deaf, 0.2, by_stdin=True) == -signal.SIGKILL
    deaf.stdout.close()


def test_stop_processes_stops_them_together_and_closes_their_stdin():
    import signal

    from memstream.core import stop_processes

    sleeper = "import time; print('ready', flush=True); time.sleep(60)"
    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for code in (sleeper, deaf, deaf)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    assert stop_processes(procs, 0.5) == [-signal.SIGTERM, -signal.SIGKILL, -signal.SIGKILL]
    for proc in procs:
        assert proc.stdin is not None and proc.stdin.closed
        assert proc.stdout is not None
        proc.stdout.close()


def test_stop_process_of_a_group_stops_the_childs_own_children(tmp_path):
    import signal

    from writepath import wait_for

    from memstream.core import stop_process

    code = (
        "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        "print(c.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert parent.stdout is not None
    grandchild = int(parent.stdout.readline())
    assert stop_process(parent, 30, group=True) == -signal.SIGTERM
    parent.stdout.close()
    wait_for(lambda: _ended(grandchild), what="the child's own child to be gone")


def _ended(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (it ran no more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True
