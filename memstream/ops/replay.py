"""``memstream replay`` and ``memstream projections``: rebuild a projection from the log as a
new version beside the live one, watch it build, switch readers, roll back, drop.

The command only writes the catalog (``projections.catalog``); the process that owns the
projection's store (``memstream up``, or any ``memstream worker`` with a Qdrant server)
builds the version as a consumer group of its own, below the live versions in priority,
and activates it once it has caught up (``--activate manual``: when you say). Progress is
read from the server (the group's lag), so it is right whoever watches and whatever
crashed meanwhile.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import redis

from memstream.core import Settings, keys
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import EventLog

__all__ = [
    "activate_version",
    "cancel_replay",
    "drop_version",
    "projection_versions",
    "replay_status",
    "start_replay",
    "wait_replay",
]


def _row(settings: Settings, name: str) -> Any:
    from memstream.projections import registered

    try:
        return registered(name, settings.projections)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from exc


def _embedder_spec(settings: Settings, row: Any, spec: str | None) -> dict[str, Any]:
    """What a new version of ``row`` is built with: the embedder ``spec`` (default: the
    active version's, else the configured one), checked here before anything is written."""
    from memstream.projections import configured_embedder, how_to_load

    if not row.vectors:
        if spec:
            raise CommandError(f"{row.name} has no vectors: --embedder does not apply to it")
        return {}
    if not spec:
        return {}  # filled by the caller from the active version
    try:
        embedder = configured_embedder(settings, spec)
    except Exception as exc:
        raise CommandError(f"embedder {spec!r} cannot be loaded ({type(exc).__name__}: {exc}); {how_to_load(spec)}") from exc
    return {"embedder": spec, "model": embedder.name, "dim": embedder.dim}


def start_replay(
    settings: Settings,
    names: list[str],
    *,
    embedder: str | None = None,
    activate: str = "auto",
    options: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Add a building version N+1 of each projection in ``names``; their records. Refused
    (``CommandError``, nothing added) for an unknown projection, an embedder that cannot be
    loaded, or a projection that is building already (the message names the build)."""
    from memstream.projections import Catalog, CatalogError

    if not names:
        raise CommandError("name at least one projection to replay")
    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    planned = []
    for name in dict.fromkeys(names):
        row = _row(settings, name)
        built = _embedder_spec(settings, row, embedder)
        active = catalog.active(name)
        if row.vectors and not built:
            if active is not None and active.embedder:
                built = {"embedder": active.embedder, "model": active.model, "dim": active.dim}
            else:
                built = _embedder_spec(settings, row, settings.embedder)
        chosen = {**row.new_options, **(options or {})}  # what every new version records, then the caller's
        if chosen:
            validate = getattr(row.cls, "validate_options", None)
            if validate is None:
                raise CommandError(f"{name} takes no options")
            try:
                validate(chosen)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        running = [v for v in catalog.versions(name) if v.state == "building"]
        if running:
            raise CommandError(
                f"{name} is already building version {running[0].version} (group "
                f"{running[0].group}): `memstream replay --status` shows it, "
                f"`memstream replay --cancel {name}` stops it"
            )
        planned.append((row, built, active, chosen))
    out = []
    archived = _archive(settings) is not None  # a replay reads it first
    for row, built, active, chosen in planned:
        try:
            v = catalog.add_build(
                row.name,
                activate=activate,
                options=chosen,
                archive=archived,
                start=active.version if active is not None else row.version,
                **built,
            )
        except CatalogError as exc:
            raise CommandError(str(exc)) from exc
        out.append(_record(v))
    return out


def _archive(settings: Settings) -> Any | None:
    """The log's archive, when it has one (a replay reads it first)."""
    from memstream.producers import Archive, ArchiveError

    try:
        return Archive.holding(settings.archive_path)
    except ArchiveError as exc:
        raise CommandError(f"the archive is unreadable, so a replay could not read the whole log: {exc}") from exc


def _record(v: Any) -> dict[str, Any]:
    import msgspec

    return {"group": v.group, **msgspec.to_builtins(msgspec.structs.asdict(v))}


def _progress(eventlog: EventLog, v: Any, archived_total: int) -> dict[str, Any]:
    from memstream.workers import build_progress, group_progress

    p = group_progress(eventlog.client, eventlog.stream_keys, v.group)
    done, total = build_progress(p, archived_total=archived_total, archive_done=v.archive_done, archive_applied=v.archive_applied)
    return {
        "group": v.group,
        "state": v.state,
        "done": done,
        "total": total,
        "lag": p.lag,
        "pending": p.pending,
        "position": p.position,
        "archive_done": v.archive_done,
        "archive_applied": v.archive_applied,
    }


def _archived_total(settings: Settings) -> int:
    archive = _archive(settings)
    return 0 if archive is None else archive.count()


def replay_status(settings: Settings, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Each building version (of ``names``, or of every projection): done of total, lag,
    pending, position. A version that finished since shows its new state."""
    from memstream.projections import Catalog, all_registered

    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    archived = _archived_total(settings)
    out = []
    for row in all_registered(settings.projections):
        if names and row.name not in names:
            continue
        versions = catalog.versions(row.name)
        newest = max((v.version for v in versions), default=0)
        for v in versions:
            if v.state == "building" or (names and v.version == newest):
                out.append({"projection": row.name, "version": v.version, **_progress(eventlog, v, archived)})
    return out


def wait_replay(
    settings: Settings,
    groups: list[str],
    report: Callable[[list[dict[str, Any]]], None],
    every: float = 0.5,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Report the progress of the versions ``groups`` every ``every`` seconds until none is
    building any more (or ``timeout``); their last progress. Ctrl-C (KeyboardInterrupt)
    leaves the builds running."""
    deadline = None if timeout is None else time.monotonic() + timeout
    names = sorted({g.rsplit(".v", 1)[0] for g in groups})
    while True:
        rows = [r for r in replay_status(settings, names) if r["group"] in groups]
        report(rows)
        if not rows or all(r["state"] != "building" for r in rows):
            return rows
        if deadline is not None and time.monotonic() >= deadline:
            return rows
        time.sleep(every)


def cancel_replay(settings: Settings, name: str) -> dict[str, Any]:
    """Stop ``name``'s build and drop its version (the service removes its data)."""
    from memstream.projections import Catalog, CatalogError

    _row(settings, name)
    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    building = [v for v in catalog.versions(name) if v.state == "building"]
    if not building:
        raise CommandError(f"{name} is not building any version")
    try:
        v = catalog.drop(name, building[0].version, cancel=True)
    except CatalogError as exc:
        raise CommandError(str(exc)) from exc
    return {**_record(v), **_dropped(catalog, name, v.version)}


def _dropped(catalog: Any, name: str, version: int, wait: float = 5.0) -> dict[str, Any]:
    """Wait a little for the service to remove the version's data."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if catalog.get(name, version) is None:
            return {"removed": True}
        time.sleep(0.1)
    return {"removed": False, "note": "the service removes its data when it runs (`memstream up` or a worker)"}


def projection_versions(settings: Settings) -> list[dict[str, Any]]:
    """Every version of every projection: state, embedder and dimension, items, lag,
    pending, position, when it was created and activated, options, error."""
    from memstream.projections import Catalog, Counters, FactsTable, all_registered, group_of
    from memstream.query import CountRequest, QueryTimeout, ask

    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    try:
        stored = ask(eventlog.client, eventlog.prefix, CountRequest(), timeout=1.0).get("items") or {}
    except (QueryTimeout, redis.RedisError, ValueError):
        stored = {}
    archived = _archived_total(settings)
    out = []
    for row in all_registered(settings.projections):
        versions = catalog.versions(row.name)
        if not versions:
            out.append(
                {
                    "projection": row.name,
                    "version": row.version,
                    "group": group_of(row.name),
                    "state": "not started",
                    "items": None,
                }
            )
            continue
        for v in versions:
            p = _progress(eventlog, v, archived)
            if row.name == "facts":
                items: int | None = FactsTable(eventlog.client, eventlog.prefix, version=v.version).count()
            elif row.vectors:
                items = stored.get(v.group)
            else:
                counters = Counters(eventlog.client, eventlog.prefix, v.group).get()
                items = counters.get("turns", counters.get("applied"))
            out.append(
                {
                    "projection": row.name,
                    "version": v.version,
                    "group": v.group,
                    "state": v.state,
                    "embedder": v.embedder,
                    "model": v.model,
                    "dim": v.dim,
                    "items": items,
                    "lag": p["lag"],
                    "pending": p["pending"],
                    "position": p["position"],
                    "done": p["done"],
                    "total": p["total"],
                    "created_at": v.created_at or None,
                    "activated_at": v.activated_at or None,
                    "caught_up_at": v.caught_up_at or None,
                    "activate": v.activate,
                    "options": v.options,
                    "error": v.error,
                }
            )
    return out


def activate_version(settings: Settings, name: str, version: int) -> dict[str, Any]:
    """Switch readers of ``name`` to ``version`` (a rollback is the activation of an older
    one). Refused for a build that has not caught up: it would answer from half a log."""
    from memstream.projections import Catalog, CatalogError
    from memstream.workers import caught_up

    row = _row(settings, name)
    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    v = catalog.get(name, version)
    if v is None:
        known = ", ".join(str(x.version) for x in catalog.versions(name)) or "none"
        raise CommandError(f"{name} has no version {version} (known: {known})")
    backlog = keys.embed_backlog(eventlog.prefix, v.group) if row.vectors else None
    if v.state == "building" and not (v.archive_done and caught_up(eventlog.client, eventlog.stream_keys, v.group, backlog)):
        p = _progress(eventlog, v, _archived_total(settings))
        raise CommandError(
            f"{name} version {version} is still building ({p['done']} of {p['total']} events): "
            "it is activated when it has caught up, or activate it then"
        )
    try:
        return _record(catalog.activate(name, version))
    except CatalogError as exc:
        raise CommandError(str(exc)) from exc


def drop_version(settings: Settings, name: str, version: int) -> dict[str, Any]:
    """Drop a version that is not active: the service removes its collection, keys and group."""
    from memstream.projections import Catalog, CatalogError

    _row(settings, name)
    eventlog = connect(settings)
    catalog = Catalog(eventlog.client, eventlog.prefix)
    try:
        v = catalog.drop(name, version)
    except CatalogError as exc:
        raise CommandError(str(exc)) from exc
    return {**_record(v), **_dropped(catalog, name, version)}
