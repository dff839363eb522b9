"""An ASGI application served by uvicorn from a daemon thread of this process: how the
metrics and the dashboard of ``memstream up`` and of every ``memstream worker`` are served.

Guarantees: the listening socket is bound by the caller's thread when ``HttpServer`` is
made, so an address that cannot be bound raises OSError there, port 0 picks a free port
and ``address`` names it; the server's thread installs no signal handler (uvicorn installs
them from the main thread only, and its thread never is); ``stop()`` closes the listening
socket and every open connection and returns once the server's thread has ended. The
application does its blocking work (a scrape reads Redis) on ``executor``'s threads,
shut down by ``stop()`` as well, so a stopped server leaves no thread and no socket.
"""

from __future__ import annotations

import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import uvicorn
import uvicorn.protocols.http.h11_impl  # noqa: F401  the protocol it serves with, imported with this module
from starlette.types import ASGIApp

__all__ = ["HttpServer"]

GRACE = 2  # seconds stop() lets a request in flight finish before it is cancelled
WORKERS = 4  # threads for blocking work: concurrent scrapes (Prometheus, a person, the sampler's own are apart)


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6, as the host resolves)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart past TIME_WAIT, never a live listener
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class HttpServer:
    """``HttpServer(make_app, host, port).start()`` serves ``make_app(executor)``;
    ``stop()`` ends it. Raises OSError when ``host:port`` cannot be bound."""

    def __init__(
        self, make_app: Callable[[ThreadPoolExecutor], ASGIApp], host: str, port: int, *, name: str = "memstream-http"
    ) -> None:
        self._socket = _bind(host, port)
        bound = self._socket.getsockname()
        self.address: tuple[str, int] = (str(bound[0]), int(bound[1]))
        self.name = name
        self.executor = ThreadPoolExecutor(WORKERS, thread_name_prefix=f"{name}-work")
        self._app = make_app(self.executor)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HttpServer:
        """Serve on a daemon thread; returns at once (the socket listens already: a
        connection made before the server's loop runs waits in its backlog)."""
        # uvicorn's loggers (uvicorn.error, uvicorn.access) at WARNING: no line per start or request
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
            log_config=None,
            log_level=logging.WARNING,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=GRACE,
        )
        config.load()  # its imports and set-up here, in the caller's thread
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [self._socket]}, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the socket and the connections; wait for the server's and the work threads."""
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(GRACE + 5.0)
        self._server = self._thread = None
        self._socket.close()  # uvicorn closed it when it ran; closing twice is harmless
        self.executor.shutdown(wait=True, cancel_futures=True)
