"""Owner-only files and directories under ``MEMSTREAM_HOME``.

The home holds every turn an agent recorded (the spool, the embedded Valkey's AOF, the
vector store, the embedding cache) and the embedded Valkey's password (the run file), so
nothing in it may be readable by another local user. Guarantees: ``private_dir`` leaves
the directory and the parents it creates mode 0700; ``write_private`` replaces a file
atomically with one of mode 0600 (with ``fsync``, durably: the file's data is on disk before
the rename, and the rename before it returns); ``fsync_dir`` makes a directory's entries
durable; ``tighten`` takes group and other bits off everything
below a directory (never following a symbolic link) and says how many it changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_dir", "write_private", "open_private", "fsync_dir", "tighten", "PRIVATE_UMASK"]

PRIVATE_UMASK = 0o077  # what the service runs under: Valkey and the stores create files 0600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as an existing directory of mode 0700 (created with its missing parents)."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, mode & 0o700)
    return path


def open_private(path: str | os.PathLike[str], flags: int = os.O_WRONLY | os.O_CREAT | os.O_APPEND) -> int:
    """``os.open`` of ``path`` with mode 0600 (an existing file is tightened too)."""
    fd = os.open(path, flags, 0o600)
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
        os.fchmod(fd, 0o600)
    return fd


def write_private(path: str | os.PathLike[str], text: str | bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` atomically with ``text`` (or bytes), mode 0600. With ``fsync`` the
    new content survives a power loss once this returns: the temporary file is fsynced
    before the rename, and the directory after it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make the entries of directory ``path`` (a rename, a new or removed file) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tighten(root: str | os.PathLike[str]) -> int:
    """Take group and other permissions off ``root`` and everything below it (symbolic
    links are not followed). Returns how many modes changed."""
    changed = 0
    root = Path(root)
    if not root.exists():
        return 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [None, *dirnames, *filenames]:
            p = dirpath if name is None else os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o077:
                try:
                    os.chmod(p, mode & 0o700)
                    changed += 1
                except OSError:
                    pass
    return changed
