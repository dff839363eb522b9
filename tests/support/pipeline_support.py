"""Helpers of the pipeline tests: events, a Pipeline on the hash embedder, store reads."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from writepath import wait_for  # noqa: F401  (re-exported: one poller for every test)

from memstream.core.codec import as_str
from memstream.core.ids import new_event_id
from memstream.core.settings import Settings
from memstream.producers.events import (
    DelegationCompleted,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    Scope,
    SessionEnded,
    TurnRecorded,
)
from memstream.producers.stream import EventLog
from memstream.projections.stores.port import Filter, Point

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def scope(tenant: str = "t1", agent: str = "a1", session: str = "s1") -> Scope:
    return Scope(tenant=tenant, agent=agent, session_id=session)


def turn(user: str, assistant: str = "Noted.", *, tenant="t1", agent="a1", when: float = 0.0, index: int = 0) -> TurnRecorded:
    return TurnRecorded(
        id=new_event_id(),
        occurred_at=at(when),
        scope=scope(tenant, agent),
        turn_index=index,
        user_text=user,
        assistant_text=assistant,
    )


def memory(
    action: str, content: str = "", old_text: str = "", *, target="memory", tenant="t1", agent="a1", when: float = 0.0
) -> MemoryWritten:
    return MemoryWritten(
        id=new_event_id(),
        occurred_at=at(when),
        scope=scope(tenant, agent),
        action=action,
        target=target,
        content=content,
        old_text=old_text,
    )


def remembered(content: str, *, tenant="t1", agent="a1", when: float = 0.0) -> MemoryRemembered:
    return MemoryRemembered(id=new_event_id(), occurred_at=at(when), scope=scope(tenant, agent), content=content)


def forgotten(event_id: str, *, tenant="t1", agent="a1", when: float = 0.0) -> MemoryForgotten:
    return MemoryForgotten(id=new_event_id(), occurred_at=at(when), scope=scope(tenant, agent), forgotten_id=event_id)


def delegation(task: str, result: str, *, tenant="t1", agent="a1") -> DelegationCompleted:
    return DelegationCompleted(id=new_event_id(), occurred_at=at(0), scope=scope(tenant, agent), task=task, result=result)


def session_ended(*, tenant="t1", agent="a1") -> SessionEnded:
    return SessionEnded(id=new_event_id(), occurred_at=at(0), scope=scope(tenant, agent))


def pipeline_settings(home: Path, **overrides) -> Settings:
    return Settings.load(home=str(home), embedder="hash", autostart=False, **overrides)


# the pipelines make_pipeline built in the running test; the autouse fixture of tests/conftest.py
# stops them at its end (stop_made), so a test that drops one leaves no store lock file or
# thread behind for the garbage collector to find in a later test
_MADE: list = []


def make_pipeline(home: Path, eventlog: EventLog, consumer: str = "w1", **config):
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    settings = pipeline_settings(home, stream_prefix=eventlog.prefix, shards=eventlog.shards)
    pipeline = Pipeline(settings, eventlog, PipelineConfig(embedder="hash", consumer=consumer, **config))
    _MADE.append(pipeline)
    return pipeline


def stop_made() -> None:
    """Stops every pipeline make_pipeline built since the last call (stopping twice is harmless)."""
    while _MADE:
        _MADE.pop().stop(timeout=5.0)


def points(store, collection: str, tenant: str, **narrow) -> list[Point]:
    """Every point of ``collection`` in the tenant's scope (all pages)."""
    out, offset = [], None
    while True:
        page, offset = store.scroll(collection, Filter(tenant=tenant, **narrow), limit=256, offset=offset)
        out.extend(page)
        if offset is None:
            return out


def texts(store, collection: str, tenant: str, **narrow) -> set[str]:
    return {p.payload["text"] for p in points(store, collection, tenant, **narrow)}


def all_applied(eventlog: EventLog, groups: Iterable[str] | None = None) -> bool:
    """Every group (default: every registered projection's) has read every entry of every
    stream and holds none pending."""
    from memstream.projections import group_names
    from memstream.workers.positions import is_applied

    groups = group_names() if groups is None else tuple(groups)

    for key in eventlog.stream_keys:
        last = eventlog.client.xrevrange(key, count=1)
        if not last:
            continue
        entry = last[0][0].decode() if isinstance(last[0][0], bytes) else last[0][0]
        if not all(is_applied(eventlog.client, key, g, entry) for g in groups):
            return False
        for g in groups:
            if eventlog.client.xpending(key, g)["pending"]:
                return False
    return True


@contextmanager
def running(consumer) -> Iterator[threading.Thread]:
    """``consumer.run`` on its own thread for the ``with`` block; stopped and joined after it."""
    stop = threading.Event()
    thread = threading.Thread(target=consumer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(10)


def everything_in_redis(client) -> str:
    """Every key and value the server holds, as one text (streams, hashes, sets, ...)."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = as_str(client.type(key))
        value: object
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = kind
        out.append(f"{as_str(key)}={value!r}")
    return "\n".join(out)


def files_holding(directory: Path, token: bytes) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and token in p.read_bytes()]
