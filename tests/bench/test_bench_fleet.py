"""``memstream bench fleet`` at a tiny size: every level is reported with every figure, no
event is lost or duplicated, every probed turn becomes searchable, and nothing the bench
started outlives it (a run, or a run interrupted as Ctrl-C interrupts it). Timings are
never asserted here."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from writepath import wait_for

from memstream.bench.fleet import HOOKS, fleet_bench, format_fleet, knee, main

pytestmark = pytest.mark.valkey


def _children_of_this_process() -> list[str]:
    """Command lines of the bench's child processes still alive."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and "memstream.bench.fleet" in cmdline:
            found.append(cmdline)
    return found


@pytest.fixture(autouse=True)
def _own_tempdir(tmp_path, monkeypatch):
    """The bench's temp dirs go under this test's own directory, so another run of the bench
    on the machine (a benchmark, a second checkout's tests) cannot leave one in the way."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def _fleet_dirs() -> set[str]:
    import tempfile

    return {p.name for p in Path(tempfile.gettempdir()).glob("memstream-bench-fleet-*")}


def test_bench_fleet_reports_every_level_and_loses_or_duplicates_no_event():
    before = _fleet_dirs()
    result = fleet_bench(
        levels=(2, 4), rate=2.0, seconds=3.0, processes=2, probes_per_s=100.0, settle=30.0, memory_every=2, search_every=2
    )
    assert [lv["agents"] for lv in result["levels"]] == [2, 4]
    for lv in result["levels"]:
        assert lv["processes"] == 2 and sum(lv["agents_per_process"]) == lv["agents"]
        events = lv["events"]
        assert events["lost"] == 0 and events["duplicated"] == 0 and events["unexpected"] == 0, events
        assert events["emitted"] == events["in_log"] > 0
        assert all(p["flushed"] for p in lv["agent_processes"])
        for hook in HOOKS:  # every hook ran, on memstream and on the do-nothing provider alike
            entry = lv["hooks"][hook]
            assert entry["memstream_us"]["n"] == entry["floor_us"]["n"] > 0, hook
            assert entry["p99_ratio"] is not None and entry["p99_ratio"] > 0
        # a turn: on_turn_start, prefetch, sync_turn, queue_prefetch, each once
        turns = lv["turns"]
        assert turns > 0
        for hook in ("on_turn_start", "prefetch", "sync_turn", "queue_prefetch"):
            assert lv["hooks"][hook]["memstream_us"]["n"] == turns
        assert sum(lv["prefetch"]["outcomes"].values()) == turns
        assert 0.0 <= lv["prefetch"]["fresh_fraction"] <= 1.0
        assert lv["query_ms"]["n"] == lv["hooks"]["handle_tool_call"]["memstream_us"]["n"]
        probes = lv["append_to_searchable_s"]
        assert probes["sampled"] == turns  # every turn probed at this rate
        for stage in ("in_log", "applied", "searchable"):  # and every one got through every stage
            assert probes[stage]["n"] == turns and probes[stage]["p95"] is not None, (stage, probes)
        for key in ("max_entries", "max_s", "series_entries", "groups"):
            assert key in lv["worker_lag"]
        assert lv["worker_lag"]["groups"]  # the projections' groups were sampled
        assert lv["redis"]["clients_per_agent"] > 0 and lv["redis"]["used_memory_mb_max"] > 0
        assert lv["redis"]["cpu_pct"]["mean"] is not None
        assert set(lv["cpu_pct"]["agent_processes"]) == {"agents-0", "agents-1"}
        assert len(lv["loadavg_at_start"]) == 3
        assert lv["query_counters"].get("answered", 0) > 0  # the service's own count, shown with its sheds
    assert result["lossless"] is True
    assert result["knee"] in (None, 2, 4)
    assert result["machine"]["cpus"] and len(result["machine"]["loadavg_at_start"]) == 3
    text = format_fleet(result)
    assert "knee" in text and "lost / duplicated" in text and "queries answered / expired; shed: late, rerank" in text
    assert _children_of_this_process() == []
    assert _fleet_dirs() <= before  # its temp dir is gone


def test_bench_fleet_against_another_checkout_runs_every_level_in_both_trees():
    import memstream

    checkout = str(Path(memstream.__file__).resolve().parents[1])  # this one, as the tree before
    result = fleet_bench(levels=(2,), rate=2.0, seconds=2.0, processes=1, probes_per_s=100.0, settle=30.0, against=checkout)
    assert result["questions"] == "fresh"
    before = result["against"]
    assert before["path"] == checkout
    assert [lv["agents"] for lv in result["levels"]] == [lv["agents"] for lv in before["levels"]] == [2]
    for lv in result["levels"] + before["levels"]:
        assert lv["turns"] > 0 and lv["events"]["lost"] == 0 and lv["events"]["emitted"] == lv["events"]["in_log"] > 0
        assert lv["append_to_searchable_s"]["searchable"]["n"] > 0
    assert result["lossless"] is True and before["lossless"] is True
    text = format_fleet(result)
    assert "questions: fresh" in text and f"the tree before ({checkout})" in text and text.count("knee (") == 2
    assert _children_of_this_process() == []


def test_bench_fleet_interrupted_stops_every_process_it_started():
    before = _fleet_dirs()

    def ctrl_c_once_the_agents_run() -> None:
        # the state, not a time: both agent processes started (on a loaded machine the service
        # alone can take longer than any fixed delay); then a real SIGINT, as a terminal sends
        wait_for(lambda: sum("--agent-process" in c for c in _children_of_this_process()) == 2, 120, "the agents to start")
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=ctrl_c_once_the_agents_run, name="ctrl-c", daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        fleet_bench(levels=(4,), rate=2.0, seconds=60.0, processes=2, settle=5.0)
    watcher.join(5)
    assert _children_of_this_process() == []
    assert _fleet_dirs() <= before


def test_knee_is_the_largest_level_fresh_within_budget_and_searchable_within_a_second():
    def level(n: int, fresh: float | None, p95: float | None) -> dict:
        return {"agents": n, "prefetch": {"fresh_fraction": fresh}, "append_to_searchable_s": {"searchable": {"p95": p95}}}

    assert knee([level(50, 0.99, 0.2), level(200, 0.96, 0.9), level(500, 0.94, 0.5), level(1000, 0.5, 3.0)]) == 200
    assert knee([level(50, 0.99, 1.2), level(200, None, None)]) is None
    assert knee([]) is None


def test_the_child_entry_point_refuses_anything_but_its_two_roles(capsys):
    assert main(["--bogus"]) == 2
    assert "memstream bench fleet" in capsys.readouterr().err
