"""Helpers of the tenant tests on a real Valkey: registered tenants with the credentials
``memstream tenant add`` gives, a pipeline projecting every tenant's log, and each tenant's
host client."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import redis

from memstream.core.settings import Settings
from memstream.producers.connect import event_log
from memstream.producers.stream import EventLog
from memstream.producers.tenants import TenantRegistry

PREFIX = "memstream"


def tenant_url(server, user: str, password: str) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/0"


def drop_users(client: redis.Redis) -> None:
    for user in client.execute_command("ACL", "USERS"):
        if user not in (b"default", "default"):
            client.execute_command("ACL", "DELUSER", user)


@contextmanager
def tenant_fleet(tmp_path, valkey_server, names=("acme", "globex"), **settings_overrides) -> Iterator[tuple]:
    """(root client, running pipeline, tenant -> URL, tenant -> host client): ``names``
    registered on a flushed server, a pipeline (hash embedder) started with the operator's
    credentials."""
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    root = redis.Redis.from_url(valkey_server.url)
    root.flushall()
    drop_users(root)
    registry = TenantRegistry(root, PREFIX)
    urls = {}
    for name in names:
        tenant, password = registry.add(name)
        urls[name] = tenant_url(valkey_server, tenant.user, password)
    settings = Settings.load(
        home=str(tmp_path / "svc"), redis_url=valkey_server.url, autostart=False, embedder="hash", **settings_overrides
    )
    pipeline = Pipeline(
        settings, event_log(root, valkey_server.url, settings), PipelineConfig(embedder="hash", consumer="w1")
    ).start()
    hosts = {name: redis.Redis.from_url(url) for name, url in urls.items()}
    try:
        yield root, pipeline, urls, hosts
    finally:
        pipeline.stop()
        for c in hosts.values():
            c.close()
        drop_users(root)
        root.close()


def host_log(url: str, tenant: str, tmp_path) -> EventLog:
    """The log as a host of ``tenant`` sees it with the credentials in ``url``."""
    settings = Settings.load(home=str(tmp_path / f"h-{tenant}"), redis_url=url, tenant=tenant, autostart=False)
    return event_log(redis.Redis.from_url(url), url, settings)


def host_settings(tmp_path, url: str, tenant: str, name: str = "", **overrides) -> Settings:
    return Settings.load(
        home=str(tmp_path / (name or f"agent-{tenant}")), redis_url=url, tenant=tenant, autostart=False, **overrides
    )


def settled(root: redis.Redis, pipeline) -> bool:
    """Every running consumer has applied every entry of every stream it reads."""
    for c in pipeline.consumers:
        for key in c.events.stream_keys:
            try:
                infos = root.xinfo_groups(key)
            except redis.ResponseError:
                continue
            mine = [g for g in infos if g["name"].decode() == c.group]
            if not mine and root.xlen(key):
                return False
            for g in mine:
                if g["pending"] or g["lag"] is None or g["lag"]:
                    return False
    return True


def log_ids(root: redis.Redis, pattern: str = PREFIX + ":*") -> dict[str, int]:
    """Event id -> how many entries of every stream under the prefix carry it."""
    out: dict[str, int] = {}
    for key in root.scan_iter(match=pattern, _type="stream"):
        name = key.decode()
        if name.endswith((":dlq",)) or ":embed:" in name:
            continue
        for _, fields in root.xrange(key):
            eid = fields.get(b"id")
            if eid is not None:
                out[eid.decode(errors="replace")] = out.get(eid.decode(errors="replace"), 0) + 1
    return out
