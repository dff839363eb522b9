"""``memstream.plain_structlog``: the processes memstream starts import structlog without the
console extras it would import (rich, pygments, colorama), which stay importable after."""

from __future__ import annotations

import json
import subprocess
import sys

import memstream

PROBE = """
import json, sys
import memstream
first = memstream.plain_structlog()
import structlog, structlog.dev
extras = sorted(m for m in sys.modules if m.partition(".")[0] in memstream.CONSOLE_EXTRAS | {"pygments"})
from memstream.core.logs import configure
configure(json=False)
try:
    raise ValueError("boom")
except ValueError:
    structlog.get_logger("probe").exception("failed")
import rich.console
print(json.dumps({"first": first, "again": memstream.plain_structlog(), "extras": extras, "rich_after": "rich" in sys.modules}))
"""


def test_structlog_comes_without_its_console_extras_which_stay_importable():
    done = subprocess.run([sys.executable, "-P", "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(done.stdout)
    assert out == {"first": True, "again": False, "extras": [], "rich_after": True}
    assert "ValueError: boom" in done.stderr  # an exception is still rendered, as plain text


def test_it_changes_nothing_once_structlog_is_imported():
    import structlog  # noqa: F401  # this process has it already

    assert memstream.plain_structlog() is False


def test_the_service_and_its_child_start_with_it():
    from memstream.service.sidecar import CHILD

    assert "memstream.plain_structlog()" in CHILD.split("from memstream.service.sidecar import main")[0]
    main = memstream.__path__[0] + "/__main__.py"
    with open(main) as f:
        source = f.read()
    assert source.index("plain_structlog()") < source.index("from memstream.cli import main")
