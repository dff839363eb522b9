"""``memstream top`` as a person runs it: against a real running service (found by its
run file) or any address (``--url``), one frame (``--once``), live on a terminal until
Ctrl-C, and one clear line when nothing serves."""

from __future__ import annotations

import io
import json
import os
import re
import socket

import pytest
from pipeline_support import wait_for
from pty_support import run_until
from rich.console import Console
from service_support import isolated, ms

from memstream.core.runfile import read_run_file
from memstream.ops import fetch_summary
from memstream.service.dashboard import History
from memstream.workers.deadletters import DeadLetters


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One service for the module: one test writes to it and counts what it wrote, the other
    only draws it; in the isolation every test has (``isolated``)."""
    root = tmp_path_factory.mktemp("top")
    home = root / "home"
    with isolated(root):
        ms(home, "up", "--detach")
        try:
            info = read_run_file(home / "run" / "service.json")
            assert info and info["metrics"]
            yield home, info
        finally:
            ms(home, "down", check=False)


@pytest.mark.valkey
def test_top_once_prints_the_numbers_the_running_service_reports(service):
    import redis

    home, info = service
    for text in ("the build cache lives on the second disk", "deploys freeze on Fridays"):
        ms(home, "add", "--sync", text)
    client = redis.Redis.from_url(info["url"])
    DeadLetters(client, "memstream").add("facts.v1", "memstream:events:0", "1-1", {b"data": b"\xff"}, "malformed", 1)
    client.close()
    base = info["metrics"][: -len("/metrics")]

    def settled() -> bool:  # a sample (one every 2 s) taken after both writes and the dead letter
        summary = fetch_summary(base)
        return summary["streams"][0]["entries"] == 2 and any(r["dead_letters"] for r in summary["projections"])

    wait_for(settled, what="the dashboard to sample the writes")
    summary = json.loads(ms(home, "top", "--once", "--json").stdout)
    assert summary["redis_up"] is True and summary["streams"][0]["entries"] == 2
    out = ms(home, "top", "--once").stdout
    assert out.splitlines()[0].startswith(f"memstream top  {base}  Redis up  service")
    # the headline under the title: its figures wrap between figures, so which line holds one depends on the rates
    headline = out.split("\n\n", 1)[0].splitlines()[1:]
    assert any("dead letters 1" in line for line in headline), out
    groups = {r["group"] for r in summary["projections"]}
    rows = {
        cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in out.splitlines()) if cells[0] in groups
    }
    assert set(rows) == groups
    for r in summary["projections"]:
        state, lag, age, pending, dead, consumers = rows[r["group"]][:6]
        assert (state, lag, age, pending, consumers) == ("active", "0", "0 s", "0", "1")
    assert rows["facts.v1"][4] == "1" and rows["turns.v1"][4] == "0"
    assert "memstream:events:0" in out and "memory.written" in out
    assert "no agent reports yet" in out if summary["fleet"] is None else "Agents" in out
    assert "build cache" not in out and "Fridays" not in out  # ids and counts, never memory text
    # any process's dashboard by its address, in any of the forms it is written
    for url in (base, info["metrics"], base.removeprefix("http://"), base + "/api/summary"):
        assert json.loads(ms(home, "top", "--once", "--json", "--url", url).stdout)["streams"] == summary["streams"]


@pytest.mark.valkey
def test_top_on_a_terminal_redraws_until_ctrl_c_and_exits_cleanly(service):
    home, info = service
    env = dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0")
    code, text = run_until(["top"], env, "Projections", tty=True)
    assert code == 0, text
    assert "turns.v1" in text and "Traceback" not in text and "KeyboardInterrupt" not in text


def test_top_with_no_service_running_says_so_in_one_line(tmp_path):
    proc = ms(tmp_path / "home", "top", "--once", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("memstream top: error: no memstream service is running here")
    assert "--url" in proc.stderr


def test_top_with_an_address_nothing_serves_says_so_in_one_line(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        proc = ms(tmp_path / "home", "top", "--once", "--url", f"127.0.0.1:{port}", check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"memstream top: error: nothing serves at http://127.0.0.1:{port}")
    bad = ms(tmp_path / "home", "top", "--once", "--url", "ftp://host:1", check=False)
    assert bad.returncode == 1 and "give http://HOST:PORT" in bad.stderr


def test_a_frame_shows_the_agents_reports_when_the_summary_has_them():
    from prometheus_client.core import GaugeMetricFamily

    from memstream.cli.top import frame

    backlog = GaugeMetricFamily("memstream_agent_spool_backlog_events", "help", labels=["agent"])
    for i in range(7):
        backlog.add_metric([f"agent-{i}"], float(i))
    active = GaugeMetricFamily("memstream_agents_active", "help")
    active.add_metric([], 7.0)
    history = History()
    history.record([active, backlog], at=1000.0)
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(frame(history.summary(), "http://127.0.0.1:9464", now=1001.0))
    out = console.export_text()
    assert "agents 7 active" in out and "backlog: agent-6" in out and "backlog: other" in out
    assert "Redis unknown" in out  # a summary without memstream_redis_up
