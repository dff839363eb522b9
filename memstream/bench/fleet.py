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
  ``prefetch(message)`` (the provider's default budget), every ``SEARCH_EVERY``-th turn a
  ``memstream_search`` tool call (``handle_tool_call``), every ``MEMORY_EVERY``-th turn an
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

The **knee** is the largest N at which prefetch got its fresh recall within its budget in
at least 95% of the turns and append-to-searchable p95 was at most 1 s.

``fleet_bench`` returns a JSON-ready dict; ``format_fleet`` renders it. Everything the
bench starts is stopped on the way out, Ctrl-C and errors included; the agent and service
processes also stop when the bench process dies (parent-death signal, and the end of
their standard input).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Iterable

from memstream.bench.command import show
from memstream.bench.prefetch import _memory, _question
from memstream.bench.stats import latency_summary, machine, percentile
from memstream.core import Settings, argtypes, keys
from memstream.producers import Event, TurnRecorded
from memstream.provider import MemstreamProvider

__all__ = ["fleet_bench", "format_fleet", "knee", "main", "LEVELS", "TARGETS", "HOOKS", "add_arguments", "run"]

LEVELS = (50, 200, 500, 1000)
RATE = 0.2  # turns per second per agent: one turn every 5 s
SECONDS = 60.0
PROCESSES = 4
PROBES_PER_S = 3.0  # probed turns per second over the whole fleet
PROBE_POLL_S = 0.05  # a pending probe is searched for again after this long
SETTLE_S = 30.0  # after a level: how long probes and the workers may take to catch up
MEMORY_EVERY = 4  # an on_memory_write every 4th turn of an agent
SEARCH_EVERY = 10  # a memstream_search tool call every 10th turn of an agent
TENANT = "fleet"
TARGETS = {"fresh_fraction": 0.95, "append_to_searchable_p95_s": 1.0}
HOOKS = ("on_turn_start", "prefetch", "handle_tool_call", "on_memory_write", "sync_turn", "queue_prefetch")
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _die_with_parent() -> None:
    """This process gets SIGTERM when its parent dies (Linux; elsewhere the end of its
    standard input is the only sign)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _protocol_channel() -> IO[str]:
    """The original standard output, for the bench's JSON lines only; file descriptor 1
    then points at standard error, so nothing else printed can break a line."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


# -- the agents' side ------------------------------------------------------------------------
class _NullProvider:
    """The do-nothing provider: the same hooks, returning at once."""

    def on_turn_start(self, turn_number: int, message: object = "", **kwargs: Any) -> None:
        return None

    def prefetch(self, query: object, *, session_id: str = "", **kwargs: Any) -> str:
        return ""

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        return "{}"

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        return None

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        return None

    def queue_prefetch(self, query: object, *, session_id: str = "", **kwargs: Any) -> None:
        return None


class _RecordedProvider(MemstreamProvider):
    """The real provider; the ids of the events its spool accepted are kept (the ledger
    the log is checked against)."""

    def __init__(self) -> None:
        super().__init__()
        self.emitted: list[str] = []
        self.last_turn = ""  # the id of the last TurnRecorded accepted (sync_turn's thread sets it)

    def _emit(self, event: Event) -> bool:
        accepted = super()._emit(event)
        if accepted:
            self.emitted.append(event.id)
            if isinstance(event, TurnRecorded):
                self.last_turn = event.id
        return accepted


class _Say:
    """JSON lines to the bench process, one writer at a time."""

    def __init__(self, channel: IO[str]) -> None:
        self.channel = channel
        self.lock = threading.Lock()

    def __call__(self, message: dict[str, Any]) -> None:
        line = json.dumps(message) + "\n"
        with self.lock:
            try:
                self.channel.write(line)
                self.channel.flush()
            except (OSError, ValueError):  # the bench process is gone: nothing to tell
                pass


class _Agent:
    """One agent of an agent process: its provider, its do-nothing twin, its threads."""

    def __init__(self, name: str, index: int, spec: dict[str, Any], say: _Say) -> None:
        self.name = name
        self.rng = random.Random(f"{spec['seed']}-{name}")
        self.session = f"{name}-{uuid.uuid4().hex[:12]}"
        self.rate = float(spec["rate"])
        self.probe_p = float(spec["probe_p"])
        self.memory_every = int(spec["memory_every"])
        self.search_every = int(spec["search_every"])
        self.say = say
        self.provider = _RecordedProvider()
        self.null = _NullProvider()
        self.sync = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mem-sync-{index}")
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": "You are Hermes, a helpful agent."}]
        self.mem: dict[str, list[int]] = {h: [] for h in HOOKS}
        self.floor: dict[str, list[int]] = {h: [] for h in HOOKS}
        self.late_ms: list[float] = []
        self.tool_errors = 0
        self.turns = 0
        self.phase = self.rng.randrange(max(self.memory_every, self.search_every))

    def initialize(self) -> None:
        self.provider.initialize(
            self.session,
            platform="telegram",
            agent_identity=self.name,
            user_id=f"user-{self.name}",
            user_name=f"user-{self.name}",
        )
        if not self.provider.initialized:
            raise RuntimeError(f"{self.name}: the provider did not initialize: {self.provider.stats()}")

    def _pair(self, hook: str, first_null: bool, *args: Any, **kwargs: Any) -> Any:
        """Call ``hook`` on the provider and on the do-nothing one, timing each; the
        provider's result."""
        clock = time.perf_counter_ns
        mem, null = getattr(self.provider, hook), getattr(self.null, hook)
        if first_null:
            t0 = clock()
            null(*args, **kwargs)
            t1 = clock()
            out = mem(*args, **kwargs)
            t2 = clock()
            self.floor[hook].append(t1 - t0)
            self.mem[hook].append(t2 - t1)
        else:
            t0 = clock()
            out = mem(*args, **kwargs)
            t1 = clock()
            null(*args, **kwargs)
            t2 = clock()
            self.mem[hook].append(t1 - t0)
            self.floor[hook].append(t2 - t1)
        return out

    def run(self, start: float, end: float, stop: threading.Event) -> None:
        """Turns from ``start`` until ``end`` (monotonic clock, shared by every process)."""
        interval = 1.0 / self.rate
        due = start + self.rng.uniform(0.0, interval)
        while due < end:
            delay = due - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            if stop.is_set():
                return
            self.late_ms.append((time.monotonic() - due) * 1000)
            self.turn(self.turns)
            self.turns += 1
            due += interval * self.rng.uniform(0.5, 1.5)

    def turn(self, i: int) -> None:
        """One Hermes turn on the agent's thread; the sync goes to its mem-sync executor."""
        rng = self.rng
        first_null = i % 2 == 0
        token = f"fleetprobe{uuid.uuid4().hex[:16]}" if rng.random() < self.probe_p else ""
        user = _question(rng) + (f" (ref {token})" if token else "")
        answer = _memory(rng, i) + " Anything else?"
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        self._pair("on_turn_start", first_null, i + 1, user)
        self._pair("prefetch", first_null, user)
        if (i + self.phase) % self.search_every == 0:
            args = {"query": _question(rng), "limit": 8}
            result = self._pair("handle_tool_call", first_null, "memstream_search", args)
            if '"error"' in result[:200]:
                self.tool_errors += 1
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            messages += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "memstream_search", "arguments": json.dumps(args)},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": result[:4000]},
            ]
        if (i + self.phase) % self.memory_every == 0:
            content = _memory(rng, i)
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            metadata = {
                "write_origin": "assistant_tool",
                "execution_context": "foreground",
                "session_id": self.session,
                "platform": "telegram",
                "tool_name": "memory",
                "tool_call_id": call_id,
            }
            self._pair("on_memory_write", first_null, "add", "memory", content, metadata=metadata)
            messages += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "memory",
                                "arguments": json.dumps({"action": "add", "target": "memory", "content": content}),
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": '{"success": true}'},
            ]
        messages.append({"role": "assistant", "content": answer})
        self.transcript.extend(messages)
        self.sync.submit(self._sync, user, answer, token, first_null)

    def _sync(self, user: str, answer: str, token: str, first_null: bool) -> None:
        """Hermes's mem-sync worker: sync_turn, then queue_prefetch."""
        started = time.monotonic()  # the probe's clock: CLOCK_MONOTONIC, shared by every process
        wall = time.time()
        self._pair("sync_turn", first_null, user, answer, session_id=self.session, messages=self.transcript)
        if token:
            self.say({"probe": token, "agent": self.name, "t": started, "wall": wall, "event_id": self.provider.last_turn})
        self._pair("queue_prefetch", first_null, user, session_id=self.session)

    def finish(self) -> dict[str, Any]:
        """After the last turn: wait for the mem-sync executor; the provider's counters;
        then the session's end and the provider's shutdown, as Hermes ends an agent."""
        self.sync.shutdown(wait=True)
        stats = self.provider.stats()
        self.provider.on_session_end(self.transcript)
        self.provider.shutdown()
        return stats


def _sum_stats(all_stats: list[dict[str, Any]], writer_keys: Iterable[str]) -> dict[str, Any]:
    """The agents' provider counters summed (the process's writer's own figures left out:
    every provider of the process reports the same shared writer)."""
    skip = set(writer_keys)
    out: dict[str, Any] = {}
    for stats in all_stats:
        for key, value in stats.items():
            if key in skip or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if key == "prefetch_ms_max":
                out[key] = max(out.get(key, 0.0), value)
            else:
                out[key] = out.get(key, 0) + value
    return out


def agent_process(spec_path: str) -> int:
    """One agent process (``--agent-process SPEC``): its agents, its turns, its results file."""
    from memstream.core import configure_in_host
    from memstream.producers import Writer

    _die_with_parent()
    say = _Say(_protocol_channel())
    configure_in_host()  # as inside Hermes: memstream's log lines go to stdlib logging (stderr)
    spec = json.loads(Path(spec_path).read_text())
    keeper = Writer.shared(Settings.load())  # the process's writer, held for the final flush
    agents = [_Agent(name, i, spec, say) for i, name in enumerate(spec["agents"])]
    for agent in agents:
        agent.initialize()
    say({"ready": True, "pid": os.getpid(), "threads": threading.active_count()})
    line = sys.stdin.readline().split()
    if len(line) != 3 or line[0] != "go":
        return 1  # the bench process went away before the start
    start, end = float(line[1]), float(line[2])
    stop = threading.Event()

    def watch() -> None:  # the end of stdin: the bench process is gone (or asks to stop)
        sys.stdin.readline()
        stop.set()
        time.sleep(15.0)
        os._exit(3)

    threading.Thread(target=watch, name="fleet-stdin", daemon=True).start()
    cpu0 = time.process_time()
    threads = [threading.Thread(target=a.run, args=(start, end, stop), name=f"agent-{a.name}", daemon=True) for a in agents]
    for t in threads:
        t.start()
    peak = [threading.active_count()]
    running = threading.Event()

    def count_threads() -> None:  # the process's threads, once a second
        while not running.wait(1.0):
            peak[0] = max(peak[0], threading.active_count())

    threading.Thread(target=count_threads, name="fleet-threads", daemon=True).start()
    for t in threads:
        t.join()
    running.set()
    threads_max = max(peak[0], threading.active_count())
    all_stats = [a.finish() for a in agents]
    cpu = time.process_time() - cpu0
    flush_started = time.monotonic()
    flushed = keeper.flush(float(spec["flush_timeout"]))
    results = {
        "pid": os.getpid(),
        "agents": len(agents),
        "turns": sum(a.turns for a in agents),
        "late_ms": [round(x, 3) for a in agents for x in a.late_ms],
        "mem": {h: [x for a in agents for x in a.mem[h]] for h in HOOKS},
        "floor": {h: [x for a in agents for x in a.floor[h]] for h in HOOKS},
        "tool_errors": sum(a.tool_errors for a in agents),
        "stats": _sum_stats(all_stats, keeper.stats()),
        "writer": {k: v for k, v in keeper.stats().items() if isinstance(v, (int, float, bool))},
        "emitted": [i for a in agents for i in a.provider.emitted],
        "flushed": flushed,
        "flush_s": round(time.monotonic() - flush_started, 3),
        "cpu_s": round(cpu, 3),
        "threads_max": threads_max,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    out = Path(spec["results"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results))
    tmp.replace(out)
    keeper.release(5.0)
    say({"done": str(out)})
    return 0


def service_process() -> int:
    """The service (``--service-process``): ``memstream up`` in embedded mode, until SIGTERM
    or the end of stdin; its first JSON line says where it serves."""
    from memstream.core import configure
    from memstream.service import Service

    _die_with_parent()
    say = _Say(_protocol_channel())
    configure("WARNING")
    service = Service(Settings.load())
    info = service.start()
    say({"url": info["url"], "pid": os.getpid(), "valkey_pid": info.get("valkey_pid"), "pipeline_error": service.pipeline_error})

    def watch() -> None:
        sys.stdin.read()
        service.stop()

    def name_threads() -> None:  # which thread is which, for the bench's CPU figures per thread
        shown: dict[int, str] = {}
        while True:
            now = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
            if now != shown:
                say({"threads": now})
                shown = now
            time.sleep(2.0)

    threading.Thread(target=watch, name="fleet-stdin", daemon=True).start()
    threading.Thread(target=name_threads, name="fleet-threads", daemon=True).start()
    service.serve()
    return 0


# -- the bench process's side --------------------------------------------------------------
def _cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far; None when it is gone."""
    if not pid:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _thread_kind(name: str | None) -> str:
    """What a thread of the service does, by its name (None: no Python thread: the store's
    or a library's native threads)."""
    if name is None:
        return "native"
    if name.startswith("memstream-queries"):
        return "queries"
    if name.startswith("memstream-") and name not in ("memstream-supervisor", "memstream-adopter"):
        return "projections"  # the consumers of the projection versions
    return "other"


def _threads_cpu(pid: int | None, names: dict[int, str]) -> dict[str, float]:
    """CPU seconds so far of process ``pid``'s threads, summed by ``_thread_kind``."""
    out: dict[str, float] = {}
    if not pid:
        return out
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = _thread_kind(names.get(int(stat.parent.name)))
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return out


def _machine_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of every CPU of the machine so far."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(x) for x in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle, sum(values[:8])


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_") and k != "HERMES_HOME"}
    env.update(MEMSTREAM_HOME=str(home), MEMSTREAM_TENANT=TENANT, MEMSTREAM_AUTOSTART="0", **extra)
    return env


def _stop(proc: subprocess.Popen[bytes] | None, grace: float) -> None:
    """End ``proc``: its stdin closed, SIGTERM, then SIGKILL after ``grace`` s."""
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        except OSError:
            pass


class _Child:
    """A child process speaking JSON lines on its stdout, read by a thread."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, on_line: Any = None) -> None:
        with open(log, "ab") as err:
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True
            )  # Ctrl-C reaches the bench only; it stops the children
        self.log = log
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.on_line = on_line
        self.reader = threading.Thread(target=self._read, name="fleet-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if self.on_line is not None and self.on_line(message):
                continue
            self.lines.put(message)
        self.lines.put({"exited": True})

    def expect(self, key: str, deadline: float) -> dict[str, Any]:
        """The next line holding ``key``; RuntimeError (with the log's tail) when the process
        exits or ``deadline`` (monotonic) passes first."""
        while True:
            try:
                message = self.lines.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"no {key!r} from pid {self.proc.pid} in time; {self.tail()}") from None
                continue
            if key in message:
                return message
            if message.get("exited"):
                raise RuntimeError(f"pid {self.proc.pid} exited ({self.proc.wait()}) before {key!r}; {self.tail()}")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        try:
            return "its log ends: " + self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return "no log"


@dataclass
class _Probe:
    token: str
    agent: str
    t: float  # monotonic (CLOCK_MONOTONIC, the same in every process) when sync_turn was called
    wall: float  # unix time of the same moment
    event_id: str
    entry: tuple[str, str] | None = None  # (stream, entry id) once the turn is in the log
    logged_s: float | None = None
    applied_s: float | None = None
    found_s: float | None = None
    next_poll: float = 0.0
    busy: bool = False


class _Prober:
    """Follows every probed turn: into the log and through the turns projection (one
    watcher thread, reading the streams and the group's position), and until a search finds
    it (``PROBE_THREADS`` threads, so that a slow answer delays no other probe)."""

    PROBE_THREADS = 8
    WATCH_EVERY = 0.02

    def __init__(self, url: str, prefix: str, shards: int, group: str) -> None:
        self.url, self.prefix, self.group = url, prefix, group
        self.streams = [keys.events(prefix, s) for s in range(shards)]
        self.lock = threading.Lock()
        self.probes: list[_Probe] = []
        self.round_trips_ms: list[float] = []
        self.errors = 0
        self.stop_at: float | None = None  # monotonic: stop then, whatever is pending
        self.threads: list[threading.Thread] = []

    def add(self, message: dict[str, Any]) -> bool:
        if "probe" not in message:
            return False
        probe = _Probe(
            str(message["probe"]),
            str(message["agent"]),
            float(message["t"]),
            float(message["wall"]),
            str(message.get("event_id") or ""),
        )
        with self.lock:
            self.probes.append(probe)
        return True

    def start(self) -> None:
        self.threads = [
            threading.Thread(target=self._search, name=f"fleet-prober-{i}", daemon=True) for i in range(self.PROBE_THREADS)
        ]
        self.threads.append(threading.Thread(target=self._watch, name="fleet-watcher", daemon=True))
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _over(self, done: Any) -> bool:
        """True once told to stop and nothing is left, or past the stop time."""
        if self.stop_at is None:
            return False
        if time.monotonic() >= self.stop_at:
            return True
        with self.lock:
            return all(done(p) for p in self.probes)

    def _search(self) -> None:
        from memstream.producers import redis_client
        from memstream.query import ask

        client = redis_client(self.url, timeout=15)
        try:
            while not self._over(lambda p: p.found_s is not None):
                now = time.monotonic()
                with self.lock:
                    due = [p for p in self.probes if p.found_s is None and not p.busy and p.next_poll <= now]
                    probe = min(due, key=lambda p: p.t) if due else None
                    if probe is not None:
                        probe.busy = True
                if probe is None:
                    time.sleep(0.005)
                    continue
                request = {"op": "search", "tenant": TENANT, "agent": probe.agent, "query": probe.token, "kind": "turns", "k": 3}
                sent = time.monotonic()
                try:
                    answer = ask(client, self.prefix, request, timeout=10.0)
                except Exception:  # noqa: BLE001 - counted; the probe is asked again
                    answer = {}
                    with self.lock:
                        self.errors += 1
                got = time.monotonic()
                items = answer.get("results") or []
                hit = any(isinstance(i, dict) and probe.token in str(i.get("text", "")) for i in items)
                with self.lock:
                    self.round_trips_ms.append((got - sent) * 1000)
                    if hit:
                        probe.found_s = got - probe.t
                    probe.next_poll = got + PROBE_POLL_S
                    probe.busy = False
        finally:
            client.close()

    def _watch(self) -> None:
        """Where each probed turn is in the log (its entry, found by event id) and when the
        turns projection's position passed it (the time its position was recorded)."""
        from memstream.core import as_str
        from memstream.producers import parse_entry_id, redis_client, xrange_entry
        from memstream.workers import Positions

        client = redis_client(self.url, timeout=15)
        positions = Positions(client, self.prefix)
        seen: dict[str, tuple[str, str]] = {}  # event id -> (stream, entry id), everything read so far
        cursor = {stream: "-" for stream in self.streams}
        try:
            while not self._over(lambda p: p.applied_s is not None):
                for stream in self.streams:
                    while True:
                        start = cursor[stream] if cursor[stream] == "-" else f"({cursor[stream]}"
                        batch = [xrange_entry(e) for e in client.xrange(stream, min=start, max="+", count=2000) or ()]
                        for entry_id, fields in batch:
                            raw = fields.get(b"id")
                            if raw is not None:
                                seen[as_str(raw)] = (stream, entry_id)
                        if batch:
                            cursor[stream] = batch[-1][0]
                        if len(batch) < 2000:
                            break
                with self.lock:
                    waiting = [p for p in self.probes if p.applied_s is None]
                if waiting:
                    applied = positions.get(self.group)
                    for probe in waiting:
                        if probe.entry is None and probe.event_id in seen:
                            probe.entry = seen[probe.event_id]
                            probe.logged_s = parse_entry_id(probe.entry[1])[0] / 1000.0 - probe.wall
                        if probe.entry is None:
                            continue
                        mine = applied.get(probe.entry[0])
                        if mine and parse_entry_id(mine["position"]) >= parse_entry_id(probe.entry[1]):
                            probe.applied_s = min(time.time(), mine["applied_at"] or time.time()) - probe.wall
                time.sleep(self.WATCH_EVERY)
        finally:
            client.close()

    def figures(self) -> dict[str, Any]:
        """Per stage, seconds from the sync_turn call (p50, p95; a probe that never got there
        counts as infinitely late)."""
        with self.lock:
            probes = list(self.probes)
        out: dict[str, Any] = {"sampled": len(probes)}
        for key, attr in (("searchable", "found_s"), ("in_log", "logged_s"), ("applied", "applied_s")):
            got = [getattr(p, attr) for p in probes if getattr(p, attr) is not None]
            values = sorted(got) + [float("inf")] * (len(probes) - len(got))
            p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
            out[key] = {
                "n": len(got),
                "p50": round(p50, 3) if got and p50 != float("inf") else None,
                "p95": round(p95, 3) if got and p95 != float("inf") else None,
                "max": round(max(got), 3) if got else None,
            }
        out["probe_round_trip_ms"] = latency_summary(self.round_trips_ms, digits=2)
        out["probe_errors"] = self.errors
        return out


@dataclass
class _Sampler:
    """Once a second: worker lag, the query backlog, Valkey's INFO, CPU of every process."""

    url: str
    prefix: str
    shards: int
    pids: dict[str, int | None]
    service_threads: dict[int, str] = field(default_factory=dict)  # native id -> name, as the service says
    samples: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: int = 0

    def sample(self, client: Any) -> dict[str, Any]:
        from memstream.core import as_str
        from memstream.workers import waiting

        now = time.time()
        out: dict[str, Any] = {"t": time.monotonic()}
        streams = [keys.events(self.prefix, s) for s in range(self.shards)]
        groups: set[str] = set()
        for stream in streams:
            try:
                groups |= {as_str(g["name"]) for g in client.xinfo_groups(stream)}
            except Exception:  # noqa: BLE001 - no stream yet
                continue
        lag: dict[str, tuple[int, float]] = {}
        for group in sorted(groups):
            w = waiting(client, streams, group)
            lag[group] = (w.entries, round(max(0.0, now - w.since), 3) if w.since is not None else 0.0)
        out["lag"] = lag
        out["query_backlog"] = int(client.llen(keys.queries(self.prefix)))
        out["queries_answered"] = int(client.hget(keys.query_counters(self.prefix), "answered") or 0)
        info = client.info()
        out["redis_cpu_s"] = float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0))
        out["used_memory"] = int(info.get("used_memory", 0))
        out["clients"] = int(info.get("connected_clients", 0))
        out["cpu_s"] = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}
        out["service_threads_cpu_s"] = _threads_cpu(self.pids.get("service"), dict(self.service_threads))
        out["machine"] = _machine_jiffies()
        return out

    def run(self) -> None:
        from memstream.producers import redis_client

        client = redis_client(self.url, timeout=10)
        try:
            while True:
                try:
                    self.samples.append(self.sample(client))
                except Exception:  # noqa: BLE001 - a missed sample is counted, not fatal
                    self.errors += 1
                if self.stop.wait(1.0):
                    return
        finally:
            client.close()


def _rate_between(samples: list[dict[str, Any]], value: Any) -> tuple[float | None, float | None]:
    """(mean over the samples, highest one-interval value) of the rate of the cumulative
    ``value(sample)``, per second; None when fewer than two samples have it."""
    points = [(s["t"], value(s)) for s in samples]
    points = [(t, v) for t, v in points if v is not None]
    if len(points) < 2:
        return None, None
    rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(points, points[1:]) if b[0] > a[0]]
    mean = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
    return mean, max(rates, default=None)


def _pct(pair: tuple[float | None, float | None]) -> dict[str, float | None]:
    mean, peak = pair
    return {"mean": None if mean is None else round(100 * mean, 1), "max": None if peak is None else round(100 * peak, 1)}


def _machine_busy(samples: list[dict[str, Any]]) -> dict[str, float | None]:
    points = [s["machine"] for s in samples if s.get("machine")]
    if len(points) < 2:
        return {"mean": None, "max": None}
    shares = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(points, points[1:]) if b[1] > a[1]]
    total = (points[-1][0] - points[0][0]) / max(1, points[-1][1] - points[0][1])
    return {"mean": round(100 * total, 1), "max": round(100 * max(shares, default=0.0), 1)}


def _us(ns: list[int]) -> dict[str, float]:
    return latency_summary([x / 1000.0 for x in ns], digits=1)


def _ms(ns: list[int]) -> dict[str, float]:
    return latency_summary([x / 1e6 for x in ns], digits=3)


def _count_log(url: str, prefix: str, shards: int) -> dict[str, int]:
    """How many times each event id is in the log (every stream, read whole)."""
    from memstream.core import as_str
    from memstream.producers import EventLog, redis_client

    client = redis_client(url, timeout=30)
    counts: dict[str, int] = {}
    try:
        for _stream, _entry, fields in EventLog(client, prefix, shards).entries(count=5000):
            raw = fields.get(b"id")
            if raw is None:
                continue
            event_id = as_str(raw)
            counts[event_id] = counts.get(event_id, 0) + 1
    finally:
        client.close()
    return counts


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if p < total % parts else 0) for p in range(parts)]


def _level(
    root: Path,
    n: int,
    processes: int,
    rate: float,
    seconds: float,
    embedder: str,
    probes_per_s: float,
    settle: float,
    seed: int,
    every: tuple[int, int],
    children: list[_Child],
) -> dict[str, Any]:
    """One level: a fresh service, ``n`` agents over ``processes`` processes, ``seconds`` of turns."""
    from memstream.producers import redis_client

    settings = Settings()  # the children's: the defaults (_env drops every MEMSTREAM_* variable but theirs)
    prefix, shards = settings.stream_prefix, settings.shards
    root.mkdir(parents=True)
    level_started = time.monotonic()
    loadavg_start = [round(x, 2) for x in os.getloadavg()]
    service_threads: dict[int, str] = {}

    def thread_names(message: dict[str, Any]) -> bool:
        if "threads" not in message:
            return False
        service_threads.update({int(k): str(v) for k, v in message["threads"].items()})
        return True

    service = _Child(
        [sys.executable, "-m", "memstream.bench.fleet", "--service-process"],
        _env(root / "service", MEMSTREAM_EMBEDDER=embedder, MEMSTREAM_METRICS_ADDR="127.0.0.1:0"),
        root / "service.log",
        on_line=thread_names,
    )
    children.append(service)
    info = service.expect("url", time.monotonic() + 120)
    if info.get("pipeline_error"):
        raise RuntimeError(f"the service's pipeline did not start: {info['pipeline_error']}")
    url = str(info["url"])
    client = redis_client(url, timeout=10)
    clients_before = int(client.info("clients").get("connected_clients", 0))
    from memstream.projections import active_group

    prober = _Prober(url, prefix, shards, active_group(client, prefix, "turns"))
    per_process = [p for p in _spread(n, processes) if p]
    probe_p = min(1.0, probes_per_s / (n * rate))
    agents: list[_Child] = []
    k = 0
    for p, count in enumerate(per_process):
        home = root / f"agents-{p}"
        home.mkdir()
        names = [f"agent-{k + j:04d}" for j in range(count)]
        k += count
        spec = {
            "agents": names,
            "rate": rate,
            "probe_p": probe_p,
            "seed": seed,
            "memory_every": every[0],
            "search_every": every[1],
            "results": str(home / "results.json"),
            "flush_timeout": max(30.0, settle),
        }
        (home / "spec.json").write_text(json.dumps(spec))
        child = _Child(
            [sys.executable, "-m", "memstream.bench.fleet", "--agent-process", str(home / "spec.json")],
            _env(home, MEMSTREAM_REDIS_URL=url),
            home / "agent.log",
            on_line=prober.add,
        )
        children.append(child)
        agents.append(child)
    ready = [a.expect("ready", time.monotonic() + 120 + 0.2 * n) for a in agents]
    clients_ready = int(client.info("clients").get("connected_clients", 0))
    pids: dict[str, int | None] = {"service": service.proc.pid, "valkey": info.get("valkey_pid"), "bench": os.getpid()}
    pids.update({f"agents-{p}": a.proc.pid for p, a in enumerate(agents)})
    sampler = _Sampler(url, prefix, shards, pids, service_threads)
    sampler_thread = threading.Thread(target=sampler.run, name="fleet-sampler", daemon=True)
    start = time.monotonic() + 1.0
    end = start + seconds
    for a in agents:
        a.send(f"go {start} {end}")
    sampler_thread.start()
    prober.start()
    try:
        done = [a.expect("done", end + max(60.0, settle) + 0.1 * n) for a in agents]
        ended = time.monotonic()
        results = [json.loads(Path(d["done"]).read_text()) for d in done]
        # the workers catch up, the probes are found (or time out)
        caught_up_s: float | None = None
        prober.stop_at = ended + settle
        deadline = ended + settle
        while time.monotonic() < deadline:
            if (
                sampler.samples
                and sampler.samples[-1]["t"] > ended
                and all(e == 0 for e, _ in sampler.samples[-1]["lag"].values())
            ):
                caught_up_s = round(sampler.samples[-1]["t"] - ended, 1)
                break
            time.sleep(0.2)
        prober.join(max(0.0, prober.stop_at - time.monotonic()) + 15)
    finally:
        prober.stop_at = time.monotonic()
        sampler.stop.set()
        sampler_thread.join(15)
    query_counters = {
        k.decode() if isinstance(k, bytes) else str(k): int(v) for k, v in client.hgetall(keys.query_counters(prefix)).items()
    }
    client.close()
    counts = _count_log(url, prefix, shards)
    for a in agents:
        _stop(a.proc, 10)
    _stop(service.proc, 30)
    emitted = [i for r in results for i in r["emitted"]]
    emitted_set = set(emitted)
    lost = sum(1 for i in emitted_set if i not in counts)
    duplicated = sum(c - 1 for c in counts.values() if c > 1) + (len(emitted) - len(emitted_set))
    unexpected = sum(1 for i in counts if i not in emitted_set)
    # figures
    run = [s for s in sampler.samples if start - 1.0 <= s["t"] <= end + 1.0]
    mem = {h: [x for r in results for x in r["mem"][h]] for h in HOOKS}
    floor = {h: [x for r in results for x in r["floor"][h]] for h in HOOKS}
    hooks: dict[str, Any] = {}
    for h in HOOKS:
        m, f = _us(mem[h]), _us(floor[h])
        ratio = round(m["p99"] / f["p99"], 1) if m.get("n") and f.get("p99") else None
        hooks[h] = {"memstream_us": m, "floor_us": f, "p99_ratio": ratio}
    stats: dict[str, Any] = {}
    for r in results:
        for key, value in r["stats"].items():
            stats[key] = max(stats.get(key, 0), value) if key == "prefetch_ms_max" else stats.get(key, 0) + value
    outcomes = {k: int(stats.get(k, 0)) for k in ("prefetch_fresh", "prefetch_stale", "prefetch_empty")}
    prefetches = sum(outcomes.values())
    turns = sum(r["turns"] for r in results)
    lag_entries = [max((e for e, _ in s["lag"].values()), default=0) for s in run]
    lag_seconds = [max((w for _, w in s["lag"].values()), default=0.0) for s in run]
    per_group = {
        g: {
            "max_entries": max((s["lag"].get(g, (0, 0.0))[0] for s in run), default=0),
            "max_s": max((s["lag"].get(g, (0, 0.0))[1] for s in run), default=0.0),
        }
        for g in sorted({g for s in run for g in s["lag"]})
    }
    clients_max = max((s["clients"] for s in run), default=clients_ready)
    agents_cpu = {
        name: _pct(_rate_between(run, lambda s, name=name: s["cpu_s"].get(name))) for name in pids if name.startswith("agents-")
    }
    return {
        "agents": n,
        "processes": len(agents),
        "agents_per_process": per_process,
        "rate_per_agent": rate,
        "target_turns_per_s": round(n * rate, 2),
        "turns": turns,
        "turns_per_s": round(turns / seconds, 2),
        "loadavg_at_start": loadavg_start,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "turn_late_ms": latency_summary([x for r in results for x in r["late_ms"]], digits=2),
        "hooks": hooks,
        "prefetch": {
            "fresh_fraction": round(outcomes["prefetch_fresh"] / prefetches, 4) if prefetches else None,
            "outcomes": outcomes,
            "ms": _ms(mem["prefetch"]),
            "budget_ms": settings.prefetch_budget_ms,
        },
        "query_ms": {**_ms(mem["handle_tool_call"]), "tool_errors": sum(r["tool_errors"] for r in results)},
        "append_to_searchable_s": prober.figures(),
        "worker_lag": {
            "max_entries": max(lag_entries, default=0),
            "max_s": max(lag_seconds, default=0.0),
            "series_entries": lag_entries,
            "series_s": lag_seconds,
            "groups": per_group,
            "caught_up_after_end_s": caught_up_s,
        },
        "query_backlog_max": max((s["query_backlog"] for s in run), default=0),
        "queries_per_s": {
            # asked: each turn's recall (on_turn_start) and warm-up (queue_prefetch), and the tool searches
            "asked": round((2 * turns + len(mem["handle_tool_call"])) / seconds, 1),
            "answered": {
                k: None if v is None else round(v, 1)
                for k, v in zip(("mean", "max"), _rate_between(run, lambda s: s["queries_answered"]))
            },
        },
        "query_counters": query_counters,
        "redis": {
            "cpu_pct": _pct(_rate_between(run, lambda s: s["redis_cpu_s"])),
            "used_memory_mb_max": round(max((s["used_memory"] for s in run), default=0) / 2**20, 1),
            "clients_before_agents": clients_before,
            "clients_agents_ready": clients_ready,
            "clients_max": clients_max,
            "clients_per_agent": round((clients_max - clients_before) / n, 2),
        },
        "cpu_pct": {
            "service": _pct(_rate_between(run, lambda s: s["cpu_s"].get("service"))),
            "service_threads": {
                kind: _pct(_rate_between(run, lambda s, kind=kind: s["service_threads_cpu_s"].get(kind)))
                for kind in ("queries", "projections", "native", "other")
            },
            # threads that ended between two samples took their CPU seconds with them
            "service_exited_threads": _pct(
                _rate_between(
                    run,
                    lambda s: (
                        s["cpu_s"]["service"] - sum(s["service_threads_cpu_s"].values())
                        if s["cpu_s"].get("service") is not None
                        else None
                    ),
                )
            ),
            "valkey": _pct(_rate_between(run, lambda s: s["cpu_s"].get("valkey"))),
            "bench": _pct(_rate_between(run, lambda s: s["cpu_s"].get("bench"))),
            "agent_processes": agents_cpu,
            "agent_processes_sum_mean": round(sum(v["mean"] or 0.0 for v in agents_cpu.values()), 1),
            "machine_busy": _machine_busy(run),
        },
        "agent_processes": [
            {
                "pid": r["pid"],
                "agents": r["agents"],
                "turns": r["turns"],
                "cpu_s": r["cpu_s"],
                "threads_max": r["threads_max"],
                "threads_ready": rd.get("threads"),
                "peak_rss_mb": r["peak_rss_mb"],
                "flushed": r["flushed"],
                "flush_s": r["flush_s"],
            }
            for r, rd in zip(results, ready)
        ],
        "provider_counters": stats,
        "events": {
            "emitted": len(emitted),
            "in_log": sum(counts.values()),
            "lost": lost,
            "duplicated": duplicated,
            "unexpected": unexpected,
        },
        "samples": len(run),
        "sampler_errors": sampler.errors,
        "level_s": round(time.monotonic() - level_started, 1),
    }


def _interrupt_on_sigterm() -> Any:
    """SIGTERM stops the run as Ctrl-C does (the children stopped, the temp dir removed);
    the former handler (None: not on the main thread, nothing changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def knee(levels: list[dict[str, Any]]) -> int | None:
    """The largest N whose prefetch was fresh within budget in at least 95% of the turns and
    whose append-to-searchable p95 was at most 1 s (None: no level)."""
    good = [
        lv["agents"]
        for lv in levels
        if (lv["prefetch"]["fresh_fraction"] or 0.0) >= TARGETS["fresh_fraction"]
        and lv["append_to_searchable_s"]["searchable"]["p95"] is not None
        and lv["append_to_searchable_s"]["searchable"]["p95"] <= TARGETS["append_to_searchable_p95_s"]
    ]
    return max(good, default=None)


def fleet_bench(
    levels: tuple[int, ...] = LEVELS,
    rate: float = RATE,
    seconds: float = SECONDS,
    processes: int = PROCESSES,
    embedder: str = "hash",
    *,
    probes_per_s: float = PROBES_PER_S,
    settle: float = SETTLE_S,
    seed: int = 7,
    memory_every: int = MEMORY_EVERY,
    search_every: int = SEARCH_EVERY,
) -> dict[str, Any]:
    """Run every level (see the module doc); JSON-ready results. ``memory_every`` and
    ``search_every``: an agent's turns per memory write and per tool search."""
    started = time.monotonic()
    out: dict[str, Any] = {
        "benchmark": "fleet",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedder": embedder,
        "rate_per_agent": rate,
        "seconds": seconds,
        "processes": processes,
        "probes_per_s": probes_per_s,
        "memory_every": memory_every,
        "search_every": search_every,
        "targets": TARGETS,
        "levels": [],
    }
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-fleet-"))
    children: list[_Child] = []
    former = _interrupt_on_sigterm()
    try:
        for i, n in enumerate(levels):
            out["levels"].append(
                _level(
                    root / f"level-{i}-{n}",
                    n,
                    max(1, processes),
                    rate,
                    seconds,
                    embedder,
                    probes_per_s,
                    settle,
                    seed + i,
                    (memory_every, search_every),
                    children,
                )
            )
    finally:
        for child in reversed(children):  # agents first, then the service (and its Valkey)
            _stop(child.proc, 10)
        if os.environ.get("MEMSTREAM_BENCH_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)
        if former is not None:
            signal.signal(signal.SIGTERM, former)
    out["knee"] = knee(out["levels"])
    out["lossless"] = all(lv["events"]["lost"] == 0 and lv["events"]["duplicated"] == 0 for lv in out["levels"])
    out["total_s"] = round(time.monotonic() - started, 1)
    out["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


# -- the table ----------------------------------------------------------------------------------
def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_fleet(r: dict[str, Any]) -> str:
    """A table of ``fleet_bench``'s result, a column per level."""
    m, levels = r["machine"], r["levels"]
    lines = [
        f"memstream bench fleet — {r['date']}; {r['embedder']} embedder; {r['rate_per_agent']} turns/s per agent, "
        f"{r['seconds']:g} s per level, {r['processes']} agent processes; {r['total_s']} s in all",
        f"machine: {m.get('cpus')} CPUs ({m.get('cpu_model', '')}), Python {m.get('python')}; load average "
        f"{m.get('loadavg_at_start')} at start, {m.get('loadavg_at_end')} at end",
        "",
    ]
    width = 18
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cells: Iterable[str]) -> None:
        rows.append((label, list(cells)))

    row("agents", (_f(lv["agents"]) for lv in levels))
    row("load average at start", (str(lv["loadavg_at_start"][0]) for lv in levels))
    row("turns/s (target)", (f"{_f(lv['turns_per_s'])} ({_f(lv['target_turns_per_s'])})" for lv in levels))
    row(
        "turn start late ms p50/p99",
        (f"{_f(lv['turn_late_ms'].get('p50'))}/{_f(lv['turn_late_ms'].get('p99'))}" for lv in levels),
    )
    row("hook µs p50/p99 (floor p99, ×)", ("" for _ in levels))
    for h in HOOKS:
        cells = []
        for lv in levels:
            e = lv["hooks"][h]
            mm, ff = e["memstream_us"], e["floor_us"]
            ratio = e["p99_ratio"]
            shown = "-" if ratio is None else f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.1f}"
            cells.append(
                f"{_f(mm.get('p50'), 0)}/{_f(mm.get('p99'), 0)} ({_f(ff.get('p99'), 0)}, {shown}×)" if mm.get("n") else "-"
            )
        row(f"  {h}", cells)
    row(
        "prefetch fresh in budget",
        (
            f"{100 * lv['prefetch']['fresh_fraction']:.1f}%" if lv["prefetch"]["fresh_fraction"] is not None else "-"
            for lv in levels
        ),
    )
    row("prefetch ms p50/p99", (f"{_f(lv['prefetch']['ms'].get('p50'))}/{_f(lv['prefetch']['ms'].get('p99'))}" for lv in levels))
    row("query (tool search) ms p50/p95", (f"{_f(lv['query_ms'].get('p50'))}/{_f(lv['query_ms'].get('p95'))}" for lv in levels))
    for key, label in (
        ("searchable", "append→searchable s p50/p95"),
        ("in_log", "  → in the log"),
        ("applied", "  → applied (turns)"),
    ):
        row(
            label,
            (
                f"{_f(lv['append_to_searchable_s'][key]['p50'], 2)}/{_f(lv['append_to_searchable_s'][key]['p95'], 2)}"
                for lv in levels
            ),
        )
    row(
        "  probes found/sampled",
        (f"{lv['append_to_searchable_s']['searchable']['n']}/{lv['append_to_searchable_s']['sampled']}" for lv in levels),
    )
    row(
        "  probe search ms p50/p95",
        (
            f"{_f(lv['append_to_searchable_s']['probe_round_trip_ms'].get('p50'))}/"
            f"{_f(lv['append_to_searchable_s']['probe_round_trip_ms'].get('p95'))}"
            for lv in levels
        ),
    )
    row(
        "worker lag max entries / s",
        (f"{_f(lv['worker_lag']['max_entries'])} / {_f(lv['worker_lag']['max_s'])}" for lv in levels),
    )
    row(
        "queries/s: agents ask, all answered",
        (f"{_f(lv['queries_per_s']['asked'])}, {_f(lv['queries_per_s']['answered']['mean'])}" for lv in levels),
    )
    row("query backlog max", (_f(lv["query_backlog_max"]) for lv in levels))
    row("Redis CPU % mean/max", (f"{_f(lv['redis']['cpu_pct']['mean'])}/{_f(lv['redis']['cpu_pct']['max'])}" for lv in levels))
    row("Redis used_memory MB", (_f(lv["redis"]["used_memory_mb_max"]) for lv in levels))
    row(
        "Redis clients (per agent)",
        (f"{lv['redis']['clients_max']} ({_f(lv['redis']['clients_per_agent'], 2)})" for lv in levels),
    )
    row(
        "service CPU % mean/max",
        (f"{_f(lv['cpu_pct']['service']['mean'])}/{_f(lv['cpu_pct']['service']['max'])}" for lv in levels),
    )
    row(
        "  threads: queries/projections/native/other/ended",
        (
            "/".join(
                [_f(lv["cpu_pct"]["service_threads"][k]["mean"], 0) for k in ("queries", "projections", "native", "other")]
                + [_f(lv["cpu_pct"]["service_exited_threads"]["mean"], 0)]
            )
            for lv in levels
        ),
    )
    row("agent procs CPU % (sum)", (_f(lv["cpu_pct"]["agent_processes_sum_mean"]) for lv in levels))
    row(
        "machine busy % mean/max",
        (f"{_f(lv['cpu_pct']['machine_busy']['mean'])}/{_f(lv['cpu_pct']['machine_busy']['max'])}" for lv in levels),
    )
    row("events emitted", (_f(lv["events"]["emitted"]) for lv in levels))
    row("lost / duplicated", (f"{lv['events']['lost']} / {lv['events']['duplicated']}" for lv in levels))
    label_width = max(len(label) for label, _ in rows) + 2
    width = max([width] + [len(c) + 2 for _, cells in rows for c in cells])
    for label, cells in rows:
        lines.append(f"{label:<{label_width}}" + "".join(f"{c:>{width}}" for c in cells))
    lines += [
        "",
        f"knee (largest N with prefetch fresh within budget ≥ {100 * TARGETS['fresh_fraction']:.0f}% and "
        f"append→searchable p95 ≤ {TARGETS['append_to_searchable_p95_s']:g} s): "
        + (_f(r["knee"]) if r["knee"] is not None else "none of the levels"),
        f"lossless (every emitted event in the log exactly once, every level): {'yes' if r['lossless'] else 'NO'}",
        "(floor: the same call on a do-nothing provider, same thread, same moment; ×: memstream's p99 / the floor's)",
    ]
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
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


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = fleet_bench(
        levels=args.agents, rate=args.rate, seconds=args.seconds, processes=args.processes, embedder=args.embedder or "hash"
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


if __name__ == "__main__":
    sys.exit(main())
