"""OpenAI-compatible and Ollama embedders against a fake server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memstream.core import Settings
from memstream.projections.embedders.factory import configured_embedder, describe_embedder, get_embedder
from memstream.projections.embedders.hashing import HashEmbedder
from memstream.projections.embedders.port import EmbedderError, EmbedderUnavailable, check_dim
from memstream.projections.embedders.remote import OllamaEmbedder, OpenAIEmbedder


class FakeEmbeddingServer:
    """Serves ``/v1/embeddings`` (OpenAI shape) and ``/api/embed`` (Ollama shape).

    Vectors come from a ``HashEmbedder`` of ``dim`` (not normalised on the wire, to check
    the client normalises). ``mode`` switches to failures: ``http500``, ``http401``,
    ``http404``, ``wrong_dim``, ``wrong_count``, ``not_json``, ``slow``, ``shuffled``,
    ``redirect`` (a 307 elsewhere), ``hangup`` (closes without an answer). HTTP/1.1 with
    keep-alive; each request records the client's port (one port: one connection).
    """

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.mode = "ok"
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY, as real servers set it: with keep-alive, a server that writes
            # headers and body apart under Nagle waits for the client's delayed ACK (~40 ms)
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization"), "port": self.client_address[1]}
                )
                server.respond(self, body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client that timed out and left
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def respond(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        mode = self.mode
        if mode == "slow":
            time.sleep(1.0)
        if mode == "hangup":
            h.close_connection = True
            return None
        if mode == "redirect":
            h.send_response(307)
            h.send_header("Location", self.url + "/elsewhere")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        if mode.startswith("http"):
            code = int(mode[4:])
            return self._send(h, code, {"error": {"message": f"fake failure {code}", "type": "server_error"}})
        if mode == "not_json":
            return self._send_raw(h, 200, b"<html>proxy login</html>", "text/html")
        texts = body["input"]
        dim = self.dim * 2 if mode == "wrong_dim" else self.dim
        vecs = (HashEmbedder(dim=dim).embed(texts) * 3.0).tolist()
        if mode == "wrong_count":
            vecs = vecs[:-1]
        if h.path == "/api/embed":
            return self._send(h, 200, {"model": body["model"], "embeddings": vecs})
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        if mode == "shuffled":
            data.reverse()
        return self._send(h, 200, {"object": "list", "data": data, "model": body["model"]})

    def _send(self, h, code, obj):
        self._send_raw(h, code, json.dumps(obj).encode(), "application/json")

    @staticmethod
    def _send_raw(h, code, raw, ctype):
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)


@pytest.fixture
def fake():
    server = FakeEmbeddingServer(dim=8)
    yield server
    server.stop()


@pytest.fixture(params=["openai", "ollama"])
def remote(request, fake):
    base = fake.url + "/v1" if request.param == "openai" else fake.url
    embedder = get_embedder(request.param, base_url=base, model="fake-embed", dim=8, batch_size=3, timeout=0.5)
    yield embedder
    embedder.close()


@pytest.fixture
def own(request):
    """Closes the embedder it is given when the test ends (its HTTP client's connections)."""

    def closed_after(embedder):
        request.addfinalizer(embedder.close)
        return embedder

    return closed_after


def test_remote_vectors_are_normalised_and_in_input_order(remote, fake):
    texts = [f"sentence number {i}" for i in range(7)]
    v = remote.embed(texts)
    assert v.dtype == np.float32 and v.shape == (7, 8)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(v, HashEmbedder(dim=8).embed(texts), atol=1e-6)
    assert [len(r["body"]["input"]) for r in fake.requests] == [3, 3, 1]  # its own batch size
    assert all(r["body"]["model"] == "fake-embed" for r in fake.requests)


def test_openai_requests_go_to_embeddings_with_the_api_key(fake, own):
    e = own(OpenAIEmbedder(base_url=fake.url + "/v1/", model="m", api_key="sk-test", dim=8))
    e.embed(["a"])
    assert fake.requests[0]["path"] == "/v1/embeddings"
    assert fake.requests[0]["auth"] == "Bearer sk-test"
    assert fake.requests[0]["body"] == {"model": "m", "input": ["a"]}


def test_openai_items_are_put_back_in_index_order(fake, own):
    fake.mode = "shuffled"
    e = own(OpenAIEmbedder(base_url=fake.url + "/v1", model="m", dim=8))
    np.testing.assert_allclose(e.embed(["x", "y", "z"]), HashEmbedder(dim=8).embed(["x", "y", "z"]), atol=1e-6)


def test_ollama_requests_go_to_api_embed_without_a_key(fake, own):
    own(OllamaEmbedder(base_url=fake.url, model="all-minilm", dim=8)).embed(["a", "b"])
    r = fake.requests[0]
    assert r["path"] == "/api/embed" and r["auth"] is None
    assert r["body"] == {"model": "all-minilm", "input": ["a", "b"], "truncate": True}


def test_configuration_comes_from_the_environment_through_the_settings(fake, monkeypatch, own):
    monkeypatch.setenv("MEMSTREAM_EMBED_URL", fake.url + "/v1")
    monkeypatch.setenv("MEMSTREAM_EMBED_MODEL", "env-model")
    monkeypatch.setenv("MEMSTREAM_EMBED_API_KEY", "sk-env")
    monkeypatch.setenv("MEMSTREAM_EMBED_DIM", "8")
    settings = Settings.load()
    e = own(configured_embedder(settings, "openai"))
    assert e.name == "openai:env-model" and e.dim == 8
    e.embed(["a"])
    assert fake.requests[0]["auth"] == "Bearer sk-env"
    assert describe_embedder(settings, "openai") == {
        "embedder": "openai",
        "url": fake.url + "/v1",
        "model": "env-model",
        "dim": 8,
    }


def test_a_model_named_in_the_spec_wins_over_the_model_setting(fake, own):
    settings = Settings(embed_url=fake.url, embed_model="setting-model", embed_dim=8)
    assert own(configured_embedder(settings, "ollama:spec-model")).name == "ollama:spec-model"
    assert own(configured_embedder(settings, "ollama")).name == "ollama:setting-model"
    assert describe_embedder(settings, "ollama:spec-model")["model"] == "spec-model"


def test_the_embedders_read_no_environment(fake, monkeypatch, own):
    monkeypatch.setenv("MEMSTREAM_EMBED_URL", "http://127.0.0.1:9/never")
    monkeypatch.setenv("MEMSTREAM_EMBED_MODEL", "env-model")
    monkeypatch.setenv("MEMSTREAM_EMBED_DIM", "not a number")
    e = own(get_embedder("ollama", base_url=fake.url))
    assert e.name == "ollama:nomic-embed-text" and e.url == fake.url + "/api/embed"


def test_unknown_dim_is_learnt_from_one_probe(fake, own):
    e = own(OllamaEmbedder(base_url=fake.url, model="m"))
    assert e.dim == 8
    assert len(fake.requests) == 1
    assert e.embed([]).shape == (0, 8) and len(fake.requests) == 1


def test_http_500_is_transient_and_says_so(remote, fake):
    fake.mode = "http500"
    with pytest.raises(EmbedderUnavailable, match="HTTP 500: fake failure 500; .*retry later"):
        remote.embed(["a"])


def test_http_429_is_transient(remote, fake):
    fake.mode = "http429"
    with pytest.raises(EmbedderUnavailable):
        remote.embed(["a"])


def test_a_rejected_key_is_permanent_and_points_at_the_key(remote, fake):
    fake.mode = "http401"
    with pytest.raises(EmbedderError, match="MEMSTREAM_EMBED_API_KEY") as err:
        remote.embed(["a"])
    assert not isinstance(err.value, EmbedderUnavailable)


def test_an_unknown_model_or_path_points_at_url_and_model(fake, own):
    fake.mode = "http404"
    with pytest.raises(EmbedderError, match="ollama pull"):
        own(OllamaEmbedder(base_url=fake.url, model="nope", dim=8)).embed(["a"])


def test_vectors_of_the_wrong_size_are_refused(remote, fake):
    fake.mode = "wrong_dim"
    with pytest.raises(EmbedderError, match="returned 16-d vectors but 8-d were expected") as err:
        remote.embed(["a"])
    assert not isinstance(err.value, EmbedderUnavailable)


def test_a_missing_vector_is_refused(remote, fake):
    fake.mode = "wrong_count"
    with pytest.raises(EmbedderError, match="returned 1 embeddings for 2 inputs"):
        remote.embed(["a", "b"])


def test_an_answer_that_is_not_json_is_refused(remote, fake):
    fake.mode = "not_json"
    with pytest.raises(EmbedderError, match="not JSON"):
        remote.embed(["a"])


def test_a_slow_server_times_out_as_transient(remote, fake):
    fake.mode = "slow"
    with pytest.raises(EmbedderUnavailable, match="did not answer within 0.5 s"):
        remote.embed(["a"])


def test_an_unreachable_server_is_transient_and_names_the_url(own):
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = own(OpenAIEmbedder(base_url=f"http://127.0.0.1:{port}/v1", model="m", dim=8, timeout=2))
    with pytest.raises(EmbedderUnavailable, match=f"cannot reach http://127.0.0.1:{port}/v1/embeddings"):
        e.embed(["a"])


def test_error_messages_never_carry_the_texts(remote, fake):
    for mode in ("http500", "wrong_dim", "wrong_count", "not_json"):
        fake.mode = mode
        with pytest.raises((EmbedderError, EmbedderUnavailable)) as err:
            remote.embed(["secret memory text", "another secret"])
        assert "secret" not in str(err.value)


def test_check_dim_against_a_remote_model(remote):
    with pytest.raises(EmbedderError, match="holds 384-d vectors but embedder '(openai|ollama):fake-embed' makes 8-d"):
        check_dim(remote, 384, "turns_v1")


def test_one_embedder_keeps_its_connection_alive_across_batches(fake, own):
    e = own(OpenAIEmbedder(base_url=fake.url + "/v1", model="m", dim=8, batch_size=2))
    e.embed([f"t{i}" for i in range(6)])
    e.embed(["again"])
    assert len(fake.requests) == 4
    assert len({r["port"] for r in fake.requests}) == 1  # one connection for every request
    e.close()
    e.embed(["after close"])  # a closed embedder opens a new connection
    assert fake.requests[-1]["port"] != fake.requests[0]["port"]


def test_a_redirect_is_not_followed_and_is_permanent(remote, fake):
    fake.mode = "redirect"
    with pytest.raises(EmbedderError, match="HTTP 307; set MEMSTREAM_EMBED_URL to the final URL") as err:
        remote.embed(["a"])
    assert not isinstance(err.value, EmbedderUnavailable)
    assert len(fake.requests) == 1  # nothing was sent to the Location


def test_a_server_that_hangs_up_without_answering_is_transient(remote, fake):
    fake.mode = "hangup"
    with pytest.raises(EmbedderUnavailable, match="connection to .* failed"):
        remote.embed(["a"])


def test_a_url_without_http_is_a_configuration_error(own):
    e = own(OllamaEmbedder(base_url="localhost:11434", model="m", dim=8))
    with pytest.raises(EmbedderError, match="not an http\\(s\\) URL.*MEMSTREAM_EMBED_URL") as err:
        e.embed(["a"])
    assert not isinstance(err.value, EmbedderUnavailable)


def test_the_api_key_is_never_logged_nor_in_an_error(fake, caplog, own):
    import logging

    key = "sk-never-log-this-key"
    e = own(OpenAIEmbedder(base_url=fake.url + "/v1", model="m", api_key=key, dim=8))
    with caplog.at_level(logging.DEBUG):  # every logger, httpx's and httpcore's too
        e.embed(["a"])
        for mode in ("http401", "http500", "redirect", "hangup"):
            fake.mode = mode
            with pytest.raises((EmbedderError, EmbedderUnavailable)) as err:
                e.embed(["a"])
            assert key not in str(err.value) and key not in repr(e)
    assert caplog.records  # the HTTP client did log its requests
    assert key not in caplog.text
    assert fake.requests[0]["auth"] == f"Bearer {key}"
