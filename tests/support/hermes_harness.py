"""The real Hermes Agent for the tests: a cached virtual environment with
``hermes-agent==0.19.0`` and this checkout, the scripted model, and the drivers' results.

Shared by ``tests/hermes``: import ``hermes_venv`` (a fixture) and the helpers from here.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "hermes"  # the driver scripts and the fake model
ROOT = HERE.parents[1]  # the checkout: tests/hermes/ -> tests/ -> root
HERMES_VERSION = "0.19.0"
CACHE = Path(os.environ.get("MEMSTREAM_TEST_CACHE") or "~/.cache/memstream").expanduser()
VENV = CACHE / f"hermes-{HERMES_VERSION}-venv"
VENV_PY = VENV / "bin" / "python"
HERMES_OK = VENV / ".memstream-hermes-ok"
SOURCE_STAMP = VENV / ".memstream-source.json"
LOCK_WAIT = 900.0  # a cold build by another run takes about a minute

TENANT = "acme"
GATEWAY_KEY = "agent:main:telegram:dm:chat-9"
AGENT_PROMPTS = ["hello there", "Please REMEMBER that I like green tea", "what do I like to drink?"]
CLI_PROMPTS = ["first session message", "message in the new session"]


def _load_fake_llm():
    spec = importlib.util.spec_from_file_location("memstream_test_fake_llm", HERE / "fake_llm_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fake_llm = _load_fake_llm()


# -- the cached Hermes environment ----------------------------------------------------------
def _run(cmd, timeout, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=kw.pop("cwd", "/"),
        **kw,
    )


def _tail(proc: subprocess.CompletedProcess, n: int = 40) -> str:
    return "\n".join((proc.stdout + "\n" + proc.stderr).strip().splitlines()[-n:])


def _source_stamp() -> dict:
    return {"root": str(ROOT), "pyproject_sha256": hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()}


def _hermes_ready(stamp_required: bool = True) -> bool:
    if not ((HERMES_OK.exists() or not stamp_required) and VENV_PY.exists() and (VENV / "bin" / "hermes").exists()):
        return False
    code = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        f"sys.exit(0 if m.version('hermes-agent') == {HERMES_VERSION!r} and u.find_spec('run_agent') "
        "and u.find_spec('agent.memory_provider') else 1)"
    )
    try:
        return _run([VENV_PY, "-c", code], 60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _source_ready() -> bool:
    try:
        if json.loads(SOURCE_STAMP.read_text()) != _source_stamp():
            return False
    except (OSError, ValueError):
        return False
    if not (VENV / "bin" / "memstream").exists():
        return False
    code = "import json, memstream, memstream.provider\nprint(json.dumps([memstream.__file__, memstream.provider.__file__]))"
    try:
        proc = _run([VENV_PY, "-c", code], 60)
        files = json.loads(proc.stdout) if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return False
    return bool(files) and all(Path(f).resolve().is_relative_to(ROOT) for f in files)


def _index_reachable() -> bool:
    try:
        proc = _run([sys.executable, "-m", "pip", "index", "versions", "hermes-agent", "--retries", "1", "--timeout", "20"], 120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and HERMES_VERSION in proc.stdout


def _flock(fd, mode) -> None:
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(f"another run held {VENV}.lock for more than {LOCK_WAIT:.0f}s")
            time.sleep(0.5)


def _build(pip_timeout: float = 900) -> None:
    """(Re)build what is missing. Called with the exclusive lock held.

    Keep pip's byte-compiling: with PYTHONDONTWRITEBYTECODE set, an uncompiled Hermes is
    recompiled on every import (~4 s per process). A recent setuptools goes into the venv so that reinstalling this
    checkout (after a ``pyproject.toml`` change) needs no isolated build env, nor the index.
    """
    pip = [VENV_PY, "-m", "pip", "install", "--disable-pip-version-check", "--retries", "2"]
    if not _hermes_ready():
        if not _index_reachable():
            pytest.skip(
                f"no cached Hermes environment at {VENV} and pip cannot reach an index offering hermes-agent=={HERMES_VERSION}"
            )
        shutil.rmtree(VENV, ignore_errors=True)
        proc = _run([sys.executable, "-m", "venv", VENV], 300)
        assert proc.returncode == 0, f"python -m venv failed:\n{_tail(proc)}"
        SOURCE_STAMP.unlink(missing_ok=True)
        # one resolver pass: Hermes, setuptools, and this checkout with its dependencies
        proc = _run([*pip, f"hermes-agent=={HERMES_VERSION}", "setuptools>=68", "-e", ROOT], pip_timeout)
        assert proc.returncode == 0, f"pip install hermes-agent + memstream failed:\n{_tail(proc)}"
        assert _hermes_ready(stamp_required=False), f"{VENV}: hermes-agent=={HERMES_VERSION} installed but not importable"
        HERMES_OK.write_text(HERMES_VERSION + "\n")
        SOURCE_STAMP.write_text(json.dumps(_source_stamp()))
    if not _source_ready():
        proc = _run([*pip, "--no-build-isolation", "-e", ROOT], pip_timeout)
        if proc.returncode != 0:  # e.g. the build requirements changed
            proc = _run([*pip, "-e", ROOT], pip_timeout)
        assert proc.returncode == 0, f"pip install -e {ROOT} failed:\n{_tail(proc)}"
        SOURCE_STAMP.write_text(json.dumps(_source_stamp()))
    assert _source_ready(), f"{VENV}: memstream installed from {ROOT} but not importable from there"


@pytest.fixture(scope="session")
def hermes_venv():
    """The cached venv, up to date; a shared lock is held while tests use it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = open(CACHE / f"{VENV.name}.lock", "a+")
    try:
        _flock(lock, fcntl.LOCK_SH)
        if not (_hermes_ready() and _source_ready()):
            fcntl.flock(lock, fcntl.LOCK_UN)
            _flock(lock, fcntl.LOCK_EX)
            _build()
            fcntl.flock(lock, fcntl.LOCK_SH)  # downgrade: other runs may use it, not rebuild it
        yield VENV
    finally:
        lock.close()


# -- one Hermes home, one Valkey, one fake model; every flow runs once per module ------------
def _clean_env(**extra: str) -> dict:
    drop = ("HERMES_", "MEMSTREAM_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and not k.endswith("_API_KEY")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


def _driver_result(proc: subprocess.CompletedProcess, what: str) -> dict:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{_tail(proc, 60)}"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("MEMSTREAM_DRIVER_RESULT "):
            return json.loads(line.split(" ", 1)[1])
    raise AssertionError(f"{what} printed no result:\n{_tail(proc, 60)}")


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON object in output:\n{text[-2000:]}")
