"""The versions of each projection: which exist, which one readers use, and how each was built.

``P:projections:{name}`` (``core.keys.catalog``) holds one JSON ``Version`` per version
(field ``v{N}``) and the ``active`` version. It is the one home of both facts: readers
resolve the active version here (and with it the collection and the embedder to query
with); the workers run a consumer for every version that is not dropped; ``memstream
replay`` adds a building version, and the service activates it once it has caught up.

States: ``building`` (a replay: its group reads the log from the start, below the live
versions in priority), ``active`` (what readers use; exactly one per projection once
any exists), ``retired`` (an older or never activated version, still fed, so activating
it again is instant), ``failed`` (its embedder could not be loaded here: ``error`` says
which), ``dropping`` (asked to go: the service that owns the store removes its data, then
its record).

Guarantees: every change is one optimistic transaction (WATCH on the hash), so two
commands (a replay and a cancel, an activation and a drop) never interleave; the active
version is never dropped nor cancelled; a projection has at most one building version.
Everything read here comes from the shared Redis: a record that does not decode is
reported as ``failed`` with the decoding error, never trusted.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

import msgspec
import redis

from memstream.core import PermanentError, as_str, keys

__all__ = ["Catalog", "CatalogError", "Version", "STATES"]

State = Literal["building", "active", "retired", "failed", "dropping"]
STATES: tuple[str, ...] = ("building", "active", "retired", "failed", "dropping")


class CatalogError(PermanentError, ValueError):
    """A change to the versions that is refused (the message says why)."""


class Version(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    version: int
    state: State
    embedder: str = ""  # the embedder spec it was built with ("" for a projection without vectors)
    model: str = ""  # the embedder's model name (what the vectors are)
    dim: int = 0
    options: dict[str, Any] = {}
    activate: Literal["auto", "manual"] = "auto"
    created_at: float = 0.0
    caught_up_at: float = 0.0  # when its lag first reached 0
    activated_at: float = 0.0
    archive_done: bool = True  # a replay reads the archive first: False until it has
    archive_position: str = ""  # the last archived entry it applied
    archive_applied: int = 0
    error: str = ""

    @property
    def group(self) -> str:
        return f"{self.name}.v{self.version}"


_decoder = msgspec.json.Decoder(Version)
_encoder = msgspec.json.Encoder()


class Catalog:
    """The versions of every projection, under ``prefix`` on ``client``."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    # -- reads --------------------------------------------------------------------------
    def versions(self, name: str) -> list[Version]:
        """Every version of ``name``, oldest first (``active`` marks the one readers use)."""
        return self._parse(name, self.client.hgetall(keys.catalog(self.prefix, name)))

    def get(self, name: str, version: int) -> Version | None:
        for v in self.versions(name):
            if v.version == version:
                return v
        return None

    def active(self, name: str) -> Version | None:
        """The version readers use (None before any exists)."""
        for v in self.versions(name):
            if v.state == "active":
                return v
        return None

    def names(self) -> list[str]:
        """Every projection with a catalog."""
        found = [as_str(k).rsplit(":", 1)[-1] for k in self.client.scan_iter(match=keys.catalog_pattern(self.prefix))]
        return sorted(found)

    def _parse(self, name: str, raw: dict[Any, Any]) -> list[Version]:
        active = raw.get(b"active", raw.get("active"))
        active_n = int(as_str(active)) if active is not None and as_str(active).isdigit() else None
        out: list[Version] = []
        for field, value in raw.items():
            f = as_str(field)
            if not (f.startswith("v") and f[1:].isdigit()):
                continue
            n = int(f[1:])
            try:
                v = _decoder.decode(value if isinstance(value, bytes) else str(value).encode())
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                v = Version(name=name, version=n, state="failed", error=f"unreadable record: {exc}")
            if v.name != name or v.version != n:
                v = Version(name=name, version=n, state="failed", error="record names another version")
            # the pointer decides which one is active; a record's own word never does
            if v.state == "active" and n != active_n:
                v = msgspec.structs.replace(v, state="retired")
            elif n == active_n and v.state != "dropping":
                v = msgspec.structs.replace(v, state="active")
            out.append(v)
        return sorted(out, key=lambda v: v.version)

    # -- changes ------------------------------------------------------------------------
    def _change(self, name: str, fn: Callable[[list[Version]], dict[str, Any]]) -> Any:
        """Run ``fn(versions) -> {"set": {field: value}, "delete": [fields], "result": x}``
        in one WATCH transaction, retried while another change interleaves."""
        key = keys.catalog(self.prefix, name)
        with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    change = fn(self._parse(name, pipe.hgetall(key)))
                    pipe.multi()
                    if change.get("set"):
                        pipe.hset(key, mapping=change["set"])
                    if change.get("delete"):
                        pipe.hdel(key, *change["delete"])
                    pipe.execute()
                    return change.get("result")
                except redis.WatchError:
                    continue

    @staticmethod
    def _field(v: Version) -> dict[str, bytes]:
        return {f"v{v.version}": _encoder.encode(v)}

    def ensure(
        self,
        name: str,
        version: int,
        *,
        embedder: str = "",
        model: str = "",
        dim: int = 0,
        options: dict[str, Any] | None = None,
        build: bool = False,
    ) -> Version:
        """The active version of ``name``; when the projection has none yet, ``version`` is
        recorded as active (a first start, or a log kept from before versions were
        recorded), or with ``build`` as building (a projection new to a log that has a
        history: it is activated once it has caught up)."""

        def fn(versions: list[Version]) -> dict[str, Any]:
            for v in versions:
                if v.state in ("active", "building"):
                    return {"result": v}
            if build and not versions:
                v = Version(
                    name=name,
                    version=version,
                    state="building",
                    embedder=embedder,
                    model=model,
                    dim=dim,
                    options=dict(options or {}),
                    created_at=time.time(),
                )
                return {"set": self._field(v), "result": v}
            known = next((v for v in versions if v.version == version), None)
            v = known or Version(
                name=name,
                version=version,
                state="active",
                embedder=embedder,
                model=model,
                dim=dim,
                options=dict(options or {}),
                created_at=time.time(),
            )
            v = msgspec.structs.replace(v, state="active", activated_at=v.activated_at or time.time())
            return {"set": {**self._field(v), "active": str(version)}, "result": v}

        result: Version = self._change(name, fn)
        return result

    def add_build(
        self,
        name: str,
        *,
        embedder: str = "",
        model: str = "",
        dim: int = 0,
        options: dict[str, Any] | None = None,
        activate: str = "auto",
        archive: bool = False,
        start: int | None = None,
    ) -> Version:
        """A new building version N+1 of ``name`` (N: the highest version known).
        Refused while ``name`` has a building version: the message names it."""
        if activate not in ("auto", "manual"):
            raise CatalogError(f"activate must be auto or manual, not {activate!r}")

        def fn(versions: list[Version]) -> dict[str, Any]:
            running = [v for v in versions if v.state == "building"]
            if running:
                raise CatalogError(
                    f"{name} is already building version {running[0].version} "
                    f"(group {running[0].group}): wait for it or cancel it with "
                    f"`memstream replay --cancel {name}`"
                )
            n = max([v.version for v in versions] + [start or 0]) + 1
            v = Version(
                name=name,
                version=n,
                state="building",
                embedder=embedder,
                model=model,
                dim=dim,
                options=dict(options or {}),
                activate=activate,  # type: ignore[arg-type]  # checked above
                created_at=time.time(),
                archive_done=not archive,
            )
            return {"set": self._field(v), "result": v}

        result: Version = self._change(name, fn)
        return result

    def update(self, name: str, version: int, **fields: Any) -> Version | None:
        """Set ``fields`` of one version's record (not its state's meaning: use the methods
        below for that); None when the version is gone."""

        def fn(versions: list[Version]) -> dict[str, Any]:
            v = next((x for x in versions if x.version == version), None)
            if v is None:
                return {"result": None}
            v = msgspec.structs.replace(v, **fields)
            return {"set": self._field(v), "result": v}

        result: Version | None = self._change(name, fn)
        return result

    def activate(self, name: str, version: int) -> Version:
        """Make ``version`` the one readers use; the formerly active one is retired."""

        def fn(versions: list[Version]) -> dict[str, Any]:
            target = next((v for v in versions if v.version == version), None)
            if target is None:
                raise CatalogError(
                    f"{name} has no version {version} (known: {', '.join(str(v.version) for v in versions) or 'none'})"
                )
            if target.state in ("dropping", "failed"):
                raise CatalogError(
                    f"{name} version {version} is {target.state}"
                    + (f": {target.error}" if target.error else "")
                    + "; it cannot be activated"
                )
            changed: dict[str, bytes | str] = {}
            for v in versions:
                if v.state == "active" and v.version != version:
                    changed.update(self._field(msgspec.structs.replace(v, state="retired")))
            new = msgspec.structs.replace(
                target, state="active", activated_at=time.time(), caught_up_at=target.caught_up_at or time.time()
            )
            changed.update(self._field(new))
            changed["active"] = str(version)
            return {"set": changed, "result": new}

        result: Version = self._change(name, fn)
        return result

    def drop(self, name: str, version: int, *, cancel: bool = False) -> Version:
        """Ask for ``version`` to go (``dropping``): refused for the active version, and with
        ``cancel`` for anything but a building one. The service removes its data."""

        def fn(versions: list[Version]) -> dict[str, Any]:
            target = next((v for v in versions if v.version == version), None)
            if target is None:
                raise CatalogError(f"{name} has no version {version}")
            if target.state == "active":
                raise CatalogError(f"{name} version {version} is active: activate another version first")
            if cancel and target.state != "building":
                raise CatalogError(f"{name} version {version} is {target.state}, not building")
            new = msgspec.structs.replace(target, state="dropping")
            return {"set": self._field(new), "result": new}

        result: Version = self._change(name, fn)
        return result

    def fail(self, name: str, version: int, error: str) -> None:
        """Record that ``version`` cannot run here (its embedder is missing, ...)."""
        self.update(name, version, state="failed", error=error[:500])

    def forget(self, name: str, version: int) -> None:
        """Remove a dropped version's record (its data is gone)."""
        self.client.hdel(keys.catalog(self.prefix, name), f"v{version}")
