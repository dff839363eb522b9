"""The loop every reader of a consumer group runs: the projection's ``Consumer`` and the dense
stage's ``EmbedConsumer`` are each a ``GroupLoop`` with its own read and handling of a batch.

One step: reclaim the entries idle too long on a dead consumer (every ``claim_every``
seconds), else the consumer's own pending entries (after a start or a failure), else new
ones (blocking up to ``block_ms``). ``run`` steps until told to stop; a step that raises
is logged and counted, and the next waits a jittered backoff (``core.backoff``): a transient
failure (``memstream.core.is_transient``) spends no delivery and is capped sooner. ``drain``
steps without blocking until nothing is left (burst mode: tests, replays, benchmarks).

A building or retired version (``low``) yields to the live versions (``workers.priority``):
its reads wait their turn and are smaller while a live version was busy lately; a live one
holds ``live()`` while it applies a batch.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import structlog
from structlog.typing import FilteringBoundLogger

from memstream.core import backoff_delay, is_transient
from memstream.workers.priority import LOW_BATCH, Priority
from memstream.workers.stats import LoopStats

__all__ = ["DEFAULT_TUNING", "GroupLoop", "Tuning"]


@dataclass(frozen=True)
class Tuning:
    """How a consumer-group loop reads and retries."""

    batch: int = 128  # entries a read asks for
    block_ms: int = 500  # how long a read of new entries waits for one
    claim_idle_ms: int = 60_000  # an entry pending this long on another consumer is reclaimed
    claim_every: float = 5.0  # seconds between looks for such entries
    max_deliveries: int = 5  # deliveries of an entry that keeps failing before its dead letter
    backoff_base: float = 0.2  # seconds: the first wait after a failed step
    backoff_cap: float = 30.0  # the longest wait after failed steps
    transient_cap: float = 5.0  # the longest wait after transient failures


DEFAULT_TUNING = Tuning()


_Got = TypeVar("_Got")  # what one read of a subclass returns


class GroupLoop(Generic[_Got]):
    """One reader of a consumer group: the steps, their retries and their priority. A subclass
    reads (``_read``: a ``_Got``), handles (``_handle``) and reclaims (``_reclaim``) its entries."""

    EVENT: ClassVar[str]  # the prefix of the loop's log lines ("consumer", "embedding")
    stats: LoopStats
    group: str  # its log lines' group

    def __init__(self, tuning: Tuning, priority: Priority | None, low: bool) -> None:
        self.tuning = tuning
        self.priority = priority
        self.low = low  # a building or retired version: yields to the live ones
        self._pending_done = False  # own pending entries read up (False: read them first)
        self._last_claim = 0.0

    @property
    def logger(self) -> FilteringBoundLogger:
        """The loop's logger, its group bound (resolved at each line, so a configuration made
        later applies)."""
        return structlog.get_logger(f"memstream.{self.EVENT}", group=self.group)  # type: ignore[no-any-return]  # structlog's factory is untyped

    # -- what a subclass provides ---------------------------------------------------------
    def _prepare(self) -> None:
        """Before each step: make the group where it is missing."""

    def _reclaim(self) -> int:
        raise NotImplementedError

    def _read(self, start: str, block: bool) -> _Got:
        raise NotImplementedError

    def _has(self, got: _Got) -> bool:
        return bool(got)

    def _handle(self, got: _Got, pending: bool) -> int:
        raise NotImplementedError

    def _stepped(self, handled: int) -> int:
        return handled

    def _failed(self, transient: bool, error: str, failures: int) -> None:
        """After a failed step (``run``): what to read again."""
        self._pending_done = False

    # -- the loop -------------------------------------------------------------------------
    def step(self, block: bool = True) -> int:
        """Read one batch (reclaimed, own pending first, else new), handle it. Returns the
        entries handled."""
        self._prepare()
        handled = 0
        if self._claim_due():
            handled += self._reclaim()
        if not self._pending_done:
            got = self._read("0", block=False)
            if self._has(got):
                return self._stepped(handled + self._handle(got, pending=True))
            self._pending_done = True
        return self._stepped(handled + self._handle(self._read(">", block=block), pending=False))

    def run(self, stop: threading.Event) -> None:
        """Step until ``stop`` is set; finishes the batch in hand. Never returns otherwise: a
        step that raises is logged and counted (transient: ``transient_failures``; any other:
        ``errors``), ``_failed`` is told, and the next step waits ``backoff_delay`` (capped at
        ``transient_cap`` or ``backoff_cap``), re-reading the entries this consumer holds."""
        failures = 0
        while not stop.is_set():
            try:
                self.step(block=True)
                failures = 0
            except Exception as exc:
                failures += 1
                stop.wait(self._backoff(exc, failures))

    def _backoff(self, exc: Exception, failures: int) -> float:
        """Count and log the failure ``exc`` (the ``failures``-th in a row); the wait before the next step."""
        t = self.tuning
        error = f"{type(exc).__name__}: {exc}"
        self.stats.last_error = error
        transient = is_transient(exc)
        delay = backoff_delay(failures, t.backoff_base, t.transient_cap if transient else t.backoff_cap)
        if transient:
            self.stats.transient_failures += 1
            self.logger.warning(f"{self.EVENT}.transient_failure", error=error[:500], retry_in=round(delay, 2))
        else:
            self.stats.errors += 1
            self.logger.error(
                f"{self.EVENT}.step_failed", error=error[:500], failures=failures, retry_in=round(delay, 2), exc_info=True
            )
        self._failed(transient, error, failures)
        return delay

    def drain(self, max_steps: int = 100_000) -> int:
        """Burst mode (tests, replays, benchmarks): step without blocking until a step handles
        nothing once the pending entries are done, or ``max_steps`` times; the total handled."""
        total = 0
        for _ in range(max_steps):
            n = self.step(block=False)
            total += n
            if n == 0 and self._pending_done:
                break
        return total

    # -- shared parts of the steps ----------------------------------------------------------
    def _claim_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_claim < self.tuning.claim_every:
            return False
        self._last_claim = now
        return True

    def _read_options(self, start: str, block: bool) -> dict[str, Any]:
        """XREADGROUP's ``count`` (and ``block`` for new entries): a low version waits its turn
        first, and reads less while a live version was busy lately."""
        if self.low and self.priority is not None:
            self.priority.wait_turn()
        small = self.low and self.priority is not None and self.priority.live_recently()
        options: dict[str, Any] = {"count": min(self.tuning.batch, LOW_BATCH) if small else self.tuning.batch}
        if block and start == ">":
            options["block"] = self.tuning.block_ms
        return options

    def _turn(self) -> AbstractContextManager[object]:
        """What a batch is applied within: a low version's turn, or a live one's hold."""
        if self.priority is None:
            return nullcontext()
        return self.priority.low() if self.low else self.priority.live()
