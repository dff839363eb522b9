"""The Hermes memstream talks to: which command, which version, how it was installed, and
what it really loads as ``memstream``, asked from inside Hermes.

- ``find`` names the ``hermes`` command: the one given, else the one beside this
  interpreter (memstream installed in Hermes's environment), else the one on ``PATH``.
- ``detect`` asks it ``hermes --version``, and ``hermes --print-runtime-command``: the
  launchers of Hermes's package manager (0.21+) answer with the command of Hermes's own
  runtime (its store Python, run isolated); a pip-installed Hermes (0.19, or a fork on PyPI)
  has no such launcher, and its interpreter is the one its probe reports.
- ``probe`` runs ``hermes memstream probe`` with the Hermes home: Hermes's own CLI, in its
  own interpreter, asks Hermes's own loader for the provider (``memstream/hermes/plugin/cli.py``).
- ``verdict`` turns that into one line: Hermes loads memstream, or falls back to its
  built-in memory, why, and the command that fixes it for this kind of installation.

Guarantees: every function returns within its timeout whatever the command does, and
never raises (a command that cannot run is a verdict of its own).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Hermes", "find", "detect", "probe", "verdict", "PROBE_PREFIX"]

PROBE_PREFIX = "MEMSTREAM_PROBE "
_VERSION = re.compile(r"Hermes Agent v?(\d+(?:\.\d+)*[^\s(]*)")


@dataclass(frozen=True)
class Hermes:
    command: str
    version: str | None  # as ``hermes --version`` says it (None: it did not say)
    managed: bool  # installed by Hermes's package manager (its launcher has a runtime command)
    runtime: list[str] | None  # Hermes's runtime command (managed only), for the record

    @property
    def current(self) -> bool:
        """0.20 and later: the plugin loader with entry points and declared dependencies."""
        parts = re.findall(r"\d+", self.version or "")[:2]
        return self.managed or (len(parts) == 2 and (int(parts[0]), int(parts[1])) >= (0, 20))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "current": self.current}


def find(command: str | os.PathLike[str] | None = None) -> str | None:
    """The ``hermes`` command to ask (see the module docstring)."""
    if command:
        found = shutil.which(str(command))
        return found or (str(command) if Path(command).exists() else None)
    beside = Path(sys.executable).parent / "hermes"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hermes")


def _run(argv: list[str], home: Path | None, timeout: float) -> subprocess.CompletedProcess[str] | None:
    env = dict(os.environ)
    if home is not None:
        env["HERMES_HOME"] = str(home)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None


def detect(command: str, home: Path | None = None, timeout: float = 60.0) -> Hermes:
    """Ask ``command`` its version and whether it has a runtime command."""
    proc = _run([command, "--version"], home, timeout)
    match = _VERSION.search(proc.stdout) if proc is not None and proc.returncode == 0 else None
    runtime = None
    proc = _run([command, "--print-runtime-command"], home, timeout)
    if proc is not None and proc.returncode == 0:
        try:
            parsed = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            parsed = None
        if isinstance(parsed, list) and parsed and all(isinstance(a, str) for a in parsed):
            runtime = parsed
    return Hermes(command=command, version=match.group(1) if match else None, managed=runtime is not None, runtime=runtime)


def probe(hermes: Hermes, home: Path, timeout: float = 120.0) -> dict[str, Any]:
    """``hermes memstream probe`` in ``home``: what Hermes loads as memstream, from inside.

    ``{"error": ...}`` when Hermes has no ``memstream`` command there (it found no plugin
    for the selected provider) or the command failed."""
    proc = _run([hermes.command, "memstream", "probe"], home, timeout)
    if proc is None:
        return {"error": f"`{hermes.command} memstream probe` did not run or did not finish within {timeout:.0f}s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(PROBE_PREFIX):
            try:
                found = json.loads(line[len(PROBE_PREFIX) :])
            except ValueError:
                break
            if isinstance(found, dict):
                return found
    tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])[-300:]
    if "invalid choice" in tail:
        return {"error": "Hermes has no `memstream` command: it finds no memstream plugin for this home", "missing": True}
    return {"error": f"`hermes memstream probe` exited {proc.returncode}: {tail}"}


def fix(hermes: Hermes | None, home: Path, python: str | None = None) -> str:
    """The command that puts memstream into the environment this Hermes runs."""
    if hermes is not None and hermes.managed:
        return "run `hermes memory setup memstream` (Hermes's package manager installs the dependency the plugin declares)"
    if python:
        return f"install memstream into the Python that runs this pip-installed Hermes: {python} -m pip install memstream"
    return f"run `memstream install-hermes --home {home}`"


def verdict(hermes: Hermes | None, home: Path, selected: str, found: dict[str, Any] | None) -> tuple[bool | None, str]:
    """``(loads, line)``: whether this Hermes loads memstream in ``home`` (None: no Hermes
    to ask), and one line saying so, why, and what to do."""
    name = f"Hermes {hermes.version or '(version unknown)'}" if hermes is not None else "Hermes"
    if selected != "memstream":
        return False, (
            f"{name} will use {'provider ' + repr(selected) if selected else 'its built-in memory'}: "
            f"memory.provider is {selected or 'unset'!r}; run `memstream install-hermes --home {home}`"
        )
    if hermes is None:
        return None, "no `hermes` command found (give it with --hermes): whether Hermes can load memstream is unknown"
    found = found or {"error": "no probe"}
    python = found.get("python")
    if found.get("error"):
        advice = f"run `memstream install-hermes --home {home}`" if found.get("missing") else fix(hermes, home)
        return False, f"{name} will fall back to built-in memory: {found['error']}; {advice}"
    where = f"{python}" if python else "its Python"
    if not found.get("memstream"):
        return False, (
            f"{name} will fall back to built-in memory: its Python {where} cannot import memstream "
            f"({found.get('import_error') or 'not installed'}); {fix(hermes, home, python)}"
        )
    loaded = str(found.get("loaded") or "")
    if not loaded.startswith("memstream."):
        why = found.get("loader_error") or found.get("unavailable_reason") or f"Hermes's loader gave {loaded or 'nothing'}"
        return False, f"{name} will fall back to built-in memory: {why}"
    if not found.get("available"):
        return (
            False,
            f"{name} will fall back to built-in memory: memstream reports unavailable ({found.get('unavailable_reason')})",
        )
    return True, (
        f"{name} will load memstream {found['memstream']} (found at {found.get('found_at')}, Python {where}"
        f"{', managed install' if hermes.managed else ''})"
    )
