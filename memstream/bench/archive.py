"""``memstream bench archive``: what archiving the log's cold part gives back to Redis, and
what writing and reading the archive cost.

One run, on this machine: a real Valkey (``ValkeyProcess``, temp dir, AOF ``everysec``),
``events`` realistic turns (LoCoMo dialogue turns paired user/assistant when available,
else generated agent-style turns, made as ``bench ingest`` makes them; past the data set
the pairs repeat with a suffix) appended as the shipper appends them (``Record``,
``append_batch``, 500 a call); every projection's consumer group then created at the end
of the log (so every group has applied everything). Then, in order:

* ``stream_read``: the log read from Redis (``EventLog.entries``), events/s: the baseline.
* ``used_memory`` (``INFO memory``) and the stream's ``MEMORY USAGE`` before and after
  ``archive`` (everything every group applied: the default of ``memstream archive``), and
  the server's RSS. The allocator keeps freed pages for reuse, so RSS does not shrink:
  ``refill`` appends as many events again and reports what the server then takes.
* ``archive``: seconds (the write: read from Redis, compress, fsync, manifest; and the
  trim), events/s, the bytes on disk (segments and manifest), bytes per event, and the
  fields' raw bytes over the segments' bytes.
* ``history``: the whole log read back (the archive, then what the stream kept), events/s;
  checked against the entry ids appended.

``archive_bench`` returns a JSON-ready dict; ``format_archive`` renders it.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.workload import load_pairs, sample_texts, turn_events
from memstream.core import argtypes
from memstream.producers import Archive, EventLog, Record, archive, history, redis_client
from memstream.service import ValkeyProcess

__all__ = ["archive_bench", "format_archive", "add_arguments", "run"]

_BATCH = 500  # records per append_batch call: the shipper's default batch


def archive_bench(events: int = 100_000, data: str | None = None) -> dict[str, Any]:
    """Append ``events`` turns to a fresh Valkey, archive them all, read them back."""
    from memstream.projections import group_names

    machine = machine_info()
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-archive-"))
    server = ValkeyProcess(root / "valkey").start()
    client = redis_client(server.url, timeout=120.0)
    try:
        eventlog = EventLog(client, "bench")
        key = eventlog.stream_keys[0]
        pairs, source = load_pairs(data)
        records = [Record.of(e) for e in turn_events(sample_texts(pairs, events, salt="archive"))]
        started = time.perf_counter()
        appended: list[str | None] = []
        for start in range(0, len(records), _BATCH):
            appended += eventlog.append_batch(records[start : start + _BATCH])
        append_s = time.perf_counter() - started
        del records
        for group in group_names():
            client.xgroup_create(key, group, id="$")
        gc.collect()

        started = time.perf_counter()
        read = sum(1 for _ in eventlog.entries())
        read_s = time.perf_counter() - started

        before = _memory(client, key)
        store = Archive(root / "archive")
        started = time.perf_counter()
        result = archive(eventlog, store, groups=group_names())
        archive_s = time.perf_counter() - started
        after = _memory(client, key)
        segments = store.segments()
        disk = sum((store.directory / s.file).stat().st_size for s in segments) + store.manifest_path.stat().st_size
        raw = sum(s.raw_bytes for s in segments)

        gc.collect()
        started = time.perf_counter()
        ids = [entry_id for _, entry_id, _ in history(eventlog, store)]
        history_s = time.perf_counter() - started

        # as many events again: they take the memory the archive freed (the allocator keeps
        # freed pages for reuse rather than give them back at once)
        more = [Record.of(e) for e in turn_events(sample_texts(pairs, events, salt="again"))]
        for start in range(0, len(more), _BATCH):
            eventlog.append_batch(more[start : start + _BATCH])
        refill = _memory(client, key)
        return {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {**machine, "loadavg_at_end": machine_info()["loadavg_at_start"]},
            "data": source,
            "events": events,
            "append": {"seconds": round(append_s, 3), "events_per_s": round(events / append_s, 1)},
            "stream_read": {"events": read, "seconds": round(read_s, 3), "events_per_s": round(read / read_s, 1)},
            "redis": {
                "used_memory_before": before["used_memory"],
                "used_memory_after": after["used_memory"],
                "used_memory_freed": before["used_memory"] - after["used_memory"],
                "used_memory_rss_before": before["used_memory_rss"],
                "used_memory_rss_after": after["used_memory_rss"],
                "used_memory_rss_after_refill": refill["used_memory_rss"],
                "used_memory_after_refill": refill["used_memory"],
                "allocator": before["allocator"],
                "stream_before": before["stream"],
                "stream_after": after["stream"],
                "stream_length_after": after["length"],
            },
            "archive": {
                "events": result["archived"],
                "trimmed": result["trimmed"],
                "segments": len(segments),
                "seconds": round(archive_s, 3),
                "write_seconds": result["seconds"]["write"],
                "trim_seconds": result["seconds"]["trim"],
                "events_per_s": round(result["archived"] / archive_s, 1),
                "disk_bytes": disk,
                "bytes_per_event": round(disk / max(1, result["archived"]), 1),
                "raw_bytes": raw,
                "ratio": round(raw / max(1, disk), 2),
            },
            "history": {
                "events": len(ids),
                "seconds": round(history_s, 3),
                "events_per_s": round(len(ids) / history_s, 1),
                "matches": ids == [i for i in appended if i],
            },
        }
    finally:
        client.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _memory(client: Any, key: str) -> dict[str, Any]:
    info = client.info("memory")
    return {
        "used_memory": int(info["used_memory"]),
        "used_memory_rss": int(info["used_memory_rss"]),
        "allocator": info.get("mem_allocator"),
        "stream": int(client.memory_usage(key, samples=0) or 0),
        "length": int(client.xlen(key)),
    }


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def format_archive(result: dict[str, Any]) -> str:
    m, r, a, h = result["machine"], result["redis"], result["archive"], result["history"]
    return "\n".join(
        [
            f"memstream bench archive — {result['date']}",
            f"machine: {m.get('cpus')} CPUs {m.get('cpu_model', '')}, Python {m.get('python')}; load average "
            f"{m.get('loadavg_at_start')} at start, {m.get('loadavg_at_end')} at end",
            f"data: {result['events']} turns, {result['data']}",
            "",
            f"append: {result['append']['events_per_s']:,.0f} events/s; stream read (EventLog.entries): "
            f"{result['stream_read']['events_per_s']:,.0f} events/s",
            f"Redis used_memory: {_mib(r['used_memory_before'])} before, {_mib(r['used_memory_after'])} after "
            f"({_mib(r['used_memory_freed'])} freed; RSS {_mib(r['used_memory_rss_before'])} -> "
            f"{_mib(r['used_memory_rss_after'])}, allocator {r['allocator']}); the stream {_mib(r['stream_before'])} -> "
            f"{r['stream_after']} bytes ({r['stream_length_after']} entries kept)",
            f"as many events again after the archive: used_memory {_mib(r['used_memory_after_refill'])}, RSS "
            f"{_mib(r['used_memory_rss_after_refill'])} (the freed memory reused)",
            f"archive: {a['events']} events in {a['seconds']} s = {a['events_per_s']:,.0f} events/s (write "
            f"{a['write_seconds']} s, trim {a['trim_seconds']} s); {a['segments']} segments, {_mib(a['disk_bytes'])} on "
            f"disk, {a['bytes_per_event']} bytes/event, {a['ratio']}x smaller than the fields",
            f"history (archive then stream): {h['events']} events in {h['seconds']} s = {h['events_per_s']:,.0f} "
            f"events/s; the ids appended, in order: {'yes' if h['matches'] else 'NO'}",
        ]
    )


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench archive``'s arguments."""
    parser.add_argument(
        "--events",
        type=argtypes.int_between(1, 10_000_000),
        default=100_000,
        help="events appended, archived and read back (default 100000)",
    )
    parser.add_argument("--data", default="", help="LoCoMo turns JSONL (default: generated text if absent)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = archive_bench(events=args.events, data=args.data or None)
    return show(args, result, format_archive(result))
