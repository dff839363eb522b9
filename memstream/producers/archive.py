"""The cold part of the event log, in files: the archive.

``archive`` copies the oldest entries of each stream (``P:events:{shard}``) into compressed,
checksummed segment files, then trims them from Redis, so the streams stop growing in
Redis's memory. ``history`` reads the whole log back as one sequence: the archive, then
the streams.

The directory (``MEMSTREAM_ARCHIVE_DIR``, default ``$MEMSTREAM_HOME/archive``) may be on a
filesystem every host mounts: any number of hosts read it, one archiver at a time writes.

  manifest.json  every segment: file, stream, first and last entry id, count, bytes (of
                 the file), raw_bytes (of the fields), sha256 (of the file), codec, created
  segments/      one file per segment: entries of one stream, in id order
  lock           the archiver holds an exclusive ``flock`` on it while it writes (Linux's
                 NFS client turns it into a whole-file lock every host sees)

A segment file is xz (LZMA2 preset 6, 1 MiB dictionary) of frames, each a big-endian u32
length then msgpack: first ``{"memstream_archive": 1, "stream": KEY}``, then one
``[entry id, [[field, value], ...]]`` per entry, its fields and values the bytes Redis held,
in their order. Measured on 2,500 LoCoMo turns (about 590 bytes an entry), this machine:
zlib level 6 made them 3.9-4.2x smaller at about 45,000 entries/s, xz preset 6 5.5-5.7x at
about 5,000 entries/s, decoding at about 130 MB/s. xz it is: a segment is written once and
kept for years. Its 1 MiB dictionary (xz's default is 8 MiB) cost under 1% of the ratio
there and keeps a reader to about 1 MiB per stream it reads at once.

Guarantees:

- A segment file is whole and fsynced before the manifest names it, and never changes
  after; the manifest is replaced atomically (temporary file, fsync, rename, directory
  fsync). A reader sees one manifest or the next, and every segment it names is whole.
  Files are owner-only (``memstream.core.files``).
- ``Archive.entries`` checks each segment's size and sha256 before it yields any of its
  entries; ``CorruptSegment`` names the file.
- ``archive`` trims from a stream only entries in the archive (at or below the stream's
  watermark, once the manifest naming them is durable and the watermark is recorded in
  ``P:archived``) and strictly below every consumer group's position on the stream (its
  last delivered entry and its oldest pending one). Before it writes anything it refuses
  (``GroupBehind``, naming the group and how far it is) when a group has not applied an
  entry below the requested point.
- ``history`` yields every entry of the log once, oldest first by entry id across streams
  (equal ids in stream order), in the shape ``EventLog.entries`` yields: a stream's
  archived entries, then its entries above its watermark (an entry both archived and
  still in the stream, after a crash between the write and the trim, comes once). An
  archiver trimming while it reads is seen (the watermark recorded in Redis passed what
  was read) and those entries are read from the archive; when the archive lacks entries
  the log records as archived, ``ArchiveGap`` is raised, never a log with a hole.
"""

from __future__ import annotations

import fcntl
import hashlib
import heapq
import lzma
import os
import re
import socket
import struct
import time
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import msgspec
import redis

from memstream.core import PermanentError, TransientError, fsync_dir, keys, open_private, private_dir, shown, write_private
from memstream.producers.stream import MAX_ID, EntryFields, EventLog, parse_entry_id, xrange_entry
from memstream.producers.stream import after as next_after  # ``after`` names cursors here

__all__ = [
    "Archive",
    "ArchiveBusy",
    "ArchiveError",
    "ArchiveGap",
    "ArchiveSegment",
    "CorruptSegment",
    "GroupBehind",
    "archive",
    "erase",
    "history",
    "entry_id_of",
]

FORMAT = 1
CODEC = "xz"
SEGMENT_ENTRIES = 100_000  # a segment closes at this many entries ...
SEGMENT_BYTES = 32 << 20  # ... or this many bytes of fields, whichever comes first
_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 20}]
_FRAME = struct.Struct(">I")
_CHUNK = 1 << 16
_U64 = (1 << 64) - 1
_ENTRY_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_FILE = re.compile(r"segments/[A-Za-z0-9._-]{1,200}\.xz")
_GAP_RETRIES = 3  # re-reads of a manifest that lags the watermark in Redis (a network filesystem's cache)

Id = tuple[int, int]
Progress = Callable[[str, int, int | None], None]


class ArchiveError(PermanentError):
    """The archive cannot be read or written as asked; the message says why and where."""


class CorruptSegment(ArchiveError):
    """A segment file is missing, or is not what the manifest says (size, sha256, entries)."""


class GroupBehind(ArchiveError):
    """A consumer group has not applied entries below the point to archive: nothing was done."""


class ArchiveGap(ArchiveError):
    """The log records entries as archived (and may have trimmed them) that this archive lacks."""


class ArchiveBusy(TransientError):
    """Another archiver holds the archive's lock: try again when it is done."""


class ArchiveSegment(msgspec.Struct, frozen=True, kw_only=True):
    """One segment file as the manifest lists it (``file`` relative to the archive)."""

    file: str
    stream: str
    first_id: str
    last_id: str
    count: int
    bytes: int
    raw_bytes: int
    sha256: str
    codec: str
    created: str
    # entries removed from the file by ``erase`` (``memstream forget``): first_id and
    # last_id still bound the range of the log the segment covers, count is what it holds
    erased: int = 0


class _Manifest(msgspec.Struct, kw_only=True):
    format: int
    segments: list[ArchiveSegment] = msgspec.field(default_factory=list)


_HEADER = msgspec.msgpack.Decoder(dict[str, Any])
_ENTRY = msgspec.msgpack.Decoder(tuple[str, list[tuple[bytes, bytes]]])
_ENCODER = msgspec.msgpack.Encoder()


# -- entry ids ------------------------------------------------------------------------------------
def _fmt(entry: Id) -> str:
    return f"{entry[0]}-{entry[1]}"


def _next(entry: Id) -> Id:
    """The smallest entry id above ``entry`` (above the largest one: past every entry)."""
    return (entry[0], entry[1] + 1) if entry[1] < _U64 else (entry[0] + 1, 0)


def _below(entry: Id) -> str:
    """The XRANGE end bound of the entries below ``entry`` (every entry, past the largest id)."""
    return "+" if entry > MAX_ID else "(" + _fmt(entry)


def entry_id_of(value: str | date | datetime) -> str:
    """``value`` as an entry id ``MS-SEQ``: an entry id (``MS`` is ``MS-0``) as it is, a date
    (midnight UTC) or a time (UTC when it names no zone) as the first id of its millisecond;
    ISO text of a date or time too. Raises ValueError saying what it expected."""
    if isinstance(value, str):
        text = value.strip()
        match = _ENTRY_ID.fullmatch(text)
        if match:
            ms, seq = int(match.group(1)), int(match.group(2) or 0)
            if ms > _U64 or seq > _U64:
                raise ValueError(f"{text!r}: each part of a log entry id is at most {_U64}")
            return f"{ms}-{seq}"
        try:
            value = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise ValueError(
                f"{text[:60]!r} is neither a log entry id (MS-SEQ, e.g. 1795398237060-0) nor a "
                "date or time (2026-11-01, 2026-11-01T12:00:00Z)"
            ) from None
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    ms = (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    if ms < 0:
        raise ValueError(f"{value.isoformat()} is before 1970: no log entry is that old")
    return f"{ms}-0"


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _stream_order(key: str) -> tuple[str, int, str]:
    """Stream keys in shard order (``P:events:2`` before ``P:events:10``)."""
    head, _, tail = key.rpartition(":")
    return (head, int(tail), "") if tail.isdigit() else (head, -1, tail)


# -- the archive: reading ----------------------------------------------------------------------------
class Archive:
    """The archive in ``directory``: read by anyone (nothing is created by reading), written
    by ``archive`` under the lock."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"Archive({str(self.directory)!r})"

    @property
    def manifest_path(self) -> Path:
        return self.directory / "manifest.json"

    @property
    def segments_dir(self) -> Path:
        return self.directory / "segments"

    @property
    def lock_path(self) -> Path:
        return self.directory / "lock"

    def segments(self) -> list[ArchiveSegment]:
        """Every segment the manifest lists, by stream (shard order) then entry id; [] when
        there is no manifest. ``ArchiveError`` when the manifest is unreadable or invalid."""
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ArchiveError(f"cannot read the archive manifest {self.manifest_path}: {exc}") from exc
        try:
            manifest = msgspec.json.decode(raw, type=_Manifest)
        except msgspec.DecodeError as exc:
            raise ArchiveError(f"the archive manifest {self.manifest_path} is not valid: {exc}") from exc
        if manifest.format != FORMAT:
            raise ArchiveError(
                f"the archive manifest {self.manifest_path} is of format {manifest.format}; this memstream reads format {FORMAT}"
            )
        segments = sorted(manifest.segments, key=lambda s: (_stream_order(s.stream), parse_entry_id(s.first_id)))
        previous: ArchiveSegment | None = None
        for seg in segments:
            problem = _invalid(seg)
            if (
                problem is None
                and previous is not None
                and previous.stream == seg.stream
                and parse_entry_id(previous.last_id) >= parse_entry_id(seg.first_id)
            ):
                problem = f"overlaps {previous.file}"
            if problem:
                raise ArchiveError(
                    f"the archive manifest {self.manifest_path} is not valid: segment {seg.file[:200]!r} {problem}"
                )
            previous = seg
        return segments

    @classmethod
    def holding(cls, directory: str | os.PathLike[str]) -> Archive | None:
        """The archive in ``directory`` when its manifest lists any segment, else None.
        ``ArchiveError`` when the manifest is unreadable or invalid."""
        archive = cls(directory)
        return archive if archive.segments() else None

    def count(self) -> int:
        """Entries in the archive, every stream's."""
        return sum(seg.count for seg in self.segments())

    def watermark(self) -> dict[str, str]:
        """Per stream key: the last archived entry id."""
        return {seg.stream: seg.last_id for seg in self.segments()}  # in id order: the last wins

    def usage(self) -> dict[str, dict[str, Any]]:
        """Per stream key: archived ``events``, ``bytes`` (of the files), ``segments`` and ``last_id``."""
        out: dict[str, dict[str, Any]] = {}
        for seg in self.segments():
            row = out.setdefault(seg.stream, {"events": 0, "bytes": 0, "segments": 0, "last_id": None})
            row["events"] += seg.count
            row["bytes"] += seg.bytes
            row["segments"] += 1
            row["last_id"] = seg.last_id
        return out

    def entries(self, streams: Iterable[str] | None = None, since: str = "-") -> Iterator[tuple[str, str, EntryFields]]:
        """Every archived entry (of ``streams``, all when None) after ``since`` (exclusive;
        "-" for all), merged oldest first by entry id across streams (equal ids in shard
        order): (stream key, entry id, fields as bytes), as ``EventLog.entries`` yields."""
        by_stream = _by_stream(self.segments())
        wanted = sorted(by_stream if streams is None else set(streams), key=_stream_order)
        after = _since(since)
        return heapq.merge(
            *(self._read(by_stream.get(key, []), after) for key in wanted), key=lambda entry: parse_entry_id(entry[1])
        )

    def verify(self) -> dict[str, int]:
        """Check every segment's file against the manifest (present, size, sha256): the
        totals checked, or ``CorruptSegment`` naming every file that fails."""
        segments = self.segments()
        bad = []
        for seg in segments:
            try:
                self._check(seg)
            except CorruptSegment as exc:
                bad.append(str(exc))
        if bad:
            raise CorruptSegment("; ".join(bad))
        return {"segments": len(segments), "events": sum(s.count for s in segments), "bytes": sum(s.bytes for s in segments)}

    def _check(self, seg: ArchiveSegment) -> Path:
        path = self.directory / seg.file
        digest = hashlib.sha256()
        size = 0
        try:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
        except FileNotFoundError:
            raise CorruptSegment(
                f"archive segment {path} is missing (the manifest lists it: {seg.count} entries of "
                f"{seg.stream}, {seg.first_id} to {seg.last_id})"
            ) from None
        except OSError as exc:
            raise ArchiveError(f"cannot read archive segment {path}: {exc}") from exc
        if size != seg.bytes or digest.hexdigest() != seg.sha256:
            raise CorruptSegment(
                f"archive segment {path} is corrupt: its {'sha256' if size == seg.bytes else 'size'} "
                f"is not the manifest's ({seg.count} entries of {seg.stream}, {seg.first_id} to "
                f"{seg.last_id}; restore the file from a copy)"
            )
        return path

    def _read(self, segments: list[ArchiveSegment], after: Id | None) -> Iterator[tuple[str, str, EntryFields]]:
        for seg in segments:
            if after is None or parse_entry_id(seg.last_id) > after:
                yield from self._read_segment(seg, after)

    def _read_segment(self, seg: ArchiveSegment, after: Id | None) -> Iterator[tuple[str, str, EntryFields]]:
        path = self._check(seg)
        count, last = 0, (-1, -1)
        try:
            with open(path, "rb") as f:
                frames = _frames(f)
                header = _HEADER.decode(next(frames))
                if header.get("memstream_archive") != FORMAT or header.get("stream") != seg.stream:
                    raise ValueError(f"its header is {header!r:.200}")
                for frame in frames:
                    entry_id, pairs = _ENTRY.decode(frame)
                    current = parse_entry_id(entry_id)
                    if current <= last:
                        raise ValueError(f"entry {entry_id} is not above the one before it")
                    count, last = count + 1, current
                    if after is None or current > after:
                        yield seg.stream, entry_id, dict(pairs)
        except (ValueError, StopIteration, lzma.LZMAError, msgspec.DecodeError) as exc:
            raise CorruptSegment(
                f"archive segment {path} cannot be read although its sha256 is the manifest's ({type(exc).__name__}: {exc})"
            ) from exc
        if count != seg.count or (_fmt(last) != seg.last_id if not seg.erased else last > parse_entry_id(seg.last_id)):
            raise CorruptSegment(
                f"archive segment {path} holds {count} entries up to {_fmt(last)}, the manifest "
                f"says {seg.count} up to {seg.last_id}"
            )

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[_Writer]:
        """The archive's lock (``ArchiveBusy`` when another archiver holds it) and a writer;
        files half written by a run that died are removed first."""
        private_dir(self.segments_dir)
        fd = open_private(self.lock_path, os.O_RDWR | os.O_CREAT)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                raise ArchiveBusy(
                    f"the archive {self.directory} is being written by {holder} (it holds "
                    f"{self.lock_path}); one archiver at a time"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {_now()}\n".encode(), 0)
            yield _Writer(self)
        finally:
            os.close(fd)  # releases the lock


class _Writer:
    """Adds segments to an archive whose lock is held."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.segments = archive.segments()
        for path in archive.segments_dir.glob("*.tmp"):
            path.unlink(missing_ok=True)  # half written by a run that died
        # a whole file the manifest does not name is left alone: the same run again rewrites it
        # under its name (named by its first entry), and it may hold entries a restored manifest forgot

    def watermark(self) -> dict[str, str]:
        return {seg.stream: seg.last_id for seg in self.segments}

    def add(self, seg: ArchiveSegment) -> None:
        """Name ``seg`` (its file durable already) in the manifest, durably."""
        self.segments.append(seg)
        self._save()

    def replace(self, old: ArchiveSegment, new: ArchiveSegment) -> None:
        """Name ``new`` (its file durable already) in ``old``'s place, durably."""
        self.segments[self.segments.index(old)] = new
        self._save()

    def _save(self) -> None:
        manifest = _Manifest(format=FORMAT, segments=self.segments)
        write_private(self.archive.manifest_path, msgspec.json.format(msgspec.json.encode(manifest), indent=1), fsync=True)


class _SegmentFile:
    """One segment being written: a temporary file, renamed into place by ``close``."""

    def __init__(self, archive: Archive, stream: str, first_id: str, tag: str = "") -> None:
        self.stream, self.first_id, self.last_id = stream, first_id, first_id
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", stream)[:100]
        name = f"{safe}-{hashlib.sha256(stream.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}.{first_id}{tag}.xz"
        self.file = f"segments/{name}"
        self.path = archive.directory / self.file
        self.tmp = self.path.with_name(name + ".tmp")
        self.out = os.fdopen(open_private(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb")
        self.compressor = lzma.LZMACompressor(format=lzma.FORMAT_XZ, filters=_FILTERS)
        self.digest = hashlib.sha256()
        self.size = self.count = self.raw = 0
        self._frame(_ENCODER.encode({"memstream_archive": FORMAT, "stream": stream}))

    @property
    def full(self) -> bool:
        return self.count >= SEGMENT_ENTRIES or self.raw >= SEGMENT_BYTES

    def add(self, entry_id: str, pairs: list[tuple[bytes, bytes]]) -> None:
        self._frame(_ENCODER.encode((entry_id, pairs)))
        self.count += 1
        self.raw += sum(len(k) + len(v) for k, v in pairs)
        self.last_id = entry_id

    def _frame(self, body: bytes) -> None:
        self._write(self.compressor.compress(_FRAME.pack(len(body)) + body))

    def _write(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.digest.update(data)
            self.size += len(data)

    def close(self) -> ArchiveSegment:
        """The file, whole and durable in its place, as the manifest will list it."""
        self._write(self.compressor.flush())
        self.out.flush()
        os.fsync(self.out.fileno())
        self.out.close()
        os.replace(self.tmp, self.path)
        fsync_dir(self.path.parent)
        return ArchiveSegment(
            file=self.file,
            stream=self.stream,
            first_id=self.first_id,
            last_id=self.last_id,
            count=self.count,
            bytes=self.size,
            raw_bytes=self.raw,
            sha256=self.digest.hexdigest(),
            codec=CODEC,
            created=_now(),
        )

    def abort(self) -> None:
        self.out.close()
        self.tmp.unlink(missing_ok=True)


def _frames(f: BinaryIO) -> Iterator[bytes]:
    """The frames of a segment file, decompressed a chunk at a time."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    buf = bytearray()
    while True:
        while len(buf) >= _FRAME.size:
            (length,) = _FRAME.unpack_from(buf)
            if len(buf) < _FRAME.size + length:
                break
            yield bytes(buf[_FRAME.size : _FRAME.size + length])
            del buf[: _FRAME.size + length]
        if decompressor.eof:
            if buf:
                raise ValueError(f"{len(buf)} bytes after the last whole frame")
            return
        chunk = f.read(_CHUNK) if decompressor.needs_input else b""
        if decompressor.needs_input and not chunk:
            raise ValueError("the compressed data ends early")
        buf += decompressor.decompress(chunk, _CHUNK)


def _invalid(seg: ArchiveSegment) -> str | None:
    """Why a manifest row cannot be a segment, or None."""
    if not _FILE.fullmatch(seg.file):
        return "is not a file name under segments/"
    if seg.codec != CODEC:
        return f"has codec {seg.codec[:40]!r}, not {CODEC!r}"
    if not (_ENTRY_ID.fullmatch(seg.first_id) and _ENTRY_ID.fullmatch(seg.last_id)):
        return "has an entry id that is not MS-SEQ"
    if (
        (seg.count < 1 and not seg.erased)
        or seg.count < 0
        or seg.erased < 0
        or parse_entry_id(seg.first_id) > parse_entry_id(seg.last_id)
    ):
        return "holds no entries"
    return None


def _by_stream(segments: list[ArchiveSegment]) -> dict[str, list[ArchiveSegment]]:
    out: dict[str, list[ArchiveSegment]] = {}
    for seg in segments:
        out.setdefault(seg.stream, []).append(seg)
    return out


def _since(since: str) -> Id | None:
    return None if since in ("-", "0", "") else parse_entry_id(since)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- the consumer groups ------------------------------------------------------------------------
class _Group:
    """How far one consumer group is on one stream."""

    def __init__(
        self, name: str, delivered: Id, pending: int, oldest_pending: Id | None, lag: int | None, exists: bool = True
    ) -> None:
        self.name, self.delivered, self.pending = name, delivered, pending
        self.oldest_pending, self.lag, self.exists = oldest_pending, lag, exists

    @property
    def applied_below(self) -> Id:
        """Every entry below this id is applied (delivered and acknowledged)."""
        return self.oldest_pending if self.oldest_pending is not None else _next(self.delivered)

    @property
    def trim_below(self) -> Id:
        """What a trim keeps of this group: its oldest pending entry and its last delivered one."""
        return self.oldest_pending if self.oldest_pending is not None else self.delivered

    def behind(self, key: str, first: str, point: str) -> str:
        if not self.exists:
            return (
                f"consumer group {self.name} does not exist on {key}: it has applied none of its entries "
                f"(the first below {point} is {first})"
            )
        return (
            f"consumer group {self.name} on {key} has not applied every entry below {point}: the first it has "
            f"not is {first} (last delivered {_fmt(self.delivered)}, {self.pending} pending, lag "
            f"{'unknown' if self.lag is None else self.lag})"
        )


def _groups(client: redis.Redis, key: str, expected: Iterable[str]) -> list[_Group]:
    """Every consumer group on ``key``, and each ``expected`` one it lacks (as at 0-0)."""
    try:
        infos = client.xinfo_groups(key)
    except redis.ResponseError:  # no such stream
        infos = []
    out = []
    for info in infos:
        raw_name = info["name"]
        pending = int(info.get("pending") or 0)
        oldest = None
        if pending:
            summary = client.xpending(key, raw_name)
            if summary.get("min") is not None:
                oldest = parse_entry_id(summary["min"])
        lag = info.get("lag")
        out.append(
            _Group(shown(raw_name), parse_entry_id(info["last-delivered-id"]), pending, oldest, None if lag is None else int(lag))
        )
    present = {g.name for g in out}
    out += [_Group(name, (0, 0), 0, None, None, exists=False) for name in expected if name not in present]
    return out


def _first_in(client: redis.Redis, key: str, low: Id, high: Id) -> str | None:
    """The first entry id of ``key`` in [low, high), or None."""
    if low > MAX_ID:
        return None
    got = client.xrange(key, min=_fmt(low), max=_below(high), count=1)
    return xrange_entry(got[0])[0] if got else None


# -- archive: write, record, trim -----------------------------------------------------------------
def archive(
    eventlog: EventLog,
    archive: Archive,
    before: str | date | datetime | None = None,
    *,
    groups: Iterable[str] = (),
    trim: bool = True,
    progress: Progress | None = None,
    count: int = 1000,
) -> dict[str, Any]:
    """Archive every entry below ``before`` (an entry id, a date or a time: ``entry_id_of``)
    not archived yet, then trim the streams (see the module's guarantees).

    ``before`` None: per stream, everything every consumer group on it has applied (a
    stream without any group keeps everything). ``groups`` (the projections' groups) must
    have applied what is archived: one missing from a stream has applied none of it.
    ``trim`` False writes and records only. ``progress(task, done, total)`` is called as
    entries are written (``total`` None when unknown).

    Returns plain data: per stream what was archived, its watermark and what was trimmed,
    and the totals. Raises ``GroupBehind`` (nothing done), ``ArchiveBusy``,
    ``ArchiveError``, ``OSError`` and ``redis.RedisError``; entries archived before a
    failure stay archived, and are not archived again.
    """
    client = eventlog.client
    expected = list(groups)
    point = None if before is None else parse_entry_id(entry_id_of(before))
    started = time.perf_counter()
    with archive.writing() as writer:
        marks = writer.watermark()
        bounds: dict[str, Id] = {}
        behind = []
        streams_read = list(eventlog.stream_keys)
        for key in list(streams_read):
            try:
                positions = _groups(client, key, expected)
            except redis.ResponseError:
                if keys.stream_tenant(eventlog.prefix, key) is None:
                    raise
                streams_read.remove(key)  # a tenant's log its user made another type: its own to mend
                continue
            if point is None:
                bounds[key] = min((g.applied_below for g in positions), default=(0, 0))
                continue
            bounds[key] = point
            for g in positions:
                if g.applied_below < point:
                    first = _first_in(client, key, g.applied_below, point)
                    if first is not None:
                        behind.append(g.behind(key, first, _fmt(point)))
        if behind:
            raise GroupBehind(
                "nothing archived: "
                + "; ".join(behind)
                + ". Archive below that point, or let the group catch up (memstream stats shows its lag)"
            )
        streams: dict[str, dict[str, Any]] = {}
        for key in list(streams_read):
            try:
                streams[key] = _copy(client, writer, key, marks.get(key), bounds[key], progress, count)
            except redis.ResponseError:
                if keys.stream_tenant(eventlog.prefix, key) is None:
                    raise
                streams_read.remove(key)
        marks = writer.watermark()
        recorded = keys.archived(eventlog.prefix)
        for key, mark in marks.items():
            current = client.hget(recorded, key)
            if current is None or parse_entry_id(current) < parse_entry_id(mark):
                client.hset(recorded, key, mark)  # before any trim: readers learn what the archive holds
        written = time.perf_counter()
        for key in streams_read:
            row = streams[key]
            row["watermark"] = marks.get(key)
            try:
                row["trimmed"], row["trimmed_below"] = _trim(client, key, marks.get(key), expected) if trim else (0, None)
            except redis.ResponseError:
                if keys.stream_tenant(eventlog.prefix, key) is None:
                    raise
                row["trimmed"], row["trimmed_below"] = 0, None
    done = time.perf_counter()
    rows = streams.values()
    return {
        "directory": str(archive.directory),
        "streams": streams,
        "archived": sum(r["archived"] for r in rows),
        "segments": sum(r["segments"] for r in rows),
        "bytes": sum(r["bytes"] for r in rows),
        "trimmed": sum(r["trimmed"] for r in rows),
        "seconds": {"write": round(written - started, 3), "trim": round(done - written, 3)},
    }


def _copy(
    client: redis.Redis, writer: _Writer, key: str, mark: str | None, below: Id, progress: Progress | None, count: int
) -> dict[str, Any]:
    """Write the entries of ``key`` above ``mark`` and below ``below`` as segments."""
    row: dict[str, Any] = {"before": _fmt(below), "archived": 0, "segments": 0, "bytes": 0}
    start = parse_entry_id(mark) if mark else None
    if below <= (start or (0, 0)) or below == (0, 0):
        return row
    task = f"archive {key}"
    total = _total(client, key, start, below)
    seg: _SegmentFile | None = None
    cursor: str | None = "-" if mark is None else next_after(mark)
    try:
        while cursor is not None and (batch := client.xrange(key, min=cursor, max=_below(below), count=count)):
            for entry in batch:
                entry_id, fields = xrange_entry(entry)
                if seg is None:
                    seg = _SegmentFile(writer.archive, key, entry_id)
                seg.add(entry_id, [(_as_bytes(k), _as_bytes(v)) for k, v in fields.items()])
                row["archived"] += 1
                if seg.full:
                    _commit(writer, seg.close(), row)
                    seg = None
            cursor = next_after(entry_id)
            if progress is not None:
                progress(task, row["archived"], total)
        if seg is not None:
            _commit(writer, seg.close(), row)
            seg = None
    finally:
        if seg is not None:
            seg.abort()
    if progress is not None:
        progress(task, row["archived"], row["archived"])
    return row


def _commit(writer: _Writer, seg: ArchiveSegment, row: dict[str, Any]) -> None:
    writer.add(seg)
    row["segments"] += 1
    row["bytes"] += seg.bytes


def _total(client: redis.Redis, key: str, start: Id | None, below: Id) -> int | None:
    """How many entries will be written, when the whole stream is (else unknown)."""
    first, last = client.xrange(key, count=1), client.xrevrange(key, count=1)
    if not first or not last:
        return 0
    if (start is None or parse_entry_id(xrange_entry(first[0])[0]) > start) and parse_entry_id(xrange_entry(last[0])[0]) < below:
        return int(client.xlen(key))
    return None


def _trim(client: redis.Redis, key: str, mark: str | None, expected: list[str]) -> tuple[int, str | None]:
    """Trim ``key`` strictly below its watermark's successor and every group's position, read now."""
    if mark is None:
        return 0, None
    limit = _next(parse_entry_id(mark))
    for g in _groups(client, key, expected):
        limit = min(limit, g.trim_below)
    if limit <= (0, 1):
        return 0, None
    limit = min(limit, MAX_ID)  # past the largest id: all but the last entry (a MINID cannot say more)
    trimmed = client.xtrim(key, minid=_fmt(limit), approximate=False)
    return int(trimmed), _fmt(limit)


# -- erase: the one change to a written segment ---------------------------------------------------
def erase(archive: Archive, doomed: dict[str, set[str]]) -> dict[str, int]:
    """Rewrite each segment that holds an entry of ``doomed`` (stream key -> entry ids)
    without those entries, under the archive's lock (``ArchiveBusy`` while an archiver
    writes): the new file is whole and durable before the manifest names it in place of
    the old one (same ``first_id`` and ``last_id``: the range of the log it covers, so
    watermarks and trims are unchanged; ``count`` what it holds, ``erased`` what was
    removed), then the old file is deleted. A segment left empty stays listed. This is
    ``memstream forget``'s, and the only change ever made to a written segment.
    Idempotent: entries already gone are not counted. Returns the segments rewritten and
    the entries removed."""
    out = {"segments": 0, "entries": 0}
    if not any(doomed.values()) or not archive.segments():
        return out  # nothing to erase: no directory or lock is made
    with archive.writing() as writer:
        for seg in list(writer.segments):
            ids = doomed.get(seg.stream)
            if not ids:
                continue
            low, high = parse_entry_id(seg.first_id), parse_entry_id(seg.last_id)
            if not any(low <= parse_entry_id(i) <= high for i in ids):
                continue
            entries = list(archive._read_segment(seg, None))
            kept = [(entry_id, fields) for _, entry_id, fields in entries if entry_id not in ids]
            if len(kept) == len(entries):
                continue
            tag = f".erased{int(time.time() * 1000)}"
            new_file = _SegmentFile(archive, seg.stream, seg.first_id, tag)
            try:
                for entry_id, fields in kept:
                    new_file.add(entry_id, [(_as_bytes(k), _as_bytes(v)) for k, v in fields.items()])
                written = new_file.close()
            except BaseException:
                new_file.abort()
                raise
            removed = len(entries) - len(kept)
            writer.replace(
                seg, msgspec.structs.replace(written, first_id=seg.first_id, last_id=seg.last_id, erased=seg.erased + removed)
            )
            if seg.file != written.file:
                (archive.directory / seg.file).unlink(missing_ok=True)
                fsync_dir(archive.segments_dir)
            out["segments"] += 1
            out["entries"] += removed
    return out


# -- history: the archive, then the streams --------------------------------------------------------
def history(eventlog: EventLog, archive: Archive, since: str = "-", count: int = 1000) -> Iterator[tuple[str, str, EntryFields]]:
    """The whole log after ``since`` (exclusive; "-" for all) as one sequence, oldest
    first: (stream key, entry id, raw fields), as ``EventLog.entries`` yields; see the
    module's guarantees. Reads each stream ``count`` entries at a time, as the merge needs."""
    by_stream = _by_stream(archive.segments())
    ordered = list(eventlog.stream_keys)
    ordered += sorted((k for k in by_stream if k not in set(ordered)), key=_stream_order)
    start = _since(since)
    histories = (_stream_history(eventlog, archive, key, by_stream.get(key, []), start, count) for key in ordered)
    return heapq.merge(
        *(_tolerant(eventlog, key, entries) for key, entries in zip(ordered, histories)),
        key=lambda entry: parse_entry_id(entry[1]),
    )


def _tolerant(
    eventlog: EventLog, key: str, entries: Iterator[tuple[str, str, EntryFields]]
) -> Iterator[tuple[str, str, EntryFields]]:
    """``entries`` of ``key``, ended (not failed) by a Redis error on a tenant's log: its user
    may make it another type at any time, and what the other logs hold is read on."""
    try:
        yield from entries
    except redis.ResponseError:
        if keys.stream_tenant(eventlog.prefix, key) is None:
            raise


def _stream_history(
    eventlog: EventLog, archive: Archive, key: str, segments: list[ArchiveSegment], after: Id | None, count: int
) -> Iterator[tuple[str, str, EntryFields]]:
    yield from archive._read(segments, after)
    cursor = max(after or (0, 0), parse_entry_id(segments[-1].last_id)) if segments else after
    recorded_key = keys.archived(eventlog.prefix)
    while True:
        if cursor == MAX_ID:
            return  # nothing can follow the largest id
        low = "-" if cursor is None else "(" + _fmt(cursor)
        if eventlog.clustered:
            # the watermark is in the prefix's slot, the stream in its shard's: no snapshot of
            # the three (and redis-py's cluster transactions leave XRANGE's reply unparsed).
            # Read in this order: the archiver records a watermark before it trims, so a
            # trim that took entries from the batch shows in the head read after it, and its
            # watermark in the one read last; the archive then gives them
            batch = eventlog.client.xrange(key, min=low, max="+", count=count)
            head = eventlog.client.xrange(key, min="-", max="+", count=1)
            recorded = eventlog.client.hget(recorded_key, key)
        else:
            pipe = eventlog.client.pipeline(transaction=True)  # one snapshot: the batch, the head, the watermark
            pipe.xrange(key, min=low, max="+", count=count)
            pipe.xrange(key, min="-", max="+", count=1)
            pipe.hget(recorded_key, key)
            batch, head, recorded = pipe.execute()
        if (
            recorded is not None
            and (cursor is None or parse_entry_id(recorded) > cursor)
            and (not head or cursor is None or parse_entry_id(xrange_entry(head[0])[0]) > cursor)
        ):
            # entries above the cursor were archived and may be trimmed: they come from the archive
            gained = _archived_since(archive, key, cursor, parse_entry_id(recorded))
            yield from archive._read(gained, cursor)
            cursor = max(cursor or (0, 0), parse_entry_id(gained[-1].last_id))
            continue
        if not batch:
            return
        for entry in batch:
            entry_id, fields = xrange_entry(entry)
            yield key, entry_id, fields
        cursor = parse_entry_id(entry_id)


def _archived_since(archive: Archive, key: str, cursor: Id | None, recorded: Id) -> list[ArchiveSegment]:
    """The segments of ``key`` above ``cursor``, once the manifest reaches ``recorded``."""
    for attempt in range(_GAP_RETRIES + 1):
        segments = [s for s in archive.segments() if s.stream == key]
        if segments and parse_entry_id(segments[-1].last_id) >= recorded:
            return [s for s in segments if cursor is None or parse_entry_id(s.last_id) > cursor]
        if attempt < _GAP_RETRIES:
            time.sleep(0.5 * (attempt + 1))
    held = f"entries up to {segments[-1].last_id}" if segments else "no entries"
    raise ArchiveGap(
        f"the log records entries of {key} up to {_fmt(recorded)} as archived (and may have trimmed "
        f"them from Redis), but the archive {archive.directory} holds {held} of that stream: read "
        "the archive they were written to (MEMSTREAM_ARCHIVE_DIR, or memstream archive --to)"
    )
