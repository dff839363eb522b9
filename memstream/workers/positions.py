"""How far each projection group has applied each stream, and read-your-writes.

Guarantee: a position only ever moves forward (entry ids compared as (ms, seq)).
"""

from __future__ import annotations

import time
from typing import Any

import redis

from memstream.core import as_str, keys
from memstream.producers import parse_entry_id

_SET_MAX = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
if cur then
  local cm, cs = parse(cur)
  local nm, ns = parse(ARGV[2])
  if nm < cm or (nm == cm and ns <= cs) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""


class Positions:
    """Per projection group and stream: the highest applied entry id and when.

    Guarantee: ``record`` only ever moves a position forward (compared as (ms, seq)).
    """

    def __init__(self, client: redis.Redis, prefix: str):
        self.client = client
        self.prefix = prefix
        self._script = client.register_script(_SET_MAX)

    def _keys(self, group: str) -> list[str]:
        return [keys.positions(self.prefix, group), keys.applied_at(self.prefix, group)]

    def record(
        self, group: str, stream: str, entry_id: str, at: float | None = None, pipe: redis.client.Pipeline | None = None
    ) -> None:
        """Record now, or as part of ``pipe`` (a transaction that also acks)."""
        self._script(keys=self._keys(group), args=[stream, entry_id, repr(at or time.time())], client=pipe)

    def get(self, group: str) -> dict[str, dict[str, Any]]:
        pos_key, at_key = self._keys(group)
        positions = self.client.hgetall(pos_key)
        applied = self.client.hgetall(at_key)
        out = {}
        for stream, entry in positions.items():
            s = stream.decode() if isinstance(stream, bytes) else stream
            out[s] = {
                "position": entry.decode() if isinstance(entry, bytes) else entry,
                "applied_at": float(applied.get(stream, 0) or 0),
            }
        return out

    def reset(self, group: str) -> None:
        self.client.delete(*self._keys(group))


def is_applied(client: redis.Redis, stream: str, group: str, entry_id: str) -> bool:
    """True once ``group`` has read ``entry_id`` and holds it no longer pending
    (applied, skipped or dead-lettered): read-your-writes for ``add --sync``."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:
        return False
    for g in groups:
        if as_str(g["name"]) != group:
            continue
        if parse_entry_id(as_str(g["last-delivered-id"])) < parse_entry_id(entry_id):
            return False
        return not client.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    return False
