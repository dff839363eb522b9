"""Configuration: environment variables over an optional JSON file over defaults.

Guarantee: ``Settings.load()`` never touches the network and never raises on a
missing or unreadable file (it reports the problem in ``Settings.problems``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "OPTIONS", "config_file_for"]

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


def _coerce(value: object, default: object) -> object:
    if isinstance(default, bool):
        return str(value).strip().lower() not in ("0", "false", "no", "off", "")
    if isinstance(default, int):
        return int(value)  # type: ignore[arg-type]
    if isinstance(default, float):
        return float(value)  # type: ignore[arg-type]
    return str(value)


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
                problems.append(f"{path}: ignored ({exc})")
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
            except (TypeError, ValueError):
                problems.append(f"{env}={values[attr]!r} is not a valid {type(default).__name__}; using {default!r}")
        home = Path(str(kwargs.pop("home", "~/.memstream"))).expanduser()
        settings = cls(home=home, problems=tuple(problems), **kwargs)  # type: ignore[arg-type]
        return settings.validated()

    def validated(self) -> "Settings":
        problems = list(self.problems)
        if self.shards < 1:
            problems.append(f"shards must be >= 1 (got {self.shards}); using 1")
            object.__setattr__(self, "shards", 1)
        for name, floor in (("prefetch_budget_ms", 0), ("prefetch_tokens", 50), ("tool_timeout", 0.1)):
            if getattr(self, name) < floor:
                default = next(d for a, _, d, _ in OPTIONS if a == name)
                problems.append(f"{name} must be >= {floor} (got {getattr(self, name)}); using {default}")
                object.__setattr__(self, name, default)
        if not self.tenant:
            problems.append("tenant is empty; using 'default'")
            object.__setattr__(self, "tenant", "default")
        if self.fsync_interval is None and self.spool_fsync not in ("never", "always"):
            problems.append(f"spool_fsync={self.spool_fsync!r} is not never|always|SECONDS; using 1.0")
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
        return seconds if seconds > 0 else None

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
        """Settings as JSON-ready values, the Redis URL's password masked."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name == "problems":
                continue
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Path) else value
        out["redis_url"] = _mask(self.redis_url)
        return out


def _mask(url: str) -> str:
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
