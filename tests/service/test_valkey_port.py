"""A Valkey server started on a port another server holds: tests run in parallel, and free_port()
finds a port free only for a moment. The server that answers must be the one started."""

from __future__ import annotations

import pytest
import redis

from memstream.service import valkey
from memstream.service.valkey import ValkeyProcess, ValkeyStartError

pytestmark = pytest.mark.valkey


@pytest.fixture
def other(tmp_path):
    """Another server, holding its port."""
    with ValkeyProcess(tmp_path / "other") as server:
        yield server


def test_a_port_held_by_another_server_is_an_error_not_that_server(tmp_path, other):
    mine = ValkeyProcess(tmp_path / "mine", port=other.port)
    with pytest.raises(ValkeyStartError, match="Address already in use"):
        mine.start()
    assert mine.proc is None or mine.proc.poll() is not None
    assert redis.Redis.from_url(other.url).info("server")["process_id"] == other.pid  # the other one is untouched


def test_a_chosen_port_taken_before_the_server_binds_it_is_replaced(tmp_path, other, monkeypatch):
    ports = iter([other.port])  # free_port() found it free; another server bound it since
    real = valkey.free_port
    monkeypatch.setattr(valkey, "free_port", lambda: next(ports, None) or real())
    with ValkeyProcess(tmp_path / "mine") as mine:
        assert mine.port != other.port
        client = redis.Redis.from_url(mine.url)
        assert client.info("server")["process_id"] == mine.pid
        client.close()
