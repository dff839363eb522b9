"""Time-ordered unique event ids (UUIDv7, RFC 9562), and the ids of imported events.

Guarantee: ids made by one process are strictly increasing as strings and as
integers, even within one millisecond or if the wall clock steps back; ids made by
different processes are unique (74 random bits) and ordered to the millisecond.
The id is the idempotency key of every consumer and maps directly to a Qdrant
point id (a UUID).

``derived_event_id`` makes the id of an event brought in from elsewhere (``memstream
import``): a UUIDv7 whose time is the item's own and whose 74 other bits are a hash of
what identifies the item, so importing the same item again gives the same id and the
log's dedup by id appends it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import uuid

__all__ = ["new_event_id", "derived_event_id", "event_id_time_ms", "MAX_ID_BYTES"]

# The most UTF-8 bytes of an event id and of each scope identifier: they become Redis keys,
# point payloads and filters. Admission dead-letters an entry over it; importers refuse one.
MAX_ID_BYTES = 1024

_lock = threading.Lock()
# Not a secret, only unique: a per-process generator seeded from the OS (os.urandom is a
# syscall, ~1 µs on the hook path), reseeded in a forked child so siblings never share it.
_rng = random.Random(os.urandom(16))
os.register_at_fork(after_in_child=lambda: _rng.seed(os.urandom(16)))
_last_ms = 0
_last_seq = 0
_MS_MASK = (1 << 48) - 1
_VARIANT = 0b10 << 62
_RAND_B_MASK = (1 << 62) - 1


def new_event_id() -> str:
    """A new UUIDv7 string; monotonic within this process, thread-safe."""
    global _last_ms, _last_seq
    ms = time.time_ns() // 1_000_000
    rand = _rng.getrandbits(80)
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            seq = _last_seq + 1
            if seq >= 1 << 12:  # 4096 ids in one millisecond: borrow the next one
                ms += 1
                seq = rand & 0x3FF
        else:
            seq = rand & 0x3FF  # leave room to count up within the millisecond
        _last_ms, _last_seq = ms, seq
    # The 128 bits as hex, formatted directly (str(uuid.UUID(...)) costs ~3 µs on the
    # hook path): 48 bits unix_ts_ms | version 7 + 12-bit rand_a (a per-process counter
    # within the millisecond) | RFC 4122 variant 0b10 + 62 random bits.
    h = "%012x%04x%016x" % (ms & _MS_MASK, 0x7000 | seq, _VARIANT | ((rand >> 16) & _RAND_B_MASK))
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def derived_event_id(at_ms: int, *key: str | int) -> str:
    """The UUIDv7 string of an imported item: time ``at_ms`` (unix milliseconds, clamped to
    0 .. 2**48 - 1) and 74 bits of the SHA-256 of ``key`` (typed, ordered: ``1`` and ``"1"``
    differ). The same arguments give the same id in every process and release; different
    keys collide with the odds of random ids."""
    if not key:
        raise ValueError("derived_event_id needs at least one key part")
    for part in key:
        if isinstance(part, bool) or not isinstance(part, (str, int)):
            raise ValueError(f"derived_event_id key parts are str or int, got {type(part).__name__}")
    text = json.dumps(["memstream.event", *key], ensure_ascii=False, separators=(",", ":"))
    bits = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:10], "big")
    ms = min(max(int(at_ms), 0), _MS_MASK)
    h = "%012x%04x%016x" % (ms, 0x7000 | (bits >> 68), _VARIANT | (bits & _RAND_B_MASK))
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def event_id_time_ms(event_id: str) -> int:
    """The unix time in milliseconds encoded in a UUIDv7 event id."""
    return uuid.UUID(event_id).int >> 80
