"""The fleet report: what an agent process tells the operators, and how it is read back.

Every ``MEMSTREAM_REPORT_EVERY_S`` seconds the shipper thread of a process that serves a
provider writes one record, ``AgentReport``, into its own field of its tenant's reports
hash (``EventLog.reports_key``: a registered tenant's ``keys.tenant_agent_reports``, which
only its hosts may write; the operator's ``keys.agent_reports``), with the connection it
ships with: one pipelined ``HSET`` and ``EXPIRE``. Every process that serves metrics reads
those hashes at each scrape, within a bound per tenant and per scrape, and sums the fleet's
figures (``memstream.service.fleet``).

**The fleet's "agent" is the reporting process** (one ``Writer``: one spool, one shipper
thread), named ``HOST:PID:NONCE``. A backlog belongs to a spool, and a spool to a process: in
Hermes's gateway one process serves a provider per chat (each its own scope agent, the
chat's session key) through one spool, and a CLI agent's scope agent is ``default`` on every
host, so neither names a backlog. The record lists the scope agents the process serves now
(the first ``MAX_AGENTS``, clipped) so that a name can be traced to them.

**Figures are cumulative** since the name was given (counts of refusals, prefetch outcomes,
hook durations per bucket): a lost report loses nothing, the next one carries it. The
readers remove a report an hour after its last time and add its figures to
``keys.agent_reports_retired``, so that the fleet's sums never go down. A process that could
not report for ``RENAME_AFTER_S`` (half that hour) takes a new name and reports its figures
since its last written report under it: whatever a reader removed meanwhile is counted once.

**The hooks' side** (``Tally``): each timed hook costs one ``perf_counter_ns`` pair, one
``bisect`` and two list-item increments; nothing else happens on the hook's thread.

Contract of a record: msgpack of ``AgentReport`` (tag ``agent.v1``), at most
``MAX_REPORT_BYTES``; a hook's row is its count per bucket of ``BUCKETS_NS`` (the last bucket:
above one second), then the sum of its durations in ns, as ``ROW`` little-endian unsigned
64-bit integers in one byte string (``pack_row``): a reader sums a thousand agents' rows in
one array operation instead of decoding and adding a quarter of a million numbers. Fields
are only ever added with defaults; anything else is a new tag. ``decode_report`` is the
readers' one way in: it checks every bound (the shared Redis is the trust boundary: every
host of a tenant may write its tenant's hash).
"""

from __future__ import annotations

import os
import re
import socket
import struct
import threading
import time
from typing import Annotated, Callable, NamedTuple

import msgspec
import redis
import structlog
from msgspec import Meta

from memstream.core import PermanentError, Settings, keys

__all__ = [
    "HOOKS",
    "BUCKETS_NS",
    "ROW",
    "PREFETCH_OUTCOMES",
    "MAX_REPORT_BYTES",
    "MAX_AGENTS",
    "REPORTS_EXPIRE_S",
    "RENAME_AFTER_S",
    "REPORTER_NAME",
    "AgentReport",
    "Prefetch",
    "Tally",
    "Figures",
    "Reporter",
    "ReportError",
    "encode_report",
    "decode_report",
    "reporter_name",
    "pack_row",
    "unpack_row",
    "ROW_BYTES",
]

log = structlog.get_logger("memstream.report")

# the provider's timed hooks (its Hermes methods; a reader counts any other name as `other`)
HOOKS = (
    "initialize",
    "shutdown",
    "system_prompt_block",
    "on_turn_start",
    "prefetch",
    "queue_prefetch",
    "sync_turn",
    "on_memory_write",
    "on_session_end",
    "on_session_switch",
    "on_delegation",
    "handle_tool_call",
)
# upper bounds of the duration buckets, ns: 10 µs to 1 s, about 2.5 per decade (plus one above 1 s)
BUCKETS_NS = (
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
)
ROW = len(BUCKETS_NS) + 2  # a hook's row: a count per bucket (the last above 1 s), then the sum of ns
_ROW_FORMAT = struct.Struct(f"<{ROW}Q")
ROW_BYTES = _ROW_FORMAT.size  # a row in a record
PREFETCH_OUTCOMES = ("fresh", "cached", "empty")

MAX_REPORT_BYTES = 4096  # a record of MAX_HOOKS rows fits (a writer drops its list of agents if need be)
MAX_AGENTS = 8
MAX_AGENT_CHARS = 64
MAX_HOOKS = 16  # hooks a record may carry (a newer provider may time more than HOOKS)
REPORTS_EXPIRE_S = 86_400  # the hash goes a day after the last report of any process
RENAME_AFTER_S = 1800.0  # no report written for this long: a new name (readers remove after 3600 s)
REPORTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # a name a label may carry

_Count = Annotated[int, Meta(ge=0, le=(1 << 63) - 1)]
_Time = Annotated[float, Meta(ge=0.0, le=1e11)]  # unix seconds, finite (the year 5138 at most)
_Text = Annotated[str, Meta(max_length=256)]


class ReportError(PermanentError, ValueError):
    """A record read from Redis that is no report of this contract (or out of its bounds)."""


class Prefetch(msgspec.Struct, frozen=True):
    """Prefetches by outcome: this turn's recall in time, an earlier one of the session, nothing."""

    fresh: _Count = 0
    cached: _Count = 0
    empty: _Count = 0


class AgentReport(msgspec.Struct, frozen=True, kw_only=True, tag="agent.v1", tag_field="kind"):
    """One process's report (see the module doc); counts are cumulative since ``started``."""

    at: _Time  # when it was written, the process's clock
    started: _Time  # when the process took its name (the counts start there)
    host: _Text = ""
    pid: Annotated[int, Meta(ge=0, le=(1 << 32) - 1)] = 0
    tenant: _Text = ""
    agents: Annotated[list[Annotated[str, Meta(max_length=MAX_AGENT_CHARS)]], Meta(max_length=MAX_AGENTS)] = []
    agents_total: _Count = 0  # scope agents served now (``agents`` lists the first MAX_AGENTS)
    backlog: _Count = 0  # events spooled and not yet shipped (own and adopted segments)
    backlog_bytes: _Count = 0
    refused: _Count = 0  # events the spool refused: full (MEMSTREAM_SPOOL_MAX_BYTES) or a write error
    invalid: _Count = 0  # events that could not be encoded
    prefetch: Prefetch = Prefetch()
    hooks: Annotated[
        dict[Annotated[str, Meta(max_length=64)], Annotated[bytes, Meta(min_length=ROW_BYTES, max_length=ROW_BYTES)]],
        Meta(max_length=MAX_HOOKS),
    ] = {}  # hook -> pack_row of its row


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AgentReport)


def encode_report(report: AgentReport) -> bytes:
    return _encoder.encode(report)


def pack_row(row: list[int]) -> bytes:
    """A hook's row as a record carries it (``ROW`` counts of at most 2**64 - 1)."""
    return _ROW_FORMAT.pack(*row)


def unpack_row(data: bytes) -> list[int]:
    return list(_ROW_FORMAT.unpack(data))


def decode_report(name: object, data: object) -> tuple[str, AgentReport]:
    """(name, report) of one field of the reports hash (``name`` and ``data`` as Redis gave
    them); ReportError when the name is not ``REPORTER_NAME`` or the data no report within
    the contract's bounds. Never another exception, whatever they are."""
    try:
        text = name.decode("ascii") if isinstance(name, bytes) else name
    except UnicodeDecodeError:
        raise ReportError("the reporter's name is not ASCII") from None
    if not isinstance(text, str) or not REPORTER_NAME.fullmatch(text):
        raise ReportError("the reporter's name is not a name a label may carry")
    if not isinstance(data, bytes) or len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"a report is bytes, at most {MAX_REPORT_BYTES}")
    try:
        report = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReportError(f"not a report: {str(exc)[:200]}") from None
    return text, report


def reporter_name(host: str | None = None, pid: int | None = None) -> str:
    """``HOST:PID:NONCE``: the host's name reduced to letters, digits, ``.`` and ``-`` (64 at
    most), the process id and 6 random hex digits (a restarted process with the same pid on a
    host of the same name is another reporter)."""
    raw = socket.gethostname() if host is None else host
    clean = re.sub(r"[^A-Za-z0-9.-]", "-", raw)[:64].lstrip(".-") or "host"
    return f"{clean}:{os.getpid() if pid is None else pid}:{os.urandom(3).hex()}"


class Tally:
    """What a process's hooks record for its report: per hook a ``ROW`` (counts per bucket,
    then the sum of ns), prefetch outcomes. Written by the hooks' threads without a lock:
    under CPython's interpreter lock a list item's ``+=`` of an int is not interrupted (no
    call and no backward jump between its load and its store); a free-threaded build may lose
    an increment, never corrupt a count."""

    __slots__ = ("hooks", "prefetch")

    def __init__(self) -> None:
        self.hooks: dict[str, list[int]] = {hook: [0] * ROW for hook in HOOKS}
        self.prefetch: dict[str, int] = dict.fromkeys(PREFETCH_OUTCOMES, 0)


class Figures(NamedTuple):
    """A writer's figures at report time (``Reporter``'s source)."""

    backlog: int
    backlog_bytes: int
    refused: int
    invalid: int
    agents: list[str]  # the scope agents served now, sorted
    served: bool  # whether any provider ever used the writer (a writer that served none does not report)


class _Counts(NamedTuple):
    """The cumulative counts of a process (what a new name subtracts)."""

    refused: int
    invalid: int
    prefetch: tuple[int, ...]
    hooks: dict[str, list[int]]


class Reporter:
    """Writes one process's report (see the module doc). ``send`` runs on the shipper thread
    with the shipper's client, never raises, and a failure of it changes nothing of the
    shipping: Redis unreachable skips the report (``skipped``; the shipper says Redis is
    down when it ships); any other failure (a refused command: an ACL without the report's
    rule, a full server) is counted (``failures``) and logged once until a report succeeds
    again. Either way the next report is tried an interval later."""

    def __init__(self, settings: Settings, tally: Tally, figures: Callable[[], Figures]) -> None:
        self.every = settings.report_every_s
        self.tenant = settings.tenant
        self.tally = tally
        self.figures = figures
        self.name = reporter_name()
        self.host = self.name.rsplit(":", 2)[0]
        self.started = time.time()
        self.sent = 0
        self.skipped = 0
        self.failures = 0
        self.last_error = ""
        self._lock = threading.Lock()  # one report at a time (the shipper's passes, a final one at exit)
        self._due = time.monotonic() + self.every
        self._written_at: float | None = None  # monotonic time of the last report written
        self._written = _Counts(0, 0, (0,) * len(PREFETCH_OUTCOMES), {})  # what it carried, cumulative
        self._base = self._written  # subtracted from the cumulative counts (0 until a new name)

    def due(self) -> bool:
        return time.monotonic() >= self._due

    def postpone(self) -> None:
        """No report now (the log is unreachable): skipped, the next due an interval later."""
        self._due = time.monotonic() + self.every
        self.skipped += 1

    def send(self, client: redis.Redis, prefix: str, key: str | None = None) -> bool:
        """Write the report now, if the writer ever served a provider, into ``key`` (the
        reports of the process's tenant: ``EventLog.reports_key``; default the operator's,
        ``keys.agent_reports``). True once written."""
        with self._lock:
            now = time.monotonic()
            self._due = now + self.every
            try:
                figures = self.figures()
                if not figures.served:
                    return False
                if self._written_at is not None and now - self._written_at >= RENAME_AFTER_S:
                    # silent long enough for a reader to have removed the last report: a new
                    # name, counting from what that report carried
                    self.name, self.started, self._base = reporter_name(), time.time(), self._written
                counts = self._counts(figures)
                data = self._encoded(figures, counts)
                where = key or keys.agent_reports(prefix)
                pipe = client.pipeline(transaction=False)
                pipe.hset(where, self.name, data)
                pipe.expire(where, REPORTS_EXPIRE_S)
                pipe.execute()
            except (redis.ConnectionError, redis.TimeoutError):
                self.skipped += 1  # Redis is down: the latest report goes once it is back
                return False
            except Exception as exc:  # noqa: BLE001  a report never reaches the shipping
                self.failures += 1
                error = f"{type(exc).__name__}: {exc}"[:300]
                if not self.last_error:
                    log.warning(
                        "report.failed",
                        error=error,
                        reporter=self.name,
                        action=f"shipping goes on; the next report in {self.every} s"
                        + (
                            " (a tenant's user made by an older release lacks the rule: "
                            "`memstream tenant update`, or docs/security.md)"
                            if isinstance(exc, redis.exceptions.NoPermissionError)
                            else ""
                        ),
                    )
                self.last_error = error
                return False
            if self.last_error:
                log.info("report.resumed", reporter=self.name, failures=self.failures)
                self.last_error = ""
            self.sent += 1
            self._written_at, self._written = now, counts
            return True

    def _counts(self, figures: Figures) -> _Counts:
        prefetch = self.tally.prefetch
        return _Counts(
            figures.refused,
            figures.invalid,
            tuple(prefetch[o] for o in PREFETCH_OUTCOMES),
            {hook: list(row) for hook, row in self.tally.hooks.items()},
        )

    def _encoded(self, figures: Figures, counts: _Counts) -> bytes:
        """The record of ``counts`` less the base, encoded (without the list of agents if
        the record would be over MAX_REPORT_BYTES with it)."""
        base = self._base
        hooks = {}
        for hook, row in counts.hooks.items():
            before = base.hooks.get(hook)
            since = [a - b for a, b in zip(row, before)] if before else row
            if any(since[:-1]):  # hooks that never ran are left out
                hooks[hook] = pack_row([max(0, n) for n in since])
        prefetch = [max(0, a - b) for a, b in zip(counts.prefetch, base.prefetch)]
        data = encode_report(self._record(figures, counts, base, prefetch, hooks, figures.agents))
        if len(data) > MAX_REPORT_BYTES:  # long names in a script of many bytes a character
            data = encode_report(self._record(figures, counts, base, prefetch, hooks, []))
        return data

    def _record(
        self, figures: Figures, counts: _Counts, base: _Counts, prefetch: list[int], hooks: dict[str, bytes], agents: list[str]
    ) -> AgentReport:
        return AgentReport(
            at=time.time(),
            started=self.started,
            host=self.host,
            pid=os.getpid(),
            tenant=self.tenant,
            agents=[a[:MAX_AGENT_CHARS] for a in agents[:MAX_AGENTS]],
            agents_total=len(figures.agents),
            backlog=figures.backlog,
            backlog_bytes=figures.backlog_bytes,
            refused=max(0, counts.refused - base.refused),
            invalid=max(0, counts.invalid - base.invalid),
            prefetch=Prefetch(*prefetch),
            hooks=hooks,
        )
