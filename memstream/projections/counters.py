"""Per-group counters in Redis, read by ``memstream stats``."""

from __future__ import annotations

import redis

from memstream.core import counts as counted
from memstream.core import keys


class Counters:
    """Per-group counters in Redis (``P:counters:{group}``), read by ``memstream stats``."""

    def __init__(self, client: redis.Redis, prefix: str, group: str):
        self.client = client
        self.key = keys.counters(prefix, group)

    def add(self, **counts: int) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if counts:
            pipe = self.client.pipeline(transaction=False)
            for k, v in counts.items():
                pipe.hincrby(self.key, k, v)
            pipe.execute()

    def get(self) -> dict[str, int]:
        """Counter -> count; a field that holds no count is left out (``core.counts``)."""
        return counted(self.client.hgetall(self.key))[0]
