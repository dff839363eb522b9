"""The provider's seams: the tools see their provider only through a ``ToolContext`` (no
import back into the provider), and ``save_config`` keeps the settings' own names."""

from __future__ import annotations

import json

import grimp

from memstream.core import OPTIONS, Settings
from memstream.provider.provider import MemstreamProvider


def test_no_module_of_the_provider_imports_the_provider_back():
    graph = grimp.build_graph("memstream")
    provider = "memstream.provider.provider"
    for module in graph.find_modules_that_directly_import(provider):
        assert not graph.chain_exists(importer=provider, imported=module), module
    assert not graph.chain_exists(importer="memstream.provider.handlers", imported=provider)


def test_the_tool_handlers_are_given_a_context_not_the_provider():
    p = MemstreamProvider(Settings(autostart=False))
    assert not any(value is p for value in vars(p.tools).values())
    assert p.tools.context is not p


def test_save_config_keeps_every_setting_by_its_name_and_nothing_else(tmp_path):
    p = MemstreamProvider()
    (tmp_path / "memstream.json").write_text(json.dumps({"tenant": "before"}))
    p.save_config(
        {"tenant": "acme", "record_non_primary": True, "tool_timeout": 4.5, "not_a_setting": 1, "home": ""}, str(tmp_path)
    )
    saved = json.loads((tmp_path / "memstream.json").read_text())
    assert saved == {"tenant": "acme", "record_non_primary": True, "tool_timeout": 4.5}
    assert set(saved) <= {o.attribute for o in OPTIONS}
    loaded = Settings.load(hermes_home=tmp_path)
    assert (loaded.tenant, loaded.record_non_primary, loaded.tool_timeout) == ("acme", True, 4.5) and not loaded.problems
