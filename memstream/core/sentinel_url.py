"""The Sentinel form of ``MEMSTREAM_REDIS_URL``: the one parser of it.

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db][?option=value&...]

The hosts are the Sentinels (port 26379 when none is given); ``service_name`` is the name
the Sentinels monitor the primary under; ``user``/``password`` (percent-encoded) and
``db`` are those of the primary and its replicas, as in a ``redis://`` URL. The
Sentinels' own credentials, when they require some, are options: ``sentinel_username``
and ``sentinel_password``. ``db`` may be given as an option instead of a path segment.
Any other option is refused (a typo must not be silently ignored).

Guarantee: ``parse_sentinel_url`` never touches the network; it returns a
``SentinelURL`` or raises ``ValueError`` with a message that never shows a password
(``core/settings.py`` validates the setting with it, ``producers/connect.py`` makes the
client from what it returns).
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qsl, unquote

__all__ = ["SCHEMES", "SentinelURL", "is_sentinel_url", "parse_sentinel_url", "DEFAULT_PORT"]

SCHEMES = ("redis+sentinel",)
DEFAULT_PORT = 26379
_OPTIONS = ("sentinel_username", "sentinel_password", "db")
_MAX_SENTINELS = 64


class SentinelURL(NamedTuple):
    """What a Sentinel URL says: where the Sentinels are and which primary to ask them for."""

    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


def _host_port(text: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        if not close or not host or (rest and not rest.startswith(":")):
            raise ValueError("names a Sentinel whose address is not host[:port]")
        port_text = rest[1:]
    else:
        host, _, port_text = text.partition(":")
        if not host or ":" in port_text:
            raise ValueError("names a Sentinel whose address is not host[:port]")
    if any(c.isspace() or c in "/?#@[]" or not c.isprintable() for c in host):
        raise ValueError("names a Sentinel whose host is not valid")
    if not port_text:
        return host, DEFAULT_PORT
    if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) <= 65535):
        raise ValueError("names a Sentinel whose port is not a number from 1 to 65535")
    return host, int(port_text)


def _db(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 5):
        raise ValueError("has a db that is not a small non-negative number")
    return int(text)


def parse_sentinel_url(url: str) -> SentinelURL:
    """The parts of ``url`` (see the module doc); ``ValueError`` when it is not one."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError("is not a redis+sentinel:// URL")
    rest, _, fragment = rest.partition("#")
    if fragment:
        raise ValueError("has a fragment (#...)")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon and secret else None
        if not colon:  # ``token@host``: a password alone, as redis-py reads redis://token@host
            username, password = None, unquote(user) or None
    parts = hosts.split(",")
    if not hosts or any(not p for p in parts):
        raise ValueError("names no Sentinel (host[:port][,host[:port]...])")
    if len(parts) > _MAX_SENTINELS:
        raise ValueError(f"names more than {_MAX_SENTINELS} Sentinels")
    sentinels = tuple(_host_port(p) for p in parts)
    segments = path.split("/") if slash else []
    if not segments or not segments[0]:
        raise ValueError("names no service (redis+sentinel://hosts/SERVICE_NAME)")
    service = unquote(segments[0])
    if len(segments) > 2:
        raise ValueError("has a path other than /service_name[/db]")
    db = _db(segments[1]) if len(segments) == 2 and segments[1] else 0
    if any(c.isspace() or not c.isprintable() for c in service) or len(service) > 256:
        raise ValueError("has a service name with spaces or control characters, or too long")
    options: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if name not in _OPTIONS:
            raise ValueError(f"has an unknown option {name[:40]!r} (known: {', '.join(_OPTIONS)})")
        options[name] = value
    if "db" in options:
        db = _db(options["db"])
    return SentinelURL(
        sentinels,
        service,
        db,
        username,
        password,
        options.get("sentinel_username") or None,
        options.get("sentinel_password") or None,
    )
