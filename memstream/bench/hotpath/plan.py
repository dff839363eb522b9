"""What one run of ``memstream bench hotpath`` is: its targets, hooks, conditions, chunk sizes,
significance, and the figures others measured that it quotes for scale."""

from __future__ import annotations

TARGET_P99_US = 60.0
TARGET_P999_US = 500.0
HOOKS = ("on_turn_start", "on_memory_write", "sync_turn")
KINDS = ("redis_up", "down_mid", "down_init", "report_off")
UP_KINDS = ("redis_up", "report_off")  # conditions whose Valkey is up throughout
REPORT_EVERY_S = 1.0  # the fleet report's interval in every condition but report_off
WORKS_MS = (0, 20)
BASELINE = "naive_xadd"
NAIVE_STREAM = "naive:events"  # the baseline's own stream, outside memstream's keys
WARMUP = 200
CHUNK_20MS = 25  # turns per chunk with 20 ms of work: about 0.5 s, past the shipper's longest deferral
SIGNIFICANCE = 0.05
LEAD_IN = 10  # untimed turns at the start of every chunk

# Measured by others, quoted for scale (not measured by this benchmark).
REFERENCES = [
    {
        "name": "hermes-memory-pgvector",
        "figure": "on_memory_write ~9 µs, sync_turn 33–58 µs p99",
        "note": "dropped 1,743 of 2,000 writes",
    },
    {"name": "hermes-plugin-qdrant-memory", "figure": "3–20 ms p99", "note": "loses nothing"},
    {"name": "one synchronous XADD per hook", "figure": "~0.65 ms p99", "note": ""},
]
