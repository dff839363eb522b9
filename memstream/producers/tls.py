"""What a refused TLS connection to Redis means, in the settings' words.

redis-py reports a TLS failure as the ssl module's text (``CERTIFICATE_VERIFY_FAILED``,
an alert, or a connection closed during the handshake). ``tls_hint`` turns the common
ones into what to set; ``LogLocator`` adds it to the error, so every command, worker and
the provider's log say it.
"""

from __future__ import annotations

import os
from pathlib import Path

import redis

from memstream.core import Settings

__all__ = ["tls_hint"]


def tls_hint(exc: BaseException, url: str, settings: Settings | None) -> str:
    """What to set when ``exc``, raised connecting to ``url``, looks like a TLS refusal; else nothing."""
    if not url.lower().startswith("rediss://"):
        return ""
    text = str(exc)
    if settings is not None:
        for env, name in (
            ("MEMSTREAM_REDIS_TLS_CA_FILE", settings.redis_tls_ca_file),
            ("MEMSTREAM_REDIS_TLS_CERT_FILE", settings.redis_tls_cert_file),
            ("MEMSTREAM_REDIS_TLS_KEY_FILE", settings.redis_tls_key_file),
        ):
            if name and not os.access(Path(name).expanduser(), os.R_OK):
                return f"; {env}={name!r} cannot be read"
    if "PEM lib" in text or "KEY_VALUES_MISMATCH" in text:
        return (
            "; a TLS file is not what it should be: MEMSTREAM_REDIS_TLS_CA_FILE and _CERT_FILE hold PEM "
            "certificates, _KEY_FILE the certificate's own private key"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text:
        if "hostname" in text.lower() or "IP address mismatch" in text:
            return (
                "; the server's certificate does not name the URL's host: connect by a name it has, "
                "or set MEMSTREAM_REDIS_TLS_CHECK_HOSTNAME=0"
            )
        return (
            "; the server's certificate is not signed by a trusted CA: set MEMSTREAM_REDIS_TLS_CA_FILE to the CA that signed it"
        )
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
        return "; the server does not speak TLS on this port: use its TLS port, or redis://"
    if isinstance(exc, redis.TimeoutError) and "connecting" in text:
        # a server without TLS on this port reads the handshake as a command and waits for more
        return "; no TLS handshake: is this the server's TLS port (tls-port), not a plain one (then redis://)?"
    # a server that asks for a client certificate (tls-auth-clients) ends the handshake,
    # which the client sees as an alert or as the connection closed under it
    closed = (
        "certificate required",
        "handshake failure",
        "EOF occurred",
        "closed by server",
        "Connection reset",
        "while writing to socket",
        "while reading from",
    )
    if (settings is None or not settings.redis_tls_cert_file) and any(c in text for c in closed):
        return (
            "; if the server asks for a client certificate (tls-auth-clients), set "
            "MEMSTREAM_REDIS_TLS_CERT_FILE and MEMSTREAM_REDIS_TLS_KEY_FILE"
        )
    return ""
