"""``memstream bench fleet``: many agents on one service, as a gateway host runs them.

Per level of N agents (default 50, 200, 500, 1,000), everything real and on this machine:

* **The service**: a process of its own (``python -m memstream.bench.fleet --service-process``)
  doing what ``memstream up`` does (``memstream.service.Service``): an embedded Valkey, the
  projection workers and the query server, in a temp ``MEMSTREAM_HOME``, the chosen embedder
  (default ``hash``). A fresh one for every level.
* **The agents**: ``processes`` agent processes (``--agent-process``), each hosting its
  share of the N agents as a gateway host does: one ``MEMSTREAM_HOME`` (so one spool and one
  shipper) per process, ``MEMSTREAM_REDIS_URL`` pointing at the service's Valkey, and a real
  ``MemstreamProvider`` per agent (its own agent identity and session), built as Hermes
  builds it (no arguments: the settings come from the environment). Each agent has its own
  thread (the agent's) and its own single-thread ``mem-sync`` executor (Hermes's background
  worker), and does what Hermes does per turn, one turn every ``1 / rate`` s on average
  (each interval drawn from U(0.5, 1.5) times the mean, the first turn at a random point of
  the first interval, so agents never move in lockstep): ``on_turn_start``,
  ``prefetch(message)`` (the provider's default budget; the message a new question every turn,
  as a user's is, so no embedding cache answers it; ``cached``: one of 60 over and over), every
  ``SEARCH_EVERY``-th turn a ``memstream_search`` tool call (``handle_tool_call``), every ``MEMORY_EVERY``-th turn an
  ``on_memory_write`` (Hermes's metadata), then, on the mem-sync executor, ``sync_turn`` with
  the agent's whole growing transcript (the turn's tool calls included) and
  ``queue_prefetch``. After the last turn: ``on_session_end`` and ``shutdown``; the process
  then waits (bounded) until its spool is shipped.
* **The floor**: every hook call is paired with the same call on a do-nothing provider, on
  the same thread at the same moment (which of the two goes first alternates by turn): the
  time a call takes in these processes whatever it does, set by their own threads (the GIL,
  the scheduler). ``p99_ratio`` = memstream's p99 / the do-nothing p99.
* **Append to searchable**: about ``probes_per_s`` turns a second (over the whole fleet)
  carry a unique token; the agent process reports when their ``sync_turn`` started, and the
  bench process searches for the token with the query client (``memstream.query.ask``,
  op ``search``, kind ``turns``, the agent's scope; ``PROBE_THREADS`` searches at a time,
  each probe again ``PROBE_POLL_S`` after its last answer) until a turn holding it comes
  back: seconds from the ``sync_turn`` call to that answer (an upper bound by at most one
  poll and one round trip, so a slow read path shows here too). To tell the write path
  from the read path, the same turns are followed without the query server: when their
  event reached the log (its entry id's time, found by event id) and when the turns
  projection's position passed it (``workers.Positions``: the time that position was
  recorded, seen within ``WATCH_EVERY``). Probes that did not get there within ``settle``
  s of the level's end count as infinitely late.
* **Sampled every second** by the bench process, from the server and ``/proc``: every
  projection group's waiting entries and how long the oldest waited
  (``memstream.workers.waiting``: the worker lag), the query list's backlog, Valkey's
  ``INFO`` (CPU seconds, ``used_memory``, ``connected_clients``), the queries answered,
  the CPU seconds of the service (and of its threads by kind: query server, projection
  consumers, native threads, others, from ``/proc/PID/task`` and the names the service
  reports), Valkey and every agent process, and the machine's busy share (``/proc/stat``).
* **After the level**: every event id the agents' providers emitted (accepted by the
  spool) must be in the log exactly once (the streams are read whole): ``lost`` and
  ``duplicated`` must be 0 and 0.

**The tree before** (``against``: another checkout): every level runs its service too, with
the same agents (this tree's), the two trees alternating which goes first from level to level.

The **knee** is the largest N at which prefetch got its fresh recall within its budget in
at least 95% of the turns and append-to-searchable p95 was at most 1 s.

``fleet_bench`` returns a JSON-ready dict; ``format_fleet`` renders it. Everything the
bench starts is stopped on the way out, Ctrl-C and errors included; the agent and service
processes also stop when the bench process dies (parent-death signal, and the end of
their standard input).

The package: ``plan`` (levels, rates, targets), ``children`` (the agent and service
processes), ``supervise`` (starting, stopping and the CPU of the children), ``measure`` (the
probes and the samples), ``level`` (one level), ``run`` (every level, the tree before's beside
them, the knee), ``report`` (the table).
"""

from __future__ import annotations

import argparse
import sys

from memstream.bench.command import checkout, late_rerank_option, show
from memstream.bench.fleet.children import agent_process, service_process
from memstream.bench.fleet.plan import HOOKS, LEVELS, PROCESSES, RATE, SECONDS, TARGETS
from memstream.bench.fleet.report import format_fleet
from memstream.bench.fleet.run import fleet_bench, knee
from memstream.core import argtypes

__all__ = ["HOOKS", "LEVELS", "TARGETS", "add_arguments", "fleet_bench", "format_fleet", "knee", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench fleet``'s arguments."""
    parser.add_argument(
        "--agents",
        type=argtypes.ascending_counts,
        default=LEVELS,
        help=f"agents at each level, ascending (default {','.join(map(str, LEVELS))})",
    )
    parser.add_argument(
        "--rate",
        type=argtypes.per_second,
        default=RATE,
        help=f"turns per second of each agent (default {RATE}: a turn every 5 s)",
    )
    parser.add_argument(
        "--seconds", type=argtypes.seconds, default=SECONDS, help=f"seconds of turns per level (default {SECONDS:g})"
    )
    parser.add_argument(
        "--processes",
        type=argtypes.int_between(1, 256),
        default=PROCESSES,
        help=f"agent processes the agents are spread over (default {PROCESSES})",
    )
    parser.add_argument("--embedder", default="hash", help="embedder of the service's pipeline (default hash)")
    parser.add_argument(
        "--cached",
        action="store_true",
        help="the agents ask 60 questions over and over, which the embedding cache answers (default: a new one every turn)",
    )
    parser.add_argument(
        "--embed-threads",
        type=argtypes.int_between(0, 64),
        default=0,
        help="onnxruntime threads of every service's model (MEMSTREAM_EMBED_THREADS; default 0: the setting's own)",
    )
    late_rerank_option(parser, "auto", "service's prefetch", "auto, the setting's own")
    parser.add_argument(
        "--against",
        metavar="PATH",
        default="",
        help="another checkout whose service runs every level too, the trees alternating (default: none)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    against = str(checkout(args.against, "memstream/bench/fleet")) if args.against else ""
    result = fleet_bench(
        levels=args.agents,
        rate=args.rate,
        seconds=args.seconds,
        processes=args.processes,
        embedder=args.embedder or "hash",
        cached=args.cached,
        against=against,
        embed_threads=args.embed_threads,
        late_rerank=args.late_rerank,
    )
    return show(args, result, format_fleet(result))


def main(argv: list[str] | None = None) -> int:
    """``python -m memstream.bench.fleet --agent-process SPEC | --service-process``: the
    bench's own child processes (``memstream bench fleet`` runs the benchmark)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--agent-process":
        return agent_process(args[1])
    if args == ["--service-process"]:
        return service_process()
    print(
        "usage: python -m memstream.bench.fleet --agent-process SPEC | --service-process "
        "(the benchmark itself: memstream bench fleet)",
        file=sys.stderr,
    )
    return 2
