"""What one run of ``memstream bench fleet`` is: its levels, rates, probes, targets and the
hooks it times."""

from __future__ import annotations

import os

LEVELS = (50, 200, 500, 1000)
RATE = 0.2  # turns per second per agent: one turn every 5 s
SECONDS = 60.0
PROCESSES = 4
PROBES_PER_S = 3.0  # probed turns per second over the whole fleet
PROBE_POLL_S = 0.05  # a pending probe is searched for again after this long
SETTLE_S = 30.0  # after a level: how long probes and the workers may take to catch up
MEMORY_EVERY = 4  # an on_memory_write every 4th turn of an agent
SEARCH_EVERY = 10  # a memstream_search tool call every 10th turn of an agent
TENANT = "fleet"
TARGETS = {"fresh_fraction": 0.95, "append_to_searchable_p95_s": 1.0}
HOOKS = ("on_turn_start", "prefetch", "handle_tool_call", "on_memory_write", "sync_turn", "queue_prefetch")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
