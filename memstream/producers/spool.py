"""The local write-ahead spool: what a hook writes before it returns.

A spool is a directory of segment files. Each process appends to its own segment,
locked with ``flock`` for as long as the process lives; a segment whose lock can be
taken belongs to a dead process and is adopted by whoever takes it.

Record layout (big-endian): magic ``MSR1`` | payload length u32 | seq u64 |
crc32(seq + payload) u32 | payload. One record is written with one ``os.write`` on an
``O_APPEND`` descriptor, so once ``append`` returns the record is in the kernel and
survives a crash or SIGKILL of the process (not a power loss: see ``fsync``).

The agent's thread appends while other threads of the process (the shipper, recall) may
be waiting for the interpreter lock. ``os.write`` releases that lock for the system call,
and a thread waiting for it then runs a whole stretch of its own work (a batch of the
shipper's: 0.1–0.2 ms) before the hook can go on. So the record is written by libc's
``write`` called with the lock held (``_write``, through ``ctypes.PyDLL``): the call takes
a microsecond or two, and no other Python thread runs in the middle of a hook. The
shipper side keeps system calls out of the spool's own lock for the same reason: an
append never waits for a thread that is waiting on the kernel.

Guarantees: ``append`` never raises and never blocks on the network; it returns False
(and counts) when the record is refused (bound reached, disk error). Sequence numbers
of one segment are strictly increasing in file order. The reader skips a corrupt region
to the next record, copies it to ``quarantine/`` and counts it; nothing after it is lost.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import structlog

from memstream.core import private_dir, write_private

__all__ = ["Spool", "Segment", "SpoolRecord", "MAGIC", "HEADER", "erase_records"]

log = structlog.get_logger("memstream.spool")

MAGIC = b"MSR1"
HEADER = struct.Struct(">4sIQI")
MAX_RECORD = 64 << 20  # a length above this is corruption, not a record


def _libc_write() -> Any:
    """libc's ``write`` called without releasing the interpreter lock; None if unavailable."""
    try:
        fn = ctypes.PyDLL(None, use_errno=True).write
    except (OSError, AttributeError):
        return None
    # no argtypes: their checks cost 2.7k instructions a call (callgrind), twice the rest
    # of the call; an int goes as a C int (libffi widens it; longer data take os.write)
    # and bytes as a pointer to their buffer
    fn.restype = ctypes.c_ssize_t
    return fn


_c_write = _libc_write()
_C_INT_MAX = (1 << 31) - 1


def _write(fd: int, data: bytes) -> int:
    """``os.write`` without handing the interpreter to another thread (see the module
    docstring): bytes written, or ``OSError`` as ``os.write`` raises it."""
    if _c_write is None or len(data) > _C_INT_MAX:
        return os.write(fd, data)
    while True:
        n = int(_c_write(fd, data, len(data)))
        if n >= 0:
            return n
        err = ctypes.get_errno()
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))


@dataclass(slots=True)
class SpoolRecord:
    seq: int
    payload: bytes
    end: int  # file offset just past this record


@dataclass
class Segment:
    """One segment file and its shipping checkpoint (offset, last seq)."""

    path: Path
    fd: int  # read descriptor, holding the flock for adopted segments
    offset: int = 0
    last_seq: int = 0
    closed: bool = False  # no more appends (rotated, or adopted from a dead process)
    limit: int | None = None  # bytes written, once a segment of ours is rotated
    corrupt: int = 0
    # sequence number of its last record: ours once rotated (the active one's is the spool's),
    # an adopted one's found at its end (None: not found there)
    written_seq: int | None = None

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def ckpt_path(self) -> Path:
        return self.path.with_suffix(".ckpt")

    def load_checkpoint(self) -> None:
        try:
            offset, seq = self.ckpt_path.read_text().split()
            self.offset, self.last_seq = int(offset), int(seq)
        except (OSError, ValueError):
            self.offset, self.last_seq = 0, 0

    def save_checkpoint(self) -> None:
        # Not fsynced: a lost checkpoint only means a re-send, which the log dedups.
        tmp = self.ckpt_path.with_suffix(".ckpt.tmp")
        tmp.write_text(f"{self.offset} {self.last_seq}\n")
        os.replace(tmp, self.ckpt_path)

    def read(self, limit: int, max_records: int, quarantine: Path) -> tuple[list[SpoolRecord], int]:
        """Records from the checkpoint up to byte ``limit`` and the offset after them.

        Corrupt bytes (bad magic, bad checksum, a torn last record of a dead writer)
        are copied to ``quarantine`` and skipped to the next record.
        """
        reader = _Window(self.fd, limit)
        out: list[SpoolRecord] = []
        pos = self.offset
        while len(out) < max_records and pos < limit:
            head = reader.get(pos, HEADER.size)
            if len(head) < HEADER.size:
                if self.closed:
                    pos = self._skip(reader, quarantine, pos, limit)
                break
            magic, length, seq, crc = HEADER.unpack(head)
            if magic != MAGIC or length > MAX_RECORD:
                pos = self._skip(reader, quarantine, pos, reader.find(MAGIC, pos + 1))
                continue
            end = pos + HEADER.size + length
            if end > limit:
                if self.closed:  # a torn last record of a dead writer
                    pos = self._skip(reader, quarantine, pos, reader.find(MAGIC, pos + 1))
                    continue
                break  # cannot happen for our own segment: limit is whole records
            payload = reader.get(pos + HEADER.size, length)
            if zlib.crc32(payload, zlib.crc32(struct.pack(">Q", seq))) != crc:
                pos = self._skip(reader, quarantine, pos, reader.find(MAGIC, pos + 1))
                continue
            pos = end
            out.append(SpoolRecord(seq=seq, payload=payload, end=pos))
        return out, pos

    def _skip(self, reader: _Window, quarantine: Path, start: int, stop: int) -> int:
        self._quarantine(quarantine, start, reader.get(start, stop - start))
        return stop

    def _quarantine(self, directory: Path, offset: int, data: bytes) -> None:
        self.corrupt += 1
        try:
            private_dir(directory)
            write_private(directory / f"{self.id}.{offset}.bad", data)  # raw text: owner only
        except OSError:
            pass
        log.warning(
            "spool.corrupt_record", segment=self.id, offset=offset, bytes=len(data), action="copied to quarantine and skipped"
        )


class _Window:
    """Buffered positional reads of one file up to a byte limit."""

    CHUNK = 1 << 16  # a batch of records is tens of KB: no need to copy a megabyte per read

    def __init__(self, fd: int, limit: int):
        self.fd, self.limit = fd, limit
        self.start, self.buf = 0, b""

    def get(self, pos: int, n: int) -> bytes:
        n = max(0, min(n, self.limit - pos))
        if not (self.start <= pos and pos + n <= self.start + len(self.buf)):
            self.start = pos
            self.buf = os.pread(self.fd, min(max(n, self.CHUNK), self.limit - pos), pos)
        return self.buf[pos - self.start : pos - self.start + n]

    def find(self, needle: bytes, pos: int) -> int:
        """Offset of the next ``needle`` at or after ``pos``; ``limit`` if none."""
        while pos < self.limit:
            chunk = self.get(pos, self.CHUNK)
            found = chunk.find(needle)
            if found >= 0:
                return pos + found
            if len(chunk) < self.CHUNK:
                return self.limit
            pos += len(chunk) - len(needle) + 1
        return self.limit


class Spool:
    """The spool directory of this process: one active segment plus adopted ones."""

    def __init__(
        self, directory: str | os.PathLike[str], max_bytes: int = 1 << 30, fsync: str = "1.0", rotate_bytes: int = 16 << 20
    ):
        self.dir = Path(directory)
        self.quarantine = self.dir / "quarantine"
        self.max_bytes = max_bytes
        self.always_fsync = fsync == "always"
        self.rotate_bytes = rotate_bytes
        self._lock = threading.Lock()
        self._wfd = -1
        self._active: Segment | None = None
        self._written = 0  # bytes in the active segment written by this process
        self._seq = 0
        # bytes not yet shipped: appended by this process or in segments it adopted (the
        # disk bound covers both, so restarts while Redis is down do not grow it)
        self._unshipped = 0
        self._dirty = False
        self.segments: list[Segment] = []  # own closed, then active; adopted are separate
        self.adopted: list[Segment] = []
        # counters (read by stats/doctor; written under self._lock on the hot path)
        self.appended = 0
        self.refused = 0
        self.errors = 0
        self._corrupt_removed = 0  # corrupt regions counted by segments since deleted
        self._warned_full = 0.0
        private_dir(self.dir)
        self._open_segment()

    # -- append side (the hot path) -------------------------------------------------
    def append(self, payload: bytes) -> bool:
        """Write one record with a single write(); False if refused. Never raises."""
        n = HEADER.size + len(payload)
        with self._lock:
            if self._unshipped + n > self.max_bytes or self._wfd < 0:
                self.refused += 1
                now = time.monotonic()
                if now - self._warned_full > 10:
                    self._warned_full = now
                    log.error(
                        "spool.full",
                        refused=self.refused,
                        unshipped=self._unshipped,
                        max_bytes=self.max_bytes,
                        action="events are being refused: start Redis/the memstream service or raise MEMSTREAM_SPOOL_MAX_BYTES",
                    )
                return False
            seq = self._seq + 1
            sb = seq.to_bytes(8, "big")
            record = HEADER.pack(MAGIC, len(payload), seq, zlib.crc32(payload, zlib.crc32(sb))) + payload
            try:
                written = _write(self._wfd, record)
            except OSError as exc:
                self.errors += 1
                self.refused += 1
                log.error("spool.write_failed", error=str(exc), errno=exc.errno)
                return False
            self._seq = seq
            self._written += written
            self._unshipped += written
            self._dirty = True
            if written != n:  # ENOSPC mid-record: the reader resyncs past the torn bytes
                self.errors += 1
                self.refused += 1
                return False
            self.appended += 1
            if self.always_fsync:
                os.fsync(self._wfd)
            return True

    # -- segment management (shipper thread) ----------------------------------------
    def _open_segment(self) -> None:
        """Create a new active segment (the files are opened before the lock is taken)."""
        name = f"{time.time_ns() // 1_000_000:013d}-{os.getpid()}-{os.urandom(4).hex()}.seg"
        path = self.dir / name
        wfd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        fcntl.flock(wfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rfd = os.open(path, os.O_RDONLY)
        seg = Segment(path=path, fd=rfd)
        with self._lock:
            old_wfd = self._wfd
            if self._active is not None:  # rotated: its end is fixed from here on
                self._active.closed = True
                self._active.limit = self._written
                self._active.written_seq = self._seq
            self._wfd, self._active, self._written, self._seq = wfd, seg, 0, 0
            self.segments.append(seg)
        if old_wfd >= 0:
            os.close(old_wfd)

    def rotate_if_large(self) -> None:
        """Start a new segment once the active one is past the rotation size."""
        if self._active is None or self._written < self.rotate_bytes:
            return
        self._open_segment()

    def limit_of(self, seg: Segment) -> int:
        """How far a segment may be read: written bytes for ours, the size found at
        adoption for a dead process's (no system call: called under the lock)."""
        if seg is self._active:
            return self._written
        if seg.limit is not None:
            return seg.limit
        return os.fstat(seg.fd).st_size

    def shipped(self, seg: Segment, end: int, last_seq: int) -> None:
        """Advance a segment's checkpoint after its records reached the log."""
        with self._lock:  # one step for ``drained`` and the bound (other threads)
            self._unshipped -= end - seg.offset
            seg.offset, seg.last_seq = end, last_seq
        seg.save_checkpoint()  # a crash before this re-ships the batch: deduplicated by seq

    def drained(self) -> bool:
        """True if every segment is shipped to its end. Safe from any thread."""
        with self._lock:
            return all(s.offset >= self.limit_of(s) for s in self.ship_order())

    def finished(self, seg: Segment) -> bool:
        return seg.closed and seg.offset >= self.limit_of(seg)

    def remove(self, seg: Segment) -> None:
        """Delete a fully shipped, closed segment and its checkpoint."""
        for p in (seg.path, seg.ckpt_path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        with self._lock:  # out of ``drained``'s sight (another thread) before its fd closes
            seg.limit = seg.offset
            if seg in self.segments or seg in self.adopted:
                self._corrupt_removed += seg.corrupt
            if seg in self.segments:
                self.segments.remove(seg)
            if seg in self.adopted:
                self.adopted.remove(seg)
        os.close(seg.fd)  # not under the lock: a system call there would make an append wait

    def adopt_orphans(self) -> list[Segment]:
        """Take over segments of dead processes (their flock is free). Oldest first."""
        taken = {s.path.name for s in self.segments + self.adopted}
        new = []
        for path in sorted(self.dir.glob("*.seg")):
            if path.name in taken:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    log.warning("spool.adopt_failed", segment=path.stem, error=str(exc))
                continue
            if os.fstat(fd).st_nlink == 0:  # removed by its last adopter meanwhile
                os.close(fd)
                continue
            # its writer is dead (we hold its flock): the size no longer changes
            size = os.fstat(fd).st_size
            seg = Segment(path=path, fd=fd, closed=True, limit=size)
            seg.load_checkpoint()
            seg.written_seq = _last_seq(fd, seg.offset, size)
            new.append(seg)
            log.info("spool.adopted", segment=seg.id, bytes=size - seg.offset)
        unshipped = sum(max(0, (seg.limit or 0) - seg.offset) for seg in new)
        with self._lock:
            self.adopted.extend(new)
            self._unshipped += unshipped
        return new

    def sync(self) -> None:
        """fsync the active segment if anything was written since the last sync."""
        if self._dirty and self._wfd >= 0:
            self._dirty = False
            try:
                os.fsync(self._wfd)
            except OSError as exc:
                log.warning("spool.fsync_failed", error=str(exc))

    def ship_order(self) -> list[Segment]:
        """Adopted segments (older processes) first, then ours, oldest first."""
        return sorted(self.adopted, key=lambda s: s.path.name) + list(self.segments)

    @property
    def corrupt(self) -> int:
        """Corrupt regions quarantined by this process, deleted segments included."""
        return self._corrupt_removed + sum(s.corrupt for s in self.ship_order())

    @property
    def unshipped_bytes(self) -> int:
        return self._unshipped

    @property
    def unshipped_events(self) -> int:
        """Records not yet shipped, in this process's segments and the adopted ones: the
        sequence numbers between each segment's checkpoint and its last record (an adopted
        segment whose last record was not found within its last ``TAIL`` bytes counts 1)."""
        with self._lock:
            total = 0
            for seg in self.ship_order():
                if seg.offset >= self.limit_of(seg):
                    continue
                last = self._seq if seg is self._active else seg.written_seq
                total += 1 if last is None else max(0, last - seg.last_seq)
            return total

    def close(self) -> None:
        """Release the locks; unshipped records stay on disk for the next process."""
        with self._lock:
            if self._wfd >= 0:
                os.close(self._wfd)
                self._wfd = -1
        for seg in list(self.segments) + list(self.adopted):
            if seg.offset >= self.limit_of(seg):
                self.remove(seg)  # fully shipped (or empty): leave nothing behind
            else:
                os.close(seg.fd)
        self.segments.clear()
        self.adopted.clear()
        self._active = None


TAIL = 1 << 20  # how far from its end an adopted segment's last record is looked for


def _last_seq(fd: int, start: int, size: int) -> int | None:
    """The sequence number of the last whole record (magic, length and checksum right) in
    the file's last ``TAIL`` bytes after ``start``; None when there is none."""
    low = max(start, size - TAIL)
    try:
        data = os.pread(fd, size - low, low)
    except OSError:
        return None
    pos = len(data)
    while (pos := data.rfind(MAGIC, 0, pos)) >= 0:
        if pos + HEADER.size <= len(data):
            _, length, seq, crc = HEADER.unpack_from(data, pos)
            end = pos + HEADER.size + length
            if end <= len(data) and zlib.crc32(data[pos + HEADER.size : end], zlib.crc32(struct.pack(">Q", seq))) == crc:
                return int(seq)
    return None


def spool_usage(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Segments, bytes on disk and unshipped bytes of a spool directory (any owner)."""
    d = Path(directory)
    segments = 0
    total = 0
    pending = 0
    for path in d.glob("*.seg"):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        seg = Segment(path=path, fd=-1)
        seg.load_checkpoint()
        segments += 1
        total += size
        pending += max(0, size - seg.offset)
    quarantined = len(list((d / "quarantine").glob("*.bad"))) if (d / "quarantine").exists() else 0
    return {"dir": str(d), "segments": segments, "bytes": total, "unshipped_bytes": pending, "quarantined": quarantined}


def erase_records(directory: str | os.PathLike[str], doomed: Callable[[bytes], bool], dry_run: bool = False) -> dict[str, int]:
    """Remove from the spool in ``directory`` every record whose payload ``doomed`` names
    (``memstream forget``), shipped or not, and every quarantined region it names.

    A segment no live process holds (its ``flock`` is free: a dead process's, or a shipped
    leftover) is rewritten without those records, its checkpoint moved back by the bytes
    removed before it (sequence numbers are kept, so the log's dedup is unchanged); the
    new file replaces the old one atomically. A segment a running process appends to is
    only counted (``held``): stop that process, or let it ship, then run again.
    Returns counts: ``records`` removed, ``segments`` rewritten, ``quarantined`` files
    deleted, ``held`` records left in held segments."""
    d = Path(directory)
    out = {"records": 0, "segments": 0, "quarantined": 0, "held": 0}
    if not d.is_dir():
        return out
    for path in sorted(d.glob("*.seg")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                held = True
            seg = Segment(path=path, fd=fd, closed=not held)
            seg.load_checkpoint()
            checkpoint = seg.offset
            seg.offset = 0
            records, _ = seg.read(os.fstat(fd).st_size, 1 << 62, d / "quarantine")
            gone = [r for r in records if doomed(r.payload)]
            if not gone:
                continue
            if held or dry_run:
                out["held" if held else "records"] += len(gone)
                continue
            _rewrite_segment(seg, records, {id(r) for r in gone}, checkpoint)
            out["records"] += len(gone)
            out["segments"] += 1
        finally:
            os.close(fd)  # releases the flock
    quarantine = d / "quarantine"
    if quarantine.is_dir():
        for bad in sorted(quarantine.glob("*.bad")):
            try:
                data = bad.read_bytes()
            except OSError:
                continue
            if doomed(data):
                out["quarantined"] += 1
                if not dry_run:
                    bad.unlink(missing_ok=True)
    return out


def _rewrite_segment(seg: Segment, records: list[SpoolRecord], gone: set[int], checkpoint: int) -> None:
    """Write ``seg``'s records but ``gone`` (by ``id``) to a new file that replaces it,
    and its checkpoint moved back by the bytes removed before it."""
    tmp = seg.path.with_name(seg.path.name + ".tmp")
    offset = 0  # the kept bytes before the checkpoint (a corrupt region's are dropped: quarantined already)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for r in records:
            if id(r) in gone:
                continue
            crc = zlib.crc32(r.payload, zlib.crc32(struct.pack(">Q", r.seq)))
            os.write(fd, HEADER.pack(MAGIC, len(r.payload), r.seq, crc) + r.payload)
            if r.end <= checkpoint:
                offset += HEADER.size + len(r.payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, seg.path)
    seg.offset = offset
    seg.save_checkpoint()
