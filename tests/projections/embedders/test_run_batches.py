"""A model call's batches side by side (``run_batches``): on the calling thread when the call
is small, on threads of the caller's otherwise, with the same answers, the caller's nice value
and the first failure raised."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from memstream.projections.embedders.factory import get_embedder
from memstream.projections.embedders.onnx import PARALLEL_FROM_TOKENS, run_batches


def _threads_of(batches: list[int], workers: int, tokens: int) -> dict[int, int]:
    ran: dict[int, int] = {}

    def run(batch: int) -> None:
        time.sleep(0.01)  # long enough that a second thread takes a batch
        ran[batch] = threading.get_ident()

    run_batches(batches, run, workers, tokens)
    return ran


def test_a_small_call_runs_its_batches_in_order_on_the_calling_thread():
    seen: list[int] = []
    run_batches([1, 2, 3], seen.append, 4, PARALLEL_FROM_TOKENS - 1)
    assert seen == [1, 2, 3]
    assert set(_threads_of([1, 2, 3], 4, PARALLEL_FROM_TOKENS - 1).values()) == {threading.get_ident()}
    assert set(_threads_of([1, 2, 3], 1, 10 * PARALLEL_FROM_TOKENS).values()) == {threading.get_ident()}
    assert set(_threads_of([1], 4, 10 * PARALLEL_FROM_TOKENS).values()) == {threading.get_ident()}


def test_a_large_call_runs_every_batch_once_on_the_caller_and_its_helpers():
    ran = _threads_of(list(range(8)), 2, PARALLEL_FROM_TOKENS)
    assert sorted(ran) == list(range(8))
    assert threading.get_ident() in ran.values() and len(set(ran.values())) == 2


def test_the_first_failure_is_raised_once_no_batch_runs_and_no_batch_starts_after_it():
    started: list[int] = []
    running = [0]
    lock = threading.Lock()

    def run(batch: int) -> None:
        with lock:
            started.append(batch)
            running[0] += 1
        try:
            if batch == 9:  # the last batch, taken first
                raise ValueError("batch 9")
            time.sleep(0.01)
        finally:
            with lock:
                running[0] -= 1

    with pytest.raises(ValueError, match="batch 9"):
        run_batches(list(range(10)), run, 3, PARALLEL_FROM_TOKENS)
    assert running[0] == 0  # every batch that started had ended
    assert len(started) < 10  # the batches after the failure never started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_a_helper_has_the_nice_value_of_the_thread_that_called():
    seen: dict[int, int] = {}

    def run(batch: int) -> None:
        time.sleep(0.01)
        seen[threading.get_native_id()] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def niced() -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + 5)
        run_batches(list(range(6)), run, 2, PARALLEL_FROM_TOKENS)

    caller = threading.Thread(target=niced)
    caller.start()
    caller.join()
    assert len(seen) == 2 and len(set(seen.values())) == 1
    assert next(iter(seen.values())) == os.getpriority(os.PRIO_PROCESS, 0) + 5


def test_an_embedder_answers_a_large_call_side_by_side_as_it_does_on_one_thread():
    texts = [f"turn {i}: the weekly deploy of the memory service moved to thursday " * (1 + i % 5) for i in range(40)]
    two = get_embedder("onnx-minilm", threads=2)
    one = get_embedder("onnx-minilm", threads=1)
    assert sum(two.count_tokens(t) for t in texts) >= PARALLEL_FROM_TOKENS
    np.testing.assert_array_equal(two.embed(texts), one.embed(texts))  # the same batches: the same vectors
