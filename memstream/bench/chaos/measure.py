"""The chaos bench's run (``chaos_bench``) and what it reads afterwards: the agents' ledgers,
their hook times, what is still in their spools, and whether the workers settled."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import redis

from memstream.bench.chaos.orchestrator import Chaos
from memstream.bench.chaos.plan import HONEST, PREFIX
from memstream.bench.stats import percentile
from memstream.core import as_str, keys, stop_processes


def _ledger(root: Path, names: Iterable[str]) -> list[str]:
    out = []
    for name in names:
        path = root / name / "ledger.txt"
        if path.exists():
            out += [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return out


def _hook_times(root: Path, names: Iterable[str]) -> list[float]:
    out: list[float] = []
    for name in names:
        for path in (root / name).glob("stats-*.json"):
            try:
                out += json.loads(path.read_text())["durations"]
            except (OSError, ValueError, KeyError):
                continue
    return out


def _spooled(root: Path, names: Iterable[str]) -> list[str]:
    """The markers of the turns still in the agents' spools: every record of each segment
    past its checkpoint (whoever's it is), as a reader that adopted it would ship them."""
    from memstream.producers import Segment, TurnRecorded, decode

    out: list[str] = []
    for name in names:
        spool = root / name / "spool"
        for path in sorted(spool.glob("*.seg")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                size = os.fstat(fd).st_size
                seg = Segment(path=path, fd=fd, closed=True, limit=size)
                seg.load_checkpoint()
                while seg.offset < size:
                    records, end = seg.read(size, 1000, root / "quarantine")
                    for rec in records:
                        try:
                            event = decode(rec.payload)
                        except Exception:  # noqa: BLE001 - not a turn of the agents'
                            continue
                        if isinstance(event, TurnRecorded) and event.user_text.startswith("chaos-"):
                            out.append(event.user_text.split(":", 1)[0])
                    if end == seg.offset:
                        break
                    seg.offset = end
            finally:
                os.close(fd)
    return out


def _settled(client: redis.Redis) -> bool:
    """Every group has applied every entry of the operator's streams and the honest
    tenant's log (the hostile tenant's own log is its own to break)."""
    streams = [as_str(k) for k in client.scan_iter(keys.events_pattern(PREFIX))] + [keys.tenant_events(PREFIX, HONEST)]
    for key in streams:
        try:
            groups = client.xinfo_groups(key)
        except redis.ResponseError:
            continue
        for g in groups:
            if g["pending"] or g["lag"] is None or g["lag"]:
                return False
    return True


def chaos_bench(
    minutes: float = 2.0, agents: int = 4, rate: float = 20.0, seed: int = 0, settle_timeout: float = 180.0
) -> dict[str, Any]:
    from memstream.core import Settings
    from memstream.producers import EventLog, TurnRecorded, Writer
    from memstream.projections import group_names, group_of
    from memstream.query import CountRequest, ask
    from memstream.workers import DeadLetters

    root = Path(tempfile.mkdtemp(prefix="memstream-bench-chaos-"))
    chaos = Chaos(root, agents, rate, seed)
    try:
        chaos.valkey.start()
        chaos.url = chaos.valkey.url
        chaos.register()
        chaos.start_worker()
        for name in chaos.agents:
            chaos.start_agent(name)
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(chaos.rng.uniform(1.0, 4.0))
            chaos.act()
        # the end: agents stop (shutdown ships what it can), then every spool is shipped
        stop_processes([proc for proc in chaos.agents.values() if proc is not None], 30)
        shipped_all = True
        for name in chaos.agents:
            settings = Settings.load(
                home=str(root / name), redis_url=chaos.urls[HONEST], tenant=HONEST, autostart=False, stream_prefix=PREFIX
            )
            writer = Writer(settings)
            writer.shipper.start()
            shipped_all = writer.flush(60.0) and shipped_all
            shipped_all = writer.close() and shipped_all
        spooled = set(_spooled(root, chaos.agents))  # not lost: on the host, shipped by its next writer
        client = chaos.client()
        started = time.monotonic()
        while not _settled(client) and time.monotonic() - started < settle_timeout:
            time.sleep(0.5)
        settled = _settled(client)
        # what the log holds
        eventlog = EventLog(client, PREFIX, 1)
        markers: dict[str, int] = {}
        ids: dict[str, int] = {}
        turns = 0
        foreign = 0
        honest_log = keys.tenant_events(PREFIX, HONEST)
        written = _ledger(root, chaos.agents)
        for stream, entry_id, fields in eventlog.entries():
            if entry_id in chaos.poisoned:
                continue
            try:
                event = eventlog.decode_entry(fields)
            except Exception:
                foreign += stream == honest_log  # nothing undecodable is appended there by the honest hosts
                continue
            if not isinstance(event, TurnRecorded):
                foreign += stream == honest_log and event.scope.tenant != HONEST
                continue
            # an honest host's turn (one whose ledger line a SIGKILL lost is one too: extra, not foreign)
            mine = event.scope.tenant == HONEST and event.user_text.startswith("chaos-")
            if (stream == honest_log) != mine:
                foreign += 1  # in honest's log and not its own, or one of its turns elsewhere
            if event.user_text.startswith("chaos-"):
                turns += 1
                ids[event.id] = ids.get(event.id, 0) + 1
                marker = event.user_text.split(":", 1)[0]
                markers[marker] = markers.get(marker, 0) + 1
        lost = [m for m in written if m not in markers and m not in spooled]
        duplicated = sum(n - 1 for n in ids.values() if n > 1) + sum(n - 1 for n in markers.values() if n > 1)
        # poison: dead-lettered by every projection, each with a reason
        dead = DeadLetters(client, PREFIX).list(count=1_000_000)
        groups_per_entry: dict[str, set[str]] = {}
        reasons_ok = True
        for d in dead:
            groups_per_entry.setdefault(d.get("entry_id", ""), set()).add(str(d.get("group")))
            if d.get("entry_id") in chaos.poisoned and not d.get("error"):
                reasons_ok = False
        n_groups = len(group_names())
        poison_dead = sum(1 for e in chaos.poisoned if len(groups_per_entry.get(e, ())) == n_groups)
        try:
            items = ask(client, PREFIX, CountRequest(), timeout=10.0).get("items", {})
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            items = {"error": str(exc)}
        hooks = sorted(_hook_times(root, chaos.agents))
        return {
            "minutes": minutes,
            "agents": agents,
            "rate_per_agent": rate,
            "seed": seed,
            "actions": chaos.actions,
            "written": len(written),
            "in_log": turns,
            "distinct_in_log": len(markers),
            "projected_turn_points": items.get(group_of("turns")) if isinstance(items, dict) else None,
            "lost": len(lost),
            "lost_examples": lost[:5],
            "spooled_at_end": len([m for m in written if m not in markers and m in spooled]),
            "final_ship_drained": shipped_all,
            "duplicated": duplicated,
            "foreign_changed": foreign,
            "hostile_tenant_done": chaos.hostile_done,
            "hostile_tenant_refused": chaos.hostile_refused,
            "hostile_tenant_breached": chaos.hostile_breached,
            "poison_injected": len(chaos.poisoned),
            "poison_dead_lettered_by_every_projection": poison_dead,
            "poison_reasons_present": reasons_ok,
            "oversized_injected": len(chaos.oversized),
            "hostile_jobs_ran": chaos.marker.exists(),
            "settled": settled,
            "redis_down_s_max": round(max(chaos.redis_down_s, default=0.0), 2),
            "hook_calls": len(hooks),
            "hook_p50_ms": round(statistics.median(hooks), 3) if hooks else None,
            "hook_p99_ms": round(percentile(hooks, 0.99), 3) if hooks else None,
            "hook_max_ms": round(hooks[-1], 3) if hooks else None,
        }
    finally:
        stop_processes([proc for proc in [chaos.worker, *chaos.agents.values()] if proc is not None], 10)
        chaos.valkey.stop()
        if os.environ.get("MEMSTREAM_BENCH_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)
