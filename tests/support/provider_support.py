"""Fixtures for provider tests: the shared Writer of each provider ships to the test's log."""

from __future__ import annotations

import pytest
from writepath import logged_events

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
