"""The fleet's figures, summed at scrape time from the agents' reports
(``memstream.producers.report``): how many agent processes report, their spool backlogs
and refusals, their hooks' durations, their prefetch outcomes.

The reports are in one hash per tenant (``keys.tenant_agent_reports``: only its hosts may
write it) and the operator's (``keys.agent_reports``). ``FleetReader.read`` reads them, then
the sums of removed reports (``keys.agent_reports_retired``, written by the readers only),
within bounds that hold whatever tenants write: at most ``MAX_REPORTS`` fields a scrape, at
most ``MAX_TENANT_REPORTS`` of them from one tenant's hash (the tenants' hashes in an order
that turns at each scrape, so a budget spent reaches a different tenant each time), at
most ``SCAN_PER_CALL`` (and a page of ``HSCAN``) a script call, so Redis never runs one
call longer than that, and each field at most ``MAX_REPORT_BYTES`` (a larger one is
counted by its length, never transferred). A tenant that writes 20,000 reports costs a
scrape its own share and no more. Every record is untrusted: decoded by ``decode_report``
within the contract's bounds, a record that is not is counted in ``skipped`` by its reason
and left out; nothing read can fail the read but Redis itself.

**Active** agents reported within ``active_within`` s of this process's clock (3 report
intervals). **Removal**: every process that reads removes, at most ``MAX_REMOVALS`` a read,
the reports whose time is more than ``KEEP_S`` (an hour) old, and the skipped records it has
seen unchanged for as long, each with one compare-and-delete script that adds the removed
report's counts to the retired sums in the same step (two readers never remove one twice,
and a report written anew meanwhile is kept). So the summed counters never go down: what
a removed report counted is in the retired sums from then on, and ``RENAME_AFTER_S`` keeps a
process that comes back after an hour from counting it again.

Per-agent figures are bounded by ``top``: the backlog of the ``top`` active agents with the
largest, the rest summed as ``other``; refusals of the ``top`` reports (active or not yet
removed) with the most, the rest and the retired ones summed as ``other`` (ranked by
refusals: a cumulative count, so the list changes only when an agent's refusals pass
another's, unlike a backlog's ranking, which changes at every report).
"""

from __future__ import annotations

import hashlib
import heapq
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
import structlog

from memstream.core import as_str, keys
from memstream.producers import (
    HOOKS,
    MAX_REPORT_BYTES,
    PREFETCH_OUTCOMES,
    ROW,
    AgentReport,
    ReportError,
    TenantRegistry,
    decode_report,
    unpack_row,
)

__all__ = ["Fleet", "FleetReader", "SKIP_REASONS", "MAX_REPORTS", "MAX_TENANT_REPORTS", "KEEP_S", "MAX_AHEAD_S", "OTHER"]

log = structlog.get_logger("memstream.fleet")

MAX_REPORTS = 10_000  # fields read a scrape: 10 times a fleet of 1,000, 40 MB at worst (4 KB each)
MAX_TENANT_REPORTS = 1_000  # of them from one tenant's hash: its hosts' processes, and no more whatever it writes
SCAN_PER_CALL = 1_000  # fields a script call reads (Redis runs nothing else meanwhile)
MAX_RETIRED_FIELDS = 4096  # the retired sums have 2 + 3 + 13 * 18 fields of ours
MAX_REMOVALS = 100  # removals a read
KEEP_S = 3600.0  # a report older than this is removed (its counts retired)
MAX_AHEAD_S = 300.0  # a report time further ahead of this clock is skipped (`ahead`)
OTHER = "other"
SKIP_REASONS = ("malformed", "oversized", "ahead", "unread")
_HOOK_LABELS = (*HOOKS, OTHER)
_HOOK_SET = frozenset(HOOKS)
_RETIRED = frozenset(
    [
        "refusals",
        *(f"prefetch:{o}" for o in PREFETCH_OUTCOMES),
        *(f"hook:{h}:{i}" for h in _HOOK_LABELS for i in (*range(ROW - 1), "sum")),
    ]
)

# KEYS: the reports, the retired sums. ARGV: most fields, most bytes a field, most retired
# fields (0: the sums are not read), the cursor to start at. Returns {fields in the hash,
# retired sums (field, value, ...), the cursor to go on from ('0': done), field, value or its
# length, ...}; {-1} when the reports key holds no hash. A key of another type holds nothing
# read here. A page of HSCAN is read whole (a field is never skipped between two calls).
_SCAN = """
local function kind(key) local t = redis.call('TYPE', key) return t['ok'] or t end
local k = kind(KEYS[1])
if k ~= 'hash' and k ~= 'none' then return {-1} end
local most, biggest = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {redis.call('HLEN', KEYS[1]), {}, '0'}
local retired = tonumber(ARGV[3])
if retired > 0 and kind(KEYS[2]) == 'hash' and redis.call('HLEN', KEYS[2]) <= retired then
  out[2] = redis.call('HGETALL', KEYS[2])
end
local cursor, n = ARGV[4], 0
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 256)
  cursor = page[1]
  local items = page[2]
  for i = 1, #items, 2 do
    n = n + 1
    local value = items[i + 1]
    out[#out + 1] = items[i]
    if #value > biggest then out[#out + 1] = #value else out[#out + 1] = value end
  end
until cursor == '0' or n >= most
out[3] = cursor
return out
"""

# KEYS: the reports, the retired sums. ARGV: field, its length, its value ('' : any of that
# length), then (retired field, increment) pairs. Deletes the field only if it still holds
# what was read, and adds the increments then; returns 1 if it did.
_REMOVE = """
if redis.call('HSTRLEN', KEYS[1], ARGV[1]) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
for i = 4, #ARGV, 2 do redis.pcall('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) end
return 1
"""


@dataclass
class Fleet:
    """One read of the reports (see the module doc)."""

    active: int = 0
    backlog: list[tuple[str, int]] = field(default_factory=list)  # top agents, then ("other", rest)
    refusals: list[tuple[str, int]] = field(default_factory=list)  # top agents, then ("other", rest + retired)
    hooks: dict[str, list[float]] = field(default_factory=dict)  # hook (or "other") -> ROW, summed
    prefetch: dict[str, int] = field(default_factory=dict)  # outcome -> count
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> records
    removed: int = 0


def _top(values: list[tuple[str, int]], top: int, rest: int = 0) -> list[tuple[str, int]]:
    """The ``top`` largest (ties by name), then ``other`` with the rest summed (plus ``rest``)."""
    ranked = heapq.nsmallest(top, [(-v, name) for name, v in values]) if top else []
    kept = [(name, -v) for v, name in ranked]
    return kept + [(OTHER, sum(v for _, v in values) + sum(v for v, _ in ranked) + rest)]


def _by_name(values: Any) -> list[tuple[str, int]]:
    """(name, value) pairs with the values of one name summed: two tenants' hashes may name
    one reporting process alike (a label names it once)."""
    out: dict[str, int] = {}
    for name, value in values:
        out[name] = out.get(name, 0) + value
    return list(out.items())


def _fold(report: AgentReport) -> list[Any]:
    """(retired field, increment) pairs, flat, of a removed report's counts."""
    out: dict[str, int] = {"refusals": report.refused + report.invalid}
    for outcome in PREFETCH_OUTCOMES:
        out[f"prefetch:{outcome}"] = getattr(report.prefetch, outcome)
    for hook, packed in report.hooks.items():
        label = hook if hook in HOOKS else OTHER
        for i, n in enumerate(unpack_row(packed)):
            name = f"hook:{label}:{i if i < ROW - 1 else 'sum'}"
            out[name] = out.get(name, 0) + n
    return [x for name, n in out.items() if n for x in (name, n)]


def _sum_rows(groups: dict[tuple[str, ...], list[bytes]]) -> dict[str, list[float]]:
    """Hook label -> its rows summed column by column, from groups of reports that carry the
    same hooks (each report's rows joined: ``ROW`` unsigned 64-bit integers a hook), as floats
    (what the exposition shows; exact up to 2**53, and no sum overflows)."""
    import numpy as np

    out: dict[str, Any] = {}
    for names, blobs in groups.items():
        table = np.frombuffer(b"".join(blobs), dtype="<u8").reshape(len(blobs), len(names), ROW)
        for name, summed in zip(names, table.sum(axis=0, dtype=np.float64)):
            label = name if name in _HOOK_SET else OTHER
            out[label] = summed if label not in out else out[label] + summed
    return {label: summed.tolist() for label, summed in out.items()}


class FleetReader:
    """Reads the fleet's figures from one Redis (see the module doc); thread-safe."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        top: int,
        active_within: float,
        keep: float = KEEP_S,
        max_reports: int = MAX_REPORTS,
        max_tenant_reports: int = MAX_TENANT_REPORTS,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.shared = keys.agent_reports(prefix)
        self.retired = keys.agent_reports_retired(prefix)
        self.registry = TenantRegistry(client, prefix)
        self.top = top
        self.active_within = active_within
        self.keep = keep
        self.max_reports = max_reports
        self.max_tenant_reports = max_tenant_reports
        self._scan = client.register_script(_SCAN)
        self._remove = client.register_script(_REMOVE)
        self._lock = threading.Lock()
        # skipped records: (reports key, field) -> (what it held, monotonic time it was first seen holding it)
        self._unchanged: dict[tuple[str, bytes], tuple[bytes | int, float]] = {}
        self._warned = False
        self._turn = 0  # where the tenants' hashes start this scrape

    def _hashes(self) -> list[tuple[str, int]]:
        """(reports hash, most fields to read from it) in this scrape's order: the operator's,
        then each registered tenant's, starting one further each scrape."""
        try:
            tenants = sorted(self.registry.all())
        except redis.exceptions.NoPermissionError:
            tenants = []
        with self._lock:
            start = self._turn % len(tenants) if tenants else 0
            self._turn += 1
        ordered = tenants[start:] + tenants[:start]
        return [(self.shared, self.max_reports)] + [
            (keys.tenant_agent_reports(self.prefix, t), self.max_tenant_reports) for t in ordered
        ]

    def read(self, now: float | None = None) -> Fleet:
        """The fleet's figures now; removes what is due (see the module doc). Raises only
        what Redis raises for the read itself."""
        now = time.time() if now is None else now
        fleet = Fleet(skipped=dict.fromkeys(SKIP_REASONS, 0))
        records: dict[tuple[str, str], tuple[AgentReport, bytes]] = {}
        skipped: dict[tuple[str, bytes], bytes | int] = {}  # (key, field) -> what it held
        complete: set[str] = set()  # hashes read whole
        retired_flat: list[Any] = []
        budget = self.max_reports
        for key, most in self._hashes():
            total, seen = self._read_hash(key, min(most, budget), now, fleet, records, skipped, retired_flat)
            budget -= len(seen)
            fleet.skipped["unread"] += max(0, total - len(seen))
            if total <= len(seen):
                complete.add(key)
        retired = self._retired(retired_flat)
        self._sum(fleet, records, retired, now)
        fleet.removed = self._remove_due(records, skipped, now, complete)
        return fleet

    def _read_hash(
        self,
        key: str,
        most: int,
        now: float,
        fleet: Fleet,
        records: dict[tuple[str, str], tuple[AgentReport, bytes]],
        skipped: dict[tuple[str, bytes], bytes | int],
        retired_flat: list[Any],
    ) -> tuple[int, set[bytes]]:
        """Read up to ``most`` fields of the reports hash ``key``, ``SCAN_PER_CALL`` a call
        (the retired sums with the operator's first call); (fields in it, fields read)."""
        seen: set[bytes] = set()
        if most <= 0:  # the scrape's budget is spent: how many there are, no more
            try:
                return int(self.client.hlen(key)), seen
            except redis.ResponseError:
                fleet.skipped["malformed"] += 1
                return 0, seen
        cursor, total, first = "0", 0, True
        while len(seen) < most:
            with_retired = MAX_RETIRED_FIELDS if first and key == self.shared else 0
            wanted = min(SCAN_PER_CALL, most - len(seen))
            reply = self._scan(keys=[key, self.retired], args=[wanted, MAX_REPORT_BYTES, with_retired, cursor])
            if not reply or reply[0] == -1:
                fleet.skipped["malformed"] += 1  # the key holds no hash: one malformed record
                return 0, seen
            total, cursor, pairs = int(reply[0]), as_str(reply[2]), reply[3:]
            if with_retired:
                retired_flat.extend(reply[1])
            first = False
            for name, value in zip(pairs[::2], pairs[1::2]):
                if name in seen or len(seen) >= most:  # a scan may return a field twice; a page may pass the bound
                    continue
                seen.add(name)
                self._take(key, name, value, now, fleet, records, skipped)
            if cursor == "0":
                break
        return total, seen

    def _take(
        self,
        key: str,
        name: bytes,
        value: bytes | int,
        now: float,
        fleet: Fleet,
        records: dict[tuple[str, str], tuple[AgentReport, bytes]],
        skipped: dict[tuple[str, bytes], bytes | int],
    ) -> None:
        if isinstance(value, int):
            fleet.skipped["oversized"] += 1
            skipped[(key, name)] = value
            return
        try:
            agent, report = decode_report(name, value)
        except ReportError:
            fleet.skipped["malformed"] += 1
            skipped[(key, name)] = value
            return
        if report.at > now + MAX_AHEAD_S:
            fleet.skipped["ahead"] += 1
            skipped[(key, name)] = value
            return
        records[(key, agent)] = (report, value)

    # -- summing ---------------------------------------------------------------------------
    def _retired(self, flat: list[Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in range(0, len(flat) - 1, 2):
            try:
                name, value = flat[i].decode("ascii"), int(flat[i + 1])
            except (AttributeError, UnicodeDecodeError, ValueError):
                continue
            if name in _RETIRED and 0 <= value < 1 << 63:
                out[name] = value
            elif not self._warned:
                self._warned = True
                log.warning(
                    "fleet.retired_unreadable",
                    field=name[:80],
                    action="left out of the sums; the retired sums are written by the readers only",
                )
        return out

    def _sum(
        self, fleet: Fleet, records: dict[tuple[str, str], tuple[AgentReport, bytes]], retired: dict[str, int], now: float
    ) -> None:
        active = [(agent, report) for (_, agent), (report, _) in records.items() if now - report.at <= self.active_within]
        fleet.active = len(active)
        fleet.backlog = _top(_by_name((agent, r.backlog) for agent, r in active), self.top)
        fleet.refusals = _top(
            _by_name((agent, r.refused + r.invalid) for (_, agent), (r, _) in records.items()),
            self.top,
            rest=retired.get("refusals", 0),
        )
        prefetch = [retired.get(f"prefetch:{o}", 0) for o in PREFETCH_OUTCOMES]
        # the reports' rows grouped by the hooks they carry, in order: one join a report, one
        # array sum a group (agents of one version running alike carry the same hooks)
        groups: dict[tuple[str, ...], list[bytes]] = {}
        for report, _ in records.values():
            p = report.prefetch
            prefetch[0] += p.fresh
            prefetch[1] += p.cached
            prefetch[2] += p.empty
            if report.hooks:
                names = tuple(report.hooks)
                blobs = groups.get(names)
                if blobs is None:
                    blobs = groups[names] = []
                blobs.append(b"".join(report.hooks.values()))
        fleet.hooks = _sum_rows(groups)
        for label in _HOOK_LABELS:  # what removed reports counted
            before = [retired.get(f"hook:{label}:{i}", 0) for i in range(ROW - 1)] + [retired.get(f"hook:{label}:sum", 0)]
            if any(before):
                now_sum = fleet.hooks.get(label)
                fleet.hooks[label] = [float(b) for b in before] if now_sum is None else [a + b for a, b in zip(now_sum, before)]
        fleet.prefetch = dict(zip(PREFETCH_OUTCOMES, prefetch))

    # -- removing --------------------------------------------------------------------------
    def _remove_due(
        self,
        records: dict[tuple[str, str], tuple[AgentReport, bytes]],
        skipped: dict[tuple[str, bytes], bytes | int],
        now: float,
        complete: set[str],
    ) -> int:
        """Remove (at most MAX_REMOVALS) reports older than ``keep`` and skipped records held
        unchanged for as long; returns how many this read removed."""
        due: list[tuple[str, bytes, bytes | int, list[Any]]] = []
        for (key, agent), (report, data) in records.items():
            if now - report.at > self.keep and len(due) < MAX_REMOVALS:
                due.append((key, agent.encode("ascii"), data, _fold(report)))
        mono = time.monotonic()
        with self._lock:
            # every field of those hashes was read: forget the ones that are gone
            for seen in [n for n in self._unchanged if n[0] in complete and n not in skipped]:
                del self._unchanged[seen]
            for (key, name), value in skipped.items():
                mark = value if isinstance(value, int) else hashlib.blake2b(value, digest_size=16).digest()
                held = self._unchanged.get((key, name))
                if held is None or held[0] != mark:
                    self._unchanged[(key, name)] = (mark, mono)
                elif mono - held[1] > self.keep and len(due) < MAX_REMOVALS:
                    due.append((key, name, value, []))
        if not due:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for key, name, held_value, increments in due:
            length, expected = (held_value, b"") if isinstance(held_value, int) else (len(held_value), held_value)
            self._remove(keys=[key, self.retired], args=[name, length, expected, *increments], client=pipe)
        try:
            done = pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            log.warning(
                "fleet.remove_failed",
                error=f"{type(exc).__name__}: {exc}"[:300],
                action="the figures of this scrape stand; the next one tries again",
            )
            return 0
        with self._lock:
            for (key, name, _, _), ok in zip(due, done):
                if ok == 1:
                    self._unchanged.pop((key, name), None)
        return sum(1 for ok in done if ok == 1)
