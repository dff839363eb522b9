"""``memstream bench idle``: the resident memory of the embedded default at rest, per process.

Per round and tree: a fresh ``MEMSTREAM_HOME``, ``memstream up --detach`` (the embedded
Valkey, the service, the projection child), the README's first session (``add --sync``
twice, ``search`` and ``search --scope all``), ``settle`` seconds of rest, then the resident
size (``VmRSS``) of the service and of each of its children, and ``memstream down``.
``--against PATH`` runs another checkout's code the same way (its tree on ``PYTHONPATH``,
this interpreter and its packages), the trees alternating in every round; medians over the
rounds. The default embedder is the product's (``MEMSTREAM_EMBEDDER`` unset).
``--query-replicas N`` runs this tree's service with N read replicas (``MEMSTREAM_QUERY_REPLICAS``;
the tree before has none): each is measured as a ``read replica`` (a child holding its own
store, ``data/qdrant-replica-N``), once every one of them has opened its store.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import BenchError, checkout, show
from memstream.bench.stats import machine, rss_mb
from memstream.core import argtypes

__all__ = ["add_arguments", "format_idle", "idle_bench", "run"]

SESSION = (
    ("add", "--sync", "The staging database listens on port 6543"),
    ("add", "--agent", "alice", "--sync", "Deploys go out on Tuesdays"),
    ("search", "what port is the staging database on"),
    ("search", "--scope", "all", "when do deploys go out"),
)


ORDER = ("service", "projection child", "read replica", "valkey", "child", "total")


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return sorted(out)


def _role(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    if any(b"valkey" in a for a in argv[:1]):
        return "valkey"
    if b"-c" in argv:
        return "read replica" if _holds_replica_store(pid) else "projection child"
    return "child"


def _holds_replica_store(pid: int) -> bool:
    """Whether the process has a file of a read replica's store open (``data/qdrant-replica-N``)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if "qdrant-replica-" in os.readlink(fd):
                return True
        except OSError:
            continue
    return False


def _one(tree: Path, settle: float, root: Path, pids: list[int], replicas: int = 0) -> dict[str, float]:
    """One tree's idle service after the first session: MB per process role, and ``total``
    (the processes measured appended to ``pids``); with ``replicas`` read replicas."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    env = {k: v for k, v in os.environ.items() if k not in ("MEMSTREAM_REDIS_URL", "MEMSTREAM_QDRANT_URL")}
    env.update({"MEMSTREAM_HOME": str(home), "MEMSTREAM_METRICS_ADDR": "127.0.0.1:0", "PYTHONPATH": str(tree)})
    if replicas:
        env["MEMSTREAM_QUERY_REPLICAS"] = str(replicas)

    def memstream(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memstream", *argv], env=env, cwd=root, capture_output=True, text=True, timeout=timeout
        )

    try:
        started = memstream("up", "--detach")
        if started.returncode != 0:
            raise BenchError(f"`memstream up --detach` on {tree} failed: {(started.stderr or started.stdout).strip()[:300]}")
        for argv in SESSION:
            done = memstream(*argv)
            if done.returncode != 0:
                raise BenchError(f"`memstream {' '.join(argv)}` on {tree} failed: {done.stderr.strip()[:300]}")
        pid = int(json.loads((home / "run" / "service.json").read_text())["pid"])
        deadline = time.monotonic() + 300
        while replicas and sum(_role(c) == "read replica" for c in _children(pid)) < replicas:
            if time.monotonic() > deadline:
                raise BenchError(f"{replicas} read replicas did not open their stores within 300 s")
            time.sleep(0.2)  # polling another process's state: its children as the kernel lists them
        time.sleep(settle)  # the rest being measured
        out: dict[str, float] = {"service": rss_mb(pid)}
        pids.append(pid)
        for child in _children(pid):
            pids.append(child)
            role = _role(child)
            out[role] = out.get(role, 0.0) + rss_mb(child)
        out["total"] = sum(out.values())
        return out
    finally:
        memstream("down", timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def idle_bench(rounds: int = 3, settle: float = 8.0, against: str = "", query_replicas: int = 0) -> dict[str, Any]:
    """The figures of one run (JSON-ready): per tree and process, MB per round and median."""
    this = Path(__file__).resolve().parents[2]
    trees = [("this", this)] + ([("against", checkout(against, "memstream/service/service.py"))] if against else [])
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-idle-"))
    out: dict[str, Any] = {
        "benchmark": "idle",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "rounds": rounds,
        "settle_s": settle,
        "query_replicas": query_replicas,
        "trees": {label: {"path": str(path), "rounds": [], "pids": []} for label, path in trees},
    }
    try:
        for r in range(rounds):
            for label, path in trees if r % 2 == 0 else trees[::-1]:
                tree = out["trees"][label]
                tree["rounds"].append(_one(path, settle, root, tree["pids"], query_replicas if label == "this" else 0))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for tree in out["trees"].values():
        seen = {k for row in tree["rounds"] for k in row}
        roles = [k for k in ORDER if k in seen] + sorted(seen - set(ORDER))
        tree["median_mb"] = {k: round(statistics.median(row.get(k, 0.0) for row in tree["rounds"]), 1) for k in roles}
    if against:
        a, b = out["trees"]["this"]["median_mb"]["total"], out["trees"]["against"]["median_mb"]["total"]
        out["ratio_total"] = round(a / b, 3) if b else None
    return out


def format_idle(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"memstream bench idle  ({r['date']}, {r['rounds']} rounds, {r['settle_s']:g} s at rest, "
        f"this tree with {r.get('query_replicas', 0)} read replicas; "
        f"{m.get('cpus')} CPUs, load at start {m.get('loadavg_at_start')})",
        "tree      process            MB (median)  per round",
    ]
    for label, tree in r["trees"].items():
        for role, mb in tree["median_mb"].items():
            rounds = ", ".join(f"{row.get(role, 0.0):.0f}" for row in tree["rounds"])
            lines.append(f"{label:<9} {role:<18} {mb:>11.1f}  {rounds}")
    if r.get("ratio_total") is not None:
        lines.append(f"this / against: total x{r['ratio_total']}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench idle``'s arguments."""
    parser.add_argument(
        "--runs",
        "--rounds",
        dest="rounds",
        type=argtypes.int_between(1, 100),
        default=3,
        help="rounds, the trees alternating; one round starts each tree's service once (default 3)",
    )
    parser.add_argument("--settle", type=argtypes.seconds, default=8.0, help="seconds at rest before the measurement (default 8)")
    parser.add_argument("--against", default="", metavar="PATH", help="another checkout measured in the same run")
    parser.add_argument(
        "--query-replicas",
        type=argtypes.int_between(0, 16),
        default=0,
        help="read replicas of this tree's service (MEMSTREAM_QUERY_REPLICAS; the tree before has none; default 0)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    if not sys.platform.startswith("linux"):
        raise BenchError("bench idle reads /proc: Linux only")
    result = idle_bench(rounds=args.rounds, settle=args.settle, against=args.against, query_replicas=args.query_replicas)
    return show(args, result, format_idle(result))
