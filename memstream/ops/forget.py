"""``memstream forget``: remove what a selector names from every place memstream keeps it.

The log is append-only but for this: the entries of the forgotten events are deleted from
the streams (``XDEL``) and rewritten out of the archive's segments (``producers.erase``),
after a tombstone (``MemoryForgotten``, one per event) is appended for each, so every
projection version deletes what it built from them, and a version built later by replay
never sees them (the tombstones are kept: ``P:tombstones:T``). Then the dead letters that
copied those entries, the dense backlogs' entries holding their text, the embedding
cache's rows of their texts and this host's spool records of them go too; the command
waits for the projections to apply the tombstones and has the embedded Valkey rewrite its
append-only file, so the text is on no disk Redis writes. Finding and removing those copies
is ``memstream.workers.erasure``, the path retention erases by too; this module chooses
what to forget.

Safe against concurrent appends: only the entries read and matched are deleted, by id.
Idempotent: a second run finds nothing left to remove and appends no tombstone again
(an id already named by a tombstone in the log gets none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import redis

from memstream.core import MAX_ID_BYTES, Settings, keys, lossless
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import (
    Archive,
    ArchiveError,
    EntryFields,
    Event,
    EventLog,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    decode,
    history,
)

if TYPE_CHECKING:  # the workers are imported when a forget runs: every command imports this module
    from memstream.workers import Doomed

__all__ = ["Selector", "forget"]

REASON = "memstream forget"
_BATCH = 500
_ID_HINT = (
    " (event ids look like 0192f3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d: `memstream search --json` and `memstream export` show them)"
)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


@dataclass(frozen=True)
class Selector:
    """What to forget: events matching every given part (``events``: any of those ids;
    ``match``: text in any of the event's fields, case-insensitive); ``tombstoned``: every
    item a tombstone already names (the agents' forget tool, Hermes's ``memory remove``)."""

    events: tuple[str, ...] = ()
    session: str | None = None
    agent: str | None = None
    tenant: str | None = None
    match: str | None = None
    tombstoned: bool = False

    def __post_init__(self) -> None:
        if not (self.events or self.session or self.agent or self.tenant or self.match or self.tombstoned):
            raise CommandError("forget needs a selector: --event, --session, --agent, --tenant, --match or --tombstoned")
        if self.match is not None and not self.match.strip():
            raise CommandError("--match needs some text")
        for event_id in self.events:
            if not event_id.strip() or len(event_id.encode("utf-8", "surrogateescape")) > MAX_ID_BYTES:
                raise CommandError(f"--event {event_id[:80]!r} is no event id{_ID_HINT}")

    def selects(self, event: Event, tombstoned: set[tuple[str, str]]) -> bool:
        if isinstance(event, MemoryForgotten):
            return False  # a tombstone holds no content: it stays, so replays keep applying it
        scope = event.scope
        if self.tombstoned:
            return (scope.tenant, event.id) in tombstoned and self._narrowed(event)
        if self.events and event.id not in self.events:
            return False
        return self._narrowed(event)

    def _narrowed(self, event: Event) -> bool:
        scope = event.scope
        if self.tenant is not None and scope.tenant != self.tenant:
            return False
        if self.agent is not None and scope.agent != self.agent:
            return False
        if self.session is not None and self.session not in (
            scope.session_id,
            getattr(event, "parent_session_id", None),
            getattr(event, "child_session_id", None),
        ):
            return False
        return self.match is None or self.match.casefold() in event_text(event).casefold()

    def selects_raw(self, data: bytes) -> bool:
        """For bytes that are no valid event: only ``match`` can name them."""
        return (
            self.match is not None
            and not (self.events or self.session or self.agent or self.tenant or self.tombstoned)
            and self.match.casefold() in data.decode("utf-8", "replace").casefold()
        )


def event_text(event: Event) -> str:
    """Every text of an event (its fields' strings, the scope's included), joined."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                if k not in ("type", "occurred_at"):
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(msgspec.to_builtins(event))
    return "\x00".join(out)


def forget(
    settings: Settings,
    selector: Selector,
    *,
    dry_run: bool = False,
    wait: float = 30.0,
    rewrite_aof: bool = True,
    spool_dir: Path | None = None,
) -> dict[str, Any]:
    """Forget what ``selector`` names (see the module doc); with ``dry_run`` only find and
    count it. Returns plain data: ``events`` (the ids), ``removed`` (per place: counts),
    ``tombstones`` appended, ``projections`` (whether every group applied them within
    ``wait`` seconds), ``aof`` (what was done about Redis's files) and ``notes`` (what an
    operator must still do). ``CommandError`` when the log or the archive cannot be read."""
    from memstream.workers import ErasureError, count_removed, plan, rewrite_append_only_file

    eventlog = connect(settings)
    client = eventlog.client
    archive = Archive(settings.archive_path)
    try:
        tombstoned = _tombstoned(client, eventlog.prefix) | _named(eventlog, archive) if selector.tombstoned else set()
        found, raw_ids = _scan(eventlog, archive, selector, tombstoned)
    except ArchiveError as exc:
        raise CommandError(str(exc)) from exc
    ids = set(found.events)
    known = ids | raw_ids | {event_id for _, event_id in found.named}  # forgotten before: a second run finds it so
    unknown = [event_id for event_id in selector.events if event_id not in known]
    if unknown:  # nothing is erased: an id that names no event is a mistake to say, not a no-op
        shown = ", ".join(repr(i[:80]) for i in unknown[:5])
        hint = _ID_HINT if any(not _UUID.match(i) for i in unknown) else " in the log or the archive (with the other selectors)"
        raise CommandError(f"no event with the id {shown} was found{hint}; nothing was forgotten")
    spool = Path(spool_dir) if spool_dir is not None else settings.spool_dir
    erasure = plan(
        eventlog,
        found,
        payload_doomed=lambda data: _payload_doomed(data, selector, ids, tombstoned),
        match=selector.match,
        spool=spool,
    )
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "events": sorted(ids),
        "removed": erasure.removed(),
        "tombstones": 0,
        "spool_held": erasure.spool_counts["held"],
        "projections": None,
        "aof": None,
        "notes": [],
    }
    if erasure.spool_counts["held"]:
        result["notes"].append(
            f"{erasure.spool_counts['held']} matching records are in spool segments a running "
            f"process holds ({spool}): they ship, then the tombstones remove them; run forget "
            "again once it has shipped or stopped"
        )
    if dry_run:
        return result
    try:
        done = erasure.apply(eventlog, archive, settings.data_dir, reason=REASON, wait=wait)
    except ErasureError as exc:
        raise CommandError(f"{exc}; run forget again") from exc
    result.update(done)
    if not result["projections"]["applied"]:
        result["notes"].append(
            "the projections have not applied every tombstone yet (are the workers running?): "
            "they remove the items when they do; run forget again after that to rewrite "
            "the append-only file"
        )
    counters = keys.forget_counters(eventlog.prefix)
    changed = bool(result["tombstones"] or any(result["removed"].values()))
    if changed:
        # pending until a rewrite after every projection applied the tombstones succeeds: a
        # later run that finds nothing new still rewrites then
        client.hset(counters, "aof_pending", "1")
    if not rewrite_aof:
        result["aof"] = {"state": "skipped"}
    elif not changed and not client.hget(counters, "aof_pending"):
        result["aof"] = {"state": "not needed", "note": ""}  # nothing was removed: Redis's files hold nothing new to drop
    else:
        try:
            result["aof"] = rewrite_append_only_file(client)
        except ErasureError as exc:
            raise CommandError(f"{exc}: run forget again") from exc
        if result["projections"]["applied"] and result["aof"]["state"] != "failed":
            client.hdel(counters, "aof_pending")  # rewritten, or a server that cannot: nothing to wait for
    if result["aof"]["state"] not in ("rewritten", "not needed", "skipped"):
        result["notes"].append(result["aof"]["note"])
    count_removed(client, counters, result["removed"], result["tombstones"])
    return result


def _scan(eventlog: EventLog, archive: Archive, selector: Selector, tombstoned: set[tuple[str, str]]) -> tuple[Doomed, set[str]]:
    """The entries ``selector`` names; and the ids of those that are no valid event but
    name one of ``selector.events`` in their id field."""
    from memstream.workers import Doomed

    found = Doomed()
    raw_ids: set[str] = set()
    watermark = archive.watermark()
    from memstream.producers import parse_entry_id

    marks = {k: parse_entry_id(v) for k, v in watermark.items()}
    removes: list[tuple[str, str, MemoryWritten, bool]] = []  # memory-tool removes, for --tombstoned
    for stream, entry_id, fields in history(eventlog, archive):
        in_archive = stream in marks and parse_entry_id(entry_id) <= marks[stream]
        data = _field(fields, "data")
        try:
            event = decode(data) if data is not None else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            event = None
        if event is None:  # no valid event: named by its id field, or by the text in its bytes
            raw_field = _field(fields, "id")
            raw_id = raw_field.decode("utf-8", "replace") if raw_field is not None else None
            named = raw_id is not None and raw_id in selector.events
            if raw_id is not None and named:
                raw_ids.add(raw_id)
            if (data is not None and selector.selects_raw(data)) or named:
                found.add(stream, entry_id, None, in_archive)
            continue
        if isinstance(event, MemoryForgotten):
            found.named.add((event.scope.tenant, event.forgotten_id))
            continue
        if selector.selects(event, tombstoned):
            found.add(stream, entry_id, event, in_archive)
        elif selector.tombstoned and isinstance(event, MemoryWritten) and event.action == "remove" and event.old_text:
            removes.append((stream, entry_id, event, in_archive))
    # Hermes's memory remove quotes the entry it removes (old_text): it goes with the entry
    for stream, entry_id, remove, in_archive in removes:
        scope = remove.scope
        if any(
            isinstance(e, (MemoryWritten, MemoryRemembered))
            and e.target == remove.target
            and (e.scope.tenant, e.scope.agent) == (scope.tenant, scope.agent)
            and remove.old_text in e.content
            for e in found.events.values()
        ):
            found.add(stream, entry_id, remove, in_archive)
    return found, raw_ids


def _named(eventlog: EventLog, archive: Archive) -> set[tuple[str, str]]:
    """(tenant, id) of every item a tombstone in the log names (the forget tool's, before
    the projections applied it)."""
    out: set[tuple[str, str]] = set()
    for _, _, fields in history(eventlog, archive):
        if _field(fields, "type") != b"memory.forgotten":
            continue
        data = _field(fields, "data")
        try:
            event = decode(data) if data is not None else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if isinstance(event, MemoryForgotten):
            out.add((event.scope.tenant, event.forgotten_id))
    return out


def _field(fields: EntryFields, name: str) -> bytes | None:
    value = fields.get(name.encode(), fields.get(name))
    if value is None:
        return None
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _payload_doomed(data: bytes, selector: Selector, ids: set[str], tombstoned: set[tuple[str, str]]) -> bool:
    try:
        event = decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return selector.selects_raw(data) or any(i.encode() in data for i in ids)
    return event.id in ids or selector.selects(event, tombstoned)


def _tombstoned(client: redis.Redis, prefix: str) -> set[tuple[str, str]]:
    """(tenant, id) of every item the projections recorded as forgotten."""
    out: set[tuple[str, str]] = set()
    head = keys.tombstones(prefix, "")
    for key in client.scan_iter(match=keys.tombstones_pattern(prefix), count=500):
        tenant = lossless(key)[len(head) :]  # bytes anyone may have written: never a decode error
        out.update((tenant, lossless(m)) for m in client.sscan_iter(key, count=500))
    return out
