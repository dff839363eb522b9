"""The Redis Cluster URL: ``redis+cluster://[[user]:password@]host[:port][,host[:port]...]``
(``rediss+cluster://`` for TLS), parsed here and nowhere else.

The hosts are seed nodes: the client asks any of them for the slot map and talks to every
primary it names. A cluster has no databases, so the URL names none. Parsing needs no
network; a malformed URL raises ``ValueError`` whose message never shows a password.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["ClusterTarget", "is_cluster_url", "parse_cluster_url", "cluster_prefix"]

SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379


@dataclass(frozen=True)
class ClusterTarget:
    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    tls: bool


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES


def parse_cluster_url(url: str) -> ClusterTarget:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError("is not a redis+cluster:// URL")
    auth, at, hosts = rest.rpartition("@")
    if not at:
        auth, hosts = "", rest
    hosts, _, tail = hosts.partition("/")
    if tail.strip("/"):
        raise ValueError("names a database or path: a cluster has only database 0")
    user, colon, password = auth.partition(":")
    nodes: list[tuple[str, int]] = []
    for part in hosts.split(","):
        if not part:
            raise ValueError("has an empty host in its list")
        parsed = urlsplit(f"//{part}")
        try:
            port = parsed.port or DEFAULT_PORT
        except ValueError:
            raise ValueError("has a port that is not a number in range") from None
        if not parsed.hostname:
            raise ValueError("names no host")
        nodes.append((parsed.hostname, port))
    return ClusterTarget(
        nodes=tuple(nodes),
        username=unquote(user) or None,
        password=unquote(password) if colon else None,
        tls=scheme.lower().startswith("rediss"),
    )


def cluster_prefix(prefix: str) -> str:
    """The key prefix on a cluster: ``prefix`` as a hash tag (``{memstream}``), so every key
    but the log's shards lives in one slot (``memstream.core.keys``). A prefix already tagged
    is kept."""
    return prefix if prefix.startswith("{") and prefix.endswith("}") else "{" + prefix + "}"
