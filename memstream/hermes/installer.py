"""Install the memstream plugin into a Hermes home and select it; check that it is.

``install(home)`` copies the packaged plugin (``memstream/hermes/plugin/``: a shim
``__init__.py``, ``plugin.yaml``, ``cli.py``) into ``$HERMES_HOME/plugins/memstream/``
and sets ``memory.provider: memstream`` in ``$HERMES_HOME/config.yaml``, keeping every
other key. ``check(home)`` is what ``memstream doctor`` reports about it.

The shim only imports ``provider`` from the memstream distribution, so memstream must be
in the Python environment that runs Hermes (its ``plugin.yaml`` declares it for Hermes
0.21+'s package manager); otherwise Hermes falls back to its built-in memory. Both
functions ask Hermes whether that is the case (``memstream.hermes.runtime``).
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
from memstream.hermes import runtime

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


def _ask_hermes(home: Path, command: str | None, selected: str) -> dict[str, Any]:
    """What the Hermes of ``command`` (see ``runtime.find``) is, and what it loads as memstream
    in ``home``, with the one-line verdict (``runtime.verdict``)."""
    found = runtime.find(command)
    hermes = runtime.detect(found, home) if found else None
    probed = runtime.probe(hermes, home) if hermes is not None and selected == PLUGIN_NAME else None
    loads, line = runtime.verdict(hermes, home, selected, probed)
    return {
        "python": sys.executable,
        "provider_importable": _provider_importable(),
        "hermes": hermes.as_dict() if hermes is not None else None,
        "hermes_version": hermes.version if hermes is not None else None,
        "hermes_python": (probed or {}).get("python") or (hermes.runtime[0] if hermes is not None and hermes.runtime else None),
        "provider_importable_by_hermes": bool(probed.get("memstream")) if probed and not probed.get("error") else None,
        "probe": probed,
        "loads": loads,
        "verdict": line,
    }


def _select_with_hermes(hermes: runtime.Hermes, home: Path) -> str:
    """Select memstream with Hermes's own command: on a managed Hermes ``hermes memory setup
    memstream`` (it also installs the dependency the plugin declares), else ``hermes config set``."""
    argv = (
        [hermes.command, "memory", "setup", PLUGIN_NAME]
        if hermes.managed
        else [hermes.command, "config", "set", "memory.provider", PLUGIN_NAME]
    )
    env = {**os.environ, "HERMES_HOME": str(home)}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HermesInstallError(f"`{' '.join(argv[1:])}` did not finish: {exc}") from exc
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[-500:]
        raise HermesInstallError(f"`hermes {' '.join(argv[1:])}` failed ({proc.returncode}): {tail}")
    return "hermes " + " ".join(argv[1:])


def install(home: Path | str | None = None, hermes: str | None = None) -> dict[str, Any]:
    """Copy the plugin into ``HOME/plugins/memstream/`` and select it in ``HOME/config.yaml``.

    With Hermes 0.20+ (``runtime.detect``) the selection is Hermes's own command (see
    ``_select_with_hermes``); with 0.19, or no ``hermes`` command found, this writes
    ``config.yaml`` itself (PyYAML: other keys are kept, comments are not). Either way the
    previous file is kept as ``config.yaml.before-memstream`` when the selection changes.
    Then Hermes is asked what it loads (``runtime.probe``): ``loads`` and ``verdict``.
    Idempotent. Raises ``HermesInstallError`` if ``config.yaml`` cannot be parsed as a
    mapping, or Hermes's command fails.
    """
    home = hermes_home(home)
    plugin_dir = home / "plugins" / PLUGIN_NAME
    config_path = home / "config.yaml"
    config = _load_config(config_path)  # fail before touching anything
    command = runtime.find(hermes)
    detected = runtime.detect(command, home) if command else None

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
    selected_by = None
    if config_changed:
        if not config_created:
            backup = config_path.with_name(config_path.name + ".before-memstream")
            shutil.copy2(config_path, backup)
        if detected is not None and detected.current:
            selected_by = _select_with_hermes(detected, home)
        else:
            memory = config.get("memory")
            if not isinstance(memory, dict):
                memory = {}
                config["memory"] = memory
            memory["provider"] = PLUGIN_NAME
            text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
            _write_atomic(config_path, text.encode("utf-8"), mode_from=config_path)
            selected_by = "config.yaml"

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
        "selected_by": selected_by,
        "previous_provider": previous or None,
        **_ask_hermes(home, command, _selected_provider(_load_config(config_path))),
    }
    warnings = []
    if previous and previous != PLUGIN_NAME:
        warnings.append(f"memory.provider was {previous!r}; it is now {PLUGIN_NAME!r} (Hermes runs one provider)")
    if result["loads"] is not True:
        warnings.append(result["verdict"])
    result["warnings"] = warnings
    return result


def check(home: Path | str | None = None, hermes: str | None = None) -> dict[str, Any]:
    """The Hermes side of ``memstream doctor``: ``verdict`` is one line saying whether the
    Hermes of ``hermes`` (``runtime.find``) loads memstream in this home or falls back to
    its built-in memory, and why, as Hermes itself answers (``runtime.probe``).

    ``ok`` is True when no Hermes home exists (``skipped``), else when Hermes loads memstream;
    with no ``hermes`` command to ask, when the plugin is installed and selected (a warning).
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
    out.update(_ask_hermes(home, hermes, provider))
    if out["loads"] is False:
        out.update(ok=False, error=out["verdict"])
    elif out["loads"] is None and not (out["plugin_installed"] and out["selected"]):
        out.update(ok=False, error=f"the plugin is not installed or not selected; run `memstream install-hermes --home {home}`")
    if out["ok"] and out["plugin_installed"] and not out["plugin_current"]:
        out["warning"] = (
            "the installed plugin files differ from this memstream version's ("
            + ", ".join(stale)
            + "); run `memstream install-hermes` to update them"
        )
    if out["ok"] and out["loads"] is None:
        out["warning"] = "; ".join(w for w in (out.get("warning"), out["verdict"]) if w)
    return out
