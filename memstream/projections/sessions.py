"""The sessions projection: each session's bookends (first and last user turn), in Redis.

It feeds ``memstream_recent``: recent sessions, newest first, each with its first and
last user turns, without scanning the turns collection.

Keys (``P`` = prefix, per tenant ``T``; built by ``memstream.core.keys``):
``P:sessions:v1:T`` sorted set session id -> time of its last turn (every agent);
``P:sessions:v1:T:agent:A`` the same for one agent;
``P:session:v1:T:S`` hash: agent, first_key/first_id/first_text/first_at, the same for
``last_``, and ``turns`` (the highest turn index seen); ``P:session_bookends:v1:T`` hash
event id of a current bookend -> its session (for tombstones).

Guarantee: idempotent and order-free. First and last are the minimum and maximum of
(occurred_at, event id) over the session's turns, updated atomically by one script, so
redelivery, replay and concurrent consumers converge on the same state. A forgotten turn
leaves its bookend slot marked forgotten, without text.
"""

from __future__ import annotations

from typing import Any, Sequence

import redis

from memstream.core import as_str, keys
from memstream.producers import MemoryForgotten, TurnRecorded
from memstream.projections.base import Delivery, group_name
from memstream.projections.counters import Counters
from memstream.projections.tombstones import Tombstones
from memstream.text import BoilerplateFilter, redact

__all__ = ["SessionsProjection", "SessionsIndex"]

_UPDATE = """
local key = ARGV[1]
local old_first = redis.call('HGET', KEYS[1], 'first_id')
local old_last = redis.call('HGET', KEYS[1], 'last_id')
local first = redis.call('HGET', KEYS[1], 'first_key')
if (not first) or key < first then
  redis.call('HSET', KEYS[1], 'first_key', key, 'first_id', ARGV[2], 'first_text', ARGV[3], 'first_at', ARGV[4])
end
local last = redis.call('HGET', KEYS[1], 'last_key')
if (not last) or key > last then
  redis.call('HSET', KEYS[1], 'last_key', key, 'last_id', ARGV[2], 'last_text', ARGV[3], 'last_at', ARGV[4])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[7])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[7])
end
redis.call('HSET', KEYS[1], 'agent', ARGV[6])
local turns = tonumber(redis.call('HGET', KEYS[1], 'turns') or '0')
if tonumber(ARGV[8]) > turns then redis.call('HSET', KEYS[1], 'turns', ARGV[8]) end
local new_first = redis.call('HGET', KEYS[1], 'first_id')
local new_last = redis.call('HGET', KEYS[1], 'last_id')
for _, old in ipairs({old_first, old_last}) do
  if old and old ~= new_first and old ~= new_last then redis.call('HDEL', KEYS[4], old) end
end
redis.call('HSET', KEYS[4], new_first, ARGV[7], new_last, ARGV[7])
return 1
"""

_FORGET = """
local session = redis.call('HGET', KEYS[1], ARGV[1])
if not session then return 0 end
local h = ARGV[2] .. session
local n = 0
for _, side in ipairs({'first', 'last'}) do
  if redis.call('HGET', h, side .. '_id') == ARGV[1] then
    redis.call('HSET', h, side .. '_text', '(forgotten)')
    n = n + 1
  end
end
return n
"""

_TEXT_CHARS = 400  # a bookend is a reminder, not the transcript


class SessionsIndex:
    """Reads and writes of the sessions keys (the projection writes, queries read)."""

    version = 1

    def __init__(self, client: redis.Redis, prefix: str, *, version: int | None = None):
        if version is not None:
            self.version = version
        self.client = client
        self.prefix = prefix
        self._update = client.register_script(_UPDATE)
        self._forget = client.register_script(_FORGET)

    def _zset(self, tenant: str, agent: str | None = None) -> str:
        return keys.sessions(self.prefix, self.version, tenant, agent)

    def _hash(self, tenant: str, session: str) -> str:
        return keys.session(self.prefix, self.version, tenant, session)

    def _bookends(self, tenant: str) -> str:
        return keys.session_bookends(self.prefix, self.version, tenant)

    def record(self, event: TurnRecorded, text: str, pipe: redis.client.Pipeline | None = None) -> int:
        """Record a turn of a session (with ``pipe``: queued there, the reply is the
        pipeline's; returns 0)."""
        s = event.scope
        ts = event.occurred_at.timestamp()
        key = f"{ts:018.6f}|{event.id}"
        reply = self._update(
            keys=[
                self._hash(s.tenant, s.session_id),
                self._zset(s.tenant),
                self._zset(s.tenant, s.agent),
                self._bookends(s.tenant),
            ],
            args=[key, event.id, text, event.occurred_at.isoformat(), ts, s.agent, s.session_id, max(0, int(event.turn_index))],
            client=pipe,
        )
        return 0 if pipe is not None else int(reply)

    def forget(self, tenant: str, event_id: str, pipe: redis.client.Pipeline | None = None) -> int:
        """Blank the bookend text of a forgotten turn; the number of bookends blanked (with
        ``pipe``: queued there, that number is its reply in the pipeline's; returns 0)."""
        reply = self._forget(keys=[self._bookends(tenant)], args=[event_id, self._hash(tenant, "")], client=pipe)
        return 0 if pipe is not None else int(reply)

    def recent(self, tenant: str, agent: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """Newest sessions first (``agent`` None: every agent of the tenant)."""
        sessions = [as_str(x) for x in self.client.zrevrange(self._zset(tenant, agent), 0, max(0, limit - 1))]
        pipe = self.client.pipeline(transaction=False)
        for session in sessions:
            pipe.hgetall(self._hash(tenant, session))
        out = []
        for session, raw in zip(sessions, pipe.execute()):
            h = {as_str(k): as_str(v) for k, v in raw.items()}
            if not h:
                continue
            out.append(
                {
                    "session": session,
                    "agent": h.get("agent", ""),
                    "turns": int(h.get("turns", 0)),
                    "first": {"id": h.get("first_id"), "at": h.get("first_at"), "user": h.get("first_text", "")},
                    "last": {"id": h.get("last_id"), "at": h.get("last_at"), "user": h.get("last_text", "")},
                }
            )
        return out


class SessionsProjection:
    """Applies turns (and tombstones) to the ``SessionsIndex``; needs only Redis."""

    name = "sessions"
    FAMILIES = ("sessions", "session", "session_bookends")  # its versioned Redis keys
    version = SessionsIndex.version

    def __init__(self, client: redis.Redis, prefix: str, *, version: int | None = None):
        if version is not None:
            self.version = version
        self.index = SessionsIndex(client, prefix, version=self.version)
        self.counters = Counters(client, prefix, group_name(self))
        self._boilerplate = BoilerplateFilter()
        self.tombstones = Tombstones(client, prefix)

    def apply(self, batch: Sequence[Delivery]) -> None:
        """Apply the batch in one pipeline (one round trip, and one to check the scripts
        are loaded), its scripts in the order of the log."""
        recorded = 0
        gone = self.tombstones.of_batch(batch, (TurnRecorded,))
        pipe = self.index.client.pipeline(transaction=False)
        forgets: list[int] = []  # where the replies of the forget scripts are
        for d in batch:
            event = d.event
            if event.id in gone:
                continue
            if isinstance(event, TurnRecorded):
                text, _ = redact(self._boilerplate.clean(event.user_text).strip())
                if len(text) > _TEXT_CHARS:
                    text = text[: _TEXT_CHARS - 1].rstrip() + "…"
                self.index.record(event, text, pipe)
                recorded += 1
            elif isinstance(event, MemoryForgotten):
                self.tombstones.add(event.scope.tenant, event.forgotten_id, pipe)
                forgets.append(len(pipe))
                self.index.forget(event.scope.tenant, event.forgotten_id, pipe)
        replies = pipe.execute() if len(pipe) else []
        self.counters.add(turns=recorded, forgotten=sum(int(replies[i]) for i in forgets))
