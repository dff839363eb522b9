"""mkdocs hook: a build fails when a generated reference page is out of date.

The pages are written by ``docs/gen/reference.py`` (``make docs``); this only checks them, so
``mkdocs build --strict`` in ``make lint`` fails on a setting, metric or command added to the
code without the page regenerated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mkdocs.exceptions import PluginError

_spec = importlib.util.spec_from_file_location("memstream_docs_reference", Path(__file__).with_name("reference.py"))
assert _spec and _spec.loader
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


def on_pre_build(config) -> None:
    out_of_date = reference.stale(Path(config["docs_dir"]))
    if out_of_date:
        pages = ", ".join(f"docs/{page}" for page in out_of_date)
        raise PluginError(f"{pages} out of date with the code: run `make docs` (python docs/gen/reference.py) and commit")
