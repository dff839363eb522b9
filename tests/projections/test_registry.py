"""The projections' table: each group is its class's name and version."""

from __future__ import annotations

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


def test_each_group_is_its_class_name_and_version():
    assert [row.cls for row in PROJECTIONS] == [TurnsProjection, MemoriesProjection, FactsProjection,
                                               SessionsProjection]
    for row in PROJECTIONS:
        assert (row.name, row.version) == (row.cls.name, row.cls.version)
        assert row.group == group_of(row.name) == f"{row.cls.name}.v{row.cls.version}"
    assert group_names() == tuple(row.group for row in PROJECTIONS)
    assert len(set(group_names())) == len(PROJECTIONS)


def test_the_vector_projections_are_the_ones_that_need_the_store_and_the_embedder():
    assert [row.name for row in PROJECTIONS if row.vectors] == ["turns", "memories"]
    assert [row.name for row in PROJECTIONS if not row.vectors] == ["facts", "sessions"]


def test_a_memory_write_is_searchable_once_the_memories_and_facts_projections_applied_it():
    assert memory_write_groups() == (group_of("memories"), group_of("facts"))


def test_an_unknown_projection_is_an_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="known: turns, memories, facts, sessions"):
        registered("recall")
    with pytest.raises(KeyError):
        group_of("turn")

