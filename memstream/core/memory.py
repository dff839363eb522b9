"""Memory given back to the system: the free pages of the C heap (``release_freed_heap``:
glibc's ``malloc_trim``) and the pages of files a library read through once
(``release_file_pages``: ``madvise(MADV_PAGEOUT)``). Both do nothing where the C library
has no such call (not glibc, not Linux)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["release_file_pages", "release_freed_heap"]

_libc_lock = threading.Lock()
_libc_found: dict[str, Any] = {}  # libc's functions once looked up; None where there is none


def _libc(name: str, argtypes: list[Any] | None = None, restype: Any = None) -> Any:
    """The C library's function ``name`` (looked up once; None where it has none)."""
    with _libc_lock:
        if name not in _libc_found:
            try:
                fn = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True), name)
                if argtypes is not None:
                    fn.argtypes, fn.restype = argtypes, restype
            except (OSError, AttributeError):
                fn = None
            _libc_found[name] = fn
        return _libc_found[name]


def release_freed_heap() -> bool:
    """Give the system back the memory the C heap holds free (glibc's ``malloc_trim``;
    False, doing nothing, elsewhere). glibc keeps what a large native computation freed
    (building an onnxruntime session: about 60 MB; a batch of long texts: about 50 MB)
    for the process's later allocations, so its resident size stays at its peak."""
    trim = _libc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


_MADV_PAGEOUT = 21  # Linux 5.4+ (not in Python 3.11's mmap module)


def release_file_pages(directory: Path, maps: Path = Path("/proc/self/maps")) -> int:
    """Ask the kernel to reclaim the pages of the files under ``directory`` that this
    process has mapped (``madvise(MADV_PAGEOUT)``): the pages a store's engine read through
    once, as it opened the files (qdrant-edge reads every page of each payload index and id
    tracker as it loads a shard: 4 MB and 1 MB a field, mostly zeros), stay resident
    otherwise. Nothing is lost: the kernel writes back what it must before it drops a page,
    and a page read again is read from the file. The bytes asked for (0 where ``maps`` or
    ``madvise`` is missing: not Linux)."""
    madvise = _libc("madvise", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int)
    if madvise is None:
        return 0
    prefix = os.path.join(os.path.realpath(directory), "")
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return 0
    asked = 0
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith(prefix):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if madvise(start, end - start, _MADV_PAGEOUT) == 0:  # a mapping gone meanwhile: EINVAL/ENOMEM, skipped
            asked += end - start
    return asked
