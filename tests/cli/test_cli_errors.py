"""The CLI's failure paths: every argument checked at parse time (exit 2), every failure one
line on stderr (exit 1), a closed stdout quiet, memory text cut for the terminal."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import redis
from fuzzing import examples
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream import cli
from memstream.cli import commands, output
from memstream.core.settings import Settings
from memstream.ops import CommandError
from memstream.producers.stream import EventLog


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ms_process(*args: str, stdout=subprocess.PIPE, env=None, timeout=60) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, MEMSTREAM_EMBEDDER="hash", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        env=full_env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )


def closed_pipe_run(*args: str, env=None) -> subprocess.CompletedProcess:
    """Run ``memstream ARGS`` with stdout a pipe whose reader is gone (``| head`` done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return ms_process(*args, stdout=write_end, env=env)
    finally:
        os.close(write_end)


# -- the findings: each one a traceback or a wrong answer before -----------------------
@pytest.mark.parametrize(
    "argv, says",
    [
        (["search", "--timeout", "nan", "q"], "argument --timeout: seconds must be a finite number"),
        (["search", "--timeout", "-1", "q"], "argument --timeout: seconds must be a finite number"),
        (["search", "-k", "0", "q"], "argument -k: must be between 1 and 50"),
        (["dlq", "list", "--count", "-1"], "argument --count: must be between 1 and 100000"),
        (["export", "--since", "99999999999999999999-0"], "is not a log entry id"),
        (["dlq", "drop", "1-99999999999999999999"], "is not a log entry id"),
        (["add", "--agent", "", "x"], "agent must be 1 to 256 printable characters"),
        (["add", "--timeout", "inf", "--sync", "x"], "argument --timeout"),
        (["bench", "fleet", "--rate", "0"], "argument --rate: a rate must be above 0"),
        (["bench", "fleet", "--agents", "200,50"], "argument --agents: ascending positive counts"),
        (["bench", "fleet", "--processes", "0"], "argument --processes: must be between 1 and 256"),
        (["bench", "fleet", "--seconds", "nan"], "argument --seconds: seconds must be a finite number"),
    ],
)
def test_bad_arguments_are_usage_errors_naming_the_argument(capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert says in err and "Traceback" not in err
    assert "service" not in err  # not blamed on a missing service: nothing was contacted


@pytest.mark.parametrize("agents", ["4,8", "65"])
def test_bench_chaos_takes_one_agents_count_up_to_64(capsys, agents):
    code, out, err = run(capsys, "bench", "chaos", "--agents", agents)
    assert code == 1
    assert "bench chaos takes one --agents count from 1 to 64" in err and "Traceback" not in err


def test_a_closed_stdout_ends_the_command_quietly():
    proc = closed_pipe_run("doctor", "--json")
    assert proc.returncode == 1 and proc.stderr == ""  # not "Exception ignored ... BrokenPipeError"


def test_doctor_with_a_malformed_redis_url_fails_its_config_check(capsys, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", "redis://ops:hunter2-pw@cache:port/0")
    code, out, err = run(capsys, "doctor", "--json")
    assert code == 1 and "Traceback" not in err
    report = json.loads(out)
    config = report["checks"]["config"]
    assert config["ok"] is False and "MEMSTREAM_REDIS_URL" in config["error"]
    assert report["checks"]["redis"]["ok"] is False
    assert "hunter2-pw" not in out + err
    code, out, err = run(capsys, "doctor")
    assert code == 1 and "[FAIL] config: MEMSTREAM_REDIS_URL" in out


def test_a_malformed_redis_url_is_one_error_line_for_other_commands(capsys, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", "http://cache:6379")
    code, out, err = run(capsys, "stats")
    assert code == 1
    assert err.splitlines()[-1].startswith("memstream stats: error: cannot reach the log")
    assert "Traceback" not in err


@pytest.fixture
def log_server(valkey_server, monkeypatch):
    """The CLI pointed at a real, empty Valkey (no workers: nothing gets projected)."""
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", valkey_server.url)
    yield client
    client.close()


def logged_contents(client) -> list[str]:
    log = EventLog(client, Settings.load().stream_prefix)
    return [log.decode_entry(fields).content for _, _, fields in log.entries()]


@pytest.mark.valkey
def test_add_dash_reads_the_text_from_stdin(log_server, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a memory from a pipe\nline two\n")))
    code, out, err = run(capsys, "add", "--json", "-")
    assert code == 0, err
    assert logged_contents(log_server) == ["a memory from a pipe\nline two"]


@pytest.mark.valkey
def test_add_file_reads_utf8_and_clips_at_the_bound_saying_so(log_server, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMSTREAM_MAX_TEXT_BYTES", "1000")
    small = tmp_path / "note.txt"
    small.write_text("prefers green tea ☕\n", encoding="utf-8")
    assert run(capsys, "add", "--file", str(small))[0] == 0
    big = tmp_path / "big.txt"
    big.write_text("é" * 5000, encoding="utf-8")  # 10000 bytes, two per character
    code, out, err = run(capsys, "add", "--file", str(big))
    assert code == 0 and "over MEMSTREAM_MAX_TEXT_BYTES=1000 bytes: stored clipped" in err
    contents = logged_contents(log_server)
    assert contents[0] == "prefers green tea ☕"
    assert len(contents[1].encode()) <= 1000 and contents[1].startswith("éé") and "clipped" in contents[1]


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: d / "missing.txt", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: (d / "bad.txt").write_bytes(b"ok \xff\xfe") and d / "bad.txt", "is not UTF-8 text"),
        (lambda d: (d / "empty.txt").write_bytes(b"\n") and d / "empty.txt", "nothing to add"),
    ],
)
def test_add_file_problems_are_one_clear_line(capsys, tmp_path, make, says):
    code, out, err = run(capsys, "add", "--file", str(make(tmp_path)))
    assert code == 1 and says in err and len(err.strip().splitlines()) == 1


def test_add_needs_exactly_one_source(capsys, tmp_path):
    assert run(capsys, "add")[0] == 2
    assert run(capsys, "add", "--file", str(tmp_path), "text")[0] == 2


def test_settings_public_masks_qdrant_credentials(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_QDRANT_URL", "https://admin:qd-pass-77@qdrant.internal:6333/?api_key=qd-key-99")
    shown = json.dumps(Settings.load().public())
    assert "qd-pass-77" not in shown and "qd-key-99" not in shown
    assert "qdrant.internal:6333" in shown


# -- main() never lets an exception out ---------------------------------------------
@pytest.mark.parametrize(
    "raised, code, says",
    [
        (
            ValueError("odd\nvalue"),
            1,
            "memstream stats: error: unexpected ValueError: odd value (MEMSTREAM_DEBUG=1 shows the traceback)",
        ),
        (redis.ResponseError("ERR bad"), 1, "memstream stats: error: Redis: ResponseError: ERR bad"),
        (CommandError("do this instead"), 1, "memstream stats: error: do this instead"),
        (KeyboardInterrupt(), 130, ""),
    ],
)
def test_every_failure_is_one_line_and_an_exit_code(capsys, monkeypatch, raised, code, says):
    def fail(args, settings):
        raise raised

    monkeypatch.setattr(commands, "cmd_stats", fail)
    got, out, err = run(capsys, "stats")
    assert got == code
    assert err.strip() == says


def test_memstream_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setattr(commands, "cmd_stats", lambda args, settings: 1 / 0)
    monkeypatch.setenv("MEMSTREAM_DEBUG", "1")
    code, out, err = run(capsys, "stats", "--json")
    assert code == 1 and "Traceback" in err and "ZeroDivisionError" in err
    assert json.loads(out) == {
        "ok": False,
        "error": "unexpected ZeroDivisionError: division by zero (MEMSTREAM_DEBUG=1 shows the traceback)",
    }


def test_terminal_text_is_cut_with_a_note_and_loses_control_characters():
    assert output.cut("short") == "short"
    cut = output.cut("x" * 1000)
    assert cut.startswith("x" * output.TEXT_CUT + "…") and "700 more characters" in cut
    assert output.cut("a\x1b[2Jb\nc") == "a [2Jb c"


# -- search against a live service: long items cut, a closed stdout quiet ---------------
@pytest.fixture(scope="module")
def live_service(tmp_path_factory):
    home = tmp_path_factory.mktemp("svc")
    env = {
        "MEMSTREAM_HOME": str(home),
        "MEMSTREAM_AUTOSTART": "0",
        "MEMSTREAM_MAX_TEXT_BYTES": str(4 << 20),
        "MEMSTREAM_REDIS_URL": "",
    }
    up = ms_process("up", "--detach", "--json", env=env)
    assert up.returncode == 0, up.stderr
    try:
        from memstream.core.runfile import read_run_file

        yield home, env, read_run_file(home / "run" / "service.json")["url"]
    finally:
        ms_process("down", env=env)


@pytest.mark.valkey
def test_search_cuts_a_long_item_for_the_terminal_and_json_carries_it_whole(live_service, tmp_path):
    home, env, url = live_service
    long_text = "zebra migration notes " + "stripes " * ((2 << 20) // 8)  # about 2 MiB
    source = tmp_path / "long.txt"
    source.write_text(long_text)
    added = ms_process("add", "--sync", "--json", "--file", str(source), env=env)
    assert added.returncode == 0, added.stderr
    shown = ms_process("search", "zebra migration", env=env)
    assert shown.returncode == 0, shown.stderr
    head, line = shown.stdout.splitlines()[:2]
    assert head == "searched agent default (no --agent given: the agent `default`):"
    assert len(line) < 1000 and "more characters; --json shows all" in line
    whole = json.loads(ms_process("search", "--json", "zebra migration", env=env).stdout)
    assert whole["results"][0]["text"] == long_text
    piped = closed_pipe_run("search", "zebra migration", env=env)
    assert piped.returncode == 1 and piped.stderr == ""


# -- property: no argv makes main() raise or print a traceback -------------------------
def _choices() -> dict[str, list[str]]:
    """Each subcommand with its option strings, from the real parser."""
    parser = commands.build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    return {name: [s for a in p._actions for s in a.option_strings] for name, p in sub.choices.items()}


CHOICES = _choices()
ODD_VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "-1",
            "0",
            "1e309",
            "99999999999999999999-0",
            "18446744073709551616",
            "-",
            "--",
            "",
            " ",
            "\x00",
            "\udcff",
            "é",
            "\u202e",
            "1-1",
            "list",
            "retry",
            "drop",
            "hotpath",
            "memory",
            "user",
            "all",
            "current",
            "1",
            "50",
            "51",
            "--json",
        ]
    ),
    st.text(max_size=30),
    st.integers(min_value=-(1 << 70), max_value=1 << 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def argvs(draw) -> list[str]:
    command = draw(st.sampled_from(sorted(CHOICES)))
    argv = [command]
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()) and CHOICES[command]:
            argv.append(draw(st.sampled_from(CHOICES[command])))
        argv.append(draw(ODD_VALUES))
    return argv


def _side_effect_free(monkeypatch, outcome):
    """up, bench and install-hermes start services, run benchmarks, write to a Hermes
    home: their parsing runs for real; the command itself ends in ``outcome``."""

    def command(args, settings):
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    for name in ("cmd_up", "cmd_bench", "cmd_install_hermes"):
        monkeypatch.setattr(commands, name, command)


@hsettings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    argv=argvs(),
    stdin=st.binary(max_size=64),
    outcome=st.sampled_from(
        [0, 1, CommandError("no"), redis.ConnectionError("down"), ValueError("bad"), OSError(5, "io"), KeyboardInterrupt()]
    ),
)
def test_main_never_raises_and_never_prints_a_traceback(capsys, monkeypatch, argv, stdin, outcome):
    monkeypatch.setenv("MEMSTREAM_SHUTDOWN_TIMEOUT", "0")  # add: no waiting for a log that is not there
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    _side_effect_free(monkeypatch, outcome)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert isinstance(code, int) and code in (0, 1, 2, 130), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 1 and argv[0] not in ("doctor", "down", "up", "bench", "install-hermes"):
        assert err.strip().splitlines()[-1].startswith(f"memstream {argv[0]}: error: "), (argv, err)
