"""The tool schemas Hermes sees are generated from the arguments' types: they keep their
names and descriptions, have the shape every model backend Hermes talks to accepts, and
state the same bounds the decoder applies (each written once, in the type)."""

from __future__ import annotations

import re

import msgspec
import pytest

from memstream.provider.provider import MemstreamProvider
from memstream.provider.tools import TOOL_NAMES, TOOL_SCHEMAS, TOOLS, ToolError, tool_args

# the names and descriptions the model has been shown: a change here is a change of the agent's prompt
SHOWN = {
    "memstream_search": (
        "Search long-term memory (earlier conversation turns, saved memories and extracted facts) by meaning and "
        "keywords. Returns items with ids, dates, sources and a score in [0, 1], and a note of which agents it "
        "searched and how many items of other agents match.",
        {
            "query": "What to look for.",
            "scope": "Whose memory: 'current' (this agent, default), 'session' (this session), 'all' (every agent "
            "of the fleet), or another agent's name.",
            "kind": "Which items (default all).",
            "limit": "At most this many (default 8).",
        },
        ["query"],
    ),
    "memstream_context": (
        "The conversation turns around a search hit, in its session (scroll around a hit).",
        {"id": "An id from memstream_search.", "before": "Turns before (default 3).", "after": "Turns after (default 3)."},
        ["id"],
    ),
    "memstream_recent": (
        "Recent sessions, newest first, each with its first and last user message.",
        {"limit": "Sessions (default 5)."},
        [],
    ),
    "memstream_facts": (
        "Current facts extracted from conversations and memories (names, places, preferences, tools...), "
        "optionally with how they changed over time.",
        {
            "subject": "Only facts about this subject (e.g. 'user').",
            "kind": "Only facts of this kind.",
            "history": "Include superseded facts (default false).",
        },
        [],
    ),
    "memstream_remember": (
        "Keep something in long-term memory explicitly (a fact, a decision, a preference).",
        {
            "content": "What to remember, as one self-contained statement.",
            "target": "'user' for facts about the user, 'memory' otherwise (default).",
        },
        ["content"],
    ),
    "memstream_forget": (
        "Forget an item (turn, memory or fact) by its id: it is removed everywhere and no longer recalled.",
        {"id": "An id from memstream_search or memstream_facts.", "reason": "Why (kept in the log)."},
        ["id"],
    ),
}

# Hermes (tools/schema_sanitizer.py, 0.22) rewrites what some backends refuse: these shapes
# must never need it. Anthropic's property names; no references or combinators (Codex,
# Fireworks, Anthropic); no type arrays (llama.cpp); every property typed.
_PROPERTY_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
_REFUSED_KEYS = {"$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "title"}
_TYPES = {"string", "integer", "boolean", "number"}


def _keys(schema) -> set[str]:
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in _keys(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in _keys(v)}
    return set()


def test_the_schemas_keep_the_names_and_descriptions_the_model_was_shown():
    p = MemstreamProvider()
    assert p.get_tool_schemas() == list(TOOL_SCHEMAS)
    assert [s["name"] for s in TOOL_SCHEMAS] == list(TOOL_NAMES) == list(SHOWN)
    for schema in TOOL_SCHEMAS:
        description, properties, required = SHOWN[schema["name"]]
        assert schema["description"] == description
        shown = schema["parameters"]["properties"]
        assert {k: v["description"] for k, v in shown.items() if k != "scope"} == {
            k: v for k, v in properties.items() if k != "scope"
        }
        if "scope" in shown:
            assert shown["scope"]["description"] == SHOWN["memstream_search"][1]["scope"]
        assert schema["parameters"]["required"] == required


@pytest.mark.parametrize("schema", TOOL_SCHEMAS, ids=lambda s: s["name"])
def test_each_schema_is_a_bare_function_schema_of_a_plain_object_that_hermes_passes_on_as_it_is(schema):
    assert set(schema) == {"name", "description", "parameters"}  # bare: Hermes wraps it as an OpenAI tool
    assert isinstance(schema["name"], str) and schema["name"].startswith("memstream_")
    parameters = schema["parameters"]
    assert parameters["type"] == "object" and isinstance(parameters["properties"], dict)
    assert set(parameters["required"]) <= set(parameters["properties"])
    assert parameters["additionalProperties"] is False
    assert not _keys(parameters) & _REFUSED_KEYS
    for name, prop in parameters["properties"].items():
        assert _PROPERTY_NAME.match(name)
        assert prop["type"] in _TYPES, (name, prop)  # one type, never a list of them
        assert prop["description"]
        if "enum" in prop:
            assert all(isinstance(v, str) for v in prop["enum"]) and prop["type"] == "string"
        if "default" in prop:
            msgspec.convert(prop["default"], {"string": str, "integer": int, "boolean": bool}[prop["type"]])
    msgspec.json.encode(schema)  # plain JSON data


def test_every_bound_a_schema_states_is_the_one_the_decoder_applies():
    for tool, schema in zip(TOOLS, TOOL_SCHEMAS):
        required = {k: "x" for k in schema["parameters"]["required"]}
        for name, prop in schema["parameters"]["properties"].items():
            cases = []
            if "maximum" in prop:
                cases += [(prop["maximum"], True), (prop["maximum"] + 1, False)]
            if "minimum" in prop:
                cases += [(prop["minimum"], True), (prop["minimum"] - 1, False)]
            if "maxLength" in prop:
                cases += [("y" * prop["maxLength"], True), ("y" * (prop["maxLength"] + 1), False)]
            if "enum" in prop:
                cases += [(value, True) for value in prop["enum"]] + [("not-one-of-them", False)]
            for value, accepted in cases:
                args = {**required, name: value}
                if accepted:
                    assert getattr(tool_args(tool.name, args), name) == value, (tool.name, name, value)
                else:
                    with pytest.raises(ToolError, match=name):
                        tool_args(tool.name, args)


def test_the_search_tool_asks_for_the_cross_encoder_rerank():
    """A tool call can wait for the rerank (a few hundred ms); the prefetch's recall has none."""
    from memstream.provider.tools import SearchArgs
    from memstream.query.protocol import RERANK_CANDIDATES

    args = tool_args("memstream_search", {"query": "where did I move"})
    assert isinstance(args, SearchArgs)
    request = args.request("t1", "a1", "s1")
    assert request.rerank is True and request.rerank_candidates == RERANK_CANDIDATES and request.k == 8
