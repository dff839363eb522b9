"""The chaos bench's orchestrator (``Chaos``): Valkey, the workers and the agents started,
killed and restarted; poison, oversized and hostile input sent."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from memstream.bench.chaos.plan import EVIL, HONEST, MAX_ID, PREFIX, poison_entries
from memstream.core import as_str, keys
from memstream.service import ValkeyProcess


class Chaos:
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
            "import sys; from memstream.bench.chaos.agent import agent_main; agent_main(*sys.argv[1:3], "
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

        name, fields = self.rng.choice(poison_entries())
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
