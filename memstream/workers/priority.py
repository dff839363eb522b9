"""Live versions first: a replay never delays what the agents wrote a moment ago.

Every consumer of an active version holds ``live()`` while it applies a batch; a consumer
of a building or retired version (``low``) calls ``wait_turn()`` before it reads its next
batch and so starts no batch while a live one is being applied (it gives up waiting after
``patience`` seconds, so a log that never rests still lets a replay progress). While the
live versions are busy (a batch within ``RECENT_S``), the low consumers also read small
batches (``LOW_BATCH``: a live event that arrives during one waits for that batch at
most), take turns in one lane (one low batch at a time, however many projections are
building), and rest after each batch as long as it took (``REST``): the live consumers,
the query server and the model then hold the interpreter most of the time. When nothing
live is happening, a replay runs at full speed and full batches. In one process the
consumers share the interpreter's lock, so this ordering is what decides who runs.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["LOW_BATCH", "Priority"]

LOW_BATCH = 16  # entries per batch of a building or retired version while live ones are busy
RECENT_S = 1.0  # live batches this recent make the replays yield more
REST = 1.0  # a low batch's rest, as a fraction of its duration, while live versions are busy


class Priority:
    def __init__(self, patience: float = 0.5) -> None:
        self.patience = patience
        self._busy = 0
        self._cond = threading.Condition()
        self._last_live = -1e9
        self._lane = threading.Lock()

    @contextmanager
    def live(self) -> Iterator[None]:
        """Held by a live consumer while it applies a batch."""
        with self._cond:
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._last_live = time.monotonic()
                if self._busy == 0:
                    self._cond.notify_all()

    def live_recently(self) -> bool:
        return self._busy > 0 or time.monotonic() - self._last_live < RECENT_S

    @contextmanager
    def low(self) -> Iterator[None]:
        """Held by a building or retired version's consumer while it applies a batch."""
        if not self.live_recently():
            yield
            return
        with self._lane:
            started = time.monotonic()
            try:
                yield
            finally:
                time.sleep(REST * (time.monotonic() - started))

    def wait_turn(self, stop: threading.Event | None = None) -> bool:
        """Wait until no live batch is being applied (at most ``patience`` seconds); True
        when none was."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0 or (stop is not None and stop.is_set()), timeout=self.patience)
