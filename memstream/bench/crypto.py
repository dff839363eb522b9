"""``memstream bench crypto``: what encrypting each event's body with its tenant's key
(crypto-shredding: forgetting a tenant deletes its key) would cost. A measurement only:
memstream does not encrypt event bodies.

The candidate is AES-256-GCM (``cryptography``'s AEAD, AES-NI where the CPU has it) with
one key per tenant, kept apart from the log (here a dict: the lookup a key cache costs),
a random 96-bit nonce per event and the event id as associated data; the body grows by
the nonce and the tag (28 bytes). ChaCha20-Poly1305 is measured beside it.

Where it would run: the shipper's thread on the agent host, after ``encode`` (never the
agent's thread: a hook only spools), and the workers' ingest, before ``decode``. So:

* ``ship``: per event, ``encode`` (the baseline: what the shipper does today) against
  ``encode`` then encrypt;
* ``ingest``: per event, ``decode`` of the payload against decrypt then ``decode``.

Each round times the baseline and each candidate over the same events, in an order that
alternates between rounds (the machine is shared and noisy); the figures are the medians
over rounds of nanoseconds per event, and each candidate's ratio to the baseline of the
same rounds (the median of the per-round ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable

import msgspec

from memstream.bench.command import show
from memstream.bench.stats import machine as machine_info
from memstream.bench.workload import load_pairs, sample_texts, turn_events
from memstream.core import argtypes
from memstream.producers import decode, encode

__all__ = ["crypto_bench", "format_crypto", "add_arguments", "run"]

NONCE = 12


def crypto_bench(events: int = 2000, rounds: int = 15, tenants: int = 8, data: str | None = None) -> dict[str, Any]:
    """Time encode/decode against encode+encrypt / decrypt+decode (see the module doc)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    machine = machine_info()
    pairs, source = load_pairs(data)
    batch = [
        msgspec.structs.replace(e, scope=msgspec.structs.replace(e.scope, tenant=f"tenant{i % tenants}"))
        for i, e in enumerate(turn_events(sample_texts(pairs, events, salt="crypto")))
    ]
    ciphers: dict[str, Callable[[bytes], Any]] = {"aes-256-gcm": AESGCM, "chacha20-poly1305": ChaCha20Poly1305}
    keyrings = {name: {f"tenant{t}": make(os.urandom(32)) for t in range(tenants)} for name, make in ciphers.items()}

    def ship_plain() -> list[bytes]:
        return [encode(e) for e in batch]

    def ship_sealed(ring: dict[str, Any]) -> Callable[[], list[bytes]]:
        def run() -> list[bytes]:
            out = []
            for e in batch:
                nonce = os.urandom(NONCE)
                out.append(nonce + ring[e.scope.tenant].encrypt(nonce, encode(e), e.id.encode()))
            return out

        return run

    plain = ship_plain()
    sealed = {name: ship_sealed(ring)() for name, ring in keyrings.items()}
    tenant_ids = [(e.scope.tenant, e.id.encode()) for e in batch]

    def ingest_plain() -> None:
        for body in plain:
            decode(body)

    def ingest_sealed(ring: dict[str, Any], bodies: list[bytes]) -> Callable[[], None]:
        def run() -> None:
            for (tenant, aad), body in zip(tenant_ids, bodies):
                decode(ring[tenant].decrypt(body[:NONCE], body[NONCE:], aad))

        return run

    ship = {"baseline": ship_plain, **{name: ship_sealed(ring) for name, ring in keyrings.items()}}
    ingest = {"baseline": ingest_plain, **{name: ingest_sealed(keyrings[name], sealed[name]) for name in keyrings}}
    result: dict[str, Any] = {
        "machine": machine,
        "data": source,
        "events": len(batch),
        "rounds": rounds,
        "tenants": tenants,
        "body_bytes": {"median": statistics.median(len(b) for b in plain), "added": NONCE + 16},
    }
    for stage, runs in (("ship", ship), ("ingest", ingest)):
        result[stage] = _interleaved(runs, rounds, len(batch))
    return result


def _interleaved(runs: dict[str, Callable[[], Any]], rounds: int, n: int) -> dict[str, Any]:
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        runs[name]()  # warm up
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            started = time.perf_counter_ns()
            runs[name]()
            times[name].append((time.perf_counter_ns() - started) / n)
    base = times["baseline"]
    out: dict[str, Any] = {"baseline_ns_per_event": round(statistics.median(base), 1)}
    for name in names[1:]:
        ratios = [c / b for c, b in zip(times[name], base)]
        out[name] = {
            "ns_per_event": round(statistics.median(times[name]), 1),
            "added_ns_per_event": round(statistics.median(c - b for c, b in zip(times[name], base)), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
    return out


def format_crypto(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"crypto-shredding cost: {result['events']} turns ({result['data']}), {result['tenants']} tenants, "
        f"{result['rounds']} interleaved rounds; {m.get('cpus', '?')} CPUs {m.get('cpu_model', '?')}, "
        f"load {m.get('loadavg_at_start', '?')}",
        f"  body: median {result['body_bytes']['median']} bytes, +{result['body_bytes']['added']} (nonce and tag)",
    ]
    for stage, what in (("ship", "shipper (encode [+ encrypt])"), ("ingest", "workers ([decrypt +] decode)")):
        row = result[stage]
        lines.append(f"  {what}: baseline {row['baseline_ns_per_event']} ns/event")
        for name, figures in row.items():
            if isinstance(figures, dict):
                lines.append(
                    f"    {name}: {figures['ns_per_event']} ns/event (+{figures['added_ns_per_event']}), "
                    f"x{figures['ratio']} (rounds {figures['ratio_range'][0]}-{figures['ratio_range'][1]})"
                )
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench crypto``'s arguments."""
    parser.add_argument(
        "--events", type=argtypes.int_between(1, 10_000_000), default=2000, help="events per round (default 2000)"
    )
    parser.add_argument("--runs", type=argtypes.int_between(1, 1000), default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--data", default="", help="LoCoMo turns JSONL (default: generated text if absent)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    result = crypto_bench(events=args.events, rounds=args.runs, data=args.data or None)
    return show(args, result, format_crypto(result))
