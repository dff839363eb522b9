"""Helpers of the dense index tests: a builder that can be held between the steps of a build."""

from __future__ import annotations

import threading

from memstream.projections.stores.dense_index import Indexer


class HeldIndexer(Indexer):
    """A real ``Indexer`` whose builds stop at each step until ``release`` is set (``held``:
    a build reached a step), so a test can search and write while a build is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.held = threading.Event()
        self.release = threading.Event()

    def step(self) -> None:
        self.held.set()
        if not self.release.wait(60):
            raise TimeoutError("the test never released the build")
