"""Read-your-writes: wait until a memory write appended to the log is searchable."""

from __future__ import annotations

import time

from memstream.producers import Event, EventLog

__all__ = ["wait_projected", "wait_searchable"]


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


def wait_searchable(eventlog: EventLog, event: Event, timeout: float) -> tuple[str, bool]:
    """Wait up to ``timeout`` seconds until the query server finds ``event``'s memory
    (``exists`` on the channel these credentials may ask on: a tenant's own). Returns
    (state, checked): ``("searchable", True)``; at the deadline ``"logged (not yet
    searchable ...)"``, checked, when the server answered that it does not have it; or
    ``"logged (could not check ...: why)"``, not checked, when no server answered or the
    question was refused. Never raises for the check: the append has landed by then."""
    import redis

    from memstream.query import ExistsRequest, QueryRefused, QueryTimeout, ask

    deadline = time.monotonic() + timeout
    request = ExistsRequest(tenant=event.scope.tenant, id=event.id)
    answered = False
    why = "no query server answered"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            answer = ask(eventlog.client, eventlog.prefix, request, timeout=max(0.05, min(left, 2.0)))
        except QueryTimeout:
            continue
        except (QueryRefused, redis.RedisError) as exc:
            return f"logged (could not check that it is searchable: {str(exc)[:200]})", False
        if "error" in answer:
            return f"logged (could not check that it is searchable: {str(answer['error'])[:200]})", False
        answered = True
        if answer.get("exists") is True:
            return "searchable", True
        time.sleep(0.05)
    if answered:
        return "logged (not yet searchable through the query path: are the workers running?)", True
    return f"logged (could not check that it is searchable: {why} within {timeout:g} s)", False
