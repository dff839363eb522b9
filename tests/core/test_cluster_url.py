"""The Redis Cluster URL and the cluster's key layout (``core.cluster_url``, ``core.keys``)."""

from __future__ import annotations

import pytest

from memstream.core import Settings, keys, mask_url
from memstream.core.cluster_url import cluster_prefix, is_cluster_url, parse_cluster_url


def test_a_cluster_url_names_its_seed_nodes_and_credentials():
    target = parse_cluster_url("redis+cluster://bob:s%40cret@n1:7000,n2,[::1]:7002")
    assert target.nodes == (("n1", 7000), ("n2", 6379), ("::1", 7002))
    assert (target.username, target.password, target.tls) == ("bob", "s@cret", False)
    assert parse_cluster_url("rediss+cluster://:pw@n1").tls
    assert parse_cluster_url("rediss+cluster://:pw@n1").password == "pw"
    assert is_cluster_url("REDIS+CLUSTER://n1") and not is_cluster_url("redis://n1")


@pytest.mark.parametrize(
    "url, why",
    [
        ("redis+cluster://n1:7000/0", "database"),
        ("redis+cluster://n1,,n2", "empty host"),
        ("redis+cluster://n1:99999", "port"),
        ("redis+cluster://:pw@", "empty host"),
    ],
)
def test_a_malformed_cluster_url_is_refused_without_showing_its_password(url, why):
    with pytest.raises(ValueError, match=why) as raised:
        parse_cluster_url(url)
    assert "pw" not in str(raised.value)


def test_settings_with_a_cluster_url_tag_the_prefix_and_report_a_malformed_one(tmp_path):
    ok = Settings.load(home=str(tmp_path), redis_url="redis+cluster://n1:7000,n2:7001", stream_prefix="ms")
    assert ok.problems == () and ok.stream_prefix == "{ms}"
    assert Settings.load(home=str(tmp_path), redis_url="redis://n1:6379/0").stream_prefix == "memstream"
    bad = Settings.load(home=str(tmp_path), redis_url="redis+cluster://:hunter2@n1/3")
    assert any("database" in p for p in bad.problems) and not any("hunter2" in p for p in bad.problems)
    assert "hunter2" not in mask_url("redis+cluster://:hunter2@n1,n2")


def test_the_single_server_layout_is_unchanged_and_the_cluster_layout_tags_each_shard():
    assert keys.events("memstream", 3) == "memstream:events:3"
    assert keys.events_pattern("memstream") == "memstream:events:*"
    assert not keys.clustered("memstream") and not keys.clustered("{a}b}")
    with pytest.raises(ValueError):
        keys.shard_shipped("memstream", "t", 0)
    tagged = cluster_prefix("memstream")
    assert tagged == "{memstream}" and cluster_prefix(tagged) == tagged and keys.clustered(tagged)
    assert keys.events(tagged, 3) == "{memstream:events:3}"
    assert keys.shard_shipped(tagged, "t1", 3) == "{memstream:events:3}:t:t1:shipped"
    assert keys.shard_types(tagged, 3) == "{memstream:events:3}:types"
    assert keys.queries(tagged) == "{memstream}:queries"  # everything else in the prefix's slot


def _slot_tag(key: str) -> str:
    """The part of ``key`` Redis Cluster hashes (its hash tag, else the whole key)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


def test_what_one_append_script_touches_is_in_one_slot_and_the_shards_in_distinct_slots():
    tagged = cluster_prefix("memstream")
    for shard in range(8):
        touched = {keys.events(tagged, shard), keys.shard_shipped(tagged, "t", shard), keys.shard_types(tagged, shard)}
        assert len({_slot_tag(k) for k in touched}) == 1
    assert len({_slot_tag(keys.events(tagged, s)) for s in range(8)}) == 8
    rest = [
        keys.queries(tagged),
        keys.tenant_queries(tagged, "t"),
        keys.reply(keys.queries(tagged), "id"),
        keys.facts(tagged, 1, "t"),
        keys.facts_current(tagged, 1, "t"),
        keys.positions(tagged, "g"),
        keys.applied_at(tagged, "g"),
        keys.sessions(tagged, 1, "t", "a"),
        keys.session(tagged, 1, "t", "s"),
        keys.catalog(tagged, "turns"),
        keys.agent_reports(tagged),
        keys.embed_backlog(tagged, "g"),
    ]
    assert {_slot_tag(k) for k in rest} == {"memstream"}
