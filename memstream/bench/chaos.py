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
"""

from __future__ import annotations

import argparse
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

from memstream.bench.command import BenchError, needs, show
from memstream.bench.stats import percentile
from memstream.core import argtypes, as_str, keys
from memstream.service import ValkeyProcess

__all__ = ["chaos_bench", "format_chaos", "POISON", "add_arguments", "run"]

PREFIX = "memstream"
HONEST, EVIL = "honest", "evil"
MAX_ID = "18446744073709551615-18446744073709551615"


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
        self.urls: dict[str, str] = {}  # tenant -> the URL `memstream tenant add` gave
        self.passwords: dict[str, str] = {}
        self.hostile_done = 0  # a hostile tenant's destructive commands Redis ran (on its own keys)
        self.hostile_refused = 0  # and those Redis refused (on keys not its own)
        self.hostile_breached = 0  # an attempt on a key not its own that Redis ran: must stay 0

    def register(self) -> None:
        """The honest tenant (the agents' hosts) and the hostile one."""
        from memstream.producers import TenantRegistry

        registry = TenantRegistry(self.client(), PREFIX)
        for name in (HONEST, EVIL):
            tenant, password = registry.add(name)
            self.passwords[name] = password
            self.urls[name] = f"redis://{tenant.user}:{password}@127.0.0.1:{self.valkey.port}/0"

    def restore_users(self) -> None:
        """The tenants' users again after a restart of Valkey (its ACL users live in memory;
        a deployment keeps them in an aclfile): the same rules and passwords."""
        from memstream.producers import TenantRegistry, acl_role_rules

        client = self.client()
        users = TenantRegistry(client, PREFIX).all(fresh=True)  # the registry is in Valkey's data
        for name, password in self.passwords.items():
            client.execute_command("ACL", "SETUSER", users[name].user, *acl_role_rules(f"host:{name}", PREFIX, password))

    def hostile_tenant(self) -> None:
        """A random handful of what the hostile tenant's user may do, and of what it may not."""
        from memstream.core import new_event_id
        from memstream.producers import Record, TurnRecorded, encode, utcnow
        from memstream.producers import Scope as EventScope

        try:
            evil = redis.Redis.from_url(self.urls[EVIL], socket_timeout=5)
        except KeyError:
            return
        own = [
            keys.tenant_events(PREFIX, EVIL),
            keys.shipped(PREFIX, EVIL),
            keys.tenant_types(PREFIX, EVIL),
            keys.tenant_spool_counters(PREFIX, EVIL),
            keys.tenant_agent_reports(PREFIX, EVIL),
            keys.tenant_queries(PREFIX, EVIL),
        ]
        others = [
            keys.events(PREFIX, 0),
            keys.tenant_events(PREFIX, HONEST),
            keys.shipped(PREFIX, HONEST),
            keys.tenant_types(PREFIX, HONEST),
            keys.tenant_agent_reports(PREFIX, HONEST),
            keys.tenant_queries(PREFIX, HONEST),
            keys.types(PREFIX),
            keys.agent_reports(PREFIX),
        ]
        claim = TurnRecorded(
            id=new_event_id(),
            occurred_at=utcnow(),
            scope=EventScope(tenant=HONEST),
            turn_index=0,
            user_text="forged",
            assistant_text="x",
        )
        record = Record.of(claim)

        def forms(key: str) -> list[tuple[Any, ...]]:
            return [
                ("XADD", key, "MAXLEN", "0", "*", "type", "junk", "data", "x"),
                ("XADD", key, "MINID", MAX_ID, "*", "type", "junk", "data", "x"),
                ("XADD", key, MAX_ID, "type", "junk", "data", "x"),
                ("XADD", key, "*", "id", record.event_id, "type", record.type, "data", encode(claim)),
                ("XADD", key, "*", "type", "memory.remembered", "data", b"x" * (1 << 20)),
                ("DEL", key),
                ("EXPIRE", key, "1"),
                ("HSET", key, "memory.written", "NaN"),
                ("HSET", key, "turn.recorded", "-1"),
                ("RPUSH", key, b"\xff"),
                ("XTRIM", key, "MAXLEN", "0"),
                ("RENAME", key, key + ":x"),
            ]

        try:
            for _ in range(self.rng.randint(3, 12)):
                key = self.rng.choice(own)
                try:
                    evil.execute_command(*self.rng.choice(forms(key)))
                    self.hostile_done += 1
                except redis.exceptions.NoPermissionError:
                    pass  # a command its user may not send at all
                except redis.ResponseError:
                    pass  # refused by Redis for what the key holds (a wrong type, the largest id)
            if self.rng.random() < 0.3:  # a flood of forged reports in its own hash
                evil.hset(keys.tenant_agent_reports(PREFIX, EVIL), mapping={f"x:{i}:aaaaaa": b"\x81" * 64 for i in range(2000)})
            for _ in range(self.rng.randint(1, 4)):
                try:
                    evil.execute_command(*self.rng.choice(forms(self.rng.choice(others))))
                    self.hostile_breached += 1
                except redis.exceptions.NoPermissionError:
                    self.hostile_refused += 1
        except redis.RedisError:
            pass  # Redis is being restarted
        finally:
            evil.close()

    def env(self, home: Path, tenant: str = "") -> dict[str, str]:
        env = dict(
            os.environ,
            MEMSTREAM_HOME=str(home),
            MEMSTREAM_REDIS_URL=self.urls[tenant] if tenant else self.url,
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
        env = {**self.env(home, HONEST), "MEMSTREAM_TENANT": HONEST}
        self.agents[name] = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def act(self) -> None:
        action = self.rng.choice(
            ["kill_worker", "kill_redis", "kill_agent", "poison", "poison", "hostile", "hostile_tenant", "hostile_tenant"]
        )
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
            self.restore_users()
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
        elif action == "hostile_tenant":
            self.hostile_tenant()

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


def _spooled(root: Path, names: Iterable[str]) -> list[str]:
    """The markers of the turns still in the agents' spools: every record of each segment
    past its checkpoint (whoever's it is), as a reader that adopted it would ship them."""
    from memstream.producers import Segment, TurnRecorded, decode

    out: list[str] = []
    for name in names:
        spool = root / name / "spool"
        for path in sorted(spool.glob("*.seg")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                size = os.fstat(fd).st_size
                seg = Segment(path=path, fd=fd, closed=True, limit=size)
                seg.load_checkpoint()
                while seg.offset < size:
                    records, end = seg.read(size, 1000, root / "quarantine")
                    for rec in records:
                        try:
                            event = decode(rec.payload)
                        except Exception:  # noqa: BLE001 - not a turn of the agents'
                            continue
                        if isinstance(event, TurnRecorded) and event.user_text.startswith("chaos-"):
                            out.append(event.user_text.split(":", 1)[0])
                    if end == seg.offset:
                        break
                    seg.offset = end
            finally:
                os.close(fd)
    return out


def _settled(client: redis.Redis) -> bool:
    """Every group has applied every entry of the operator's streams and the honest
    tenant's log (the hostile tenant's own log is its own to break)."""
    streams = [as_str(k) for k in client.scan_iter(keys.events_pattern(PREFIX))] + [keys.tenant_events(PREFIX, HONEST)]
    for key in streams:
        try:
            groups = client.xinfo_groups(key)
        except redis.ResponseError:
            continue
        for g in groups:
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
        chaos.register()
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
        shipped_all = True
        for name in chaos.agents:
            settings = Settings.load(
                home=str(root / name), redis_url=chaos.urls[HONEST], tenant=HONEST, autostart=False, stream_prefix=PREFIX
            )
            writer = Writer(settings)
            writer.shipper.start()
            shipped_all = writer.flush(60.0) and shipped_all
            shipped_all = writer.close() and shipped_all
        spooled = set(_spooled(root, chaos.agents))  # not lost: on the host, shipped by its next writer
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
        foreign = 0
        honest_log = keys.tenant_events(PREFIX, HONEST)
        written = _ledger(root, chaos.agents)
        for stream, entry_id, fields in eventlog.entries():
            if entry_id in chaos.poisoned:
                continue
            try:
                event = eventlog.decode_entry(fields)
            except Exception:
                foreign += stream == honest_log  # nothing undecodable is appended there by the honest hosts
                continue
            if not isinstance(event, TurnRecorded):
                foreign += stream == honest_log and event.scope.tenant != HONEST
                continue
            # an honest host's turn (one whose ledger line a SIGKILL lost is one too: extra, not foreign)
            mine = event.scope.tenant == HONEST and event.user_text.startswith("chaos-")
            if (stream == honest_log) != mine:
                foreign += 1  # in honest's log and not its own, or one of its turns elsewhere
            if event.user_text.startswith("chaos-"):
                turns += 1
                ids[event.id] = ids.get(event.id, 0) + 1
                marker = event.user_text.split(":", 1)[0]
                markers[marker] = markers.get(marker, 0) + 1
        lost = [m for m in written if m not in markers and m not in spooled]
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
            "spooled_at_end": len([m for m in written if m not in markers and m in spooled]),
            "final_ship_drained": shipped_all,
            "duplicated": duplicated,
            "foreign_changed": foreign,
            "hostile_tenant_done": chaos.hostile_done,
            "hostile_tenant_refused": chaos.hostile_refused,
            "hostile_tenant_breached": chaos.hostile_breached,
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
        and r.get("foreign_changed", 0) == 0
        and r.get("hostile_tenant_breached", 0) == 0
        and not r["hostile_jobs_ran"]
        and r["poison_dead_lettered_by_every_projection"] == r["poison_injected"]
        and r["settled"]
        and r.get("spooled_at_end", 0) == 0
    )
    return "\n".join(
        [
            f"chaos, {r['minutes']} min, {r['agents']} agents at {r['rate_per_agent']} turns/s, seed {r['seed']}: "
            f"{'OK' if ok else 'FAILED'}",
            f"  actions: {', '.join(f'{k} {v}' for k, v in sorted(r['actions'].items()))}",
            f"  turns written {r['written']}, in the log {r['in_log']} ({r['distinct_in_log']} distinct), "
            f"turn points projected {r['projected_turn_points']}",
            f"  honest tenant: lost {r['lost']}, duplicated {r['duplicated']}, foreign-changed {r['foreign_changed']}, "
            f"settled {r['settled']}",
            f"  left in the agents' spools at the end (not in the log, not lost): {r.get('spooled_at_end', 0)} turns "
            f"(the final ship drained: {r.get('final_ship_drained')})",
            f"  hostile tenant: {r['hostile_tenant_done']} destructive commands on its own keys, "
            f"{r['hostile_tenant_refused']} on others' refused, {r['hostile_tenant_breached']} on others' ran",
            f"  poison: {r['poison_injected']} injected, {r['poison_dead_lettered_by_every_projection']} dead-lettered "
            f"by every projection (reasons present: {r['poison_reasons_present']}); oversized {r['oversized_injected']}",
            f"  hostile jobs ran: {r['hostile_jobs_ran']}",
            f"  sync_turn: {r['hook_calls']} calls, p50 {r['hook_p50_ms']} ms, p99 {r['hook_p99_ms']} ms, "
            f"max {r['hook_max_ms']} ms",
        ]
    )


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
