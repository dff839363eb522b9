"""Install the memstream plugin into a Hermes home and select it; check that it is.

``install(home)`` copies the packaged plugin (``memstream/hermes/plugin/``: a shim
``__init__.py``, ``plugin.yaml``, ``cli.py``) into ``$HERMES_HOME/plugins/memstream/``
and sets ``memory.provider: memstream`` in ``$HERMES_HOME/config.yaml``, keeping every
other key. ``check(home)`` is what ``memstream doctor`` reports about it.

The shim only imports ``provider`` from the memstream distribution, so memstream must be
installed into the Python environment that runs Hermes; otherwise Hermes silently falls
back to its built-in memory. Both functions say whether that is the case.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from memstream.core import PermanentError

__all__ = ["install", "check", "hermes_home", "PLUGIN_NAME", "PLUGIN_FILES", "HermesInstallError"]

PLUGIN_NAME = "memstream"
PLUGIN_FILES = ("__init__.py", "plugin.yaml", "cli.py")
_MARKERS = ("register_memory_provider", "MemoryProvider")  # Hermes's discovery heuristic


class HermesInstallError(PermanentError, RuntimeError):
    """The Hermes home cannot be updated safely (message says why and what to do)."""


def hermes_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``home``, else ``$HERMES_HOME``, else ``~/.hermes`` (what Hermes itself uses)."""
    if home:
        return Path(home).expanduser()
    env = os.environ.get("HERMES_HOME", "").strip()
    return Path(env).expanduser() if env else Path("~/.hermes").expanduser()


def _packaged(name: str) -> bytes:
    return (resources.files("memstream.hermes") / "plugin" / name).read_bytes()


def _write_atomic(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode_from is not None and mode_from.exists():
            shutil.copymode(mode_from, tmp)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _load_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except (OSError, yaml.YAMLError) as exc:
        raise HermesInstallError(f"cannot read {path}: {exc}; fix it (or move it away) and run again") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HermesInstallError(f"{path} is not a YAML mapping; fix it (or move it away) and run again")
    return data


def _selected_provider(config: dict[str, Any]) -> str:
    memory = config.get("memory")
    if isinstance(memory, dict):
        value = memory.get("provider")
        return str(value).strip() if value else ""
    return ""


def _provider_importable() -> bool:
    """Is memstream's provider (``memstream.provider``) importable here?

    Checked without importing it (importing it would import Hermes's ``agent`` package).
    """
    try:
        own = importlib.util.find_spec("memstream")
    except (ImportError, ValueError):
        return False
    if own is None or not own.origin:
        return False
    return (Path(own.origin).resolve().parent / "provider" / "provider.py").exists()


def _hermes_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("hermes-agent")
    except PackageNotFoundError:
        return None
    except Exception:
        return None


def _hermes_python() -> str | None:
    """The interpreter of the ``hermes`` command on PATH (from its shebang), if any."""
    exe = shutil.which("hermes")
    if not exe:
        return None
    try:
        with open(exe, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return shutil.which(parts[1])
    return parts[0]


def _importable_by(python: str) -> bool | None:
    code = (
        "import importlib.util as u, pathlib as p, sys\n"
        "s, m = u.find_spec('provider'), u.find_spec('memstream')\n"
        "ok = bool(s and m and s.origin and m.origin and "
        "p.Path(s.origin).resolve().parent.parent == p.Path(m.origin).resolve().parent.parent)\n"
        "sys.exit(0 if ok else 3)\n"
    )
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, timeout=15, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return True
    if proc.returncode == 3:
        return False
    return None


def _interpreters() -> dict[str, Any]:
    """Which Python runs Hermes here, and can it import the provider?"""
    out: dict[str, Any] = {
        "python": sys.executable,
        "provider_importable": _provider_importable(),
        "hermes_version": _hermes_version(),
    }
    hermes_python = None
    if out["hermes_version"] is None:
        hermes_python = _hermes_python()
    if hermes_python and os.path.realpath(hermes_python) != os.path.realpath(sys.executable):
        out["hermes_python"] = hermes_python
        out["provider_importable_by_hermes"] = _importable_by(hermes_python)
    elif out["hermes_version"] is not None:
        out["hermes_python"] = sys.executable
        out["provider_importable_by_hermes"] = out["provider_importable"]
    else:
        out["hermes_python"] = None
        out["provider_importable_by_hermes"] = None  # unknown: no Hermes found here
    return out


def _install_hint(python: str | None) -> str:
    return (
        f"install memstream into the Python that runs Hermes: "
        f"{python or '/path/to/hermes-venv/bin/python'} -m pip install memstream"
    )


def install(home: Path | str | None = None) -> dict[str, Any]:
    """Copy the plugin into ``HOME/plugins/memstream/`` and select it in ``HOME/config.yaml``.

    Idempotent. ``config.yaml`` is rewritten only when the selection changes (PyYAML: other
    keys are kept, comments are not; the previous file is kept as
    ``config.yaml.before-memstream``). Raises ``HermesInstallError`` if ``config.yaml``
    cannot be parsed as a mapping.
    """
    home = hermes_home(home)
    plugin_dir = home / "plugins" / PLUGIN_NAME
    config_path = home / "config.yaml"
    config = _load_config(config_path)  # fail before touching anything

    plugin_dir.mkdir(parents=True, exist_ok=True)
    files, updated = [], []
    for name in PLUGIN_FILES:
        data = _packaged(name)
        target = plugin_dir / name
        if not target.exists() or target.read_bytes() != data:
            _write_atomic(target, data)
            updated.append(name)
        files.append(str(target))

    previous = _selected_provider(config)
    config_created = not config_path.exists()
    config_changed = previous != PLUGIN_NAME or config_created
    backup = None
    if config_changed:
        memory = config.get("memory")
        if not isinstance(memory, dict):
            memory = {}
            config["memory"] = memory
        memory["provider"] = PLUGIN_NAME
        text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
        if not config_created:
            backup = config_path.with_name(config_path.name + ".before-memstream")
            shutil.copy2(config_path, backup)
        _write_atomic(config_path, text.encode("utf-8"), mode_from=config_path)

    result: dict[str, Any] = {
        "ok": True,
        "home": str(home),
        "plugin_dir": str(plugin_dir),
        "files": files,
        "files_updated": updated,
        "config": str(config_path),
        "config_created": config_created,
        "config_changed": config_changed,
        "config_backup": str(backup) if backup else None,
        "previous_provider": previous or None,
        **_interpreters(),
    }
    warnings = []
    if previous and previous != PLUGIN_NAME:
        warnings.append(f"memory.provider was {previous!r}; it is now {PLUGIN_NAME!r} (Hermes runs one provider)")
    if result["provider_importable_by_hermes"] is False or (
        result["provider_importable_by_hermes"] is None and not result["provider_importable"]
    ):
        warnings.append(
            "Hermes cannot import memstream's provider and would silently use its built-in "
            "memory; " + _install_hint(result["hermes_python"])
        )
    elif result["provider_importable_by_hermes"] is None:
        warnings.append(
            "no Hermes installation found from this Python; make sure memstream is installed in the Python that runs Hermes"
        )
    result["warnings"] = warnings
    return result


def check(home: Path | str | None = None) -> dict[str, Any]:
    """The Hermes side of ``memstream doctor``.

    ``ok`` is True when no Hermes home exists (``skipped``), else when the plugin is
    installed, selected, and Hermes's Python can import the provider (or that is unknown).
    """
    home = hermes_home(home)
    plugin_dir = home / "plugins" / PLUGIN_NAME
    config_path = home / "config.yaml"
    out: dict[str, Any] = {
        "ok": True,
        "home": str(home),
        "plugin_dir": str(plugin_dir),
        "plugin_installed": False,
        "selected": False,
    }
    if not home.is_dir():
        out.update(skipped=True, reason=f"no Hermes home at {home}")
        return out
    init = plugin_dir / "__init__.py"
    try:
        head = init.read_text(errors="replace")[:8192] if init.exists() else ""
    except OSError:
        head = ""
    out["plugin_installed"] = any(m in head for m in _MARKERS)
    stale = []
    for name in PLUGIN_FILES:
        try:
            if (plugin_dir / name).read_bytes() != _packaged(name):
                stale.append(name)
        except OSError:
            stale.append(name)
    out["plugin_current"] = out["plugin_installed"] and not stale
    try:
        provider = _selected_provider(_load_config(config_path))
    except HermesInstallError as exc:
        out.update(ok=False, error=str(exc))
        return out
    out["selected"] = provider == PLUGIN_NAME
    out["memory_provider"] = provider or None
    out.update(_interpreters())
    problems = []
    if not out["plugin_installed"]:
        problems.append(f"the plugin is not installed in {plugin_dir}")
    if not out["selected"]:
        problems.append(f"memory.provider is {provider or 'unset'!r}, not {PLUGIN_NAME!r}")
    if out["provider_importable_by_hermes"] is False:
        problems.append("Hermes's Python cannot import memstream's provider (" + _install_hint(out["hermes_python"]) + ")")
    if problems:
        out.update(ok=False, error="; ".join(problems) + f"; run `memstream install-hermes --home {home}`")
    elif not out["plugin_current"]:
        out["warning"] = (
            "the installed plugin files differ from this memstream version's ("
            + ", ".join(stale)
            + "); run `memstream install-hermes` to update them"
        )
    return out
