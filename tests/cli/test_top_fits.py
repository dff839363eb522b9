"""``memstream top`` on a small terminal (80×24): the sections shrink so that the Queries
and the Agents stay on screen, and each figure sits under a header that names it."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rich.console import Console

from memstream.cli.top import frame

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


def busy_summary(now: float) -> dict:
    """A service after two replays, with a fleet reporting: every section full."""
    projections = [
        {
            "group": f"{kind}.v{v}",
            "state": "active" if v == 3 else "retired",
            "lag_entries": 0,
            "lag_seconds": 0.0,
            "pending": 0,
            "dead_letters": 0,
            "consumers": 1 if v == 3 else 0,
            "applied_per_s": 1.5,
            "freshness_p50": 0.2,
            "freshness_p95": 0.9,
        }
        for kind in ("turns", "memories", "facts", "sessions")
        for v in (1, 2, 3)
    ]
    types = ("turn.recorded", "memory.written", "memory.remembered", "session.ended", "delegation.completed")
    return {
        "sampled_at": now,
        "redis_up": True,
        "process": {"role": "service", "version": "9.9"},
        "projections": projections,
        "streams": [{"stream": f"memstream:events:{i}", "entries": 1200, "bytes": 1 << 20} for i in range(2)],
        "events_in": {"per_s": 0.5, "total": 2400, "by_type": {t: {"total": 480, "per_s": 0.1} for t in types}},
        "queries": {
            "queue": {"recall": 0, "search": 1},
            "outcomes": {o: {"total": 100, "per_s": 0.3} for o in ("answered", "refused", "timed out")},
            "latency": {
                op: {"count": 50, "p50": 0.004, "p95": 0.02} for op in ("recall", "search", "context", "facts", "recent")
            },
            "p95": 0.02,
        },
        "fleet": {
            "agents_active": 3,
            "spool_backlog": {"agents": [{"agent": f"agent-{i}", "events": i} for i in range(3)]},
            "refusals": {"total": 0, "per_s": 0.0},
            "hooks": {
                h: {"p50": 0.001, "p95": 0.004} for h in ("initialize", "prefetch", "sync_turn", "on_session_end", "shutdown")
            },
            "prefetch": {o: {"total": 40, "per_s": 0.2} for o in ("fresh", "cached", "empty")},
        },
    }


def test_a_busy_frame_fits_80_by_24_with_the_queries_and_the_agents_on_screen():
    console = Console(width=80, height=24, record=True, file=io.StringIO())
    console.print(frame(busy_summary(1000.0), "http://127.0.0.1:9464", now=1000.0, width=80, height=24))
    lines = console.export_text().rstrip("\n").splitlines()
    assert len(lines) <= 24, "\n".join(lines)
    titles = {word for line in lines for word in line.split() if word in ("Projections", "Queries", "Agents")}
    assert titles == {"Projections", "Queries", "Agents"}, "\n".join(lines)
    assert any(line.lstrip().startswith("op search") for line in lines), "\n".join(lines)  # with rows, not titles alone
    assert "turns.v3" in "\n".join(lines)  # the active versions stay; the retired collapse
    assert any("8 retired hidden" in line for line in lines)


def test_each_agents_figure_sits_under_the_header_that_names_it():
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(frame(busy_summary(1000.0), "http://127.0.0.1:9464", now=1000.0))
    out = console.export_text()
    assert "figure" not in out and "p95 / now" not in out and "initialize p50" not in out
    agents = out[out.index("Agents") :]
    header = next(line for line in agents.splitlines() if "total" in line)
    row = next(line for line in agents.splitlines() if "hook initialize" in line)
    # the hook's p50 and p95 end under the p50 and p95 headers
    assert row.rstrip().endswith("4.00 ms") or row.rstrip().endswith("4 ms"), row
    assert header.rstrip().endswith("p95") and len(row.rstrip()) == len(header.rstrip()), (header, row)


class _Summary(BaseHTTPRequestHandler):
    summary: dict = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({**self.summary, "sampled_at": time.time()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dashboard():
    _Summary.summary = busy_summary(time.time())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Summary)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def on_terminal(args: list[str], env: dict[str, str], rows: int, columns: int, timeout: float = 60.0) -> tuple[int, str]:
    """``python -m memstream ARGS`` on a pseudo-terminal of ``rows`` × ``columns`` until it
    exits: its exit code and all it printed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "memstream", *args],
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([leader], [], [], 0.1)[0]:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the process closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_top_once_on_an_80_by_24_terminal_keeps_the_queries_and_the_agents_on_screen(dashboard, tmp_path):
    env = dict(os.environ, MEMSTREAM_HOME=str(tmp_path / "home"), MEMSTREAM_AUTOSTART="0", TERM="xterm")
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    code, text = on_terminal(["top", "--once", "--url", dashboard], env, rows=24, columns=80)
    assert code == 0, text
    lines = ANSI.sub("", text).rstrip("\n").splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) <= 24, "\n".join(lines)
    titles = {word for line in lines for word in line.split() if word in ("Projections", "Queries", "Agents")}
    assert titles == {"Projections", "Queries", "Agents"}, "\n".join(lines)
    assert "turns.v3" in text and "active" in text  # the versions that serve stay, their state whole


def test_the_headline_is_the_summarys_what_serves_now_and_still_fits_80_by_24():
    summary = busy_summary(1000.0)
    summary["headline"] = {
        "events_in_per_s": 6.0,
        "log_entries": 35,
        "forgotten": 1,
        "expired": 0,
        "serving": ["facts.v1", "memories.v1", "sessions.v1", "turns.v3"],
        "applied": {"per_s": 5.5, "group": "facts.v1", "versions": 4},
        "building": [{"group": "turns.v4", "fraction": 0.5, "applied": 10, "total": 20}],
    }
    console = Console(width=80, height=24, record=True, file=io.StringIO())
    console.print(frame(summary, "http://127.0.0.1:9464", now=1000.0, width=80, height=24))
    text = console.export_text()
    flat = " ".join(text.split())
    assert "(35 in the stream, 1 forgotten)" in flat  # the streams' entries, not every event ever appended
    assert "applied 5.5/s (slowest active: facts.v1)" in flat  # one active version's rate, not a sum
    assert "building turns.v4 50%" in flat
    assert len(text.rstrip("\n").splitlines()) <= 24, text
