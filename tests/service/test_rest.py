"""``AtRest``: a process that worked gives its memory back once when it goes quiet, and not
again until it has worked."""

from __future__ import annotations

import gc

from memstream.service.rest import AtRest


class Clocks:
    """The process's CPU time and the monotonic clock, set by the test."""

    def __init__(self, cpu: float = 0.0) -> None:
        self.cpu, self.now = cpu, 0.0

    def period(self, cpu_used: float) -> None:
        self.now += AtRest.PERIOD_S
        self.cpu += cpu_used


def test_a_quiet_period_after_work_gives_back_once_and_again_only_after_more_work():
    clocks = Clocks()
    rest = AtRest(cpu=lambda: clocks.cpu, clock=lambda: clocks.now)
    collections = gc.get_stats()[2]["collections"]
    assert not rest.tick()  # no period has passed
    for _ in range(3):
        clocks.period(0.8)  # busy
        assert not rest.tick()
    clocks.now += AtRest.PERIOD_S / 2
    assert not rest.tick()  # half a period: not read yet
    clocks.now += AtRest.PERIOD_S / 2
    clocks.cpu += 0.05
    assert rest.tick() and rest.given_back == 1
    assert gc.get_stats()[2]["collections"] > collections  # a full collection ran
    for _ in range(40):  # at rest for minutes: the loops' own CPU is no work
        clocks.period(AtRest.QUIET_CPU_S / 2)
        assert not rest.tick()
    clocks.period(2 * AtRest.QUIET_CPU_S)  # a burst of work
    assert not rest.tick()
    clocks.period(0.0)
    assert rest.tick() and rest.given_back == 2


def test_the_processs_start_is_work_and_a_process_quiet_since_gives_back_once():
    clocks = Clocks(cpu=1.2)  # its imports and loads, before the loop began
    rest = AtRest(cpu=lambda: clocks.cpu, clock=lambda: clocks.now)
    clocks.period(0.01)
    assert not rest.tick()  # the start's CPU, read in the first period
    clocks.period(0.01)
    assert rest.tick()
    for _ in range(10):
        clocks.period(0.01)
        assert not rest.tick()
    assert rest.given_back == 1
