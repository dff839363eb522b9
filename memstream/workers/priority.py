"""Live versions first: a replay never delays what the agents wrote a moment ago.

Every consumer of an active version holds ``live()`` while it applies a batch; a consumer
of a building or retired version (``low``) calls ``wait_turn()`` before it reads its next
batch and so starts no batch while a live one is being applied (it gives up waiting after
``patience`` seconds, so a log that never rests still lets a replay progress), and it reads
smaller batches (``LOW_BATCH``): a live event that arrives during a replay's batch waits
for that batch at most. In one process the consumers share the interpreter's lock, so
this ordering is what decides who runs.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["LOW_BATCH", "Priority"]

LOW_BATCH = 32  # entries per batch of a building or retired version


class Priority:
    def __init__(self, patience: float = 0.5) -> None:
        self.patience = patience
        self._busy = 0
        self._cond = threading.Condition()

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
                if self._busy == 0:
                    self._cond.notify_all()

    def wait_turn(self, stop: threading.Event | None = None) -> bool:
        """Wait until no live batch is being applied (at most ``patience`` seconds); True
        when none was."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0 or (stop is not None and stop.is_set()),
                                       timeout=self.patience)
