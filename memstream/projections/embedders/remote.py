"""Embedders behind HTTP: any OpenAI-compatible ``/embeddings`` and Ollama's ``/api/embed``.

One ``httpx.Client`` per embedder (its connections kept alive between batches; the
system's CA store, as ``ssl.create_default_context`` gives it): one POST per batch of at
most ``batch_size`` texts, ``timeout`` on connecting and on each read, redirects never
followed, no retries (a projection worker retries by redelivery). Errors are translated once,
here: ``EmbedderUnavailable`` (transient: unreachable, timeout, HTTP 408/429/5xx) or
``EmbedderError`` (permanent: bad key, unknown model or URL, rejected input, an answer of
the wrong shape or size). Messages name the URL and what to change, never the texts
nor the API key.

Configuration: the constructor's options (memstream passes ``MEMSTREAM_EMBED_URL`` /
``MEMSTREAM_EMBED_MODEL`` / ``MEMSTREAM_EMBED_API_KEY`` / ``MEMSTREAM_EMBED_DIM``), else the
class's defaults. When ``dim`` is not given and the model is not a known one, the first
access to ``dim`` embeds one probe text.
"""

from __future__ import annotations

import json
import ssl
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from memstream.projections.embedders.base import as_text_list, l2_normalize
from memstream.projections.embedders.port import EmbedderError, EmbedderUnavailable
from memstream.text import estimate_tokens

if TYPE_CHECKING:  # imported on first use: a process without a remote embedder never loads httpx (4 MB)
    import httpx

__all__ = ["KNOWN_DIMS", "OpenAIEmbedder", "OllamaEmbedder"]

_PROBE = "dimension probe"
KNOWN_DIMS = {  # the dimension of each remote model named by its provider (the factory reads it too)
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class _HttpEmbedder:
    kind = ""
    default_url = ""
    default_model: str | None = None
    default_batch = 64
    default_max_tokens = 512
    path = ""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = (base_url or self.default_url).rstrip("/")
        model = model or self.default_model
        if not model:
            raise EmbedderError(f"the {self.kind} embedder needs a model: pass model=... or set MEMSTREAM_EMBED_MODEL")
        self.model = model
        self._api_key = api_key
        self._dim: int | None = int(dim) if dim else KNOWN_DIMS.get(model)
        self.batch_size = int(batch_size or self.default_batch)
        self.max_tokens = int(max_tokens or self.default_max_tokens)
        self.timeout = float(timeout)
        if self.batch_size < 1 or self.timeout <= 0:
            raise ValueError("batch_size and timeout must be positive")
        self.name = f"{self.kind}:{model}"
        self.url = self.base_url + self.path
        self._probe_lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def _http(self) -> httpx.Client:
        """This embedder's client, made on first use (building its TLS context costs ms)."""
        if self._client is None:
            import httpx

            with self._client_lock:
                if self._client is None:
                    self._client = httpx.Client(
                        timeout=httpx.Timeout(self.timeout),
                        # never follow a redirect: it would drop the body or carry the API key elsewhere
                        follow_redirects=False,
                        verify=ssl.create_default_context(),
                    )
        return self._client

    def close(self) -> None:
        """Close the kept-alive connections (the next request opens new ones)."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, model={self.model!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        """Vector size: configured, known for the model, or learnt from one probe request."""
        if self._dim is None:
            with self._probe_lock:
                if self._dim is None:
                    self.embed([_PROBE])
        assert self._dim is not None
        return self._dim

    def count_tokens(self, text: str) -> int:
        """Estimated: the server's tokenizer is not at hand (``memstream.text.estimate_tokens``)."""
        return estimate_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 vectors, shape ``(len(texts), dim)``, in input order.

        One request per ``batch_size`` texts. Raises ``EmbedderUnavailable`` (retry later)
        or ``EmbedderError`` (fix the configuration); no partial result.
        """
        items = as_text_list(texts)
        parts = []
        for start in range(0, len(items), self.batch_size):
            chunk = items[start : start + self.batch_size]
            vectors = self._check(self._request(chunk), len(chunk))
            parts.append(vectors)
        if not parts:
            return np.empty((0, self.dim), dtype=np.float32)
        return l2_normalize(np.concatenate(parts)) if len(parts) > 1 else l2_normalize(parts[0])

    def _check(self, rows: Any, expected: int) -> np.ndarray:
        if not isinstance(rows, list) or len(rows) != expected:
            got = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise EmbedderError(f"{self.url} returned {got} embeddings for {expected} inputs; is it an embeddings endpoint?")
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderError(f"{self.url} returned embeddings that are not lists of numbers of one length") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbedderError(f"{self.url} returned embeddings that are not lists of numbers of one length")
        if not np.isfinite(vectors).all():
            raise EmbedderError(f"{self.url} returned embeddings with NaN or infinite values")
        got_dim = int(vectors.shape[1])
        if self._dim is None:
            self._dim = got_dim
        elif got_dim != self._dim:
            raise EmbedderError(
                f"{self.url} model {self.model!r} returned {got_dim}-d vectors but {self._dim}-d were expected; "
                "set dim (or MEMSTREAM_EMBED_DIM) to the model's size, and replay into a new projection "
                "version if the collection was built with another size"
            )
        return vectors

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _post(self, payload: dict[str, Any]) -> Any:
        import httpx

        body = json.dumps(payload).encode("utf-8")
        try:
            with self._http().stream("POST", self.url, content=body, headers=self._headers()) as response:
                if not response.is_success:
                    raise self._http_error(response.status_code, _error_detail(response))
                raw = response.read()
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise EmbedderError(f"{self.url} is not an http(s) URL ({exc}); set MEMSTREAM_EMBED_URL") from exc
        except httpx.ConnectTimeout as exc:
            raise EmbedderUnavailable(f"{self.url} did not answer within {self.timeout:g} s; retry later") from exc
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailable(
                f"{self.url} did not answer within {self.timeout:g} s; retry later, raise timeout or lower batch_size"
            ) from exc
        except httpx.ConnectError as exc:
            raise EmbedderUnavailable(
                f"cannot reach {self.url} ({exc}); start the embedding server or set MEMSTREAM_EMBED_URL"
            ) from exc
        except (httpx.TransportError, OSError) as exc:  # reset, closed mid-answer, bad status line
            raise EmbedderUnavailable(f"connection to {self.url} failed ({type(exc).__name__}: {exc}); retry later") from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise EmbedderError(f"{self.url} answered with something that is not JSON; is the URL an embeddings API?") from exc

    def _http_error(self, code: int, detail: str) -> EmbedderError | EmbedderUnavailable:
        where = f"{self.url} answered HTTP {code}{': ' + detail if detail else ''}"
        if code in (408, 429) or code >= 500:
            return EmbedderUnavailable(f"{where}; the server is overloaded or failing, retry later")
        if code in (401, 403):
            return EmbedderError(f"{where}; check the API key (api_key or MEMSTREAM_EMBED_API_KEY)")
        if code == 404:
            return EmbedderError(
                f"{where}; check the URL (MEMSTREAM_EMBED_URL) and the model name {self.model!r}{self._hint_404}"
            )
        if 300 <= code < 400:
            return EmbedderError(f"{where}; set MEMSTREAM_EMBED_URL to the final URL (redirects are not followed)")
        return EmbedderError(f"{where}; the input was rejected: lower batch_size or max_tokens, or check the model")

    _hint_404 = ""

    def _request(self, chunk: list[str]) -> Any:
        raise NotImplementedError


def _error_detail(response: httpx.Response, limit: int = 200) -> str:
    """The server's own error message, short, from ``{"error": ...}`` when there is one
    (the first 4 KiB of the body at most)."""
    raw = b""
    try:
        for part in response.iter_bytes():
            raw += part
            if len(raw) >= 4096:
                break
    except Exception:
        return ""
    raw = raw[:4096]
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            err = err.get("message", err)
        text = str(err)
    except ValueError:
        text = raw.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")


class OpenAIEmbedder(_HttpEmbedder):
    """Any OpenAI-compatible API: ``POST {base_url}/embeddings`` with ``model`` and ``input``.

    Works with OpenAI, vLLM, llama.cpp's server, LiteLLM, TEI's OpenAI route and the like.
    ``base_url`` includes the version prefix (``https://api.openai.com/v1``).
    """

    kind = "openai"
    default_url = "https://api.openai.com/v1"
    default_model = "text-embedding-3-small"
    default_batch = 128
    default_max_tokens = 8191
    path = "/embeddings"

    def _request(self, chunk: list[str]) -> Any:
        data = self._post({"model": self.model, "input": chunk})
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise EmbedderError(f"{self.url} answered without a 'data' list; is it an OpenAI-compatible embeddings API?")
        try:
            if all(isinstance(it, dict) and "index" in it for it in items):
                items = sorted(items, key=lambda it: int(it["index"]))
            return [it["embedding"] for it in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(f"{self.url} answered with items lacking 'embedding'; is it an embeddings API?") from exc


class OllamaEmbedder(_HttpEmbedder):
    """Ollama: ``POST {base_url}/api/embed`` with ``model`` and ``input`` -> ``embeddings``.

    The server truncates inputs past the model's context (``truncate: true``).
    """

    kind = "ollama"
    default_url = "http://127.0.0.1:11434"
    default_model = "nomic-embed-text"
    default_batch = 32
    default_max_tokens = 2048
    path = "/api/embed"
    _hint_404 = " (pull it first: `ollama pull MODEL`)"

    def _request(self, chunk: list[str]) -> Any:
        data = self._post({"model": self.model, "input": chunk, "truncate": True})
        rows = data.get("embeddings") if isinstance(data, dict) else None
        if rows is None:
            raise EmbedderError(f"{self.url} answered without 'embeddings'; is it Ollama 0.3.4 or newer (/api/embed)?")
        return rows
