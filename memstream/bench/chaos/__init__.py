"""``memstream bench chaos --minutes M``: agents and a worker run while things break.

Everything is real and on this machine: a Valkey server (``appendfsync always``, so a
SIGKILL of the server loses nothing it acknowledged and every loss found is
memstream's), ``agents`` agent processes, each a real ``MemstreamProvider`` calling
``sync_turn`` in a loop with its own ``MEMSTREAM_HOME`` (spool), and one
``memstream worker --embedded-store`` process (hash embedder). For ``minutes``, every
``U(1, 4)`` s one of these happens at random:

* ``kill_worker``: SIGKILL the worker, start a new one 0.2-2 s later;
* ``kill_redis``: SIGKILL the Valkey server, start it again on the same port and data
  0.2-2 s later (the agents spool meanwhile, the worker retries);
* ``kill_agent``: SIGKILL an agent, start a new one on the same home (it adopts the
  dead process's spool segment);
* ``poison``: append an entry the workers must dead-letter (not UTF-8, not msgpack,
  no data, a body of another type than its ``type`` field, an empty tenant, wrong field
  types) and an oversized one they must clip and apply;
* ``hostile``: enqueue an rq job naming ``os.system`` and push query requests naming
  other ops or garbage: nothing may run (a marker file must not appear);
* ``hostile_tenant``: a hostile tenant (``evil``, with the credentials ``memstream tenant
  add`` gave it) does a random handful of everything its Redis user allows to the keys it
  can write (``XADD`` with ``MAXLEN 0``, ``MINID``, explicit ids up to the largest, huge
  values, ``DEL``, ``EXPIRE``, wrong types where its log, channel and counters are, ``NaN``
  in its counters, a flood of forged reports, events claiming the honest tenant) and tries
  the same on the honest tenant's keys and the operator's (refused by Redis: counted).

The agents are one honest tenant's hosts (``honest``, with its own credentials), so the
figures below are the honest tenant's.

Each agent records a turn's marker in its ledger after ``sync_turn`` returns (a turn
whose ledger line was lost to a SIGKILL counts as extra, never as lost). At the end the
agents stop, every agent home's spool is shipped, and the bench waits for every
projection to apply everything. It reports events written (ledger), in the log,
projected (turn points in the store), poison entries dead-lettered by every projection
with a reason, ``lost`` (in a ledger, not in the log nor in a spool), ``spooled_at_end`` (in
a ledger and still in an agent's spool after the final ship: not lost, but not shipped
either), ``duplicated`` (an event id or a marker more than once in the log), ``foreign_changed`` (an entry in the honest tenant's
log it did not append, or one of its turns anywhere else), the hostile tenant's attempts
(done on its own keys, refused on others'), hostile jobs run, and the longest and p99 time
a ``sync_turn`` took. Targets: 0 lost, 0 spooled at the end, 0 duplicated, 0 foreign-changed, every poison entry
dead-lettered, nothing run, every attempt on another's key refused.

The package: ``plan`` (prefix, tenants, poison), ``agent`` (the agent process),
``orchestrator`` (what breaks and when), ``measure`` (the run and what it reads after),
``report`` (the table).
"""

from __future__ import annotations

import argparse

from memstream.bench.chaos.measure import chaos_bench
from memstream.bench.chaos.plan import POISON
from memstream.bench.chaos.report import format_chaos
from memstream.bench.command import BenchError, needs, show
from memstream.core import argtypes

__all__ = ["POISON", "add_arguments", "chaos_bench", "format_chaos", "run"]


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench chaos``'s arguments."""
    parser.add_argument("--minutes", type=argtypes.minutes, default=2.0, help="how long things break (default 2)")
    parser.add_argument(
        "--agents", type=argtypes.ascending_counts, default=(4,), help="agent processes: one count, 1 to 64 (default 4)"
    )
    parser.add_argument("--seed", type=argtypes.int_between(0, 2**32 - 1), default=0, help="the random choices (default 0)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    needs("rq", "chaos", "the hostile input includes an rq job the query server must not run")
    agents = args.agents
    if len(agents) != 1 or agents[0] > 64:
        raise BenchError(f"bench chaos takes one --agents count from 1 to 64 (got {','.join(map(str, agents))})")
    result = chaos_bench(minutes=args.minutes, agents=agents[0], seed=args.seed)
    return show(args, result, format_chaos(result))
