"""``memstream bench hotpath``: what a hook costs the agent in every condition the agent
meets, and whether anything is lost.

One run, one process. Every condition has its own provider and ``MEMSTREAM_HOME``:

* ``redis_up``: a real Valkey (``ValkeyProcess``, temp dir) is up throughout.
* ``down_mid``: a Valkey is up at ``initialize`` and for the warm-up (shipped), then stopped:
  the session goes on with Redis down.
* ``down_init``: the Redis URL points at a closed port from the start (autostart off).
* ``report_off``: as ``redis_up`` (the same Valkey), with the fleet report off
  (``MEMSTREAM_REPORT_EVERY_S`` 0: no hook is timed, nothing reported). Every other
  condition reports every ``report_every`` s (1 s: five times the default rate).
* ``naive_xadd`` (the baseline, 0 ms only): the same provider code, its writer one synchronous
  ``XADD`` per event to the ``redis_up`` Valkey.

Each of the first four runs twice: with the hooks back to back (``0ms``) and with 20 ms of
pure-Python work on the agent's thread before each turn (``20ms``: the shipper and the
recall thread then run beside the agent, as in Hermes). The conditions are interleaved:
``rounds`` rounds, each running every condition for one chunk of turns, in an order that
rotates from round to round; a chunk starts with ``LEAD_IN`` untimed turns (the conditions
before it evicted this one's code and data from the CPU's caches: without them the p99 of
the back-to-back conditions is the first call of each chunk); after a chunk of a condition
whose log is up its writer is flushed, so its shipping does not land in the next chunk. A turn is Hermes's:
``on_turn_start``, ``on_memory_write`` (Hermes-like metadata), ``sync_turn`` with the WHOLE
growing transcript; each hook is timed on its own with ``time.perf_counter_ns``, the garbage
collector disabled during a chunk (collected before). A floor (fixed Python work timed the
same way) runs in every round, and in the 20 ms conditions right after the work, before
the hooks (a CPU just busy with other work runs the same code slower).

Per hook and condition: p50/p99/p99.9/max and the ratios against ``redis_up`` at the same
work. A condition is reported as a ``REGRESSION`` against ``redis_up`` when its p99 is above
``redis_up``'s by more than the run's noise (the spread of ``redis_up``'s per-round p99s)
AND it is worse in enough rounds that a sign test gives p < 0.05. The fleet report's cost
is ``redis_up`` (reports on) against ``report_off`` by the same test (``reporting``), and
alone: the ns a trivial hook (``system_prompt_block``) costs more with its duration recorded
(``tally_ns_per_hook``, the median of interleaved batches).

Afterwards every event of every condition must be in the log (the down conditions' Valkeys
are started then, on their ports, and their shippers drain the backlog). Last, the gateway
cycle: ``cycles`` providers, each ``initialize`` / one turn / ``on_session_end`` /
``shutdown`` (Hermes's gateway builds an agent per message), with Redis up and down in
alternating blocks; ``initialize`` and ``shutdown`` timed; every turn of the up cycles must
reach the log. ``hotpath`` returns a JSON-ready dict; ``format_hotpath`` renders it.

The package: ``plan`` (targets, conditions, sizes), ``inputs`` (Hermes-like turns and memory
writes), ``conditions`` (the providers under test, a timed chunk, the floor, delivery),
``measure`` (the interleaved run, ``compare``, the report's cost, the gateway cycle),
``report`` (the table).
"""

from __future__ import annotations

import argparse

from memstream.bench.command import show
from memstream.bench.hotpath.measure import compare, hotpath
from memstream.bench.hotpath.plan import HOOKS, REFERENCES, TARGET_P99_US, TARGET_P999_US
from memstream.bench.hotpath.report import format_hotpath
from memstream.core import argtypes

__all__ = [
    "HOOKS",
    "REFERENCES",
    "TARGET_P999_US",
    "TARGET_P99_US",
    "add_arguments",
    "compare",
    "format_hotpath",
    "hotpath",
    "run",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench hotpath``'s arguments."""
    parser.add_argument(
        "--calls",
        type=argtypes.int_between(1, 10_000_000),
        default=2000,
        help="turns of each back-to-back condition, over all rounds (default 2000)",
    )
    parser.add_argument(
        "--runs",
        type=argtypes.int_between(1, 1000),
        default=20,
        help="interleaved rounds, the conditions' order rotating (default 20)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = hotpath(calls=args.calls, rounds=args.runs)
    return show(args, result, format_hotpath(result))
