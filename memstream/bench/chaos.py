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
  other ops or garbage: nothing may run (a marker file must not appear).

Each agent records a turn's marker in its ledger after ``sync_turn`` returns (a turn
whose ledger line was lost to a SIGKILL counts as extra, never as lost). At the end the
agents stop, every agent home's spool is shipped, and the bench waits for every
projection to apply everything. It reports events written (ledger), in the log,
projected (turn points in the store), poison entries dead-lettered by every projection
with a reason, ``lost`` (in a ledger, not in the log), ``duplicated`` (an event id or a
marker more than once in the log), hostile jobs run, and the longest and p99 time a
``sync_turn`` took. Targets: 0 lost, 0 duplicated, every poison entry dead-lettered,
nothing run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

import redis

from memstream.bench.stats import percentile
from memstream.core import as_str, keys
from memstream.service import ValkeyProcess

__all__ = ["chaos_bench", "format_chaos", "POISON"]

PREFIX = "memstream"


def _poison_entries() -> list[tuple[str, dict[Any, Any]]]:
    """(name, fields) of entries every projection must dead-letter."""
    from memstream.core import new_event_id
    from memstream.producers import (
        MemoryRemembered,
        Scope,
        TurnRecorded,
        encode,
        utcnow,
    )

    good_turn = TurnRecorded(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="default"), turn_index=0, user_text="u", assistant_text="a"
    )
    memory = MemoryRemembered(
        id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="default"), content="a memory posing as a turn"
    )
    no_tenant = MemoryRemembered(id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant=""), content="whose is this")
    return [
        ("type_not_utf8", {"id": new_event_id(), "type": b"\xff\xfe", "data": encode(good_turn)}),
        ("field_name_not_utf8", {b"\xff\xfeid": b"x", "type": "turn.recorded", "data": encode(good_turn)}),
        ("data_not_msgpack", {"id": new_event_id(), "type": "turn.recorded", "data": b"\xc1\xc1\xc1"}),
        ("data_is_json", {"id": new_event_id(), "type": "turn.recorded", "data": b'{"id": "x"}'}),
        ("no_data", {"id": new_event_id(), "type": "turn.recorded"}),
        ("type_mismatch", {"id": memory.id, "type": "turn.recorded", "data": encode(memory)}),
        ("empty_tenant", {"id": no_tenant.id, "type": "memory.remembered", "data": encode(no_tenant)}),
    ]


POISON = ("type_not_utf8", "field_name_not_utf8", "data_not_msgpack", "data_is_json", "no_data", "type_mismatch", "empty_tenant")


# -- the agent process ------------------------------------------------------------------------
def agent_main(home: str, name: str, rate: float, ledger: str, stats_path: str) -> None:
    """One agent: sync_turn at ``rate`` turns/s until SIGTERM; ledger line per returned turn."""
    from memstream.core import Settings
    from memstream.provider import MemstreamProvider

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    settings = Settings.load(home=home)
    provider = MemstreamProvider(settings)
    session = f"{name}-{uuid.uuid4().hex[:8]}"
    provider.initialize(session, platform="cli", agent_identity=name)
    out = open(ledger, "a", buffering=1)
    durations: list[float] = []
    n = 0
    last_stats = time.monotonic()
    while not stop["now"]:
        marker = f"chaos-{name}-{uuid.uuid4().hex[:12]}"
        t = time.perf_counter()
        provider.sync_turn(
            f"{marker}: the deploy of service {n % 17} moved to region {n % 5}", f"Noted {marker}.", session_id=session
        )
        durations.append((time.perf_counter() - t) * 1000)
        out.write(marker + "\n")
        n += 1
        if time.monotonic() - last_stats > 0.5:
            _write_stats(stats_path, durations)
            last_stats = time.monotonic()
        time.sleep(random.expovariate(rate) if rate > 0 else 0.1)
    _write_stats(stats_path, durations)
    provider.shutdown()
    out.close()


def _write_stats(path: str, durations: list[float]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(
            {
                "calls": len(durations),
                "max_ms": max(durations, default=0.0),
                "durations": [round(d, 3) for d in durations[-20000:]],
            },
            f,
        )
    os.replace(tmp, path)


# -- the orchestrator ---------------------------------------------------------------------------
class _Chaos:
    def __init__(self, root: Path, agents: int, rate: float, seed: int):
        self.root = root
        self.rng = random.Random(seed)
        self.rate = rate
        self.valkey = ValkeyProcess(root / "valkey", appendfsync="always", tie_to_parent=True)
        self.url = ""
        self.worker: subprocess.Popen[bytes] | None = None
        self.agents: dict[str, subprocess.Popen[bytes] | None] = {f"agent-{i}": None for i in range(agents)}
        self.generation: dict[str, int] = {name: 0 for name in self.agents}
        self.actions: dict[str, int] = {}
        self.poisoned: dict[str, str] = {}  # entry id in the log -> poison kind
        self.oversized: list[str] = []
        self.marker = root / "pwned"
        self.redis_down_s: list[float] = []

    def env(self, home: Path) -> dict[str, str]:
        env = dict(
            os.environ,
            MEMSTREAM_HOME=str(home),
            MEMSTREAM_REDIS_URL=self.url,
            MEMSTREAM_EMBEDDER="hash",
            MEMSTREAM_AUTOSTART="0",
            MEMSTREAM_STREAM_PREFIX=PREFIX,
        )
        env.pop("MEMSTREAM_QDRANT_URL", None)
        return env

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def start_worker(self) -> None:
        home = self.root / "worker"
        log = open(self.root / "worker.log", "ab")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "memstream", "worker", "--embedded-store", "--name", "chaos-worker"],
            env=self.env(home),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()

    def start_agent(self, name: str) -> None:
        self.generation[name] += 1
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable,
            "-c",
            "import sys; from memstream.bench.chaos import agent_main; agent_main(*sys.argv[1:3], "
            "float(sys.argv[3]), *sys.argv[4:6])",
            str(home),
            name,
            str(self.rate),
            str(home / "ledger.txt"),
            str(home / f"stats-{self.generation[name]}.json"),
        ]
        log = open(home / "agent.log", "ab")
        self.agents[name] = subprocess.Popen(
            args, env=self.env(home), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def act(self) -> None:
        action = self.rng.choice(["kill_worker", "kill_redis", "kill_agent", "poison", "poison", "hostile"])
        self.actions[action] = self.actions.get(action, 0) + 1
        if action == "kill_worker" and self.worker is not None:
            self.worker.kill()
            self.worker.wait()
            time.sleep(self.rng.uniform(0.2, 2.0))
            self.start_worker()
        elif action == "kill_redis":
            self.valkey.kill()
            down = time.monotonic()
            time.sleep(self.rng.uniform(0.2, 2.0))
            self.valkey.start()
            self.redis_down_s.append(time.monotonic() - down)
        elif action == "kill_agent":
            name = self.rng.choice(list(self.agents))
            proc = self.agents[name]
            if proc is not None:
                proc.kill()
                proc.wait()
            self.start_agent(name)
        elif action == "poison":
            self.poison()
        elif action == "hostile":
            self.hostile()

    def poison(self) -> None:
        from memstream.core import new_event_id
        from memstream.producers import MemoryRemembered, Scope, encode, utcnow

        name, fields = self.rng.choice(_poison_entries())
        try:
            entry = self.client().xadd(keys.events(PREFIX, 0), fields)
            self.poisoned[as_str(entry)] = name
            big = MemoryRemembered(
                id=new_event_id(), occurred_at=utcnow(), scope=Scope(tenant="default"), content="oversized " + "x" * (8 << 20)
            )
            if self.rng.random() < 0.3:
                self.client().xadd(keys.events(PREFIX, 0), {"id": big.id, "type": "memory.remembered", "data": encode(big)})
                self.oversized.append(big.id)
        except redis.RedisError:
            pass  # Redis is being restarted: nothing was appended

    def hostile(self) -> None:
        try:
            from rq import Queue
            from rq.serializers import JSONSerializer

            client = self.client()
            Queue(keys.queries(PREFIX), connection=client, serializer=JSONSerializer).enqueue("os.system", f"touch {self.marker}")
            rid = uuid.uuid4().hex
            client.rpush(
                keys.queries(PREFIX),
                json.dumps({"id": rid, "deadline": time.time() + 5, "req": {"op": "os.system", "cmd": f"touch {self.marker}"}}),
            )
            client.rpush(keys.queries(PREFIX), b"\xff" * 100)
        except redis.RedisError:
            pass


def _ledger(root: Path, names: Iterable[str]) -> list[str]:
    out = []
    for name in names:
        path = root / name / "ledger.txt"
        if path.exists():
            out += [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return out


def _hook_times(root: Path, names: Iterable[str]) -> list[float]:
    out: list[float] = []
    for name in names:
        for path in (root / name).glob("stats-*.json"):
            try:
                out += json.loads(path.read_text())["durations"]
            except (OSError, ValueError, KeyError):
                continue
    return out


def _settled(client: redis.Redis) -> bool:
    for key in client.scan_iter(keys.events_pattern(PREFIX)):
        for g in client.xinfo_groups(key):
            if g["pending"] or g["lag"] is None or g["lag"]:
                return False
    return True


def chaos_bench(
    minutes: float = 2.0, agents: int = 4, rate: float = 20.0, seed: int = 0, settle_timeout: float = 180.0
) -> dict[str, Any]:
    from memstream.core import Settings
    from memstream.producers import EventLog, TurnRecorded, Writer
    from memstream.projections import group_names, group_of
    from memstream.query import ask
    from memstream.workers import DeadLetters

    root = Path(tempfile.mkdtemp(prefix="memstream-bench-chaos-"))
    chaos = _Chaos(root, agents, rate, seed)
    try:
        chaos.valkey.start()
        chaos.url = chaos.valkey.url
        chaos.start_worker()
        for name in chaos.agents:
            chaos.start_agent(name)
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(chaos.rng.uniform(1.0, 4.0))
            chaos.act()
        # the end: agents stop (shutdown ships what it can), then every spool is shipped
        for proc in chaos.agents.values():
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        for proc in chaos.agents.values():
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for name in chaos.agents:
            settings = Settings.load(home=str(root / name), redis_url=chaos.url, autostart=False, stream_prefix=PREFIX)
            writer = Writer(settings)
            writer.shipper.start()
            writer.flush(60.0)
            writer.close()
        client = chaos.client()
        started = time.monotonic()
        while not _settled(client) and time.monotonic() - started < settle_timeout:
            time.sleep(0.5)
        settled = _settled(client)
        # what the log holds
        eventlog = EventLog(client, PREFIX, 1)
        markers: dict[str, int] = {}
        ids: dict[str, int] = {}
        turns = 0
        for _stream, entry_id, fields in eventlog.entries():
            if entry_id in chaos.poisoned or fields.get(b"type") != b"turn.recorded":
                continue
            try:
                event = eventlog.decode_entry(fields)
            except Exception:
                continue
            if isinstance(event, TurnRecorded) and event.user_text.startswith("chaos-"):
                turns += 1
                ids[event.id] = ids.get(event.id, 0) + 1
                marker = event.user_text.split(":", 1)[0]
                markers[marker] = markers.get(marker, 0) + 1
        written = _ledger(root, chaos.agents)
        lost = [m for m in written if m not in markers]
        duplicated = sum(n - 1 for n in ids.values() if n > 1) + sum(n - 1 for n in markers.values() if n > 1)
        # poison: dead-lettered by every projection, each with a reason
        dead = DeadLetters(client, PREFIX).list(count=1_000_000)
        groups_per_entry: dict[str, set[str]] = {}
        reasons_ok = True
        for d in dead:
            groups_per_entry.setdefault(d.get("entry_id", ""), set()).add(str(d.get("group")))
            if d.get("entry_id") in chaos.poisoned and not d.get("error"):
                reasons_ok = False
        n_groups = len(group_names())
        poison_dead = sum(1 for e in chaos.poisoned if len(groups_per_entry.get(e, ())) == n_groups)
        try:
            items = ask(client, PREFIX, {"op": "count"}, timeout=10.0).get("items", {})
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            items = {"error": str(exc)}
        hooks = sorted(_hook_times(root, chaos.agents))
        return {
            "minutes": minutes,
            "agents": agents,
            "rate_per_agent": rate,
            "seed": seed,
            "actions": chaos.actions,
            "written": len(written),
            "in_log": turns,
            "distinct_in_log": len(markers),
            "projected_turn_points": items.get(group_of("turns")) if isinstance(items, dict) else None,
            "lost": len(lost),
            "lost_examples": lost[:5],
            "duplicated": duplicated,
            "poison_injected": len(chaos.poisoned),
            "poison_dead_lettered_by_every_projection": poison_dead,
            "poison_reasons_present": reasons_ok,
            "oversized_injected": len(chaos.oversized),
            "hostile_jobs_ran": chaos.marker.exists(),
            "settled": settled,
            "redis_down_s_max": round(max(chaos.redis_down_s, default=0.0), 2),
            "hook_calls": len(hooks),
            "hook_p50_ms": round(statistics.median(hooks), 3) if hooks else None,
            "hook_p99_ms": round(percentile(hooks, 0.99), 3) if hooks else None,
            "hook_max_ms": round(hooks[-1], 3) if hooks else None,
        }
    finally:
        for proc in [chaos.worker, *chaos.agents.values()]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        chaos.valkey.stop()
        if os.environ.get("MEMSTREAM_BENCH_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


def format_chaos(r: dict[str, Any]) -> str:
    ok = (
        r["lost"] == 0
        and r["duplicated"] == 0
        and not r["hostile_jobs_ran"]
        and r["poison_dead_lettered_by_every_projection"] == r["poison_injected"]
        and r["settled"]
    )
    return "\n".join(
        [
            f"chaos, {r['minutes']} min, {r['agents']} agents at {r['rate_per_agent']} turns/s, seed {r['seed']}: "
            f"{'OK' if ok else 'FAILED'}",
            f"  actions: {', '.join(f'{k} {v}' for k, v in sorted(r['actions'].items()))}",
            f"  turns written {r['written']}, in the log {r['in_log']} ({r['distinct_in_log']} distinct), "
            f"turn points projected {r['projected_turn_points']}",
            f"  lost {r['lost']}, duplicated {r['duplicated']}, settled {r['settled']}",
            f"  poison: {r['poison_injected']} injected, {r['poison_dead_lettered_by_every_projection']} dead-lettered "
            f"by every projection (reasons present: {r['poison_reasons_present']}); oversized {r['oversized_injected']}",
            f"  hostile jobs ran: {r['hostile_jobs_ran']}",
            f"  sync_turn: {r['hook_calls']} calls, p50 {r['hook_p50_ms']} ms, p99 {r['hook_p99_ms']} ms, "
            f"max {r['hook_max_ms']} ms",
        ]
    )
