"""A full disk under the service's log and its Valkey's append-only file (a real tmpfs of a
few MiB, filled to the last byte): no thread of the service dies, and the projections resume
when space returns, without `down`/`up` (issue 26, finding 5). Needs to mount a tmpfs (root
with CAP_SYS_ADMIN, as the project's machines and CI run); skipped elsewhere.

The vector store stays off the small disk: qdrant-edge maps its files into memory, and a
write through a mapping on a full tmpfs is a SIGBUS no Python code can catch."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
import redis
from pipeline_support import all_applied, memory, wait_for
from service_support import ms

from memstream.core.runfile import read_run_file
from memstream.producers.stream import EventLog

pytestmark = pytest.mark.valkey


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(path) -> None:
    """Write ``path`` until the filesystem has no byte left."""
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (65536, 4096, 512, 1):  # the last pages too
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError:
                    break


def fill_up(path) -> None:
    """Append to the file at ``path`` until the filesystem refuses one byte more."""
    with open(path, "ab", buffering=0) as f:
        for size in (4096, 512, 1):
            while True:
                try:
                    f.write(b"\n" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break


def refused_writes(client: redis.Redis) -> int:
    stats = client.info("errorstats")
    return sum(int(v.get("count", 0)) for k, v in stats.items() if k.startswith("errorstat_MISCONF"))


def test_a_full_disk_kills_no_thread_and_the_projections_resume_when_space_returns(tmp_path, small_disk):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (small_disk / "run").mkdir(mode=0o700)
    (small_disk / "valkey").mkdir(mode=0o700)
    os.symlink(small_disk / "run", home / "run")  # the service's log
    os.symlink(small_disk / "valkey", home / "data" / "valkey")  # its Valkey's append-only file
    ms(home, "up", "--detach", env={"MEMSTREAM_METRICS_ADDR": ""})
    try:
        info = read_run_file(home / "run" / "service.json")
        client = redis.Redis.from_url(info["url"])
        log = EventLog(client)
        log.append([memory("add", "before the disk fills")])
        wait_for(lambda: all_applied(log), timeout=90, what="the first event applied")

        fill(small_disk / "filler")
        fill_up(small_disk / "run" / "service.log")  # its last page's slack too: the next line fails
        refused = refused_writes(client)
        log.append([memory("add", "while the disk is full")])  # taken in memory; its AOF write fails
        wait_for(
            lambda: client.info("persistence").get("aof_last_write_status") == "err",
            timeout=90,
            what="Valkey to fail its AOF write",
        )
        # the workers meet the refusals (and log them, onto the full disk) again and again
        wait_for(lambda: refused_writes(client) >= refused + 20, timeout=90, what="the service's writes to be refused")

        os.unlink(small_disk / "filler")  # space returns
        wait_for(
            lambda: client.info("persistence").get("aof_last_write_status") == "ok",
            timeout=90,
            what="Valkey to write its AOF again",
        )
        log.append([memory("add", "after space returned")])
        wait_for(lambda: all_applied(log), timeout=90, what="every event applied after space returned, with no restart")
        assert read_run_file(home / "run" / "service.json")["pid"] == info["pid"]  # the same service, never restarted
    finally:
        ms(home, "down", check=False)


def test_up_detach_on_a_disk_too_small_says_why_and_never_says_running(tmp_path, small_disk):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (small_disk / "run").mkdir(mode=0o700)
    (small_disk / "valkey").mkdir(mode=0o700)
    os.symlink(small_disk / "run", home / "run")
    os.symlink(small_disk / "valkey", home / "data" / "valkey")
    fill(small_disk / "filler")
    proc = ms(home, "up", "--detach", check=False, env={"MEMSTREAM_METRICS_ADDR": ""}, timeout=120)
    try:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "running" not in proc.stdout
        assert proc.stderr.startswith("memstream up: error: the service ")
    finally:
        os.unlink(small_disk / "filler")
        ms(home, "down", check=False)
