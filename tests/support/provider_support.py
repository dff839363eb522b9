"""Fixtures for provider tests: the shared Writer of each provider ships to the test's log
(``harness``); providers beside a running pipeline on real Valkey (``live``)."""

from __future__ import annotations

import json

import pytest
import redis
from pipeline_support import all_applied
from writepath import logged_events, wait_for

from memstream.core.settings import Settings
from memstream.producers import writer as writer_module
from memstream.producers.stream import EventLog
from memstream.provider.provider import MemstreamProvider


class Harness:
    """Builds providers whose shared Writer ships to ``log``; reads back what arrived."""

    def __init__(self, log: EventLog):
        self.log = log
        self.providers: list[MemstreamProvider] = []

    def provider(self, session_id: str = "sess-1", **kwargs) -> MemstreamProvider:
        p = MemstreamProvider()
        kwargs.setdefault("platform", "cli")
        kwargs.setdefault("agent_context", "primary")
        p.initialize(session_id, **kwargs)
        assert p.initialized, p.stats()
        self.providers.append(p)
        return p

    def events(self, p: MemstreamProvider | None = None, timeout: float = 15.0) -> list:
        """Everything in the log once the provider's writer has shipped what it spooled."""
        p = p or self.providers[-1]
        assert p.writer is not None and p.writer.flush(timeout), "spool not shipped in time"
        return logged_events(self.log)

    def close(self) -> None:
        for p in self.providers:
            p.shutdown()
        for w in list(writer_module._registry.values()):
            w.close(timeout=0.5)
        writer_module._registry.clear()


@pytest.fixture
def harness(monkeypatch, event_log):
    """Every Writer built during the test connects to ``event_log`` (fakeredis or Valkey)."""
    monkeypatch.setattr(writer_module, "LogLocator", lambda settings: lambda: event_log)
    h = Harness(event_log)
    yield h
    h.close()


@pytest.fixture
def live(tmp_path, valkey_server):
    """A started pipeline (hash embedder) on a flushed Valkey, and a provider factory:
    ``provider(session, tenant="t1", **initialize_kwargs)`` (platform cli unless named)."""
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    base = dict(redis_url=valkey_server.url, autostart=False, embedder="hash", prefetch_budget_ms=2000, tool_timeout=5.0)
    settings = Settings.load(home=str(tmp_path / "svc"), **base)
    log = EventLog(client, settings.stream_prefix, settings.shards)
    pipeline = Pipeline(settings, log, PipelineConfig(embedder="hash", consumer="w1")).start()
    made: list[MemstreamProvider] = []

    def provider(session="s1", tenant="t1", **kwargs) -> MemstreamProvider:
        p = MemstreamProvider(Settings.load(home=str(tmp_path / f"h-{tenant}"), tenant=tenant, **base))
        kwargs.setdefault("platform", "cli")
        p.initialize(session, **kwargs)
        made.append(p)
        return p

    yield provider, pipeline, log
    for p in made:
        p.shutdown()
    for w in list(writer_module._registry.values()):
        w.close(timeout=0.5)
    writer_module._registry.clear()
    pipeline.stop()
    client.close()


def settle(p: MemstreamProvider, log: EventLog) -> None:
    """Everything the provider wrote is in the log and applied by every projection."""
    assert p.writer is not None and p.writer.flush(10), "spool not shipped"
    wait_for(lambda: all_applied(log), what="every projection to apply the log")


def tool(p: MemstreamProvider, name: str, **args) -> dict:
    return json.loads(p.handle_tool_call(name, args))
