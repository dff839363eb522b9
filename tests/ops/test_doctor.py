"""``doctor`` as data: every check in order, each with ``ok`` and, when failed, why."""

from __future__ import annotations

import pytest
import redis

from memstream.core import Settings
from memstream.ops import doctor
from memstream.projections import group_names


def test_an_unreachable_log_fails_redis_and_streams_and_skips_what_needs_the_log(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)
    report = doctor(settings)
    assert list(report["checks"]) == ["config", "embedder", "redis", "streams", "spool"]
    assert report["ok"] is False
    assert report["checks"]["redis"]["error"] == ("no memstream service is running; start it with "
                                                  "`memstream up --detach`")
    assert report["checks"]["streams"] == {"ok": False, "error": "log unreachable"}
    assert report["checks"]["spool"]["ok"] is True and report["checks"]["spool"]["segments"] == 0


def test_the_callers_check_comes_last_and_its_exception_is_a_failed_check(tmp_path):
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False)

    def hermes() -> dict:
        raise RuntimeError("config.yaml unreadable")

    report = doctor(settings, hermes=hermes)
    assert list(report["checks"])[-1] == "hermes"
    assert report["checks"]["hermes"] == {"ok": False, "error": "RuntimeError: config.yaml unreadable"}


@pytest.mark.valkey
def test_a_reachable_log_without_workers_checks_every_registered_projection(valkey_server, tmp_path):
    redis.Redis.from_url(valkey_server.url).flushall()
    settings = Settings.load(home=str(tmp_path / "ms-home"), autostart=False, redis_url=valkey_server.url)
    report = doctor(settings, hermes=lambda: {"ok": True, "skipped": True})
    checks = report["checks"]
    assert list(checks) == ["config", "embedder", "redis", "streams", "queries", "tenants", "projections", "spool",
                            "hermes"]
    assert report["ok"] is True  # nothing waits: no projection is behind
    assert checks["redis"]["redis_version"] and checks["queries"]["answering"] is False
    assert list(checks["projections"]["groups"]) == list(group_names())
