"""The parent's handle on one tree's query process for ``memstream bench reads``
(``memstream.bench.reads``): the child (``reads_child``, run by path with that tree first on
the path) is started, asked one JSON command a line, and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from memstream.bench import reads_child
from memstream.bench.reads_child import CHILD
from memstream.core import stop_process

__all__ = ["QueryProcess"]


class QueryProcess:
    """The parent's handle on one tree's query process."""

    def __init__(
        self, label: str, path: Path, url: str, prefix: str, home: Path, embedder: str, replica: int = 0, late_rerank: str = ""
    ) -> None:
        self.label = label
        self.prefix = prefix
        boot = f"import runpy, sys; sys.path.insert(0, sys.argv[1]); runpy.run_path(sys.argv[2], run_name={CHILD!r})"
        # one BLAS thread: OpenBLAS's idle threads spin, counted as the process's CPU
        env = {**os.environ, "PYTHONPATH": str(path), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        if late_rerank:
            env["MEMSTREAM_LATE_RERANK"] = late_rerank
        env.pop("MEMSTREAM_HOME", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", boot, str(path), str(Path(reads_child.__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.ask({"url": url, "prefix": prefix, "home": str(home), "embedder": embedder, "replica": replica})

    def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the query process of {self.label} ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.label}: {answer['error']}")
        return answer

    def close(self) -> dict[str, Any]:
        try:
            return self.ask({"cmd": "quit"})
        except (RuntimeError, OSError, ValueError):
            return {}
        finally:
            stop_process(self.proc, 30, by_stdin=True)
            self.close_stdout()

    def close_stdout(self) -> None:  # once stopped (``stop_process`` closed its stdin)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
