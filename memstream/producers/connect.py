"""Where the log is: a configured Redis URL, or the embedded service's run file.

Guarantee: ``LogLocator.__call__`` either returns a connected ``EventLog`` or raises
``redis.ConnectionError`` quickly (short timeouts); with autostart on and no service
running, it starts one in the background (``memstream.core.start_service``, as ``memstream
up --detach`` does) at most once per 30 s per process, and the service itself refuses to
run twice (it holds a lock for its lifetime).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, cast

import redis
import structlog

from memstream.core import Settings, is_sentinel_url, mask_url, parse_sentinel_url, read_run_file, start_service
from memstream.producers.stream import EventLog
from memstream.producers.tenants import Signer, password_of
from memstream.producers.tls import tls_hint

__all__ = [
    "LogLocator",
    "redis_client",
    "cluster_client",
    "sentinel_client",
    "slot_primary_url",
    "event_log",
    "shipping_timeout",
    "tls_kwargs",
]

log = structlog.get_logger("memstream.connect")


def tls_kwargs(url: str, settings: Settings | None) -> dict[str, Any]:
    """redis-py's TLS arguments for ``url``: none unless it is ``rediss://`` (or
    ``rediss+cluster://``); then the
    server's certificate is always checked (against ``redis_tls_ca_file``, else the
    system's CAs), its host name unless ``redis_tls_check_hostname`` is off, and the
    client certificate of ``redis_tls_cert_file`` (key: ``redis_tls_key_file``) is sent."""
    if not url.lower().startswith(("rediss://", "rediss+cluster://")):
        return {}
    out: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    if settings is None:
        return out
    out["ssl_check_hostname"] = settings.redis_tls_check_hostname
    if settings.redis_tls_ca_file:
        out["ssl_ca_certs"] = str(Path(settings.redis_tls_ca_file).expanduser())
    if settings.redis_tls_cert_file:
        out["ssl_certfile"] = str(Path(settings.redis_tls_cert_file).expanduser())
        if settings.redis_tls_key_file:
            out["ssl_keyfile"] = str(Path(settings.redis_tls_key_file).expanduser())
    return out


def redis_client(url: str, timeout: float = 2.0, settings: Settings | None = None) -> redis.Redis:
    """A client of the server ``url`` names: ``redis://``, ``rediss://`` (with the TLS of
    ``settings``), ``unix://``, the primary the Sentinels of a ``redis+sentinel://`` URL name
    (``sentinel_client``), or a Redis Cluster (``cluster_client``). Raises ``ValueError`` on a
    malformed URL (``Settings.problems`` says why)."""
    from memstream.core import is_cluster_url

    if is_sentinel_url(url):
        return sentinel_client(url, timeout)
    if is_cluster_url(url):
        return cluster_client(url, timeout, settings)
    return redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30, **tls_kwargs(url, settings)
    )


def cluster_client(url: str, timeout: float = 2.0, settings: Settings | None = None) -> redis.Redis:
    """A client of the Redis Cluster whose seed nodes ``url`` names (``core.parse_cluster_url``):
    redis-py's ``RedisCluster``, which follows the slot map (MOVED, ASK) and a failover of a
    primary to its replica. Typed as ``redis.Redis``: it answers the same commands, each key
    routed to its slot's primary; memstream keeps every multi-key command in one slot
    (``core.keys``, the cluster layout)."""
    from redis.cluster import ClusterNode

    from memstream.core import parse_cluster_url

    target = parse_cluster_url(url)
    client = _cluster_class()(
        startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],
        username=target.username,
        password=target.password,
        ssl=target.tls,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=30,
        **tls_kwargs(url, settings),
    )
    return cast(redis.Redis, client)


def slot_primary_url(url: str, key: str, timeout: float = 2.0) -> str:
    """For a cluster URL, the ``redis://`` (``rediss://``) URL of the primary that serves
    ``key``'s slot now, with the URL's credentials: for a client of one node (the query
    path's, whose keys all carry the prefix's hash tag); any other URL as given."""
    from urllib.parse import quote

    from memstream.core import is_cluster_url, parse_cluster_url

    if not is_cluster_url(url):
        return url
    target = parse_cluster_url(url)
    client = cluster_client(url, timeout)
    try:
        node = client.get_node_from_key(key)  # type: ignore[attr-defined]  # a RedisCluster
    finally:
        client.close()
    auth = ""
    if target.username or target.password:
        auth = f"{quote(target.username or '', safe='')}:{quote(target.password or '', safe='')}@"
    host = f"[{node.host}]" if ":" in node.host else node.host
    return f"{'rediss' if target.tls else 'redis'}://{auth}{host}:{node.port}/0"


_SCRIPTS: dict[str, str | bytes] = {}  # SHA1 -> text of every script a cluster client registered
_CLUSTER_CLASS: type | None = None


def _cluster_class() -> type:
    """``RedisCluster`` whose pipelines run scripts. redis-py refuses EVALSHA in a cluster
    pipeline (a node's script cache may lack it, and the pipeline cannot load it there):
    a registered script queued in a pipeline or transaction goes as EVAL with its text,
    routed like any command by its keys (one slot: ``core.keys``). An unregistered SHA
    goes as EVALSHA (its caller handles NOSCRIPT)."""
    global _CLUSTER_CLASS
    if _CLUSTER_CLASS is not None:
        return _CLUSTER_CLASS
    from redis.cluster import ClusterPipeline, RedisCluster

    class ScriptingClusterPipeline(ClusterPipeline):
        def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
            text = _SCRIPTS.get(sha)
            if text is None:
                return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)
            return self.execute_command("EVAL", text, numkeys, *keys_and_args)

        def eval(self, script: str | bytes, numkeys: int, *keys_and_args: Any) -> Any:  # type: ignore[override]  # ClusterPipeline.eval takes no script
            return self.execute_command("EVAL", script, numkeys, *keys_and_args)

    class ScriptingCluster(RedisCluster):
        def register_script(self, script: Any) -> Any:
            registered = super().register_script(script)
            _SCRIPTS[registered.sha] = script
            return registered

        def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
            pipe = super().pipeline(transaction, shard_hint)
            pipe.__class__ = ScriptingClusterPipeline  # adds a method, no state
            return pipe

    _CLUSTER_CLASS = ScriptingCluster
    return ScriptingCluster


def sentinel_client(url: str, timeout: float = 2.0) -> redis.Redis:
    """A client of the primary the Sentinels of ``url`` watch (``core.parse_sentinel_url``).

    redis-py's Sentinel pool asks the Sentinels for the primary's address whenever it opens
    a connection, so after a failover the next connection goes to the promoted replica: a
    command on a dead primary fails with ``ConnectionError`` (the caller's retry loop comes
    back), and one on a primary demoted to a replica (READONLY) drops its connection and
    fails the same way. Nothing is cached across a failover but the scripts' SHAs, which
    ``Script`` reloads on NOSCRIPT.
    """
    from redis.sentinel import Sentinel

    target = parse_sentinel_url(url)
    common: dict[str, object] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    sentinels = Sentinel(
        list(target.sentinels),
        sentinel_kwargs={**common, "username": target.sentinel_username, "password": target.sentinel_password},
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    client: redis.Redis = sentinels.master_for(
        target.service_name, db=target.db, username=target.username, password=target.password, health_check_interval=30
    )
    return client


def shipping_timeout(settings: Settings) -> float:
    """The socket timeout of a shipper's client: 2 s, or longer than a batch's WAIT may take."""
    waits = settings.ship_replica_timeout_ms / 1000 + 1.0 if settings.ship_replicas else 0.0
    return max(2.0, waits)


def event_log(client: redis.Redis, url: str, settings: Settings) -> EventLog:
    """The log at ``url`` as ``settings`` configure it, signing what it appends (see
    ``memstream.producers.tenants``)."""
    from memstream.core import cluster_prefix, is_cluster_url

    prefix = cluster_prefix(settings.stream_prefix) if is_cluster_url(url) else settings.stream_prefix
    return EventLog(client, prefix, settings.shards, signer=Signer(client, prefix, password_of(url)))


class LogLocator:
    """Callable that connects to the configured log (used by the shipper thread)."""

    RESPAWN_AFTER = 30.0

    def __init__(self, settings: Settings, autostart: bool | None = None):
        self.settings = settings
        self.autostart = settings.autostart if autostart is None else autostart
        self._spawned_at = 0.0
        self.started: dict[str, Any] | None = None  # what the last autostart began (its pid), if any
        self._lock = threading.Lock()
        self._url = ""
        self._client: redis.Redis | None = None

    @property
    def timeout(self) -> float:
        return shipping_timeout(self.settings)

    def url(self) -> str | None:
        if self.settings.redis_url:
            return self.settings.redis_url
        info = read_run_file(self.settings.run_file)
        return info.get("url") if info else None

    def __call__(self) -> EventLog:
        url = self.url()
        if url is None:
            self._maybe_start_service()
            raise redis.ConnectionError(
                f"no memstream service is running (no live run file at {self.settings.run_file}); "
                + ("starting one" if self.autostart else "run `memstream up` or set MEMSTREAM_REDIS_URL")
            )
        with self._lock:
            client = self._client
            if client is None or url != self._url:
                try:
                    client = redis_client(url, timeout=self.timeout, settings=self.settings)
                except ValueError as exc:  # a malformed URL: Settings.problems says why
                    raise redis.ConnectionError(
                        f"the Redis URL {mask_url(url)!r} is not valid ({type(exc).__name__}); `memstream doctor` says why"
                    ) from None
                self._close_client()
                self._client, self._url = client, url
        try:
            client.ping()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            hint = tls_hint(exc, url, self.settings)
            if not hint:
                raise
            raise type(exc)(f"{exc}{hint}") from exc
        return event_log(client, url, self.settings)

    def close(self) -> None:
        """Close the client kept for the next call (its connections); a later call opens another."""
        with self._lock:
            self._close_client()
            self._client, self._url = None, ""

    def _close_client(self) -> None:  # under self._lock
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # closing a broken connection must not fail the caller
                pass

    def _maybe_start_service(self) -> None:
        if not self.autostart or self.settings.redis_url:
            return
        now = time.monotonic()
        if self._spawned_at and now - self._spawned_at < self.RESPAWN_AFTER:
            return
        self._spawned_at = now
        try:
            started = start_service(self.settings, wait=None)
            self.started = started
            log.info(
                "service.autostart",
                home=str(self.settings.home),
                pid=started.get("pid"),
                already_running=started["already_running"],
            )
        except OSError as exc:
            log.warning("service.autostart_failed", error=str(exc))
