"""``memstream bench idle`` on this tree: a real embedded service after the README's first
session, every process of it measured, and nothing left running or on disk after it."""

from __future__ import annotations

import os

import pytest

from memstream.bench import idle

pytestmark = pytest.mark.valkey


def test_one_round_measures_the_service_and_each_of_its_children_then_stops_them(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")  # the model is not what this checks
    monkeypatch.setattr(idle.tempfile, "tempdir", str(tmp_path))
    result = idle.idle_bench(rounds=1, settle=0.0)
    row = result["trees"]["this"]["rounds"][0]
    assert {"service", "valkey", "projection child"} <= set(row)
    assert all(mb > 0 for mb in row.values())
    assert row["total"] == pytest.approx(sum(v for k, v in row.items() if k != "total"))
    assert list(result["trees"]["this"]["median_mb"])[0] == "service"
    assert "this      service" in idle.format_idle(result)
    assert os.listdir(tmp_path) == []  # the home and its run file removed with the service stopped
    measured = result["trees"]["this"]["pids"]
    assert len(measured) == 3
    assert [pid for pid in measured if idle._role(pid) != "gone"] == []  # `memstream down` stopped them all


def test_a_read_replica_is_measured_as_a_process_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBEDDER", "hash")
    monkeypatch.setattr(idle.tempfile, "tempdir", str(tmp_path))
    result = idle.idle_bench(rounds=1, settle=0.0, query_replicas=1)
    row = result["trees"]["this"]["rounds"][0]
    assert {"service", "valkey", "projection child", "read replica"} <= set(row)
    assert row["read replica"] > 0 and len(result["trees"]["this"]["pids"]) == 4
    assert "with 1 read replicas" in idle.format_idle(result)
    assert [pid for pid in result["trees"]["this"]["pids"] if idle._role(pid) != "gone"] == []


def test_a_path_that_is_no_checkout_is_refused(tmp_path):
    with pytest.raises(idle.BenchError, match="not a memstream checkout"):
        idle.idle_bench(rounds=1, settle=0.0, against=str(tmp_path))
