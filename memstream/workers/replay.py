"""How far a version has read the log, and whether it has caught up.

A replay is a consumer group like any other, created at the start of the log (or after
what the archive holds, which it reads first): it resumes from its own position after a
crash, and applies each event through the same admission and the same ``apply`` as live
ingest. These functions read its progress from the server (XINFO), never from a count
kept by a process that may have died.

Guarantee: ``caught_up`` is True only when, on every stream, the group has been delivered
the stream's last entry and holds none pending: every event in the log then has been
applied (or dead-lettered) by it; and, given a vector projection's ``backlog``
(``P:embed:{group}``), when that holds nothing either: every point it wrote has its dense
vector, so activating it never hands readers a version that finds by keywords only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Protocol

import redis

from memstream.core import as_str
from memstream.producers import EntryFields, parse_entry_id

__all__ = ["Archived", "GroupProgress", "build_progress", "caught_up", "group_progress"]


class Archived(Protocol):
    """What a replay reads before the streams (``producers.Archive``)."""

    def watermark(self) -> dict[str, str]:
        """Per stream: the last archived entry id (a replay's group starts after it)."""

    def entries(self, streams: Iterable[str] | None = None, since: str = "-") -> Iterator[tuple[str, str, EntryFields]]:
        """The archived entries after ``since``, oldest first across streams."""


@dataclass(frozen=True)
class GroupProgress:
    """One group on the streams: entries of the log, entries still to read (None:
    unknown), entries read but not yet acknowledged, and the position."""

    length: int
    lag: int | None
    pending: int
    position: str

    @property
    def done(self) -> int | None:
        return None if self.lag is None else max(0, self.length - self.lag - self.pending)


def _info(client: redis.Redis, stream: str, group: str) -> dict[str, Any] | None:
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream
        return None
    for g in groups:
        if as_str(g["name"]) == group:
            return dict(g)
    return None


def _last_id(client: redis.Redis, stream: str) -> str | None:
    last = client.xrevrange(stream, count=1)
    return as_str(last[0][0]) if last else None


def group_progress(client: redis.Redis, streams: list[str], group: str) -> GroupProgress:
    """The group's progress summed over ``streams``. Lag is the server's count when it
    knows it; when it does not (a group created after entries were deleted), 0 if the group
    was delivered the stream's last entry, else unknown."""
    length = lag_total = pending = 0
    known = True
    position = ""
    for stream in streams:
        try:
            n = int(client.xlen(stream))
        except redis.ResponseError:  # a tenant's log its user made another type: none of the log's
            continue
        length += n
        info = _info(client, stream, group)
        if info is None:
            lag_total += n
            continue
        pending += int(info.get("pending") or 0)
        delivered = as_str(info.get("last-delivered-id") or "0-0")
        if not position or parse_entry_id(delivered) > parse_entry_id(position):
            position = delivered
        lag = info.get("lag")
        if lag is not None:
            lag_total += int(lag)
            continue
        try:
            last = _last_id(client, stream)
        except redis.ResponseError:
            continue
        if last is None or parse_entry_id(delivered) >= parse_entry_id(last):
            continue
        known = False
    return GroupProgress(length=length, lag=lag_total if known else None, pending=pending, position=position)


def build_progress(
    progress: GroupProgress, *, archived_total: int, archive_done: bool, archive_applied: int
) -> tuple[int | None, int]:
    """A build's (done, total) over the whole log: the archive's ``archived_total`` entries
    (all of them applied once it has read the archive, else ``archive_applied``) and the
    streams' (``progress``); done is None while the streams' part is unknown."""
    total = progress.length + archived_total
    if progress.done is None:
        return None, total
    return progress.done + (archived_total if archive_done else archive_applied), total


def caught_up(client: redis.Redis, streams: list[str], group: str, backlog: str | None = None) -> bool:
    """Whether ``group`` has applied every entry now in ``streams``, and its dense stage
    every entry of ``backlog`` when given (see the module doc)."""
    for stream in streams:
        info = _info(client, stream, group)
        try:
            last = _last_id(client, stream)
        except redis.ResponseError:  # a tenant's log its user made another type: nothing there to wait for
            continue
        if info is None:
            if last is None:
                continue  # an empty stream the group is not on yet
            return False
        if int(info.get("pending") or 0):
            return False
        if last is not None and parse_entry_id(as_str(info.get("last-delivered-id") or "0-0")) < parse_entry_id(last):
            return False
    # read after the streams: a batch's backlog entries are added before its events are acked
    return backlog is None or not int(client.xlen(backlog))
