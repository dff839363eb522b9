"""The embedded service's run file: where a running service says where its log is.

``$MEMSTREAM_HOME/run/service.json`` (mode 0600) exists only while the service serves;
it holds its pid and the URL of its Valkey, password included. ``read_run_file`` returns
it only when the process it names is alive.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_run_file(path: Path) -> dict | None:
    """The running service's run file, or None if absent, unreadable or stale."""
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not pid_alive(int(info.get("pid", 0))):
        return None
    return info
