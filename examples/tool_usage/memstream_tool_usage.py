"""A projection of your own: which tools each agent calls, built from the log.

Install it beside memstream (``pip install -e examples/tool_usage``: its entry point
registers it) or name it in ``MEMSTREAM_PROJECTIONS=memstream_tool_usage:ToolUsageProjection``.
The service then builds it from the whole history as ``tool_usage.v1`` and keeps it
current; ``memstream replay tool_usage`` rebuilds it as a new version.

What it keeps, per tenant and agent: ``P:own:tool_usage:vN:T:A`` (a hash, one field per
tool call: ``{event id}:{i}`` -> the tool's name). A redelivered event writes the same
fields again, so ``apply`` is idempotent; a forgotten turn's calls are removed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import redis

from memstream.core import as_str, keys
from memstream.producers import MemoryForgotten, TurnRecorded


class ToolUsageProjection:
    name = "tool_usage"
    version = 1

    def __init__(self, client: redis.Redis, prefix: str, *, version: int | None = None) -> None:
        if version is not None:
            self.version = version
        self.client = client
        self.prefix = prefix

    def _key(self, tenant: str, agent: str) -> str:
        return keys.own(self.prefix, self.name, self.version, tenant, agent)

    def _index(self, tenant: str) -> str:
        """Which agent's hash holds each event's calls (to forget them)."""
        return keys.own(self.prefix, self.name, self.version, tenant, "_events")

    def apply(self, batch: Sequence[Any]) -> None:
        pipe = self.client.pipeline(transaction=False)
        written: dict[str, str] = {}  # event id -> "agent:calls", of this batch (not yet in Redis)
        for delivery in batch:
            event = delivery.event
            if isinstance(event, TurnRecorded) and event.tool_calls:
                s = event.scope
                fields = {f"{event.id}:{i}": call.name for i, call in enumerate(event.tool_calls)}
                pipe.hset(self._key(s.tenant, s.agent), mapping=fields)
                written[event.id] = f"{s.agent}:{len(fields)}"
                pipe.hset(self._index(s.tenant), event.id, written[event.id])
            elif isinstance(event, MemoryForgotten):
                self._forget(event.scope.tenant, event.forgotten_id, pipe, written)
        pipe.execute()

    def _forget(self, tenant: str, event_id: str, pipe: Any, written: dict[str, str]) -> None:
        found = written.get(event_id) or self.client.hget(self._index(tenant), event_id)
        if found is None:
            return
        agent, _, n = as_str(found).rpartition(":")
        pipe.hdel(self._key(tenant, agent), *[f"{event_id}:{i}" for i in range(int(n))])
        pipe.hdel(self._index(tenant), event_id)

    def usage(self, tenant: str, agent: str) -> dict[str, int]:
        """Calls per tool of one agent, most used first."""
        names = Counter(as_str(v) for v in self.client.hvals(self._key(tenant, agent)))
        return dict(names.most_common())
