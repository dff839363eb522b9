"""What `memstream up` shows a person and a program: readable log lines on a terminal, JSON
lines when piped or with --json, the URL always masked; --quiet prints nothing."""

from __future__ import annotations

import json
import os
import re

import pytest
from pty_support import run_until
from service_support import ms

pytestmark = pytest.mark.valkey

UNMASKED = re.compile(r"redis://:(?!\*\*\*@)")  # a password shown in a URL


def _env(home) -> dict[str, str]:
    return dict(os.environ, MEMSTREAM_HOME=str(home), MEMSTREAM_AUTOSTART="0", MEMSTREAM_EMBEDDER="hash")


def _json_lines(text: str) -> list[dict]:
    """Every line of ``text`` as JSON (fails on a line that is not)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_up_on_a_terminal_logs_readable_lines_with_the_url_masked(tmp_path):
    code, text = run_until(["up"], _env(tmp_path / "home"), "Ctrl-C stops it", tty=True)
    assert code == 0, text
    started = [line for line in text.splitlines() if "service.started" in line]
    assert len(started) == 1 and re.search(
        r"\[info\s*\] service\.started .*url=redis://:\*\*\*@127\.0\.0\.1:\d+/0", started[0]
    ), text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("{")], text
    assert "service.stopped" in text and not UNMASKED.search(text), text


def test_up_with_json_on_a_terminal_logs_json_lines(tmp_path):
    code, text = run_until(["up", "--json"], _env(tmp_path / "home"), "service.started", tty=True)
    assert code == 0, text
    lines = _json_lines(text)
    started = next(line for line in lines if line.get("event") == "service.started")
    assert started["level"] == "info" and started["url"].startswith("redis://:***@127.0.0.1:")
    assert any(line.get("event") == "service.stopped" for line in lines)
    assert not UNMASKED.search(text), text


def test_up_piped_logs_json_lines_with_the_url_masked(tmp_path):
    code, text = run_until(["up"], _env(tmp_path / "home"), "Ctrl-C stops it", tty=False, log=tmp_path / "up.log")
    assert code == 0, text
    logged = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    started = next(line for line in logged if line.get("event") == "service.started")
    assert started["url"].startswith("redis://:***@127.0.0.1:") and not UNMASKED.search(text), text
    serving = next(line for line in logged if line.get("event") == "metrics.serving")
    dashboard = serving["url"].removesuffix("metrics")  # http://127.0.0.1:PORT/
    assert [line for line in text.splitlines() if not line.startswith("{")] == [
        f"memstream service running at {started['url']}, dashboard at {dashboard} (home {tmp_path / 'home'}); Ctrl-C stops it"
    ]


def test_up_detach_says_where_it_runs_and_quiet_prints_nothing(tmp_path):
    home = tmp_path / "home"
    try:
        started = ms(home, "up", "--detach")
        assert re.fullmatch(
            r"memstream service running \(pid \d+\) at redis://:\*\*\*@127\.0\.0\.1:\d+/0, "
            r"dashboard at http://127\.0\.0\.1:\d+/; `memstream down` stops it\n",
            started.stdout,
        ), started.stdout
        quiet = ms(home, "up", "--detach", "--quiet")  # already running: still a success
        assert (quiet.stdout, quiet.stderr) == ("", "")
        shown = json.loads(ms(home, "up", "--detach", "--json").stdout)
        assert shown["already_running"] is True and shown["url"].startswith("redis://:***@")
        ms(home, "down")
        quiet = ms(home, "up", "--detach", "--quiet")  # started here
        assert (quiet.stdout, quiet.stderr) == ("", "")
        assert "already running" in ms(home, "up", "--detach").stdout
    finally:
        ms(home, "down", check=False)


def test_stats_shows_relative_times_and_json_keeps_the_numbers(tmp_path):
    home = tmp_path / "home"
    ms(home, "up", "--detach", "--quiet")
    try:
        ms(home, "add", "--sync", "prefers tea over coffee")
        text = ms(home, "stats").stdout
        numbers = json.loads(ms(home, "stats", "--json").stdout)
    finally:
        ms(home, "down", check=False)
    memories = numbers["projections"]["memories.v1"]
    assert isinstance(memories["last_applied_at"], float) and isinstance(numbers["streams"][0]["last_at"], float)
    assert re.search(r"memories\.v1: .*, last applied \d+s ago, ", text), text
    without_ids = re.sub(r"\b\d+-\d+\b", "", text)  # entry ids start with milliseconds since the epoch
    assert str(int(memories["last_applied_at"])) not in without_ids, text
    assert re.search(r"memstream:events:0: 1 event, first \S+ \(\d+s ago\), last \S+ \(\d+s ago\)", text), text
