"""The projections' table: each group is its class's name and version, written nowhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memstream.projections import (
    PROJECTIONS,
    FactsProjection,
    MemoriesProjection,
    SessionsProjection,
    TurnsProjection,
    group_names,
    group_of,
    memory_write_groups,
    registered,
)

PACKAGE = Path(__file__).resolve().parents[2] / "memstream"


def test_each_group_is_its_class_name_and_version():
    assert [row.cls for row in PROJECTIONS] == [TurnsProjection, MemoriesProjection, FactsProjection, SessionsProjection]
    for row in PROJECTIONS:
        assert (row.name, row.version) == (row.cls.name, row.cls.version)
        assert row.group == group_of(row.name) == f"{row.cls.name}.v{row.cls.version}"
    assert group_names() == tuple(row.group for row in PROJECTIONS)
    assert len(set(group_names())) == len(PROJECTIONS)


def test_the_vector_projections_are_the_ones_that_need_the_store_and_the_embedder():
    assert [row.name for row in PROJECTIONS if row.vectors] == ["turns", "memories"]
    assert [row.name for row in PROJECTIONS if not row.vectors] == ["facts", "sessions"]


def test_a_memory_write_is_searchable_once_the_memories_and_facts_projections_applied_it():
    import fakeredis

    from memstream.projections import Catalog

    client = fakeredis.FakeRedis()
    assert memory_write_groups(client, "p") == (group_of("memories"), group_of("facts"))
    catalog = Catalog(client, "p")
    catalog.ensure("memories", 1)
    catalog.add_build("memories")
    assert memory_write_groups(client, "p")[0] == "memories.v1"  # a build is not searched yet
    catalog.activate("memories", 2)
    assert memory_write_groups(client, "p") == ("memories.v2", group_of("facts"))


def test_an_unknown_projection_is_an_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="known: turns, memories, facts, sessions"):
        registered("recall")
    with pytest.raises(KeyError):
        group_of("turn")


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {
        id(n.body[0].value)
        for n in nodes
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def _group_literals(source: str, names: list[str]) -> list[tuple[int, str]]:
    """Lines of ``source`` that write a group name (``facts.v1``) or its recipe
    (``f"{name}.v{version}"``) in code; docstrings may name one as an example."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    literal = re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\.v\d+\b")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs and literal.search(node.value):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            for part, after in zip(node.values, node.values[1:]):
                if isinstance(part, ast.Constant) and str(part.value).endswith(".v") and isinstance(after, ast.FormattedValue):
                    found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_outside_projections_writes_a_group_name():
    names = [row.name for row in PROJECTIONS]
    written = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("projections/"):
            continue
        found = _group_literals(path.read_text(), names)
        if found:
            written[rel] = found
    assert written == {}, f"ask memstream.projections (group_of, group_names) instead: {written}"


def test_the_check_sees_a_literal_and_a_retyped_recipe_and_lets_docstrings_be():
    names = ["turns", "facts"]
    assert _group_literals('GROUPS = ("turns.v1", "x")', names) == [(1, "turns.v1")]
    assert _group_literals('g = f"{p.name}.v{p.version}"', names) == [(1, "f'{p.name}.v{p.version}'")]
    assert _group_literals('def f():\n    """One group (``facts.v1``) each."""\n', names) == []
    assert _group_literals('key = f"{prefix}:facts:v{version}:{tenant}"', names) == []
