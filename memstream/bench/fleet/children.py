"""The bench's child processes (``python -m memstream.bench.fleet --agent-process SPEC |
--service-process``): the agent processes, each hosting its share of the agents with a real
provider and a do-nothing one side by side, and the service (``memstream up``'s work)."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Iterable

from memstream.bench.fleet.plan import HOOKS
from memstream.bench.workload import fresh_question, memory_text, question
from memstream.core import Settings
from memstream.producers import Event, TurnRecorded
from memstream.provider import MemstreamProvider


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
        # what the user asks: a new sentence every turn (no embedding cache answers it), or
        # with ``cached`` one of 60 questions (the cache answers them after the first turns)
        self.ask = question if spec.get("cached") else fresh_question
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
        user = self.ask(rng) + (f" (ref {token})" if token else "")
        answer = memory_text(rng, i) + " Anything else?"
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        self._pair("on_turn_start", first_null, i + 1, user)
        self._pair("prefetch", first_null, user)
        if (i + self.phase) % self.search_every == 0:
            args = {"query": self.ask(rng), "limit": 8}
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
            content = memory_text(rng, i)
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
