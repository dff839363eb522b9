"""The Redis key map (memstream.core.keys): every key under the prefix, the projections'
keys versioned, and no key built anywhere else."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import fakeredis
import pytest
from pipeline_support import forgotten, make_pipeline, memory, remembered, turn

from memstream.core import keys
from memstream.producers.stream import EventLog

PREFIX = "ms-test"
SOURCE = Path(keys.__file__).resolve().parents[1]  # the memstream package

# an argument for every parameter name a key function takes
ARGS = {
    "prefix": PREFIX,
    "shard": 2,
    "tenant": "acme",
    "group": "facts.v1",
    "version": 7,
    "agent": "a1",
    "session": "s1",
    "target": "memory",
    "request_id": "0" * 32,
    "family": "facts",
    "name": "turns",
    "replica": 3,
}

# the keys a projection owns: each carries the projection's version
PROJECTION_KEYS = (
    "facts",
    "facts_current",
    "facts_index",
    "facts_indexed",
    "facts_pattern",
    "fact_sources",
    "turn_context",
    "sessions",
    "session",
    "session_bookends",
    "version_pattern",
)


def _build(name: str, **overrides) -> str:
    fn = getattr(keys, name)
    args = {**ARGS, **overrides}
    params = inspect.signature(fn).parameters
    if "channel" in params:  # a reply sits beside the channel it answers
        return fn(keys.queries(args["prefix"]), args["request_id"])
    return fn(**{p: args[p] for p in params if p in args})


# the keys of the cluster layout only (a hash-tagged prefix: ``keys.clustered``)
CLUSTER_KEYS = ("shard_shipped", "shard_types")


@pytest.mark.parametrize("name", keys.__all__)
def test_every_key_is_under_the_configured_prefix(name):
    if name in CLUSTER_KEYS:
        with pytest.raises(ValueError, match="cluster"):
            _build(name)
    else:
        assert _build(name).startswith(PREFIX + ":")
        assert _build(name, prefix="other").startswith("other:")
    # on a cluster (the prefix a hash tag) every key starts with the tag or a tag made from it
    built = _build(name, prefix="{" + PREFIX + "}")
    assert built.startswith("{" + PREFIX + "}:") or built.startswith("{" + PREFIX + ":events:"), built


def test_a_tenants_reply_and_query_channel_stay_in_the_space_its_redis_user_owns():
    space = keys.tenant_space(PREFIX, "acme")
    assert keys.tenant_queries(PREFIX, "acme").startswith(space + ":")
    assert keys.reply(keys.tenant_queries(PREFIX, "acme"), "r1") == f"{space}:reply:r1"
    assert keys.shipped(PREFIX, "acme").startswith(space + ":")
    pattern = keys.tenant_pattern(PREFIX, "acme")
    assert pattern == f"{space}:*"
    assert not keys.tenant_queries(PREFIX, "acme-2").startswith(pattern[:-1])  # no neighbour's keys


@pytest.mark.parametrize("name", keys.__all__)
def test_every_key_function_says_in_one_line_what_it_holds_and_its_redis_type(name):
    doc = inspect.getdoc(getattr(keys, name)) or ""
    assert doc and "\n" not in doc, doc
    assert re.search(r"\b(stream|hash|set|sorted set|list|string|pattern|not a key)\b", doc), doc


@pytest.mark.parametrize("name", PROJECTION_KEYS)
def test_a_projections_keys_carry_its_version(name):
    assert ":v7:" in _build(name, version=7)
    assert _build(name, version=1) != _build(name, version=2)


def test_tombstones_are_one_set_per_tenant_for_every_projection_and_version():
    assert "version" not in inspect.signature(keys.tombstones).parameters
    assert keys.tombstones(PREFIX, "acme") == f"{PREFIX}:tombstones:acme"


def test_the_facts_table_of_a_new_facts_version_is_written_beside_the_live_one(tmp_path):
    """``facts.v1`` writes ``P:facts:v1:T``; nothing lands in the unversioned ``P:facts:T``."""
    from memstream.projections import FactsProjection, FactsTable, SessionsIndex, SessionsProjection

    assert FactsProjection.version == FactsTable.version
    assert SessionsProjection.version == SessionsIndex.version
    log = EventLog(fakeredis.FakeRedis(), PREFIX)
    log.append([turn("I live in Berlin")])
    pipeline = make_pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
        table = log.client.hgetall(keys.facts(PREFIX, FactsTable.version, "t1"))
        assert table and any(b"Berlin" in v for v in table.values())
        assert log.client.hlen(keys.facts_current(PREFIX, FactsTable.version, "t1"))
        assert not log.client.exists(f"{PREFIX}:facts:t1", f"{PREFIX}:facts:t1:current")
        assert not log.client.exists(keys.facts(PREFIX, FactsTable.version + 1, "t1"))
        assert FactsTable(log.client, PREFIX).count() == len(table)
    finally:
        pipeline.stop()


def test_everything_the_pipeline_writes_to_redis_is_under_the_prefix(tmp_path):
    client = fakeredis.FakeRedis()
    log = EventLog(client, PREFIX)
    kept, gone = turn("I live in Berlin and work on the ingest service"), turn("My dog is called Rex")
    log.append([kept, gone, memory("add", "Deploys go out on Tuesdays"), remembered("I like green tea"), forgotten(gone.id)])
    log.client.xadd(keys.events(PREFIX, 0), {"id": "x", "type": "turn.recorded", "data": b"not an event"})
    pipeline = make_pipeline(tmp_path / "home", log)
    try:
        pipeline.drain()
    finally:
        pipeline.stop()
    written = sorted(k.decode() for k in client.scan_iter("*"))
    assert {
        keys.dlq(PREFIX),
        keys.tombstones(PREFIX, "t1"),
        keys.facts(PREFIX, 1, "t1"),
        keys.sessions(PREFIX, 1, "t1"),
        keys.counters(PREFIX, "facts.v1"),
        keys.positions(PREFIX, "facts.v1"),
        keys.health(PREFIX, "facts.v1"),
    } <= set(written)
    assert [k for k in written if not k.startswith(PREFIX + ":")] == []


# -- the map stays true: no key is built outside memstream/core/keys.py -------------------------
# an f-string with a {...prefix...}: or {...PREFIX...}: or {tenant_space(...)}: placeholder, and
# a prefix glued to a ":..." literal
_BUILT_HERE = [
    re.compile(r"""\b[rRbB]?[fF][rRbB]?(["']).*?\{[^{}]*(prefix|PREFIX)[^{}]*\}:"""),
    re.compile(r"""\b[rRbB]?[fF][rRbB]?(["']).*?\{[^{}]*tenant_space\("""),
    re.compile(r"""\w*(prefix|PREFIX)\w*\s*\+\s*[fF]?["']:"""),
]


def _builds_a_key(line: str) -> bool:
    return any(p.search(line) for p in _BUILT_HERE)


def test_the_key_check_recognises_the_ways_keys_were_built_before():
    for line in (
        'self.key = f"{prefix}:counters:{group}"',
        'return f"{self.prefix}:facts:{tenant}"',
        'pipe.hincrby(f"{eventlog.prefix}:counters:spool", k, v)',
        'stream = f"{STREAM_PREFIX}:events:0"',
        'client.rpush(f"{PREFIX}:queries", raw)',
        'return f"{tenant_space(self.prefix, tenant)}:shipped"',
        'f"%W~{prefix}:events:*",',
        'key = self.prefix + ":dlq"',
    ):
        assert _builds_a_key(line), line
    for line in (
        'line = f"{prefix} {text}"',
        'return f"{prefix}-{tenant}"',
        'problems.append(f"{path}: ignored")',
        "self.key = keys.dlq(prefix)",
    ):
        assert not _builds_a_key(line), line


def test_no_module_but_core_keys_builds_a_redis_key():
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path == SOURCE / "core" / "keys.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _builds_a_key(line):
                offenders.append(f"{path.relative_to(SOURCE.parent)}:{number}: {line.strip()}")
    assert offenders == [], "build these keys with memstream.core.keys:\n" + "\n".join(offenders)
