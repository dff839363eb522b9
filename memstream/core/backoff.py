"""How long to wait before retrying after failures in a row: one schedule for every
retry loop (the shipper, the query server, the consumers and their supervisor).

Guarantee: after ``n`` failures in a row the delay is drawn uniformly between
``base * 2**(n-1)`` and ``base * 2**n``, capped at ``cap`` (then between ``cap / 2`` and
``cap``): never shorter than ``base``, never longer than ``cap``, and jittered from the
first retry on, so processes that failed together (a fleet's shippers when Redis
restarts) do not come back together. The draw is redis-py's ``EqualJitterBackoff``.
"""

from __future__ import annotations

from redis.backoff import EqualJitterBackoff

__all__ = ["backoff_delay"]


def backoff_delay(failures: int, base: float = 0.2, cap: float = 30.0) -> float:
    """Seconds to wait after ``failures`` failures in a row (see the module docstring)."""
    return EqualJitterBackoff(cap=cap, base=base).compute(min(max(failures, 1), 30))
