"""Asking a query: push a typed request on a channel, wait for its answer.

Guarantee: ``ask`` returns the answer or raises ``QueryTimeout`` within ``timeout`` seconds
(plus one Redis round trip). Light to import: the provider asks through this module
without loading any store or model.
"""

from __future__ import annotations

import json
import math
import time
import uuid
import weakref
from typing import Any

import msgspec
import redis

from memstream.core import TransientError, keys
from memstream.query.protocol import (
    MAX_ENVELOPE_BYTES,
    MAX_QUERY_CHARS,
    Envelope,
    QueryRefused,
    Request,
)

_encoder = msgspec.json.Encoder()


ANSWER_TTL = 60


class QueryTimeout(TransientError):
    """No answer within the caller's timeout: no query server is running or all are busy."""


# -- channels --------------------------------------------------------------------------
def operator_channel(prefix: str) -> str:
    return keys.queries(prefix)


def tenant_channel(prefix: str, tenant: str) -> str:
    return keys.tenant_queries(prefix, tenant)


def reply_key(channel: str, request_id: str) -> str:
    """Where the answer to ``request_id`` on ``channel`` goes: beside the channel, in the
    keyspace of whoever may write that channel (never a key the request names)."""
    return keys.reply(channel, request_id)


# Per client (connection pool): the channel it asks on. The operator's credentials may
# write P:queries; a tenant's may not (NOPERM) and use their own channel from then on.
_channels: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


# -- the caller's side -------------------------------------------------------------------
def ask(client: redis.Redis, prefix: str, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """Send ``request`` (a dict with ``op``) and wait for its answer.

    Raises QueryTimeout when nobody answers within ``timeout`` s, QueryRefused when the
    request is not one the protocol accepts (checked here before sending, so a caller
    learns at once), and ``redis.RedisError`` when Redis cannot be reached."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):  # type: ignore[redundant-expr]  # for untyped callers
        raise QueryRefused(f"timeout must be a positive number of seconds, got {timeout!r}")
    body = dict(request)
    if isinstance(body.get("query"), str):
        body["query"] = body["query"][:MAX_QUERY_CHARS]
    try:
        req = msgspec.convert(body, Request)
    except msgspec.ValidationError as exc:
        raise QueryRefused(f"bad request: {exc}") from None
    now = time.time()
    env = Envelope(id=uuid.uuid4().hex, deadline=now + timeout, req=req, asked_at=now)
    raw = _encoder.encode(env)
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise QueryRefused(f"request of {len(raw)} bytes is over the {MAX_ENVELOPE_BYTES}-byte limit")
    tenant = getattr(req, "tenant", "") or ""
    pool = getattr(client, "connection_pool", client)  # a cluster client has a pool per node: itself
    channel = _channels.get(pool, operator_channel(prefix))
    try:
        client.rpush(channel, raw)
    except redis.exceptions.NoPermissionError:
        if not tenant:
            raise
        channel = tenant_channel(prefix, tenant)
        client.rpush(channel, raw)
        _channels[pool] = channel
    key = reply_key(channel, env.id)
    got = client.blpop([key], timeout=max(0.001, timeout))
    if not got:
        try:
            client.delete(key)  # an answer racing the timeout must not linger
        except redis.RedisError:
            pass
        raise QueryTimeout(f"no answer within {timeout:g}s: is the memstream service (or a worker) running?")
    try:
        answer = json.loads(got[1])
    except ValueError:
        return {"error": "the query server sent an answer that is not JSON"}
    return answer if isinstance(answer, dict) else {"error": "the query server sent an answer that is not an object"}
