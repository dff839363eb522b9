"""Read-your-writes: wait until a memory write appended to the log is searchable."""

from __future__ import annotations

import time

from memstream.producers import Event, EventLog

__all__ = ["wait_projected"]


def wait_projected(eventlog: EventLog, event: Event, entry: str, timeout: float) -> str:
    """Wait up to ``timeout`` seconds until every projection that makes a memory write
    searchable (``memstream.projections.memory_write_groups``) has applied log entry
    ``entry`` (``event``'s). Returns ``"searchable"``; ``"dead-lettered in GROUP: ERROR"``
    when one of them gave up on it; or, at the deadline, a ``"logged (not yet projected ...)"``
    state naming the likely cause. Searchable means by its keywords: with a model embedder
    its dense vector follows from the memories' dense stage (``projections.vector``)."""

    from memstream.projections import memory_write_groups
    from memstream.workers import DeadLetters, is_applied

    stream = eventlog.stream_for(event.scope.tenant, event.scope.agent)
    groups = memory_write_groups(eventlog.client, eventlog.prefix)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(is_applied(eventlog.client, stream, g, entry) for g in groups):
            # applied, or dead-lettered: a dead letter is out of the group's pending list too
            dead = [
                d
                for d in DeadLetters(eventlog.client, eventlog.prefix).list(count=100000)
                if d.get("entry_id") == entry and d.get("stream") == stream and d.get("group") in groups
            ]
            if dead:
                return f"dead-lettered in {dead[0]['group']}: {dead[0].get('error', '')[:200]}"
            return "searchable"
        time.sleep(0.02)
    return "logged (not yet projected: are the workers running?)"
