"""Timings the lower layers report to whoever records them in this process.

The workers (a batch applied, an embedding call) and the query server (a request
answered) report through the functions below, which pass each report on to the
installed ``Observer``: ``memstream.service.metrics`` installs one that records them in
Prometheus histograms. Without one, a report costs one global read.

Guarantees: at most one observer per process (``install`` replaces the former one);
a report (``batch``, ``embedded``, ``answered``, ``embed_dead_lettered``) never raises: an observer's failure is
swallowed and never reaches the batch or the request it describes.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Observer", "answered", "batch", "current", "embed_dead_lettered", "embedded", "install"]


class Observer(Protocol):
    """What the lower layers report (seconds are wall-clock seconds of this process)."""

    def batch(self, group: str, stages: dict[str, float], applied: list[str], at: float) -> None:
        """One batch of ``group`` committed at unix time ``at``: the seconds of each stage
        (``admit``, ``apply``, ``commit``) and the entry ids applied."""

    def embedded(self, group: str, texts: int, seconds: float) -> None:
        """One embedding call of ``group``'s projection: how many texts, how long."""

    def answered(self, op: str, seconds: float) -> None:
        """One query request of ``op`` answered by its handler in ``seconds``."""

    def embed_dead_lettered(self, group: str, entries: int) -> None:
        """``entries`` of ``group``'s dense-stage backlog dead-lettered (malformed, or
        failing ``max_deliveries`` times)."""


_observer: Observer | None = None


def install(observer: Observer | None) -> Observer | None:
    """Make ``observer`` this process's (None: none); returns the one it replaces."""
    global _observer
    former, _observer = _observer, observer
    return former


def current() -> Observer | None:
    """The installed observer, or None."""
    return _observer


def batch(group: str, stages: dict[str, float], applied: list[str], at: float) -> None:
    """Report one committed batch (``Observer.batch``); never raises."""
    observer = _observer
    if observer is not None:
        try:
            observer.batch(group, stages, applied, at)
        except Exception:  # noqa: BLE001  an observer never breaks what it observes
            pass


def embedded(group: str, texts: int, seconds: float) -> None:
    """Report one embedding call (``Observer.embedded``); never raises."""
    observer = _observer
    if observer is not None:
        try:
            observer.embedded(group, texts, seconds)
        except Exception:  # noqa: BLE001
            pass


def answered(op: str, seconds: float) -> None:
    """Report one answered query request (``Observer.answered``); never raises."""
    observer = _observer
    if observer is not None:
        try:
            observer.answered(op, seconds)
        except Exception:  # noqa: BLE001
            pass


def embed_dead_lettered(group: str, entries: int) -> None:
    """Report dense-stage backlog entries dead-lettered (``Observer.embed_dead_lettered``);
    never raises."""
    observer = _observer
    if observer is not None:
        try:
            observer.embed_dead_lettered(group, entries)
        except Exception:  # noqa: BLE001
            pass
