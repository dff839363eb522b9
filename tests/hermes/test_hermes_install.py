"""``memstream install-hermes`` and the Hermes check of ``memstream doctor``, without Hermes.

The real thing (Hermes loading the installed plugin) is tests/hermes/.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from memstream import cli as memstream_cli
from memstream.hermes import installer as hermes_install
from memstream.hermes.installer import PLUGIN_FILES, HermesInstallError, check, install

PACKAGED = Path(hermes_install.__file__).parent / "plugin"


def load_plugin_cli():
    """The plugin's cli.py as Hermes loads it: by path, without its package."""
    spec = importlib.util.spec_from_file_location("_hermes_user_memory_test.memstream.cli", PACKAGED / "cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shim_passes_hermes_discovery_and_names_the_provider():
    head = (PACKAGED / "__init__.py").read_text()[:8192]  # Hermes reads the first 8 KB
    assert "MemoryProvider" in head and "register_memory_provider" in head
    assert "from memstream.provider import MemstreamProvider, register" in head
    meta = yaml.safe_load((PACKAGED / "plugin.yaml").read_text())
    assert meta["name"] == "memstream" and meta["version"] and meta["description"]
    assert meta["kind"] == "exclusive"  # the general plugin loader must leave it alone


def test_install_into_a_fresh_home_writes_the_plugin_and_creates_the_config(tmp_path):
    home = tmp_path / "hermes"
    result = install(home)
    plugin = home / "plugins" / "memstream"
    assert result["plugin_dir"] == str(plugin) and result["config"] == str(home / "config.yaml")
    for name in PLUGIN_FILES:
        assert (plugin / name).read_bytes() == (PACKAGED / name).read_bytes()
    assert yaml.safe_load((home / "config.yaml").read_text()) == {"memory": {"provider": "memstream"}}
    assert result["config_created"] and result["config_changed"] and result["config_backup"] is None
    assert result["provider_importable"] is True  # this interpreter has memstream's provider


def test_install_keeps_every_other_key_backs_up_and_is_idempotent(tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    original = {
        "model": {"provider": "custom", "base_url": "http://127.0.0.1:1/v1", "default": "m"},
        "memory": {"provider": "holographic", "memory_char_limit": 3000},
        "toolsets": ["memory", "terminal"],
    }
    (home / "config.yaml").write_text(yaml.safe_dump(original))
    (home / "config.yaml").chmod(0o600)
    result = install(home)
    assert result["previous_provider"] == "holographic"
    assert any("holographic" in w for w in result["warnings"])
    config = yaml.safe_load((home / "config.yaml").read_text())
    assert config == {**original, "memory": {"provider": "memstream", "memory_char_limit": 3000}}
    assert yaml.safe_load(Path(result["config_backup"]).read_text()) == original
    assert (home / "config.yaml").stat().st_mode & 0o777 == 0o600

    before = (home / "config.yaml").stat().st_mtime_ns
    again = install(home)
    assert again["files_updated"] == [] and again["config_changed"] is False
    assert (home / "config.yaml").stat().st_mtime_ns == before


def test_install_refreshes_changed_plugin_files(tmp_path):
    home = tmp_path / "hermes"
    install(home)
    (home / "plugins" / "memstream" / "cli.py").write_text("# old\n")
    assert install(home)["files_updated"] == ["cli.py"]


@pytest.mark.parametrize("text", ["model: [unclosed\n", "- a\n- list\n"])
def test_install_refuses_a_config_it_cannot_parse_and_writes_nothing(tmp_path, text):
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(text)
    with pytest.raises(HermesInstallError, match="config.yaml"):
        install(home)
    assert (home / "config.yaml").read_text() == text
    assert not (home / "plugins").exists()


def test_home_defaults_to_hermes_home_then_dot_hermes(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "from-env"))
    assert install()["home"] == str(tmp_path / "from-env")
    monkeypatch.delenv("HERMES_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert hermes_install.hermes_home() == tmp_path / "user" / ".hermes"


def test_check_skips_when_there_is_no_hermes_home(tmp_path):
    result = check(tmp_path / "nowhere")
    assert result["ok"] is True and result["skipped"] is True
    assert result["plugin_installed"] is False and result["selected"] is False


def test_check_fails_until_installed_and_selected(tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    result = check(home)
    assert result["ok"] is False and not result["plugin_installed"] and not result["selected"]
    assert "install-hermes" in result["error"]
    install(home)
    result = check(home)
    assert result["ok"] is True and result["plugin_installed"] and result["selected"] and result["plugin_current"]
    # another provider selected afterwards (e.g. `hermes memory setup mem0`)
    (home / "config.yaml").write_text(yaml.safe_dump({"memory": {"provider": "mem0"}}))
    result = check(home)
    assert result["ok"] is False and result["memory_provider"] == "mem0"


def test_check_warns_about_stale_plugin_files_but_stays_ok(tmp_path):
    home = tmp_path / "hermes"
    install(home)
    (home / "plugins" / "memstream" / "plugin.yaml").write_text("name: memstream\nversion: 0.0.1\n")
    result = check(home)
    assert result["ok"] is True and result["plugin_current"] is False
    assert "plugin.yaml" in result["warning"]


def test_memstream_install_hermes_command(tmp_path, capsys):
    home = tmp_path / "hermes"
    assert memstream_cli.main(["install-hermes", "--home", str(home), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["plugin_dir"] == str(home / "plugins" / "memstream")
    assert check(home)["ok"] is True


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["memstream", "doctor", "--json"], ["doctor", "--json"]),
        (["memstream", "add", "--target", "user", "--sync", "likes tea"], ["add", "--target", "user", "--sync", "likes tea"]),
        (["memstream", "export", "--since", "0-1", "--help"], ["export", "--since", "0-1", "--help"]),
        (["memstream", "stats"], ["stats"]),
        (["memstream"], ["doctor"]),
    ],
)
def test_the_plugin_cli_passes_arguments_through_to_memstream(monkeypatch, argv, expected):
    plugin_cli = load_plugin_cli()
    parser = argparse.ArgumentParser(prog="hermes")  # what Hermes builds around it
    sub = parser.add_subparsers(dest="command")
    plugin_cli.register_cli(sub.add_parser("memstream"))
    seen = []
    monkeypatch.setattr(memstream_cli, "main", lambda a: seen.append(a) or 0)
    args = parser.parse_args(argv)
    args.func(args)
    assert seen == [expected]


def test_the_plugin_cli_exits_with_the_memstream_exit_code(monkeypatch):
    plugin_cli = load_plugin_cli()
    monkeypatch.setattr(memstream_cli, "main", lambda a: 1)  # e.g. doctor: not ok
    with pytest.raises(SystemExit) as exc:  # Hermes ignores the handler's return value
        plugin_cli.memstream_command(argparse.Namespace(memstream_command="doctor", memstream_args=[]))
    assert exc.value.code == 1


def test_the_plugin_cli_is_light_to_import():
    tree = ast.parse((PACKAGED / "cli.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [a.name for n in top for a in n.names] == ["argparse"]  # Hermes imports it to build its parser


# -- a Hermes installed by its package manager (0.21+), which cannot run here ---------------
FAKE_MANAGED_HERMES = """#!/bin/sh
# Stands in for the launcher of a Hermes 0.21 installed by its package manager (a store
# Python 3.14 and dependency generations, which cannot be built on this machine): it answers
# what that launcher answers and records the commands it is given.
echo "$*" >> "$HERMES_HOME/hermes-argv.log"
case "$1" in
  --version) echo "Hermes Agent v0.21.3 (2026.9.14)"; exit 0 ;;
  --print-runtime-command) echo '["/opt/hermes/store/python/bin/python3", "-I", "-c", "import hermes_bootstrap"]'; exit 0 ;;
  memory) printf 'memory:\\n  provider: memstream\\n' > "$HERMES_HOME/config.yaml"; exit 0 ;;
  memstream) echo 'MEMSTREAM_PROBE {"python": "/opt/hermes/store/python/bin/python3", "memstream": null, "import_error": "ModuleNotFoundError: No module named memstream", "found_at": "'"$HERMES_HOME"'/plugins/memstream", "loaded": "_hermes_user_memory.memstream__source_x.MemstreamProvider", "available": false}'; exit 0 ;;
esac
exit 2
"""


def test_a_managed_hermes_is_told_apart_by_its_runtime_command_and_selected_with_its_own_commands(tmp_path):
    fake = tmp_path / "hermes"
    fake.write_text(FAKE_MANAGED_HERMES)
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("model: {provider: custom}\n")
    result = install(home, hermes=str(fake))
    assert result["hermes"]["managed"] is True and result["hermes"]["version"] == "0.21.3"
    assert result["selected_by"] == "hermes memory setup memstream"
    assert "memory setup memstream" in (home / "hermes-argv.log").read_text()
    # Hermes's runtime has no memstream yet: the advice is Hermes's command, never pip
    assert result["loads"] is False and result["provider_importable_by_hermes"] is False
    assert "will fall back to built-in memory" in result["verdict"]
    assert "hermes memory setup memstream" in result["verdict"] and "pip" not in result["verdict"]
    assert check(home, hermes=str(fake))["error"] == result["verdict"]


def test_the_verdict_names_the_reason_hermes_falls_back():
    from memstream.hermes import runtime

    home = Path("/h")
    pip19 = runtime.Hermes(command="hermes", version="0.19.0", managed=False, runtime=None)
    assert not pip19.current and runtime.Hermes("hermes", "0.22.2.post1", False, None).current
    loads, line = runtime.verdict(pip19, home, "mem0", None)
    assert loads is False and "provider 'mem0'" in line
    loads, line = runtime.verdict(pip19, home, "memstream", {"error": "Hermes has no `memstream` command", "missing": True})
    assert loads is False and "install-hermes --home /h" in line
    missing = {"python": "/venv/bin/python", "memstream": None, "import_error": "ModuleNotFoundError"}
    loads, line = runtime.verdict(pip19, home, "memstream", missing)
    assert loads is False and "/venv/bin/python -m pip install memstream" in line
    ok = {
        "python": "/venv/bin/python",
        "memstream": "0.1.0",
        "loaded": "memstream.provider.provider.MemstreamProvider",
        "available": True,
    }
    loads, line = runtime.verdict(pip19, home, "memstream", {**ok, "found_at": "/h/plugins/memstream"})
    assert loads is True and line.startswith("Hermes 0.19.0 will load memstream 0.1.0")
    loads, line = runtime.verdict(pip19, home, "memstream", {**ok, "available": False, "unavailable_reason": "no tenant"})
    assert loads is False and "no tenant" in line
    assert runtime.verdict(None, home, "memstream", None)[0] is None


def test_without_memstream_the_shim_registers_a_stand_in_that_hermes_reports_unavailable(monkeypatch, capsys):
    import sys
    import types

    from memstream.provider import _base

    monkeypatch.setitem(sys.modules, "memstream.provider", None)  # `from memstream.provider import` fails
    hermes_abc = types.ModuleType("agent.memory_provider")
    hermes_abc.MemoryProvider = _base.MemoryProvider
    monkeypatch.setitem(sys.modules, "agent", types.ModuleType("agent"))
    monkeypatch.setitem(sys.modules, "agent.memory_provider", hermes_abc)
    spec = importlib.util.spec_from_file_location("_hermes_user_memory_test.memstream", PACKAGED / "__init__.py")
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    registered = []
    shim.register(types.SimpleNamespace(register_memory_provider=registered.append))
    [provider] = registered
    assert provider.name == "memstream" and provider.is_available() is False and provider.get_tool_schemas() == []
    assert "hermes memory setup memstream" in provider.unavailable_reason()
    assert "not installed in the Python that runs Hermes" in capsys.readouterr().err


def test_plugin_yaml_declares_this_memstream_for_hermes_s_package_manager():
    meta = yaml.safe_load((PACKAGED / "plugin.yaml").read_text())
    from importlib.metadata import version

    assert meta["version"] == version("memstream")
    assert meta["pip_dependencies"] == [f"memstream>={version('memstream')}"]
