"""Owner-only files: ``write_private`` replaces a file whole, text or bytes, durably when asked."""

from __future__ import annotations

import stat

import pytest

from memstream.core import fsync_dir, write_private


@pytest.mark.parametrize("content", ["some text\n", b"\x00\xff bytes"])
@pytest.mark.parametrize("fsync", [False, True])
def test_write_private_replaces_the_file_whole_with_mode_0600_and_leaves_no_temporary(tmp_path, content, fsync):
    path = tmp_path / "file"
    path.write_text("old content, longer than the new one")
    path.chmod(0o644)
    write_private(path, content, fsync=fsync)
    assert (path.read_bytes() if isinstance(content, bytes) else path.read_text()) == content
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    fsync_dir(tmp_path)  # a directory can be fsynced
