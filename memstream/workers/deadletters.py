"""The dead-letter stream: entries no projection could apply, with their reason."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import redis

from memstream.core import Settings, as_str, keys, lossless, shown
from memstream.producers import EntryFields, xrange_entry

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT


class DeadLetters:
    """The dead-letter stream ``{prefix}:dlq``: failed entries with their error.

    Each record keeps the entry's fields byte for byte as ``f:<name>`` (names and values
    need not be UTF-8). Bounded: at most ``max_letters`` (``MEMSTREAM_DLQ_MAX_LETTERS``);
    past it an entry is acked without a letter and counted (``dropped``: the metric
    ``memstream_dead_letters_dropped_total``); it stays in the log. An entry admission
    refused has one letter that every group shares (``every_group``; ``P:dlq:entries``
    finds it), so a replay's new version never copies it again. Guarantee: ``list``, ``take`` and ``retry`` never raise on what a
    record holds: ``list`` shows undecodable bytes as backslash escapes, ``take`` keeps
    field names lossless (undecodable bytes as surrogate escapes) and ``retry`` re-appends
    the original bytes.
    """

    def __init__(self, client: redis.Redis, prefix: str, max_letters: int = Settings().dlq_max_letters) -> None:
        self.client = client
        self.key = keys.dlq(prefix)
        self.entries_key = keys.dlq_entries(prefix)
        self.counters_key = keys.dlq_counters(prefix)
        self.max_letters = max_letters

    def add(
        self,
        group: str,
        stream: str,
        entry_id: str,
        fields: EntryFields,
        error: str,
        deliveries: int,
        *,
        every_group: bool = False,
    ) -> str:
        """Dead-letter one entry and ack it in its group, atomically (MULTI). With
        ``every_group`` (admission's verdict: the entry is the same garbage to every projection
        and version) the entry gets one dead letter that every group shares: a group (or a
        replay's new version) that meets an entry which has one only acks it. Returns
        ``added``, ``shared`` (it had one) or ``dropped`` (the stream holds ``max_letters``:
        acked without one, counted in ``P:counters:dlq``)."""
        ref = f"{stream} {entry_id}"
        if every_group and not self._claim(ref, group):
            self.client.xack(stream, group, entry_id)
            return "shared"
        if self._full():
            pipe = self.client.pipeline(transaction=True)
            pipe.hincrby(self.counters_key, "dropped", 1)
            pipe.xack(stream, group, entry_id)
            if every_group:
                pipe.hset(self.entries_key, ref, "dropped")  # counted once, never again by a replay
            pipe.execute()
            return "dropped"
        self.add_entries(group, stream, [(entry_id, fields)], error, {entry_id: deliveries}, every_group=every_group)
        return "added"

    def _claim(self, ref: str, group: str) -> bool:
        """Whether ``group`` is the one to record the shared letter of the entry ``ref``: the
        first to claim it (``HSETNX``), or the claimer itself met it again (it crashed before
        the letter was written: the entry stayed pending in its group)."""
        mine = f"claimed:{group}"
        if self.client.hsetnx(self.entries_key, ref, mine):
            return True
        return lossless(self.client.hget(self.entries_key, ref) or b"") == mine

    def _full(self, adding: int = 1) -> bool:
        """Whether ``adding`` more letters would pass ``max_letters`` (read before the write:
        concurrent consumers may each add a batch past it)."""
        return int(self.client.xlen(self.key)) + adding > self.max_letters

    def dropped(self) -> int:
        """Dead letters not kept since the stream held ``max_letters``."""
        raw = self.client.hget(self.counters_key, "dropped")
        try:
            return max(0, int(raw or 0))
        except ValueError:
            return 0

    def add_entries(
        self,
        group: str,
        stream: str,
        entries: list[tuple[str, EntryFields]],
        error: str,
        deliveries: dict[str, int],
        *,
        ack_group: str | None = None,
        delete: bool = False,
        stage: str = "",
        every_group: bool = False,
    ) -> None:
        """Dead-letter ``entries`` of ``stream`` (each with its deliveries, 1 when not
        given) and ack them in ``ack_group`` (``group`` when None), deleting them from the
        stream too when ``delete`` (a backlog, whose length is what waits), atomically
        (MULTI). ``stage`` names the stage that gave up on them (a version's dense stage:
        ``dense``), recorded when given; ``retry`` re-appends them to ``stream``."""
        if not entries:
            return
        pipe = self.client.pipeline(transaction=True)
        dead_at = repr(time.time())
        room = max(0, self.max_letters - int(self.client.xlen(self.key)))
        kept, dropped = entries[:room], len(entries) - room
        if dropped > 0:
            pipe.hincrby(self.counters_key, "dropped", dropped)
        for entry_id, fields in kept:
            record: dict[FieldT, EncodableT] = {
                "group": group,
                "stream": stream,
                "entry_id": entry_id,
                "error": error[:2000],
                "deliveries": deliveries.get(entry_id, 1),
                "dead_at": dead_at,
            }
            if stage:
                record["stage"] = stage
            if every_group:
                record["every_group"] = "1"
            for k, v in fields.items():
                record[b"f:" + k if isinstance(k, bytes) else f"f:{k}"] = v
            pipe.xadd(self.key, record)
        ids = [entry_id for entry_id, _ in entries]
        pipe.xack(stream, ack_group or group, *ids)
        if delete:
            pipe.xdel(stream, *ids)
        replies = pipe.execute()
        if every_group and kept:
            offset = 1 if dropped > 0 else 0
            shared = {f"{stream} {entry_id}": as_str(replies[offset + i]) for i, (entry_id, _) in enumerate(kept)}
            self.client.hset(self.entries_key, mapping=shared)  # type: ignore[arg-type]  # str -> str

    def list(self, count: int = 100, group: str | None = None) -> list[dict[str, str]]:
        out = []
        for entry in self.client.xrange(self.key, count=count) or []:
            dlq_id, record = xrange_entry(entry)
            item = {"dlq_id": shown(dlq_id)}
            for k, v in record.items():
                key = shown(k)
                if key.startswith("f:"):
                    if key == "f:type" or key == "f:id":
                        item[key[2:]] = shown(v)
                    continue
                item[key] = shown(v)
            if group is None or item.get("group") == group or item.get("every_group") == "1":
                out.append(item)
        return out

    def take(self, dlq_id: str) -> dict[str, bytes | str] | None:
        got = self.client.xrange(self.key, min=dlq_id, max=dlq_id)
        return {lossless(k): v for k, v in xrange_entry(got[0])[1].items()} if got else None

    def retry(self, dlq_id: str) -> str | None:
        """Re-append a dead letter to its stream for its group only; drop it from the DLQ."""
        record = self.take(dlq_id)
        if record is None:
            return None
        fields: dict[FieldT, EncodableT] = {
            k[2:].encode("utf-8", "surrogateescape"): v
            for k, v in record.items()
            if k.startswith("f:") and k not in ("f:only_group", "f:retry_of")
        }
        if record.get("every_group") not in (b"1", "1"):  # a shared letter goes back to every group
            fields[b"only_group"] = record.get("group", b"")
        fields[b"retry_of"] = record.get("entry_id", b"")
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(shown(record.get("stream", b"")), fields)
        pipe.xdel(self.key, dlq_id)
        new_id, _ = pipe.execute()
        return as_str(new_id)

    def drop(self, dlq_id: str) -> bool:
        return bool(self.client.xdel(self.key, dlq_id))

    def count_by_group(self, limit: int = 100_000, page: int = 500) -> dict[str, int]:
        """Group -> its dead letters, over the oldest ``limit`` records (read ``page`` at a
        time); a record without a readable group counts under ``""``."""
        return self.count_by("group", limit, page)

    def count_by(self, field: str, limit: int = 100_000, page: int = 500) -> dict[str, int]:
        """Value of the records' ``field`` (``group``, ``stream``, ``stage``) -> how many
        records hold it, over the oldest ``limit`` records (read ``page`` at a time); a
        record without it, or with one that does not decode, counts under ``""``."""
        counts: dict[str, int] = {}
        cursor, seen = "-", 0
        name = field.encode()
        while seen < limit:
            got = self.client.xrange(self.key, min=cursor, count=min(page, limit - seen)) or []
            for entry in got:
                dlq_id, record = xrange_entry(entry)
                value = shown(record.get(name, record.get(field, b"")))
                counts[value] = counts.get(value, 0) + 1
                cursor = f"({dlq_id}"
            seen += len(got)
            if len(got) < page:
                break
        return counts

    def count(self, group: str | None = None) -> int:
        if group is None:
            return int(self.client.xlen(self.key))
        return len(self.list(count=100000, group=group))
