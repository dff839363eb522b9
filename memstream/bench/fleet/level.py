"""One level of N agents from start to settle (``level``): a fresh service, the agents, the
probes and samples, and the level's figures."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memstream.bench.fleet.measure import (
    Prober,
    Sampler,
    count_log,
    machine_busy,
    ms_figures,
    pct,
    rate_between,
    spread,
    us_figures,
)
from memstream.bench.fleet.plan import (
    HOOKS,
)
from memstream.bench.fleet.supervise import Child, child_env
from memstream.bench.stats import latency_summary
from memstream.core import Settings, keys, stop_process, stop_processes


def level(
    root: Path,
    n: int,
    processes: int,
    rate: float,
    seconds: float,
    embedder: str,
    probes_per_s: float,
    settle: float,
    seed: int,
    every: tuple[int, int],
    children: list[Child],
    cached: bool = False,
    tree: str = "",
    embed_threads: int = 0,
    late_rerank: str = "auto",
) -> dict[str, Any]:
    """One level: a fresh service, ``n`` agents over ``processes`` processes, ``seconds`` of turns;
    the service runs ``tree``'s code (another checkout first on its path; "": this one's)."""
    from memstream.producers import redis_client

    settings = Settings()  # the children's: the defaults (env drops every MEMSTREAM_* variable but theirs)
    prefix, shards = settings.stream_prefix, settings.shards
    root.mkdir(parents=True)
    level_started = time.monotonic()
    loadavg_start = [round(x, 2) for x in os.getloadavg()]
    service_threads: dict[int, str] = {}

    def thread_names(message: dict[str, Any]) -> bool:
        if "threads" not in message:
            return False
        service_threads.update({int(k): str(v) for k, v in message["threads"].items()})
        return True

    # another tree's code first on the path (``-m`` would put the working directory before it)
    boot = f"import sys; sys.path.insert(0, {tree!r}); from memstream.bench.fleet import main; sys.exit(main())"
    service = Child(
        [sys.executable, "-c", boot, "--service-process"]
        if tree
        else [sys.executable, "-m", "memstream.bench.fleet", "--service-process"],
        child_env(
            root / "service",
            MEMSTREAM_EMBEDDER=embedder,
            MEMSTREAM_METRICS_ADDR="127.0.0.1:0",
            **({"MEMSTREAM_EMBED_THREADS": str(embed_threads)} if embed_threads else {}),
            **({"MEMSTREAM_LATE_RERANK": late_rerank} if late_rerank != "auto" else {}),
        ),
        root / "service.log",
        on_line=thread_names,
        started=children,
    )
    info = service.expect("url", time.monotonic() + 120)
    if info.get("pipeline_error"):
        raise RuntimeError(f"the service's pipeline did not start: {info['pipeline_error']}")
    url = str(info["url"])
    client = redis_client(url, timeout=10)
    clients_before = int(client.info("clients").get("connected_clients", 0))
    from memstream.projections import active_group

    prober = Prober(url, prefix, shards, active_group(client, prefix, "turns"))
    per_process = [p for p in spread(n, processes) if p]
    probe_p = min(1.0, probes_per_s / (n * rate))
    agents: list[Child] = []
    k = 0
    for p, count in enumerate(per_process):
        home = root / f"agents-{p}"
        home.mkdir()
        names = [f"agent-{k + j:04d}" for j in range(count)]
        k += count
        spec = {
            "agents": names,
            "rate": rate,
            "probe_p": probe_p,
            "seed": seed,
            "memory_every": every[0],
            "search_every": every[1],
            "cached": cached,
            "results": str(home / "results.json"),
            "flush_timeout": max(30.0, settle),
        }
        (home / "spec.json").write_text(json.dumps(spec))
        child = Child(
            [sys.executable, "-m", "memstream.bench.fleet", "--agent-process", str(home / "spec.json")],
            child_env(home, MEMSTREAM_REDIS_URL=url),
            home / "agent.log",
            on_line=prober.add,
            started=children,
        )
        agents.append(child)
    ready = [a.expect("ready", time.monotonic() + 120 + 0.2 * n) for a in agents]
    clients_ready = int(client.info("clients").get("connected_clients", 0))
    pids: dict[str, int | None] = {"service": service.proc.pid, "valkey": info.get("valkey_pid"), "bench": os.getpid()}
    pids.update({f"agents-{p}": a.proc.pid for p, a in enumerate(agents)})
    sampler = Sampler(url, prefix, shards, pids, service_threads)
    sampler_thread = threading.Thread(target=sampler.run, name="fleet-sampler", daemon=True)
    start = time.monotonic() + 1.0
    end = start + seconds
    for a in agents:
        a.send(f"go {start} {end}")
    sampler_thread.start()
    prober.start()
    try:
        done = [a.expect("done", end + max(60.0, settle) + 0.1 * n) for a in agents]
        ended = time.monotonic()
        results = [json.loads(Path(d["done"]).read_text()) for d in done]
        # the workers catch up, the probes are found (or time out)
        caught_up_s: float | None = None
        prober.stop_at = ended + settle
        deadline = ended + settle
        while time.monotonic() < deadline:
            if (
                sampler.samples
                and sampler.samples[-1]["t"] > ended
                and all(e == 0 for e, _ in sampler.samples[-1]["lag"].values())
            ):
                caught_up_s = round(sampler.samples[-1]["t"] - ended, 1)
                break
            time.sleep(0.2)
        prober.join(max(0.0, prober.stop_at - time.monotonic()) + 15)
    finally:
        prober.stop_at = time.monotonic()
        sampler.stop.set()
        sampler_thread.join(15)
    query_counters = {
        k.decode() if isinstance(k, bytes) else str(k): int(v) for k, v in client.hgetall(keys.query_counters(prefix)).items()
    }
    client.close()
    counts = count_log(url, prefix, shards)
    stop_processes([a.proc for a in agents], 10)
    stop_process(service.proc, 30)
    emitted = [i for r in results for i in r["emitted"]]
    emitted_set = set(emitted)
    lost = sum(1 for i in emitted_set if i not in counts)
    duplicated = sum(c - 1 for c in counts.values() if c > 1) + (len(emitted) - len(emitted_set))
    unexpected = sum(1 for i in counts if i not in emitted_set)
    # figures
    run = [s for s in sampler.samples if start - 1.0 <= s["t"] <= end + 1.0]
    mem = {h: [x for r in results for x in r["mem"][h]] for h in HOOKS}
    floor = {h: [x for r in results for x in r["floor"][h]] for h in HOOKS}
    hooks: dict[str, Any] = {}
    for h in HOOKS:
        m, f = us_figures(mem[h]), us_figures(floor[h])
        ratio = round(m["p99"] / f["p99"], 1) if m.get("n") and f.get("p99") else None
        hooks[h] = {"memstream_us": m, "floor_us": f, "p99_ratio": ratio}
    stats: dict[str, Any] = {}
    for r in results:
        for key, value in r["stats"].items():
            stats[key] = max(stats.get(key, 0), value) if key == "prefetch_ms_max" else stats.get(key, 0) + value
    outcomes = {k: int(stats.get(k, 0)) for k in ("prefetch_fresh", "prefetch_stale", "prefetch_empty")}
    prefetches = sum(outcomes.values())
    turns = sum(r["turns"] for r in results)
    lag_entries = [max((e for e, _ in s["lag"].values()), default=0) for s in run]
    lag_seconds = [max((w for _, w in s["lag"].values()), default=0.0) for s in run]
    per_group = {
        g: {
            "max_entries": max((s["lag"].get(g, (0, 0.0))[0] for s in run), default=0),
            "max_s": max((s["lag"].get(g, (0, 0.0))[1] for s in run), default=0.0),
        }
        for g in sorted({g for s in run for g in s["lag"]})
    }
    clients_max = max((s["clients"] for s in run), default=clients_ready)
    agents_cpu = {
        name: pct(rate_between(run, lambda s, name=name: s["cpu_s"].get(name))) for name in pids if name.startswith("agents-")
    }
    return {
        "agents": n,
        "processes": len(agents),
        "agents_per_process": per_process,
        "rate_per_agent": rate,
        "target_turns_per_s": round(n * rate, 2),
        "turns": turns,
        "turns_per_s": round(turns / seconds, 2),
        "loadavg_at_start": loadavg_start,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "turn_late_ms": latency_summary([x for r in results for x in r["late_ms"]], digits=2),
        "hooks": hooks,
        "prefetch": {
            "fresh_fraction": round(outcomes["prefetch_fresh"] / prefetches, 4) if prefetches else None,
            "outcomes": outcomes,
            "ms": ms_figures(mem["prefetch"]),
            "budget_ms": settings.prefetch_budget_ms,
        },
        "query_ms": {**ms_figures(mem["handle_tool_call"]), "tool_errors": sum(r["tool_errors"] for r in results)},
        "append_to_searchable_s": prober.figures(),
        "worker_lag": {
            "max_entries": max(lag_entries, default=0),
            "max_s": max(lag_seconds, default=0.0),
            "series_entries": lag_entries,
            "series_s": lag_seconds,
            "groups": per_group,
            "caught_up_after_end_s": caught_up_s,
        },
        "query_backlog_max": max((s["query_backlog"] for s in run), default=0),
        "queries_per_s": {
            # asked: each turn's recall (on_turn_start) and warm-up (queue_prefetch), and the tool searches
            "asked": round((2 * turns + len(mem["handle_tool_call"])) / seconds, 1),
            "answered": {
                k: None if v is None else round(v, 1)
                for k, v in zip(("mean", "max"), rate_between(run, lambda s: s["queries_answered"]))
            },
        },
        "query_counters": query_counters,
        "redis": {
            "cpu_pct": pct(rate_between(run, lambda s: s["redis_cpu_s"])),
            "used_memory_mb_max": round(max((s["used_memory"] for s in run), default=0) / 2**20, 1),
            "clients_before_agents": clients_before,
            "clients_agents_ready": clients_ready,
            "clients_max": clients_max,
            "clients_per_agent": round((clients_max - clients_before) / n, 2),
        },
        "cpu_pct": {
            "service": pct(rate_between(run, lambda s: s["cpu_s"].get("service"))),
            "service_threads": {
                kind: pct(rate_between(run, lambda s, kind=kind: s["service_threads_cpu_s"].get(kind)))
                for kind in ("queries", "projections", "native", "other")
            },
            # threads that ended between two samples took their CPU seconds with them
            "service_exited_threads": pct(
                rate_between(
                    run,
                    lambda s: (
                        s["cpu_s"]["service"] - sum(s["service_threads_cpu_s"].values())
                        if s["cpu_s"].get("service") is not None
                        else None
                    ),
                )
            ),
            "valkey": pct(rate_between(run, lambda s: s["cpu_s"].get("valkey"))),
            "bench": pct(rate_between(run, lambda s: s["cpu_s"].get("bench"))),
            "agent_processes": agents_cpu,
            "agent_processes_sum_mean": round(sum(v["mean"] or 0.0 for v in agents_cpu.values()), 1),
            "machine_busy": machine_busy(run),
        },
        "agent_processes": [
            {
                "pid": r["pid"],
                "agents": r["agents"],
                "turns": r["turns"],
                "cpu_s": r["cpu_s"],
                "threads_max": r["threads_max"],
                "threads_ready": rd.get("threads"),
                "peak_rss_mb": r["peak_rss_mb"],
                "flushed": r["flushed"],
                "flush_s": r["flush_s"],
            }
            for r, rd in zip(results, ready)
        ],
        "provider_counters": stats,
        "events": {
            "emitted": len(emitted),
            "in_log": sum(counts.values()),
            "lost": lost,
            "duplicated": duplicated,
            "unexpected": unexpected,
        },
        "samples": len(run),
        "sampler_errors": sampler.errors,
        "level_s": round(time.monotonic() - level_started, 1),
    }
