"""``memstream forget``: remove what a selector names from every place memstream keeps it.

The log is append-only but for this: the entries of the forgotten events are deleted from
the streams (``XDEL``) and rewritten out of the archive's segments (``producers.erase``),
after a tombstone (``MemoryForgotten``, one per event) is appended for each, so every
projection version deletes what it built from them, and a version built later by replay
never sees them (the tombstones are kept: ``P:tombstones:T``). Then the dead letters that
copied those entries, the dense backlogs' entries holding their text, the embedding
cache's rows of their texts and this host's spool records of them go too; the command
waits for the projections to apply the tombstones and has the embedded Valkey rewrite its
append-only file, so the text is on no disk Redis writes.

Safe against concurrent appends: only the entries read and matched are deleted, by id.
Idempotent: a second run finds nothing left to remove and appends no tombstone again
(an id already named by a tombstone in the log gets none).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import msgspec
import redis

from memstream.core import Settings, as_str, keys, new_event_id
from memstream.ops.connect import connect
from memstream.ops.errors import CommandError
from memstream.producers import (
    Archive,
    ArchiveBusy,
    ArchiveError,
    DelegationCompleted,
    EntryFields,
    Event,
    EventLog,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    TurnRecorded,
    decode,
    erase,
    erase_records,
    history,
    utcnow,
    xrange_entry,
)

__all__ = ["Selector", "forget"]

REASON = "memstream forget"
_BATCH = 500


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
            raise CommandError("forget needs a selector: --event, --session, --agent, --tenant, --match "
                               "or --tombstoned")
        if self.match is not None and not self.match.strip():
            raise CommandError("--match needs some text")

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
        if self.session is not None and self.session not in (scope.session_id, getattr(event, "parent_session_id", None),
                                                              getattr(event, "child_session_id", None)):
            return False
        return self.match is None or self.match.casefold() in event_text(event).casefold()

    def selects_raw(self, data: bytes) -> bool:
        """For bytes that are no valid event: only ``match`` can name them."""
        return self.match is not None and not (self.events or self.session or self.agent or self.tenant
                                               or self.tombstoned) \
            and self.match.casefold() in data.decode("utf-8", "replace").casefold()


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


def texts_of(event: Event) -> list[str]:
    """The texts an embedder may have been given for ``event`` (the embedding cache's keys)."""
    if isinstance(event, TurnRecorded):
        return [event.user_text, event.assistant_text, f"{event.user_text}\n{event.assistant_text}"]
    if isinstance(event, (MemoryWritten, MemoryRemembered)):
        return [event.content]
    if isinstance(event, DelegationCompleted):
        return [event.task, event.result, f"{event.task}\n{event.result}"]
    return []


@dataclass
class _Found:
    entries: dict[str, set[str]] = field(default_factory=dict)  # stream -> entry ids
    events: dict[str, Event] = field(default_factory=dict)  # event id -> event
    archived: dict[str, set[str]] = field(default_factory=dict)  # stream -> entry ids read from the archive
    named: set[tuple[str, str]] = field(default_factory=set)  # (tenant, id) a tombstone in the log names

    def add(self, stream: str, entry_id: str, event: Event | None, archived: bool) -> None:
        self.entries.setdefault(stream, set()).add(entry_id)
        if archived:
            self.archived.setdefault(stream, set()).add(entry_id)
        if event is not None:
            self.events[event.id] = event


def forget(settings: Settings, selector: Selector, *, dry_run: bool = False, wait: float = 30.0,
           rewrite_aof: bool = True, spool_dir: Path | None = None) -> dict[str, Any]:
    """Forget what ``selector`` names (see the module doc); with ``dry_run`` only find and
    count it. Returns plain data: ``events`` (the ids), ``removed`` (per place: counts),
    ``tombstones`` appended, ``projections`` (whether every group applied them within
    ``wait`` seconds), ``aof`` (what was done about Redis's files) and ``notes`` (what an
    operator must still do). ``CommandError`` when the log or the archive cannot be read."""
    eventlog = connect(settings)
    client = eventlog.client
    archive = Archive(settings.archive_path)
    try:
        tombstoned = _tombstoned(client, eventlog.prefix) | _named(eventlog, archive) if selector.tombstoned else set()
        found = _scan(eventlog, archive, selector, tombstoned)
    except ArchiveError as exc:
        raise CommandError(str(exc)) from exc
    ids = set(found.events)
    doomed_entries = {(s, e) for s, es in found.entries.items() for e in es}
    dlq_ids = _dead_letters(client, eventlog.prefix, selector, ids, doomed_entries, tombstoned)
    backlog, backlog_texts = _backlog(client, eventlog.prefix, ids, selector.match)
    texts = {t for e in found.events.values() for t in texts_of(e) if t} | backlog_texts
    spool = Path(spool_dir) if spool_dir is not None else settings.spool_dir
    spool_counts = erase_records(spool, lambda data: _payload_doomed(data, selector, ids, tombstoned), dry_run=True)
    removed: dict[str, Any] = {
        "stream_entries": sum(len(v) - len(found.archived.get(k, ())) for k, v in found.entries.items()),
        "archive_entries": sum(len(v) for v in found.archived.values()),
        "dead_letters": len(dlq_ids),
        "embed_backlog": sum(len(v) for v in backlog.values()),
        "embedding_cache": 0,
        "spool_records": spool_counts["records"] + spool_counts["quarantined"],
    }
    result: dict[str, Any] = {
        "dry_run": dry_run, "events": sorted(ids), "removed": removed, "tombstones": 0,
        "spool_held": spool_counts["held"], "projections": None, "aof": None, "notes": [],
    }
    if spool_counts["held"]:
        result["notes"].append(f"{spool_counts['held']} matching records are in spool segments a running process "
                               f"holds ({spool}): they ship, then the tombstones remove them; run forget again "
                               "once it has shipped or stopped")
    if dry_run:
        return result
    # 1. tombstones first: if anything below fails, every projection still drops the items
    new = [e for e in found.events.values() if (e.scope.tenant, e.id) not in found.named]
    last = _tombstone(eventlog, new)
    result["tombstones"] = len(new)
    # 2. the log: the streams (XDEL, by the ids matched: never an entry appended since), the archive
    deleted = 0
    for stream, entry_ids in found.entries.items():
        for chunk in _chunks(sorted(entry_ids)):
            deleted += int(client.xdel(stream, *chunk))
    removed["stream_entries"] = deleted  # what the streams still held (the rest was archived and trimmed)
    try:
        # every matched entry, not only those read from the archive: an archiver may have
        # copied some from the streams since they were read (it cannot after the XDEL)
        erased = erase(archive, found.entries)
    except (ArchiveError, ArchiveBusy) as exc:
        raise CommandError(f"the stream entries are deleted and tombstoned, but the archive could not be "
                           f"rewritten: {exc}; run forget again") from exc
    removed["archive_segments"] = erased["segments"]
    removed["archive_entries"] = erased["entries"]
    # 3. copies of the entries and of their text
    for chunk in _chunks(sorted(dlq_ids)):
        client.xdel(keys.dlq(eventlog.prefix), *chunk)
    for key, entry_ids in backlog.items():
        for chunk in _chunks(sorted(entry_ids)):
            client.xdel(key, *chunk)
    removed["embedding_cache"] = _cache(settings, texts)
    spooled = erase_records(spool, lambda data: _payload_doomed(data, selector, ids, tombstoned))
    removed["spool_records"] = spooled["records"] + spooled["quarantined"]
    # 4. the projections apply the tombstones; then Redis's own file is rewritten
    result["projections"] = _wait_applied(client, last, wait)
    if not result["projections"]["applied"]:
        result["notes"].append("the projections have not applied every tombstone yet (are the workers running?): "
                               "they remove the items when they do; run forget again after that to rewrite "
                               "the append-only file")
    result["aof"] = rewrite_append_only_file(client) if rewrite_aof else {"state": "skipped"}
    if result["aof"]["state"] != "rewritten":
        result["notes"].append(result["aof"]["note"])
    _count(client, eventlog.prefix, removed, result["tombstones"])
    return result


def _scan(eventlog: EventLog, archive: Archive, selector: Selector, tombstoned: set[tuple[str, str]]) -> _Found:
    found = _Found()
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
            raw_id = _field(fields, "id")
            if (data is not None and selector.selects_raw(data)) \
                    or (raw_id is not None and raw_id.decode("utf-8", "replace") in selector.events):
                found.add(stream, entry_id, None, in_archive)
            continue
        if isinstance(event, MemoryForgotten):
            found.named.add((event.scope.tenant, event.forgotten_id))
            continue
        if selector.selects(event, tombstoned):
            found.add(stream, entry_id, event, in_archive)
        elif selector.tombstoned and isinstance(event, MemoryWritten) and event.action == "remove" \
                and event.old_text:
            removes.append((stream, entry_id, event, in_archive))
    # Hermes's memory remove quotes the entry it removes (old_text): it goes with the entry
    for stream, entry_id, remove, in_archive in removes:
        scope = remove.scope
        if any(isinstance(e, (MemoryWritten, MemoryRemembered)) and e.target == remove.target
               and (e.scope.tenant, e.scope.agent) == (scope.tenant, scope.agent) and remove.old_text in e.content
               for e in found.events.values()):
            found.add(stream, entry_id, remove, in_archive)
    return found


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
        tenant = as_str(key)[len(head):]
        out.update((tenant, as_str(m)) for m in client.sscan_iter(key, count=500))
    return out


def _dead_letters(client: redis.Redis, prefix: str, selector: Selector, ids: set[str],
                  entries: set[tuple[str, str]], tombstoned: set[tuple[str, str]]) -> set[str]:
    """Ids of the dead letters holding a forgotten entry (or one the selector names)."""
    out: set[str] = set()
    key = keys.dlq(prefix)
    cursor = "-"
    while batch := client.xrange(key, min=cursor, max="+", count=_BATCH):
        for entry in batch:
            dlq_id, record = xrange_entry(entry)
            fields = {as_str(k): v for k, v in record.items()}
            data = fields.get("f:data")
            raw = data if isinstance(data, bytes) else (data or "").encode("utf-8", "surrogateescape")
            if as_str(fields.get("f:id", b"")) in ids \
                    or (as_str(fields.get("stream", b"")), as_str(fields.get("entry_id", b""))) in entries \
                    or (raw and _payload_doomed(raw, selector, ids, tombstoned)):
                out.add(dlq_id)
        cursor = "(" + dlq_id
    return out


def _backlog(client: redis.Redis, prefix: str, ids: set[str],
             match: str | None) -> tuple[dict[str, set[str]], set[str]]:
    """Per dense backlog: the entries of forgotten events, and those whose text holds
    ``match`` (a later turn's unit quoting a forgotten one: its point is re-indexed without
    it, so the entry was stale anyway); and their texts."""
    out: dict[str, set[str]] = {}
    texts: set[str] = set()
    needle = match.casefold() if match else None
    if not ids and needle is None:
        return out, texts
    for raw_key in client.scan_iter(match=keys.embed_backlog_pattern(prefix), count=500):
        key = as_str(raw_key)
        cursor = "-"
        while batch := client.xrange(key, min=cursor, max="+", count=_BATCH):
            for entry in batch:
                entry_id, record = xrange_entry(entry)
                fields = {as_str(k): v for k, v in record.items()}
                text = as_str(fields.get("text", b""))
                if as_str(fields.get("event", b"")) in ids or (needle is not None and needle in text.casefold()):
                    out.setdefault(key, set()).add(entry_id)
                    texts.add(text)
            cursor = "(" + entry_id
    return out, texts


def _cache(settings: Settings, texts: set[str]) -> int:
    """Delete the embedding cache's rows of ``texts`` (the pipeline's file, when there is one)."""
    path = settings.data_dir / "embeddings.sqlite3"
    if not texts or not path.exists():
        return 0
    from memstream.projections import EmbeddingCache, text_key

    try:
        with EmbeddingCache(path, memory_items=0) as cache:
            return cache.delete([text_key(t) for t in texts])
    except sqlite3.Error as exc:
        raise CommandError(f"the embedding cache {path} could not be cleaned ({exc}): run forget again") from exc


def _tombstone(eventlog: EventLog, events: list[Event]) -> dict[str, str]:
    """Append a tombstone for each of ``events``, in its stream; the last entry id per stream."""
    last: dict[str, str] = {}
    tombstones: list[Event] = [MemoryForgotten(id=new_event_id(), occurred_at=utcnow(), scope=e.scope,
                                               forgotten_id=e.id, reason=REASON) for e in events]
    for chunk in _chunks(tombstones):
        for event, entry_id in zip(chunk, eventlog.append(chunk)):
            if entry_id:
                last[eventlog.stream_for(event.scope.tenant, event.scope.agent)] = entry_id
    return last


def _wait_applied(client: redis.Redis, last: dict[str, str], wait: float) -> dict[str, Any]:
    """Wait up to ``wait`` seconds until every consumer group of each stream has applied
    its last tombstone."""
    from memstream.workers import is_applied

    deadline = time.monotonic() + wait
    pending: list[tuple[str, str, str]] = []
    for stream, entry_id in last.items():
        try:
            groups = [as_str(g["name"]) for g in client.xinfo_groups(stream)]
        except redis.ResponseError:
            groups = []
        pending += [(stream, g, entry_id) for g in groups]
    while True:
        pending = [p for p in pending if not is_applied(client, *p)]
        if not pending or time.monotonic() >= deadline:
            return {"applied": not pending, "waiting": sorted({g for _, g, _ in pending})}
        time.sleep(0.05)


def rewrite_append_only_file(client: redis.Redis, timeout: float = 120.0) -> dict[str, Any]:
    """Have the server rewrite its append-only file from the data it holds now (deleted
    entries and keys are not in it), in command form so that no deleted stream entry's
    bytes ride along in an RDB preamble, and wait for it. A server without an AOF, or that
    refuses (a managed Redis), is reported with what its operator must do."""
    note = ("Redis's files may still hold the text: on a server you run, rewrite its append-only file "
            "(BGREWRITEAOF with aof-use-rdb-preamble no), take a new RDB snapshot (BGSAVE) and delete older "
            "snapshots and backups; on a managed Redis, ask its operator")
    try:
        config = client.config_get("appendonly")
        if as_str(config.get("appendonly", "no")) != "yes":
            return {"state": "no append-only file", "note": note}
        preamble = as_str(client.config_get("aof-use-rdb-preamble").get("aof-use-rdb-preamble", "no"))
        _wait_rewrite(client, timeout)  # one already running would not include the deletions
        client.config_set("aof-use-rdb-preamble", "no")
        try:
            client.bgrewriteaof()
            time.sleep(0.05)
            _wait_rewrite(client, timeout)
        finally:
            client.config_set("aof-use-rdb-preamble", preamble)
        info = client.info("persistence")
        if as_str(info.get("aof_last_bgrewrite_status", "ok")) != "ok":
            return {"state": "failed", "note": "the append-only file rewrite failed (see the server's log): " + note}
        return {"state": "rewritten", "note": ""}
    except redis.ResponseError as exc:
        return {"state": f"refused ({str(exc)[:100]})", "note": note}


def _wait_rewrite(client: redis.Redis, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        if time.monotonic() >= deadline:
            raise CommandError("the append-only file rewrite did not finish in time: run forget again")
        time.sleep(0.05)


def _count(client: redis.Redis, prefix: str, removed: dict[str, Any], tombstones: int) -> None:
    """Add what was removed to ``P:counters:forget`` (the metric ``memstream_forgotten_total``)."""
    pipe = client.pipeline(transaction=False)
    key = keys.forget_counters(prefix)
    for place, n in removed.items():
        if n:
            pipe.hincrby(key, place, int(n))
    if tombstones:
        pipe.hincrby(key, "tombstones", tombstones)
    pipe.execute()


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _BATCH):
        yield items[start:start + _BATCH]
