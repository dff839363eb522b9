"""compose.yaml cannot run here (no Docker engine); what can be checked without one is."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).parents[1] / "compose.yaml"


def test_compose_describes_redis_with_aof_qdrant_and_workers_wired_to_both():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert set(services) >= {"redis", "qdrant", "worker"}
    redis_cmd = services["redis"]["command"]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    worker = services["worker"]
    env = worker["environment"]
    assert env["MEMSTREAM_REDIS_URL"].startswith("redis://redis:")
    assert env["MEMSTREAM_QDRANT_URL"].startswith("http://qdrant:")
    assert "memstream worker" in " ".join(worker["command"])
    assert set(worker["depends_on"]) == {"redis", "qdrant"}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith((".", "/")) or source in spec.get("volumes", {}), (name, volume)
