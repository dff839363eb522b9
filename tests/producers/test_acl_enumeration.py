"""Enumerate, don't guess: on a real Valkey, every command and key pattern each user of
``memstream acl recipe`` and ``memstream tenant add`` is allowed (read back with ``ACL
GETUSER``), and every destructive form of those commands against every key the user can
write. A tenant's user is hostile here: afterwards another tenant's appends, projections,
searches, forget and retention all work, and nothing of theirs changed. For the worker and
the admin what the role allows is by design: the test records the boundary the README's
Security section documents (their key pattern and commands) and checks it holds."""

from __future__ import annotations

import shlex

import msgspec
import pytest
import redis
from pipeline_support import remembered, turn
from tenant_support import PREFIX, drop_users, host_log, host_settings, settled, tenant_fleet
from writepath import wait_for

from memstream.core import keys
from memstream.producers.acl import admin_rules, role_user, worker_rules
from memstream.producers.record import Record
from memstream.producers.stream import MAX_ENTRY_ID
from memstream.producers.tenants import acl_grants
from memstream.producers.writer import Writer

pytestmark = pytest.mark.valkey

HUGE = b"x" * (4 << 20)  # a value far past what memstream writes (and past MAX_TEXT_BYTES)


def _user(root: redis.Redis, user: str) -> tuple[set[str], set[str]]:
    """(key patterns, allowed commands) of ``user`` as Valkey reports them (ACL GETUSER)."""
    got = root.execute_command("ACL", "GETUSER", user)
    info = dict(zip(got[::2], got[1::2])) if isinstance(got, list) else dict(got)
    text = {(k.decode() if isinstance(k, bytes) else k): v for k, v in info.items()}
    patterns = (text["keys"].decode() if isinstance(text["keys"], bytes) else str(text["keys"])).split()
    commands = (text["commands"].decode() if isinstance(text["commands"], bytes) else str(text["commands"])).split()
    return set(patterns), {c[1:] for c in commands if c.startswith("+")}


def _grants(rules: list[str]) -> tuple[set[str], set[str]]:
    return {r for r in rules if r.startswith(("~", "%"))}, {r[1:] for r in rules if r.startswith("+")}


def _attempts(key: str, commands: set[str]) -> list[tuple]:
    """Every destructive form of the allowed ``commands`` against ``key``."""
    out: list[tuple] = []
    if "xadd" in commands:
        out += [
            ("XADD", key, "MAXLEN", "0", "*", "type", "junk", "data", "x"),
            ("XADD", key, "MINID", MAX_ENTRY_ID, "*", "type", "junk", "data", "x"),
            ("XADD", key, "1-1", "type", "junk", "data", "x"),
            ("XADD", key, "*", "type", "memory.remembered", "data", HUGE),
            ("XADD", key, MAX_ENTRY_ID, "type", "junk", "data", "x"),
            ("XADD", key, "*", "type", "junk", "data", "x"),  # after the largest id: refused by Redis itself
        ]
    for field in ("memory.written", "memory.remembered", "refused", "unreplicated", "seg-x", "evil:1:aaaaaa"):
        if "hset" in commands:
            out += [("HSET", key, field, "NaN"), ("HSET", key, field, "-1"), ("HSET", key, field, HUGE)]
        if "hincrby" in commands:
            out.append(("HINCRBY", key, field, "-1000000000000000000"))
    if "hdel" in commands:
        out.append(("HDEL", key, "seg-x"))
    if "rpush" in commands:
        out += [("RPUSH", key, b"\xff\xfe"), ("RPUSH", key, HUGE)]
    if "lpop" in commands:
        out.append(("LPOP", key))
    if "expire" in commands:
        out += [("EXPIRE", key, "1"), ("EXPIRE", key, "0")]
    if "del" in commands:
        out.append(("DEL", key))
    # what it may not send at all, sent anyway
    out += [
        ("XTRIM", key, "MAXLEN", "0"),
        ("UNLINK", key),
        ("RENAME", key, key + ":moved"),
        ("SET", key, "x"),
        ("XDEL", key, "0-1"),
        ("XGROUP", "DESTROY", key, "turns.v1"),
        ("EVAL", "return redis.call('XTRIM', KEYS[1], 'MAXLEN', 0)", "1", key),
        ("EVAL", "return redis.call('DEL', KEYS[1])", "1", key),
    ]
    return out


def test_a_hostile_tenant_does_every_destructive_thing_its_user_allows_and_no_other_tenant_notices(tmp_path, valkey_server):
    from metrics_support import scrape, value

    from memstream.ops import Selector, doctor, forget
    from memstream.query import SearchRequest, ask
    from memstream.service import Metrics
    from memstream.workers import Retention

    with tenant_fleet(tmp_path, valkey_server, names=("evil", "honest")) as (root, pipeline, urls, hosts):
        # the boundary, read back from Valkey: exactly the documented grants
        patterns, commands = _user(root, f"{PREFIX}-evil")
        want_patterns, want_commands = _grants(acl_grants(PREFIX, "evil"))
        assert patterns == want_patterns == {"~" + keys.tenant_pattern(PREFIX, "evil")}
        assert commands == want_commands, commands ^ want_commands
        # honest's life before the storm
        honest = host_log(urls["honest"], "honest", tmp_path)
        before = [remembered(f"honest note {i} about the heron colony", tenant="honest") for i in range(3)]
        old_turn = turn("honest asks about the old lighthouse", "it was built in 1871", tenant="honest")
        honest.append_batch([Record.of(e, seq=i + 1) for i, e in enumerate([*before, old_turn])], segment="seg-h1")
        wait_for(lambda: settled(root, pipeline), what="honest's events applied")
        honest_log = keys.tenant_events(PREFIX, "honest")

        def honest_state() -> dict:
            # its log's entries (a stream's DUMP holds its groups' read times too), its dedup record, counters
            return {
                "log": root.xrange(honest_log),
                "shipped": root.hgetall(keys.shipped(PREFIX, "honest")),
                "types": root.hgetall(keys.tenant_types(PREFIX, "honest")),
            }

        snapshot = honest_state()
        assert len(snapshot["log"]) == 4 and snapshot["shipped"] and snapshot["types"]

        # every key the evil user can write: the ones memstream uses under its pattern, one more
        evil_keys = [
            keys.tenant_events(PREFIX, "evil"),
            keys.shipped(PREFIX, "evil"),
            keys.tenant_types(PREFIX, "evil"),
            keys.tenant_spool_counters(PREFIX, "evil"),
            keys.tenant_agent_reports(PREFIX, "evil"),
            keys.tenant_queries(PREFIX, "evil"),
            keys.reply(keys.tenant_queries(PREFIX, "evil"), "0" * 32),
            keys.tenant_space(PREFIX, "evil") + ":anything",
        ]
        # every key it must not reach: the operator's, the workers', honest's
        others = [
            keys.events(PREFIX, 0),
            honest_log,
            keys.shipped(PREFIX, "honest"),
            keys.tenant_types(PREFIX, "honest"),
            keys.tenant_agent_reports(PREFIX, "honest"),
            keys.tenant_queries(PREFIX, "honest"),
            keys.types(PREFIX),
            keys.spool_counters(PREFIX),
            keys.agent_reports(PREFIX),
            keys.agent_reports_retired(PREFIX),
            keys.tenants(PREFIX),
            keys.dlq(PREFIX),
            keys.positions(PREFIX, "turns.v1"),
            keys.tombstones(PREFIX, "honest"),
            keys.catalog(PREFIX, "turns"),
        ]
        evil = hosts["evil"]
        allowed = refused = 0
        for key in evil_keys:
            for attempt in _attempts(key, commands):
                try:
                    evil.execute_command(*attempt)
                    allowed += 1
                except redis.exceptions.NoPermissionError:
                    refused += 1
                except redis.ResponseError:
                    pass  # refused by Redis for what the key holds now (a wrong type, the largest id)
            # and every wrong type where memstream expects another
            for make in (("HSET", key, "a", "b"), ("RPUSH", key, "x"), ("XADD", key, "*", "a", "b")):
                evil.execute_command("DEL", key)
                try:
                    evil.execute_command(*make)
                except redis.ResponseError:
                    pass  # the workers made its log a stream again between the two (its group)
        for key in others:
            for attempt in _attempts(key, commands):
                with pytest.raises(redis.exceptions.NoPermissionError):
                    evil.execute_command(*attempt)
        assert allowed and refused  # both kinds were tried
        # its log ends a hash, its channel a stream: the states that break a reader that trusts them
        for key in evil_keys:
            evil.execute_command("DEL", key)
        evil.execute_command(
            "EVAL",
            "redis.call('DEL', KEYS[1]); return redis.call('HSET', KEYS[1], 'a', 'b')",
            "1",
            keys.tenant_events(PREFIX, "evil"),
        )
        evil.xadd(keys.tenant_queries(PREFIX, "evil"), {"a": "b"})
        evil.hset(keys.tenant_types(PREFIX, "evil"), "memory.remembered", "NaN")
        evil.hset(keys.tenant_agent_reports(PREFIX, "evil"), mapping={f"x:{i}:aaaaaa": HUGE[:5000] for i in range(50)})

        # honest: nothing of its changed
        assert honest_state() == snapshot
        # it appends through its spool, and is projected and found
        writer = Writer(host_settings(tmp_path, urls["honest"], "honest"))
        writer.shipper.start()
        try:
            after = [remembered(f"honest note {i} after the storm about kestrels", tenant="honest") for i in range(3)]
            for event in after:
                assert writer.emit(event)
            assert writer.flush(15.0), writer.stats()
        finally:
            writer.close()

        def hits(query: str, text: str) -> int:
            request = SearchRequest(tenant="honest", query=query, k=20, scope="all")
            return sum(text in r["text"] for r in ask(hosts["honest"], PREFIX, request, timeout=5.0).get("results", []))

        wait_for(lambda: hits("kestrels storm", "kestrels") == 3, what="honest's new notes found")
        assert hits("heron colony", "about the heron colony") == 3
        # the operator's commands all answer: doctor (naming evil's log), metrics, forget, retention
        settings = pipeline.settings
        checks = doctor(settings)["checks"]
        assert checks["logs"]["broken"] == {keys.tenant_events(PREFIX, "evil"): "wrong_type"}, checks["logs"]
        assert checks["streams"]["ok"] and checks["projections"]["ok"], (checks["streams"], checks["projections"])
        text = scrape(Metrics(pipeline.events, settings))
        assert value(text, "memstream_redis_up") == 1
        assert value(text, "memstream_logs_broken", reason="wrong_type") == 1
        forgot = forget(settings, Selector(events=(before[0].id,), tenant="honest"), wait=30.0)
        assert forgot["events"] == [before[0].id], forgot
        assert not any(f.get(b"id") == before[0].id.encode() for _, f in root.xrange(honest_log))
        wait_for(lambda: hits("heron colony", "about the heron colony") == 2, what="the forgotten note gone from search")
        assert not hits("heron colony", "note 0 about the heron")
        retention = Retention(msgspec.structs.replace(settings, retention_turns_days=1.0), pipeline.events).run(
            now_ms=int(root.time()[0]) * 1000 + 2 * 86_400_000, rewrite_aof=False, wait=30.0
        )
        assert retention["erased"]["turns"] >= 1 and not retention["skipped"], retention
        assert not any(f.get(b"id") == old_turn.id.encode() for _, f in root.xrange(honest_log))


def test_the_worker_and_the_admin_may_do_what_their_role_documents_and_nothing_else(valkey_server):
    """Their boundary is the prefix and the command lists of ``producers.acl`` (README,
    Security: every memstream key, destructive commands included, is theirs by design):
    recorded from Valkey, and checked against what they are refused."""
    root = redis.Redis.from_url(valkey_server.url)
    root.flushall()
    drop_users(root)
    try:
        for role, rules in (("worker", worker_rules(PREFIX, "pw-w")), ("admin", admin_rules(PREFIX, "pw-a"))):
            user = role_user(PREFIX, role)
            assert root.execute_command(*shlex.split(" ".join(["ACL", "SETUSER", user, *rules])))
            patterns, commands = _user(root, user)
            want_patterns, want_commands = _grants(rules)
            assert patterns == want_patterns == {"~" + keys.all_pattern(PREFIX)}
            assert commands == want_commands, commands ^ want_commands
            client = redis.Redis.from_url(f"redis://{user.replace('+', '%2B')}:{rules[2][1:]}@127.0.0.1:{valkey_server.port}/0")
            try:
                # by design: every memstream key, its own streams trimmed (admin), keys deleted
                assert client.xadd(keys.events(PREFIX, 0), {"type": "junk"})
                assert client.delete(keys.events(PREFIX, 0)) == 1
                for key in ("other-app:key", "memstreamX:events:0"):  # outside the prefix: never
                    for attempt in _attempts(key, commands):
                        with pytest.raises(redis.exceptions.NoPermissionError):
                            client.execute_command(*attempt)
                trims = ("XTRIM", keys.events(PREFIX, 0), "MINID", "0-1")
                if role == "admin":
                    client.execute_command(*trims)
                else:
                    with pytest.raises(redis.exceptions.NoPermissionError):
                        client.execute_command(*trims)
            finally:
                client.close()
    finally:
        drop_users(root)
        root.close()
