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

import redis
import structlog

from memstream.core import Settings, is_sentinel_url, mask_url, parse_sentinel_url, read_run_file, start_service
from memstream.producers.stream import EventLog
from memstream.producers.tenants import Signer, password_of

__all__ = ["LogLocator", "read_run_file", "redis_client", "sentinel_client", "event_log", "shipping_timeout"]

log = structlog.get_logger("memstream.connect")






def redis_client(url: str, timeout: float = 2.0) -> redis.Redis:
    """A client of the server ``url`` names: ``redis://``, ``rediss://``, ``unix://``, or the
    primary the Sentinels of a ``redis+sentinel://`` URL name (``sentinel_client``).
    Raises ``ValueError`` on a malformed URL (``Settings.problems`` says why)."""
    if is_sentinel_url(url):
        return sentinel_client(url, timeout)
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                health_check_interval=30)


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
    common = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    sentinels = Sentinel(
        list(target.sentinels),
        sentinel_kwargs={**common, "username": target.sentinel_username, "password": target.sentinel_password},
        **common)
    client: redis.Redis = sentinels.master_for(target.service_name, db=target.db, username=target.username,
                                               password=target.password, health_check_interval=30)
    return client


def shipping_timeout(settings: Settings) -> float:
    """The socket timeout of a shipper's client: 2 s, or longer than a batch's WAIT may take."""
    waits = settings.ship_replica_timeout_ms / 1000 + 1.0 if settings.ship_replicas else 0.0
    return max(2.0, waits)


def event_log(client: redis.Redis, url: str, settings: Settings) -> EventLog:
    """The log at ``url`` as ``settings`` configure it, signing what it appends (see
    ``memstream.producers.tenants``)."""
    prefix = settings.stream_prefix
    return EventLog(client, prefix, settings.shards, signer=Signer(client, prefix, password_of(url)))


class LogLocator:
    """Callable that connects to the configured log (used by the shipper thread)."""

    RESPAWN_AFTER = 30.0

    def __init__(self, settings: Settings, autostart: bool | None = None):
        self.settings = settings
        self.autostart = settings.autostart if autostart is None else autostart
        self._spawned_at = 0.0
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
                + ("starting one" if self.autostart else "run `memstream up` or set MEMSTREAM_REDIS_URL"))
        with self._lock:
            client = self._client
            if client is None or url != self._url:
                try:
                    client = redis_client(url, timeout=self.timeout)
                except ValueError as exc:  # a malformed URL: Settings.problems says why
                    raise redis.ConnectionError(f"the Redis URL {mask_url(url)!r} is not valid "
                                                f"({type(exc).__name__}); `memstream doctor` says why") from None
                self._close_client()
                self._client, self._url = client, url
        client.ping()
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
            log.info("service.autostart", home=str(self.settings.home), pid=started.get("pid"),
                     already_running=started["already_running"])
        except OSError as exc:
            log.warning("service.autostart_failed", error=str(exc))
