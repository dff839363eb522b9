"""Configuration: environment variables over an optional JSON file over defaults.

Guarantees: ``Settings.load()`` never touches the network and never raises, whatever the
file and the environment hold: a missing or unreadable file, a value of the wrong type,
a number out of its bounds (or not finite) is reported in ``Settings.problems`` and the
default is used. A malformed ``redis_url`` or ``qdrant_url`` is reported there too and
kept as given (falling back to the embedded service would silently split the log);
connecting to it fails with a clear error. ``Settings.public()`` and every problem
message show URLs through ``mask_url``: no password or query-string token is shown.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "OPTIONS", "config_file_for", "mask_url"]

# (attribute, environment variable, default, meaning): the README's configuration table.
OPTIONS: list[tuple[str, str, object, str]] = [
    ("redis_url", "MEMSTREAM_REDIS_URL", "", "Redis/Valkey URL of a shared server. Empty: the embedded Valkey of `memstream up`."),
    ("tenant", "MEMSTREAM_TENANT", "default", "Tenant every event of this installation belongs to."),
    ("home", "MEMSTREAM_HOME", "~/.memstream", "Data directory: spool, embedded Valkey data, run file."),
    ("app", "MEMSTREAM_APP", "hermes", "Application name recorded in every event's scope."),
    ("stream_prefix", "MEMSTREAM_STREAM_PREFIX", "memstream", "Prefix of every Redis key memstream uses."),
    ("shards", "MEMSTREAM_SHARDS", 1, "Number of event streams; an agent's events always go to the same one. Fixed for the life of a log."),
    ("spool_max_bytes", "MEMSTREAM_SPOOL_MAX_BYTES", 1 << 30, "Bound on the local spool's unshipped bytes; past it appends are refused and counted."),
    ("spool_fsync", "MEMSTREAM_SPOOL_FSYNC", "1.0", "Power-loss durability of the spool: `never`, `always` (fsync in the hook: slow), or seconds between fsyncs by the shipper thread."),
    ("max_text_bytes", "MEMSTREAM_MAX_TEXT_BYTES", 256 * 1024, "Text fields longer than this (UTF-8 bytes) are clipped, counted and flagged in the event."),
    ("ship_batch", "MEMSTREAM_SHIP_BATCH", 500, "Events per shipped batch (one atomic script call)."),
    ("shutdown_timeout", "MEMSTREAM_SHUTDOWN_TIMEOUT", 2.0, "Seconds `shutdown()` spends shipping; the rest stays in the spool for the next start."),
    ("qdrant_url", "MEMSTREAM_QDRANT_URL", "", "Qdrant server for the projections. Empty: the embedded store (qdrant-edge) owned by `memstream up`."),
    ("embedder", "MEMSTREAM_EMBEDDER", "onnx-minilm", "Embedder of the projections: `onnx-minilm` (offline), `hash` (tests), `openai[:MODEL]`, `ollama[:MODEL]` (see MEMSTREAM_EMBED_URL/_MODEL/_API_KEY)."),
    ("autostart", "MEMSTREAM_AUTOSTART", True, "Start the embedded service (`memstream up --detach`) when none is running and no Redis URL is set."),
    ("prefetch_budget_ms", "MEMSTREAM_PREFETCH_BUDGET_MS", 150, "How long `prefetch()` may take: it waits for the fresh recall of the turn's message until 2 ms before this budget ends (the thread's wake-up latency), then returns the freshest block already computed (or nothing)."),
    ("prefetch_tokens", "MEMSTREAM_PREFETCH_TOKENS", 400, "Token budget of the injected `<memory-context>` block (estimated at 4 characters a token)."),
    ("tool_timeout", "MEMSTREAM_TOOL_TIMEOUT", 5.0, "Seconds a memstream tool call waits for the service's answer before it returns an error."),
]


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")

# attribute -> (lowest, highest) accepted; outside it the default is used and a problem recorded
_BOUNDS: dict[str, tuple[float, float]] = {
    "shards": (1, 1024),
    "spool_max_bytes": (0, 1 << 50),
    "max_text_bytes": (64, 1 << 30),  # room for the clip mark
    "ship_batch": (1, 100_000),
    "shutdown_timeout": (0.0, 3600.0),
    "prefetch_budget_ms": (0, 60_000),
    "prefetch_tokens": (50, 1_000_000),
    "tool_timeout": (0.1, 3600.0),
}
_NAME_MAX = 256  # tenant, app, stream prefix: characters


def _coerce(value: object, default: object) -> object:
    if isinstance(default, bool):
        word = str(value).strip().lower()
        if word not in _TRUE + _FALSE:
            raise ValueError(f"not one of {'/'.join(_TRUE + _FALSE[:-1])}")
        return word in _TRUE
    if isinstance(default, int):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("not an integer")
        return int(value)  # type: ignore[arg-type]
    if isinstance(default, float):
        number = float(value)  # type: ignore[arg-type]
        if not math.isfinite(number):
            raise ValueError("not finite")
        return number
    return str(value)


def _brief(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (an env value may be megabytes)."""
    return _clip(repr(value), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_SECRET_NAME = re.compile(r"pass|pwd|token|secret|key|auth|cred|sig", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: the password of ``user:password@``
    (the whole user part when it has no password) and the value of every query parameter
    whose name looks secret (password, token, api_key, auth, ...). Works on malformed URLs
    too: everything before the last ``@`` after the scheme is taken as credentials."""
    from urllib.parse import unquote

    if not url:
        return url
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    at = url.rfind("@")
    if at >= start:
        user, colon, _ = url[start:at].partition(":")
        url = url[:start] + (f"{user}:***" if colon else "***") + url[at:]
    query_at = url.find("?", start)
    if query_at < 0:
        return url
    head, rest = url[: query_at + 1], url[query_at + 1:]
    query, hash_, fragment = rest.partition("#")
    params = []
    for param in re.split(r"([&;])", query):
        name, eq, value = param.partition("=")
        if eq and value and _SECRET_NAME.search(unquote(name)):
            value = "***"
        params.append(name + eq + value)
    return head + "".join(params) + hash_ + ("***" if fragment else "")


def _url_problem(attr: str, env: str, url: str) -> str | None:
    """Why ``url`` cannot be the ``attr`` setting, or None if it can (no network)."""
    from urllib.parse import urlsplit

    if not url:
        return None
    if attr == "redis_url":
        expected = "redis://[[user]:password@]host[:port][/db], rediss://... or unix:///path"
        schemes = ("redis", "rediss", "unix")
    else:
        expected = "http(s)://host[:port]"
        schemes = ("http", "https")
    why = None
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        why = "contains whitespace or control characters"
    else:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
        except ValueError:
            parts, why = None, "is not a URL with a valid host and port"
        if parts is not None:
            if parts.scheme.lower() not in schemes:
                why = "has no supported scheme"
            elif parts.scheme.lower() == "unix":
                why = None if parts.path else "names no socket path"
            elif not parts.hostname:
                why = "names no host"
            elif attr == "redis_url":
                from redis.connection import parse_url

                try:
                    parse_url(url)
                except ValueError:
                    why = "has an invalid query parameter"
    if why is None:
        return None
    return f"{env}={_brief(mask_url(url))} {why}; expected {expected}"


def config_file_for(hermes_home: str | os.PathLike | None) -> Path | None:
    """Where ``save_config`` keeps non-secret settings inside a Hermes home."""
    if not hermes_home:
        return None
    return Path(hermes_home) / "memstream.json"


@dataclass(frozen=True)
class Settings:
    redis_url: str = ""
    tenant: str = "default"
    home: Path = Path("~/.memstream")
    app: str = "hermes"
    stream_prefix: str = "memstream"
    shards: int = 1
    spool_max_bytes: int = 1 << 30
    spool_fsync: str = "1.0"
    max_text_bytes: int = 256 * 1024
    ship_batch: int = 500
    shutdown_timeout: float = 2.0
    qdrant_url: str = ""
    embedder: str = "onnx-minilm"
    autostart: bool = True
    prefetch_budget_ms: int = 150
    prefetch_tokens: int = 400
    tool_timeout: float = 5.0
    problems: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def load(cls, hermes_home: str | os.PathLike | None = None, **overrides: object) -> "Settings":
        """Defaults < ``$HERMES_HOME/memstream.json`` < environment < ``overrides``."""
        values: dict[str, object] = {}
        problems: list[str] = []
        path = config_file_for(hermes_home or os.environ.get("HERMES_HOME"))
        if path is not None and path.exists():
            try:
                loaded = json.loads(path.read_text())
                if not isinstance(loaded, dict):
                    raise ValueError("not a JSON object")
                values.update(loaded)
            except (OSError, ValueError) as exc:
                problems.append(f"{path}: ignored ({type(exc).__name__}: {_clip(str(exc), 200)})")
        for attr, env, default, _ in OPTIONS:
            if env in os.environ:
                values[attr] = os.environ[env]
        values.update({k: v for k, v in overrides.items() if v is not None})
        kwargs: dict[str, object] = {}
        for attr, env, default, _ in OPTIONS:
            if attr not in values:
                continue
            try:
                kwargs[attr] = _coerce(values[attr], default)
            except (TypeError, ValueError, OverflowError) as exc:
                shown = mask_url(str(values[attr])) if attr.endswith("_url") else values[attr]
                problems.append(f"{env}={_brief(shown)} is not a valid {type(default).__name__} "
                                f"({_clip(str(exc), 60)}); using {default!r}")
        home_text = str(kwargs.pop("home", "~/.memstream"))
        try:
            home = Path(home_text).expanduser()
        except RuntimeError:  # ~user of no known user, or no home directory at all
            problems.append(f"MEMSTREAM_HOME={_brief(home_text)}: cannot expand '~'; using it as given")
            home = Path(home_text)
        settings = cls(home=home, problems=tuple(problems), **kwargs)  # type: ignore[arg-type]
        return settings.validated()

    def validated(self) -> "Settings":
        """Out-of-bounds values replaced by their defaults, each replacement a problem."""
        problems = list(self.problems)
        for name, (low, high) in _BOUNDS.items():
            value = getattr(self, name)
            if not low <= value <= high:  # False for nan too
                default = next(d for a, _, d, _ in OPTIONS if a == name)
                problems.append(f"{name} must be between {low} and {high} (got {_brief(value)}); using {default}")
                object.__setattr__(self, name, default)
        for name, default in (("tenant", "default"), ("app", "hermes"), ("stream_prefix", "memstream")):
            value = getattr(self, name)
            if not value.strip() or len(value) > _NAME_MAX or not value.isprintable():
                problems.append(f"{name} must be 1 to {_NAME_MAX} printable characters "
                                f"(got {_brief(value)}); using {default!r}")
                object.__setattr__(self, name, default)
        for attr, env, _, _ in OPTIONS:
            if attr.endswith("_url"):
                problem = _url_problem(attr, env, getattr(self, attr))
                if problem:
                    problems.append(problem)
        if self.fsync_interval is None and self.spool_fsync not in ("never", "always"):
            problems.append(f"spool_fsync={_brief(self.spool_fsync)} is not never|always|SECONDS; using 1.0")
            object.__setattr__(self, "spool_fsync", "1.0")
        object.__setattr__(self, "problems", tuple(problems))
        return self

    @property
    def fsync_interval(self) -> float | None:
        """Seconds between background fsyncs, or None for never/always."""
        try:
            seconds = float(self.spool_fsync)
        except ValueError:
            return None
        return seconds if 0 < seconds < math.inf else None

    @property
    def spool_dir(self) -> Path:
        return self.home / "spool"

    @property
    def run_file(self) -> Path:
        return self.home / "run" / "service.json"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def public(self) -> dict[str, object]:
        """Settings as JSON-ready values, safe to show: every URL through ``mask_url``, the
        value of any setting named like a secret (key, token, password, ...) as ``***``."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name == "problems":
                continue
            value = getattr(self, f.name)
            if f.name.endswith("_url"):
                value = mask_url(str(value))
            elif _SECRET_NAME.search(f.name) and value:
                value = "***"
            out[f.name] = str(value) if isinstance(value, Path) else value
        return out
