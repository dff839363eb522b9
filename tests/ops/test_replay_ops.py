"""memstream replay's checks before it writes anything, and options per version."""

from __future__ import annotations

import pytest
import redis
from pipeline_support import make_pipeline, turn

from memstream.core import Settings
from memstream.ops import CommandError, activate_version, projection_versions, start_replay
from memstream.producers import EventLog
from memstream.projections import Catalog

pytestmark = pytest.mark.valkey


@pytest.fixture
def ops_settings(valkey_server, tmp_path):
    redis.Redis.from_url(valkey_server.url).flushall()
    return Settings.load(home=str(tmp_path / "ms"), autostart=False, redis_url=valkey_server.url, embedder="hash")


def test_a_version_is_built_with_its_own_options_and_bad_options_add_nothing(ops_settings, tmp_path):
    log = EventLog(redis.Redis.from_url(ops_settings.redis_url), ops_settings.stream_prefix)
    pipeline = make_pipeline(tmp_path / "home", log)
    log.append([turn(f"turn {i} about the deploy", index=i) for i in range(4)])
    pipeline.drain()
    for options, message in (
        ({"nope": 1}, "unknown option 'nope' of the turns projection"),
        ({"context_turns": "2"}, "option 'context_turns' of the turns projection must be int"),
    ):
        with pytest.raises(CommandError, match=message):
            start_replay(ops_settings, ["turns"], options=options)
    with pytest.raises(CommandError, match="facts takes no options"):
        start_replay(ops_settings, ["facts"], options={"context_turns": 2})
    assert len(Catalog(log.client, log.prefix).versions("turns")) == 1

    [v] = start_replay(ops_settings, ["turns"], options={"keyword_context_turns": 1}, activate="manual")
    assert (
        v["group"] == "turns.v2" and v["options"] == {"tenant_ids": True, "keyword_context_turns": 1} and v["embedder"] == "hash"
    )
    with pytest.raises(CommandError, match="turns version 2 is still building"):
        activate_version(ops_settings, "turns", 2)
    pipeline.sync_catalog()
    assert pipeline.runs["turns.v2"].projection.options["keyword_context_turns"] == 1
    assert pipeline.runs["turns.v1"].projection.options["keyword_context_turns"] == 0
    pipeline.drain()
    assert activate_version(ops_settings, "turns", 2)["state"] == "active"
    rows = {(r["projection"], r["version"]): r for r in projection_versions(ops_settings)}
    assert rows[("turns", 2)]["state"] == "active" and rows[("turns", 1)]["state"] == "retired"
    assert rows[("turns", 2)]["lag"] == 0 and rows[("facts", 1)]["items"] == 0


def test_archived_events_count_as_in_the_log_for_an_import(ops_settings, tmp_path):
    import json

    from memstream.ops import archive, export, import_jsonl

    log = EventLog(redis.Redis.from_url(ops_settings.redis_url), ops_settings.stream_prefix)
    pipeline = make_pipeline(tmp_path / "home", log)
    log.append([turn(f"turn {i} about the deploy", index=i) for i in range(6)])
    pipeline.drain()
    exported = tmp_path / "log.jsonl"
    exported.write_text("".join(json.dumps(e) + "\n" for e in export(ops_settings)))
    assert archive(ops_settings)["streams"]
    assert log.client.xlen(log.stream_keys[0]) <= 1
    result = import_jsonl(ops_settings, exported)
    assert result["appended"] == 0 and result["skipped"] == {"already in the log": 6}
