"""The hot-path bench's conditions: the providers under test (memstream's and the naive
synchronous ``XADD`` baseline), their set-up, a timed chunk of turns, the floor of fixed
work, and the check that every event reached the log."""

from __future__ import annotations

import gc
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from memstream.bench.hotpath.inputs import Inputs
from memstream.bench.hotpath.plan import BASELINE, HOOKS, KINDS, NAIVE_STREAM, REPORT_EVERY_S, UP_KINDS, WORKS_MS
from memstream.bench.stats import percentile
from memstream.core import Settings, keys
from memstream.producers import Event, encode, redis_client, xrange_entry
from memstream.provider import MemstreamProvider
from memstream.service import ValkeyProcess, free_port


# -- the providers under test ----------------------------------------------------------
class _NaiveWriter:
    """The baseline transport: one synchronous XADD per event, same encoded payload."""

    def __init__(self, url: str):
        self.client = redis_client(url)

    def emit(self, event: Event) -> bool:
        data = encode(event)
        self.client.xadd(NAIVE_STREAM, {"id": event.id, "type": str(type(event).__struct_config__.tag), "data": data})
        return True

    def stats(self) -> dict[str, Any]:
        return {}

    def release(self, timeout: float | None = None) -> bool:
        self.client.close()
        return True

    def detach_agent(self, agent: str) -> None:
        """No fleet report to leave: the naive transport reports nothing."""

    def detach(self) -> None:
        self.client.close()


# -- conditions ---------------------------------------------------------------------------
@dataclass
class Condition:
    kind: str
    work_ms: int
    chunk: int
    provider: MemstreamProvider
    prefix: str
    url: str
    port: int
    server: ValkeyProcess | None = None
    data_dir: Path | None = None
    transcript: list[dict[str, Any]] = field(
        default_factory=lambda: [{"role": "system", "content": "You are Hermes, a helpful agent."}]
    )
    turns: int = 0  # turns run so far (the warm-up included)
    timings: dict[str, list[int]] = field(default_factory=lambda: {h: [] for h in HOOKS})
    floor: list[int] = field(default_factory=list)  # the fixed work, timed right after the agent's work
    rounds: list[dict[str, float]] = field(default_factory=list)  # per round: hook -> p99 µs

    @property
    def name(self) -> str:
        return self.kind if self.kind == BASELINE else f"{self.kind}/{self.work_ms}ms"


def condition_settings(home: Path, url: str, prefix: str, report_every: float = REPORT_EVERY_S) -> Settings:
    return Settings(redis_url=url, home=home, autostart=False, stream_prefix=prefix, report_every_s=report_every).validated()


def _provider(settings: Settings, session: str, writer: Any = None) -> MemstreamProvider:
    provider = MemstreamProvider(settings)
    provider.writer = writer  # None: initialize attaches the shared spool writer
    provider.initialize(
        session,
        hermes_home=str(settings.home / "hermes"),
        platform="cli",
        agent_identity="bench-agent",
        user_id="bench-user",
        user_name="bench",
    )
    if provider.writer is None:
        raise RuntimeError(f"provider did not initialize: {provider.stats()}")
    return provider


def _work(ms: float) -> None:
    """Pure-Python work on the calling thread for ``ms`` ms (the agent's own work)."""
    end = time.perf_counter() + ms / 1000
    s = 0
    while time.perf_counter() < end:
        for i in range(100):
            s += i * i


def run_chunk(cond: Condition, inputs: Inputs, n: int, timed: bool = True) -> dict[str, list[int]]:
    """``n`` turns of ``cond``; the ns of every hook call (untimed: a warm-up, without the work)."""
    out: dict[str, list[int]] = {h: [0] * n for h in HOOKS}
    t_start, t_write, t_sync = out["on_turn_start"], out["on_memory_write"], out["sync_turn"]
    p, transcript, session = cond.provider, cond.transcript, inputs.session
    on_turn_start, on_memory_write, sync_turn = p.on_turn_start, p.on_memory_write, p.sync_turn
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for k in range(n):
            i = cond.turns + k
            user, answer, messages = inputs.turns[i]
            action, target, content, metadata = inputs.writes[i]
            if timed and cond.work_ms:
                _work(cond.work_ms)
                f0 = clock()
                _fixed_work()  # the floor where the hooks run: right after the agent's work
                cond.floor.append(clock() - f0)
            t0 = clock()
            on_turn_start(i + 1, user)
            t1 = clock()
            transcript.extend(messages)
            t2 = clock()
            on_memory_write(action, target, content, metadata=metadata)
            t3 = clock()
            sync_turn(user, answer, session_id=session, messages=transcript)
            t4 = clock()
            t_start[k], t_write[k], t_sync[k] = t1 - t0, t3 - t2, t4 - t3
    finally:
        gc.enable()
    cond.turns += n
    if timed:
        for h in HOOKS:
            cond.timings[h].extend(out[h])
        cond.rounds.append({h: percentile(out[h], 0.99) / 1000.0 for h in HOOKS})
    return out


def summary_of(ns: list[int]) -> dict[str, Any]:
    s = sorted(ns)
    us = [x / 1000.0 for x in s]
    return {
        "n": len(s),
        "p50_us": round(percentile(us, 0.50), 1),
        "p99_us": round(percentile(us, 0.99), 1),
        "p999_us": round(percentile(us, 0.999), 1),
        "max_us": round(us[-1], 1) if us else None,
    }


def _log_ids(client: redis.Redis, stream: str, after: str = "-") -> list[bytes]:
    """Event ids of the stream entries after ``after`` (exclusive), in log order."""
    ids: list[bytes] = []
    cursor = after if after == "-" else f"({after}"
    while True:
        batch = client.xrange(stream, min=cursor, max="+", count=5000)
        if not batch:
            return ids
        entries = [xrange_entry(entry) for entry in batch]
        ids.extend(_bytes(fields[b"id"]) for _, fields in entries)
        cursor = "(" + entries[-1][0]


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def count_in_log(url: str, stream: str) -> tuple[int, int]:
    """(entries, distinct event ids) of ``stream``."""
    client = redis_client(url)
    try:
        ids = _log_ids(client, stream)
    finally:
        client.close()
    return len(ids), len(set(ids))


def _fixed_work() -> int:
    """The floor's fixed pure-Python workload (about as long as a cheap hook)."""
    s = 0
    for i in range(250):
        s += i * i
    return s


def measure_floor(root: Path, n: int = 4000) -> dict[str, Any]:
    """The machine's own noise: a fixed pure-Python workload and a bare 2 KB write(),
    timed like the hooks (same timer, gc disabled)."""
    clock = time.perf_counter_ns
    work = _fixed_work

    py, wr = [0] * n, [0] * n
    fd = os.open(root / "floor.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    record = os.urandom(2048)
    gc.collect()
    gc.disable()
    try:
        for k in range(n):
            t0 = clock()
            work()
            t1 = clock()
            os.write(fd, record)
            t2 = clock()
            py[k], wr[k] = t1 - t0, t2 - t1
    finally:
        gc.enable()
        os.close(fd)
    return {"python_work": summary_of(py), "write_2kb": summary_of(wr)}


def set_up_conditions(
    root: Path,
    up: ValkeyProcess,
    session: str,
    inputs: Inputs,
    calls: int,
    rounds: int,
    slow_chunk: int,
    warmup: int,
    report_every: float,
) -> list[Condition]:
    chunk0 = max(1, calls // rounds)
    conds: list[Condition] = []
    for work in WORKS_MS:
        chunk = chunk0 if work == 0 else slow_chunk
        for kind in KINDS:
            prefix = f"bench-{kind}-{work}"
            home = root / f"home-{kind}-{work}"
            server: ValkeyProcess | None = None
            data_dir: Path | None = None
            if kind in UP_KINDS:
                url, port = up.url, 0
            elif kind == "down_mid":
                data_dir = root / f"valkey-{kind}-{work}"
                server = ValkeyProcess(data_dir).start()
                url, port = server.url, server.port
            else:
                port = free_port()  # nothing listens there until the end of the rounds
                url = f"redis://127.0.0.1:{port}/0"
            every = 0.0 if kind == "report_off" else report_every
            provider = _provider(condition_settings(home, url, prefix, every), session)
            conds.append(Condition(kind, work, chunk, provider, prefix, url, port, server, data_dir))
    naive = _NaiveWriter(up.url)
    conds.append(
        Condition(
            BASELINE,
            0,
            chunk0,
            _provider(condition_settings(root / "home-naive", up.url, "bench-naive"), session, writer=naive),
            "bench-naive",
            up.url,
            0,
        )
    )
    for cond in conds:  # warm-up, untimed; down_mid loses its Redis after it
        run_chunk(cond, inputs, warmup, timed=False)
        writer = cond.provider.writer
        if cond.kind in (*UP_KINDS, "down_mid") and writer is not None and not writer.flush(30.0):
            raise RuntimeError(f"{cond.name}: the warm-up did not reach the log within 30 s")
        if cond.kind == "down_mid" and cond.server is not None:
            cond.server.stop()
            cond.server = None
    return conds


def check_delivery(cond: Condition) -> dict[str, Any]:
    """Every event of ``cond`` must reach its log (down: once its Valkey is started)."""
    expected = 2 * cond.turns  # on_memory_write and sync_turn each append one event a turn (lead-ins too)
    if cond.kind == BASELINE:
        entries, distinct = count_in_log(cond.url, NAIVE_STREAM)
        return {"expected": expected, "in_log": entries, "distinct": distinct, "lossless": distinct == expected}
    writer = cond.provider.writer
    stats = cond.provider.stats()
    if cond.kind not in UP_KINDS:
        cond.server = ValkeyProcess(cond.data_dir or Path(tempfile.mkdtemp(prefix="memstream-valkey-")), port=cond.port).start()
    t0 = time.perf_counter()
    flushed = writer.flush(120.0) if writer is not None else False
    ship_s = time.perf_counter() - t0
    entries, distinct = count_in_log(cond.url, keys.events(cond.prefix, 0))
    refused = stats.get("spool_refused", 0) + stats.get("refused", 0)
    return {
        "expected": expected,
        "in_log": entries,
        "distinct": distinct,
        "flushed": flushed,
        "refused": refused,
        "hook_errors": stats.get("hook_errors", 0),
        "ship_s": round(ship_s, 3),
        "lossless": bool(flushed and entries == distinct == expected and refused == 0 and stats.get("hook_errors", 0) == 0),
    }
