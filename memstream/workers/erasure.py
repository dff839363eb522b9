"""Erasing events from every place memstream keeps them: the one path that ``memstream
forget`` (``ops/forget.py``: it chooses the events by a selector) and retention
(``workers/retention.py``: it chooses them by age) share.

Given the log entries to erase (``Doomed``: stream entry ids, the events decoded from
them, which of them were read from the archive), ``plan`` finds the copies: the dead
letters that copied an entry, the dense backlogs' entries holding their text, the
embedding cache's rows of their texts and this host's spool records of them.
``Plan.apply`` then removes them, in this order: a tombstone (``MemoryForgotten``) per
event first, so that if anything below fails every projection version still drops the
items and a version built later never sees them; the stream entries (``XDEL``, by the ids
matched: never an entry appended since) and the archive's segments (``producers.erase``);
the copies; then it waits for every consumer group to apply the tombstones.
``rewrite_append_only_file`` has the server rewrite its file so the text is on no disk
Redis writes.

Idempotent: an event a tombstone in the log already names (``Doomed.named``) gets none
again; an entry deleted already is not counted again. Never fails on what a record holds:
dead letters and backlog entries are read losslessly (``core.lossless``), as admission
reads entries, whatever bytes their names and values are.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import redis

from memstream.core import PermanentError, as_str, keys, lossless, new_event_id
from memstream.producers import (
    Archive,
    ArchiveBusy,
    ArchiveError,
    DelegationCompleted,
    Event,
    EventLog,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    TurnRecorded,
    erase,
    erase_records,
    utcnow,
    xrange_entry,
)

__all__ = ["Doomed", "ErasureError", "Plan", "count_removed", "plan", "rewrite_append_only_file", "texts_of"]

BATCH = 500
_T = TypeVar("_T")


class ErasureError(PermanentError):
    """A place could not be cleaned (the archive is busy or unreadable, the embedding cache
    cannot be written): what was removed before stays removed; run the erasure again."""


def texts_of(event: Event) -> list[str]:
    """The texts an embedder may have been given for ``event`` (the embedding cache's keys):
    each as the log holds it and as the projections embed it, redacted (an event appended
    before the log's door redacted it holds the raw text; the projections redact again)."""
    if isinstance(event, TurnRecorded):
        texts = [event.user_text, event.assistant_text, f"{event.user_text}\n{event.assistant_text}"]
    elif isinstance(event, (MemoryWritten, MemoryRemembered)):
        texts = [event.content]
    elif isinstance(event, DelegationCompleted):
        texts = [event.task, event.result, f"{event.task}\n{event.result}"]
    else:
        return []
    from memstream.text import redact

    return list(dict.fromkeys(t for text in texts for t in (text, redact(text)[0])))


@dataclass
class Doomed:
    """The log entries to erase."""

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

    def __bool__(self) -> bool:
        return bool(self.entries)


@dataclass
class Plan:
    """What erasing ``doomed`` removes beyond the log entries (see the module doc)."""

    doomed: Doomed
    dead_letters: set[str]
    backlog: dict[str, set[str]]  # dense backlog key -> entry ids
    texts: set[str]
    spool: Path | None
    spool_counts: dict[str, int]
    payload_doomed: Callable[[bytes], bool]

    def removed(self) -> dict[str, int]:
        """Per place: what would go (before ``apply``)."""
        d = self.doomed
        return {
            "stream_entries": sum(len(v) - len(d.archived.get(k, ())) for k, v in d.entries.items()),
            "archive_entries": sum(len(v) for v in d.archived.values()),
            "dead_letters": len(self.dead_letters),
            "embed_backlog": sum(len(v) for v in self.backlog.values()),
            "embedding_cache": 0,
            "spool_records": self.spool_counts["records"] + self.spool_counts["quarantined"],
        }

    def apply(self, eventlog: EventLog, archive: Archive, data_dir: Path, *, reason: str, wait: float) -> dict[str, Any]:
        """Erase (see the module doc). Returns ``removed`` (per place: counts),
        ``tombstones`` (appended) and ``projections`` (whether every group applied them
        within ``wait`` seconds, and which did not). ``ErasureError`` when the archive or
        the embedding cache cannot be rewritten (the streams are cleaned and tombstoned
        by then)."""
        client = eventlog.client
        removed = self.removed()
        d = self.doomed
        new = [e for e in d.events.values() if (e.scope.tenant, e.id) not in d.named]
        last = _tombstone(eventlog, new, reason)
        deleted = 0
        for stream, entry_ids in d.entries.items():
            for chunk in chunks(sorted(entry_ids)):
                deleted += int(client.xdel(stream, *chunk))
        removed["stream_entries"] = deleted  # what the streams still held (the rest was archived and trimmed)
        try:
            # every matched entry, not only those read from the archive: an archiver may have
            # copied some from the streams since they were read (it cannot after the XDEL)
            erased = erase(archive, d.entries)
        except (ArchiveError, ArchiveBusy) as exc:
            raise ErasureError(
                f"the stream entries are deleted and tombstoned, but the archive could not be rewritten: {exc}"
            ) from exc
        removed["archive_segments"] = erased["segments"]
        removed["archive_entries"] = erased["entries"]
        for chunk in chunks(sorted(self.dead_letters)):
            client.xdel(keys.dlq(eventlog.prefix), *chunk)
        for chunk in chunks(sorted(f"{s} {e}" for s, es in d.entries.items() for e in es)):
            client.hdel(keys.dlq_entries(eventlog.prefix), *chunk)  # the shared letters' index
        for key, entry_ids in self.backlog.items():
            for chunk in chunks(sorted(entry_ids)):
                client.xdel(key, *chunk)
        removed["embedding_cache"] = _cache(data_dir, self.texts, set(d.events))
        if self.spool is not None:
            spooled = erase_records(self.spool, self.payload_doomed)
            removed["spool_records"] = spooled["records"] + spooled["quarantined"]
        return {"removed": removed, "tombstones": len(new), "projections": _wait_applied(client, last, wait)}


def plan(
    eventlog: EventLog, doomed: Doomed, *, payload_doomed: Callable[[bytes], bool], match: str | None, spool: Path | None
) -> Plan:
    """Find the copies of ``doomed``'s entries (see the module doc). ``payload_doomed``
    says whether an event's bytes (a dead letter's, a spool record's) are to go too;
    ``match``: a text whose dense backlog entries go too; ``spool``: this host's spool
    directory (None: leave the spool alone)."""
    client = eventlog.client
    ids = set(doomed.events)
    entries = {(s, e) for s, es in doomed.entries.items() for e in es}
    dead = _dead_letters(client, eventlog.prefix, ids, entries, payload_doomed)
    backlog, backlog_texts = _backlog(client, eventlog.prefix, ids, match)
    texts = {t for e in doomed.events.values() for t in texts_of(e) if t} | backlog_texts
    counts = (
        erase_records(spool, payload_doomed, dry_run=True) if spool is not None else {"records": 0, "quarantined": 0, "held": 0}
    )
    return Plan(doomed, dead, backlog, texts, spool, counts, payload_doomed)


def _dead_letters(
    client: redis.Redis, prefix: str, ids: set[str], entries: set[tuple[str, str]], payload_doomed: Callable[[bytes], bool]
) -> set[str]:
    """Ids of the dead letters holding a doomed entry (or bytes ``payload_doomed`` names)."""
    out: set[str] = set()
    key = keys.dlq(prefix)
    cursor = "-"
    while batch := client.xrange(key, min=cursor, max="+", count=BATCH):
        for entry in batch:
            dlq_id, record = xrange_entry(entry)
            # a dead letter holds what admission refused, names and values that need not be
            # UTF-8: decoded losslessly, as admission reads them, never an error
            fields = {lossless(k): v for k, v in record.items()}
            data = fields.get("f:data")
            raw = data if isinstance(data, bytes) else (data or "").encode("utf-8", "surrogateescape")
            if (
                lossless(fields.get("f:id", b"")) in ids
                or (lossless(fields.get("stream", b"")), lossless(fields.get("entry_id", b""))) in entries
                or (raw and payload_doomed(raw))
            ):
                out.add(dlq_id)
        cursor = "(" + dlq_id
    return out


def _backlog(client: redis.Redis, prefix: str, ids: set[str], match: str | None) -> tuple[dict[str, set[str]], set[str]]:
    """Per dense backlog: the entries of doomed events, and those whose text holds
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
        while batch := client.xrange(key, min=cursor, max="+", count=BATCH):
            for entry in batch:
                entry_id, record = xrange_entry(entry)
                fields = {lossless(k): v for k, v in record.items()}
                text = lossless(fields.get("text", b""))
                if lossless(fields.get("event", b"")) in ids or (needle is not None and needle in text.casefold()):
                    out.setdefault(key, set()).add(entry_id)
                    texts.add(text)
            cursor = "(" + entry_id
    return out, texts


def _cache(data_dir: Path, texts: set[str], events: Iterable[str] = ()) -> int:
    """Delete the embedding cache's rows of ``texts`` and of what the dense stage embedded
    for ``events`` (its recorded origins: a turn's unit), from the pipeline's file when
    there is one."""
    path = data_dir / "embeddings.sqlite3"
    if not (texts or events) or not path.exists():
        return 0
    from memstream.projections import EmbeddingCache, text_key

    try:
        with EmbeddingCache(path, memory_items=0) as cache:
            return cache.delete(sorted({text_key(t) for t in texts} | cache.keys_of(sorted(events))))
    except sqlite3.Error as exc:
        raise ErasureError(f"the embedding cache {path} could not be cleaned ({exc})") from exc


def _tombstone(eventlog: EventLog, events: list[Event], reason: str) -> dict[str, str]:
    """Append a tombstone for each of ``events``, in its stream; the last entry id per stream."""
    last: dict[str, str] = {}
    tombstones: list[Event] = [
        MemoryForgotten(id=new_event_id(), occurred_at=utcnow(), scope=e.scope, forgotten_id=e.id, reason=reason) for e in events
    ]
    for chunk in chunks(tombstones):
        for event, entry_id in zip(chunk, eventlog.append(chunk)):
            if entry_id:
                last[eventlog.stream_for(event.scope.tenant, event.scope.agent)] = entry_id
    return last


def _wait_applied(client: redis.Redis, last: dict[str, str], wait: float) -> dict[str, Any]:
    """Wait up to ``wait`` seconds until every consumer group of each stream has applied
    its last tombstone."""
    from memstream.workers.positions import is_applied

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
    refuses (a managed Redis), is reported with what its operator must do. ``ErasureError``
    when a rewrite does not finish within ``timeout`` seconds. On a Redis Cluster every
    primary rewrites its own (one after the other); the state is the first that is not
    ``rewritten``, naming its node."""
    from redis.cluster import RedisCluster

    if isinstance(client, RedisCluster):
        for node in client.get_primaries():
            done = rewrite_append_only_file(client.get_redis_connection(node), timeout)
            if done["state"] != "rewritten":
                return {**done, "state": f"{done['state']} on {node.host}:{node.port}"}
        return {"state": "rewritten", "note": ""}
    note = (
        "Redis's files may still hold the text: on a server you run, rewrite its append-only file "
        "(BGREWRITEAOF with aof-use-rdb-preamble no), take a new RDB snapshot (BGSAVE) and delete older "
        "snapshots and backups; on a managed Redis, ask its operator"
    )
    try:
        config = client.config_get("appendonly")
        if as_str(config.get("appendonly", "no")) != "yes":
            return {"state": "no append-only file", "note": note}
        preamble = as_str(client.config_get("aof-use-rdb-preamble").get("aof-use-rdb-preamble", "no"))
        wait_rewrite(client, timeout)  # one already running would not include the deletions
        client.config_set("aof-use-rdb-preamble", "no")
        try:
            client.bgrewriteaof()
            time.sleep(0.05)
            wait_rewrite(client, timeout)
        finally:
            client.config_set("aof-use-rdb-preamble", preamble)
        info = client.info("persistence")
        if as_str(info.get("aof_last_bgrewrite_status", "ok")) != "ok":
            return {"state": "failed", "note": "the append-only file rewrite failed (see the server's log): " + note}
        return {"state": "rewritten", "note": ""}
    except redis.ResponseError as exc:
        return {"state": f"refused ({str(exc)[:100]})", "note": note}


def wait_rewrite(client: redis.Redis, timeout: float) -> None:
    """Wait until no append-only file rewrite runs or is scheduled; ``ErasureError`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        if time.monotonic() >= deadline:
            raise ErasureError("the append-only file rewrite did not finish in time")
        time.sleep(0.05)


def count_removed(client: redis.Redis, key: str, removed: dict[str, Any], tombstones: int) -> None:
    """Add what was removed (per place) and the tombstones appended to the hash ``key``."""
    pipe = client.pipeline(transaction=False)
    for place, n in removed.items():
        if n:
            pipe.hincrby(key, place, int(n))
    if tombstones:
        pipe.hincrby(key, "tombstones", tombstones)
    pipe.execute()


def chunks(items: list[_T]) -> Iterator[list[_T]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]
