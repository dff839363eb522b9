"""``memstream bench cluster``: a short run measures each configuration and checks every
event sent is in the streams (the figures themselves are BENCHMARKS.md's, never asserted)."""

from __future__ import annotations

import pytest

from memstream.bench.cluster import cluster_bench, format_cluster
from memstream.bench.testbed import ValkeyCluster

pytestmark = pytest.mark.valkey


def test_a_short_run_measures_the_server_and_each_cluster_size_and_formats_them():
    result = cluster_bench(sizes=(1, 2), runs=2, writers=1, shards=4, batch=8, seconds=0.3)
    assert set(result["appends_per_s"]) == {"server", "1", "2"}
    assert all(len(v) == 2 and all(x > 0 for x in v) for v in result["appends_per_s"].values())
    assert result["ratio_to_server"]["server"] == 1.0
    text = format_cluster(result)
    assert "one server" in text and "2 primaries" in text and "1 primary" in text


def test_a_cluster_of_valkey_processes_serves_every_slot_from_its_primaries(tmp_path):
    with ValkeyCluster(tmp_path, primaries=2) as cluster:
        assert cluster.url.startswith("redis+cluster://127.0.0.1:")
        ranges = sorted((int(r[0]), int(r[1])) for r in cluster.client(0).execute_command("CLUSTER", "SLOTS"))
        assert ranges == [(0, 8191), (8192, 16383)]
    with pytest.raises(ValueError):
        ValkeyCluster(tmp_path, primaries=0)
