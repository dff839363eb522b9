"""A command starts without importing what only some commands run: every ``memstream``
invocation (a user's, and each of the suite's child processes) pays for what the command
line imports. The workers, the projections (numpy, the stores, the embedders) are imported
by the operations that use them, when they run (memstream.ops's module doc)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("memstream.workers", "memstream.projections", "numpy", "qdrant_edge", "httpx")


def test_the_command_line_imports_no_worker_projection_or_numpy():
    code = (
        "import json, sys\n"
        "import memstream.cli.commands\n"
        "print(json.dumps(sorted({m for m in sys.modules if m.split('.')[0] in ('numpy', 'qdrant_edge', 'httpx')"
        " or '.'.join(m.split('.')[:2]) in ('memstream.workers', 'memstream.projections')})))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert not [m for m in loaded if m.startswith(HEAVY)], loaded
