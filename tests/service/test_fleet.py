"""The fleet's figures on /metrics (``memstream.service.fleet``): agents' reports summed at
scrape time, per-agent figures bounded to the top N and ``other``, hostile records counted
and skipped, stale agents leaving the active ones and then the hash with their counts
retired so that no sum goes down, and the read bounded."""

from __future__ import annotations

import json
import time

import msgspec
import pytest
from metrics_support import samples, scrape, value
from pipeline_support import pipeline_settings

from memstream.core import Settings, keys
from memstream.producers.report import (
    BUCKETS_NS,
    MAX_REPORT_BYTES,
    ROW,
    AgentReport,
    Figures,
    Prefetch,
    Reporter,
    Tally,
    decode_report,
    encode_report,
    pack_row,
)
from memstream.producers.stream import EventLog
from memstream.service.fleet import KEEP_S, OTHER, FleetReader
from memstream.service.metrics import Metrics

PREFIX = "memstream"


def row(**buckets: int) -> bytes:
    """A hook's row as a report carries it: ``b3=2`` is 2 calls in bucket 3; the sum is 1 µs a call."""
    out = [0] * ROW
    for name, n in buckets.items():
        out[int(name[1:])] += n
    out[-1] = sum(out[:-1]) * 1000
    return pack_row(out)


def put(client, name: str, report: AgentReport | bytes) -> None:
    data = report if isinstance(report, bytes) else encode_report(report)
    client.hset(keys.agent_reports(PREFIX), name, data)


def report(at: float | None = None, **fields) -> AgentReport:
    at = time.time() if at is None else at
    return AgentReport(at=at, started=at - 100, **fields)


def metrics_of(client, tmp_path, **settings) -> Metrics:
    return Metrics(EventLog(client, PREFIX), pipeline_settings(tmp_path / "home", **settings), projections=[])


def reader(client, **kwargs) -> FleetReader:
    return FleetReader(client, PREFIX, **{"top": 20, "active_within": 15.0, **kwargs})


# -- what a scrape shows -----------------------------------------------------------------------
def test_a_scrape_shows_the_reporting_agents_their_backlogs_hooks_and_prefetch_outcomes(redis_client, tmp_path):
    names = []
    for i, (backlog, refused) in enumerate([(7, 0), (0, 3), (2, 1)]):
        tally = Tally()
        tally.hooks["sync_turn"][2] += 10 * (i + 1)
        tally.hooks["sync_turn"][-1] += 30_000 * (i + 1)
        tally.hooks["prefetch"][8] += 1
        tally.hooks["prefetch"][-1] += 4_000_000
        tally.prefetch.update(fresh=i + 1, cached=1, empty=0)

        def figures(backlog=backlog, refused=refused, i=i) -> Figures:
            return Figures(
                backlog=backlog, backlog_bytes=backlog * 900, refused=refused, invalid=0, agents=[f"agent-{i}"], served=True
            )

        reporter = Reporter(Settings(report_every_s=5.0), tally, figures)
        assert reporter.send(redis_client, PREFIX)
        names.append(reporter.name)
    text = scrape(metrics_of(redis_client, tmp_path))
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_agents_active") == 3
    assert {s.labels["agent"]: s.value for s in samples(text, "memstream_agent_spool_backlog_events")} == {
        names[0]: 7,
        names[1]: 0,
        names[2]: 2,
        OTHER: 0,
    }
    assert {s.labels["agent"]: s.value for s in samples(text, "memstream_agent_spool_refusals_total")} == {
        names[0]: 0,
        names[1]: 3,
        names[2]: 1,
        OTHER: 0,
    }
    assert value(text, "memstream_hook_seconds_count", hook="sync_turn") == 60
    assert value(text, "memstream_hook_seconds_bucket", hook="sync_turn", le=f"{BUCKETS_NS[2] / 1e9}") == 60
    assert value(text, "memstream_hook_seconds_bucket", hook="sync_turn", le=f"{BUCKETS_NS[1] / 1e9}") == 0
    assert value(text, "memstream_hook_seconds_sum", hook="sync_turn") == pytest.approx(180_000 / 1e9)
    assert value(text, "memstream_hook_seconds_count", hook="prefetch") == 3
    assert value(text, "memstream_hook_seconds_count", hook="on_memory_write") == 0  # every hook, always
    assert value(text, "memstream_hook_seconds_count", hook=OTHER) is None
    assert {s.labels["outcome"]: s.value for s in samples(text, "memstream_prefetch_total")} == {
        "fresh": 6,
        "cached": 3,
        "empty": 0,
    }
    assert {s.labels["reason"]: s.value for s in samples(text, "memstream_agent_reports_skipped")} == {
        "malformed": 0,
        "oversized": 0,
        "ahead": 0,
        "unread": 0,
    }


def test_with_no_report_the_fleet_is_zero_and_named_by_other_only(redis_client, tmp_path):
    text = scrape(metrics_of(redis_client, tmp_path))
    assert value(text, "memstream_agents_active") == 0
    assert [s.labels["agent"] for s in samples(text, "memstream_agent_spool_backlog_events")] == [OTHER]
    assert value(text, "memstream_agent_spool_refusals_total", agent=OTHER) == 0


def test_with_many_agents_only_the_top_n_are_named_and_the_rest_is_summed_as_other(redis_client, tmp_path):
    for i in range(60):
        put(redis_client, f"host-{i:02d}:{i}:aaaaaa", report(backlog=i, refused=(i * 7) % 60))
    text = scrape(metrics_of(redis_client, tmp_path, metrics_top_agents=5))
    backlog = {s.labels["agent"]: s.value for s in samples(text, "memstream_agent_spool_backlog_events")}
    assert set(backlog) == {f"host-{i}:{i}:aaaaaa" for i in range(55, 60)} | {OTHER}
    assert backlog[OTHER] == sum(range(55))
    refusals = {s.labels["agent"]: s.value for s in samples(text, "memstream_agent_spool_refusals_total")}
    assert len(refusals) == 6 and sorted(refusals.values())[:5] == [55, 56, 57, 58, 59]  # the most
    assert sum(refusals.values()) == sum((i * 7) % 60 for i in range(60))
    assert value(text, "memstream_agents_active") == 60
    none = scrape(metrics_of(redis_client, tmp_path, metrics_top_agents=0))
    assert [s.labels["agent"] for s in samples(none, "memstream_agent_spool_backlog_events")] == [OTHER]


# -- untrusted records ---------------------------------------------------------------------------
def test_malformed_oversized_and_hostile_records_are_counted_and_skipped_never_failing_the_scrape(redis_client, tmp_path):
    good = report(backlog=4, hooks={"sync_turn": row(b1=2), "hook_of_tomorrow": row(b0=1)})
    put(redis_client, "good:1:aaaaaa", good)
    wrong_rows = msgspec.to_builtins(report(hooks={"sync_turn": row(b1=1)}), builtin_types=(bytes,))
    wrong_rows["hooks"]["sync_turn"] = pack_row([1] * ROW) + pack_row([1] * ROW)[:8]  # another bucket count
    hostile = {
        "garbage:1:aaaaaa": b"\xde\xad\xbe\xef",
        "json:1:aaaaaa": b'{"kind": "agent.v1", "at": 1}',
        "other-version:1:aaaaaa": msgspec.msgpack.encode(
            {**msgspec.to_builtins(good, builtin_types=(bytes,)), "kind": "agent.v9"}
        ),
        "rows:1:aaaaaa": msgspec.msgpack.encode(wrong_rows),
        "negative:1:aaaaaa": msgspec.msgpack.encode({**msgspec.to_builtins(good, builtin_types=(bytes,)), "backlog": -5}),
        'label"}injection': encode_report(good),
        "new\nline:1:a": encode_report(good),
        "x" * 300: encode_report(good),
        "empty:1:aaaaaa": b"",
    }
    for name, data in hostile.items():
        put(redis_client, name, data)
    put(redis_client, "huge:1:aaaaaa", b"\x00" * (MAX_REPORT_BYTES + 1))
    put(redis_client, "huger:1:aaaaaa", b"\x00" * (4 << 20))
    put(redis_client, "future:1:aaaaaa", report(at=time.time() + 3600, backlog=1000))
    text = scrape(metrics_of(redis_client, tmp_path))
    assert value(text, "memstream_redis_up") == 1
    assert {s.labels["reason"]: s.value for s in samples(text, "memstream_agent_reports_skipped")} == {
        "malformed": len(hostile),
        "oversized": 2,
        "ahead": 1,
        "unread": 0,
    }
    assert value(text, "memstream_agents_active") == 1
    assert {s.labels["agent"] for s in samples(text, "memstream_agent_spool_backlog_events")} == {"good:1:aaaaaa", OTHER}
    assert value(text, "memstream_hook_seconds_count", hook="sync_turn") == 2
    assert value(text, "memstream_hook_seconds_count", hook=OTHER) == 1  # a hook the provider does not have


def test_a_reports_key_of_another_type_is_one_malformed_record_and_the_scrape_goes_on(redis_client, tmp_path):
    redis_client.set(keys.agent_reports(PREFIX), b"not a hash")
    redis_client.set(keys.agent_reports_retired(PREFIX), b"nor this")
    text = scrape(metrics_of(redis_client, tmp_path))
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_agent_reports_skipped", reason="malformed") == 1
    assert value(text, "memstream_agents_active") == 0


def test_retired_sums_that_are_not_ours_are_left_out(redis_client):
    put(redis_client, "a:1:aaaaaa", report(refused=2))
    redis_client.hset(
        keys.agent_reports_retired(PREFIX),
        mapping={
            "refusals": 5,
            "hook:sync_turn:3": 4,
            "hook:sync_turn:sum": 4000,
            "prefetch:fresh": 1,
            "hook:evil:3": 9,
            "refusals ": 9,
            "prefetch:cached": b"many",
            "prefetch:empty": -3,
        },
    )
    fleet = reader(redis_client).read()
    assert dict(fleet.refusals)[OTHER] == 5
    assert fleet.hooks["sync_turn"][3] == 4 and fleet.hooks["sync_turn"][-1] == 4000 and OTHER not in fleet.hooks
    assert fleet.prefetch == {"fresh": 1, "cached": 0, "empty": 0}


def test_a_read_takes_at_most_its_cap_and_counts_the_rest_unread(redis_client):
    for i in range(15):
        put(redis_client, f"h:{i}:aaaaaa", report(backlog=1))
    fleet = reader(redis_client, max_reports=10).read()
    assert fleet.skipped["unread"] == 5 and fleet.active == 10


# -- stale agents, removal, sums that never go down ----------------------------------------------
def test_an_agent_that_stopped_reporting_leaves_the_active_ones_and_its_backlog_but_not_the_sums(redis_client, tmp_path):
    now = time.time()
    put(redis_client, "live:1:aaaaaa", report(at=now - 2, backlog=3, refused=1, hooks={"sync_turn": row(b2=5)}))
    put(redis_client, "gone:2:aaaaaa", report(at=now - 60, backlog=9, refused=4, hooks={"sync_turn": row(b2=7)}))
    text = scrape(metrics_of(redis_client, tmp_path, report_every_s=5.0))
    assert value(text, "memstream_agents_active") == 1
    assert {s.labels["agent"]: s.value for s in samples(text, "memstream_agent_spool_backlog_events")} == {
        "live:1:aaaaaa": 3,
        OTHER: 0,
    }
    assert value(text, "memstream_agent_spool_refusals_total", agent="gone:2:aaaaaa") == 4  # until removed
    assert value(text, "memstream_hook_seconds_count", hook="sync_turn") == 12
    assert redis_client.hexists(keys.agent_reports(PREFIX), "gone:2:aaaaaa")


def test_a_report_an_hour_old_is_removed_its_counts_retired_and_no_sum_goes_down(redis_client):
    now = time.time()
    put(redis_client, "live:1:aaaaaa", report(at=now, refused=1, prefetch=Prefetch(2, 0, 1), hooks={"sync_turn": row(b2=5)}))
    put(
        redis_client,
        "gone:2:aaaaaa",
        report(
            at=now - KEEP_S - 5,
            refused=4,
            invalid=1,
            prefetch=Prefetch(3, 1, 0),
            hooks={"sync_turn": row(b2=7), "prefetch": row(b8=2)},
        ),
    )
    r = reader(redis_client)
    before = r.read(now)
    assert before.removed == 1 and not redis_client.hexists(keys.agent_reports(PREFIX), "gone:2:aaaaaa")
    after = r.read(now)
    assert after.removed == 0
    assert dict(before.refusals) == {"gone:2:aaaaaa": 5, "live:1:aaaaaa": 1, OTHER: 0}
    assert dict(after.refusals) == {"live:1:aaaaaa": 1, OTHER: 5}  # the sum is the same
    assert after.hooks == before.hooks and after.prefetch == before.prefetch == {"fresh": 5, "cached": 1, "empty": 1}
    assert after.hooks["prefetch"][8] == 2 and after.hooks["sync_turn"][2] == 12


def test_two_readers_that_saw_the_same_old_report_retire_it_once(redis_client):
    now = time.time()
    old = report(at=now - KEEP_S - 5, refused=3)
    put(redis_client, "gone:1:aaaaaa", old)
    data = encode_report(old)
    reports = keys.agent_reports(PREFIX)
    records = {(reports, "gone:1:aaaaaa"): (decode_report("gone:1:aaaaaa", data)[1], data)}
    first, second = reader(redis_client), reader(redis_client)
    assert first._remove_due(records, {}, now, complete={reports}) == 1
    assert second._remove_due(records, {}, now, complete={reports}) == 0
    assert dict(reader(redis_client).read(now).refusals) == {OTHER: 3}


def test_a_report_written_anew_after_it_was_read_is_not_removed(redis_client):
    now = time.time()
    old = report(at=now - KEEP_S - 5, refused=3)
    put(redis_client, "back:1:aaaaaa", old)
    data = encode_report(old)
    reports = keys.agent_reports(PREFIX)
    records = {(reports, "back:1:aaaaaa"): (old, data)}
    put(redis_client, "back:1:aaaaaa", report(at=now, refused=3))  # the agent came back meanwhile
    assert reader(redis_client)._remove_due(records, {}, now, complete={reports}) == 0
    fleet = reader(redis_client).read(now)
    assert fleet.active == 1 and dict(fleet.refusals) == {"back:1:aaaaaa": 3, OTHER: 0}


def test_a_skipped_record_left_unchanged_for_the_keeping_time_is_removed(redis_client):
    put(redis_client, "junk:1:aaaaaa", b"\x00junk")
    put(redis_client, "big:1:aaaaaa", b"\x00" * (MAX_REPORT_BYTES + 1))
    r = reader(redis_client, keep=0.0)
    assert r.read().removed == 0  # first seen now
    assert r.read().removed == 2
    assert redis_client.hlen(keys.agent_reports(PREFIX)) == 0
    put(redis_client, "junk:1:aaaaaa", b"\x00junk")
    put(redis_client, "junk:1:aaaaaa", b"\x00junk, changed")
    r.read()
    assert reader(redis_client, keep=3600.0).read().skipped["malformed"] == 1


def test_a_stale_record_is_kept_for_an_hour_before_it_is_removed(redis_client):
    now = time.time()
    put(redis_client, "quiet:1:aaaaaa", report(at=now - KEEP_S + 60))
    fleet = reader(redis_client).read(now)
    assert fleet.removed == 0 and fleet.active == 0
    assert redis_client.hexists(keys.agent_reports(PREFIX), "quiet:1:aaaaaa")


def _register(client, *tenants: str) -> None:
    """Tenants in the registry as ``memstream tenant add`` records them (no ACL user: fakeredis)."""
    for name in tenants:
        client.hset(keys.tenants(PREFIX), name, json.dumps({"user": f"{PREFIX}-{name}", "sign_key": "00" * 32, "created_at": 0}))


def test_each_tenants_reports_are_read_within_its_share_and_the_scrapes_budget(redis_client):
    """The operator's hash and each registered tenant's: at most ``max_tenant_reports`` of one
    tenant's, at most ``max_reports`` in all, a different tenant left unread each scrape when
    the budget runs out; the same name in two tenants' hashes is one agent label."""
    _register(redis_client, "acme", "globex", "initech")
    put(redis_client, "op:1:aaaaaa", report(backlog=1))
    for tenant, n in (("acme", 30), ("globex", 4), ("initech", 4)):
        redis_client.hset(
            keys.tenant_agent_reports(PREFIX, tenant),
            mapping={f"{tenant}:{i}:aaaaaa": encode_report(report(backlog=1)) for i in range(n)},
        )
    redis_client.hset(keys.tenant_agent_reports(PREFIX, "globex"), "op:1:aaaaaa", encode_report(report(backlog=2)))
    fleet = reader(redis_client, max_tenant_reports=10).read()
    assert fleet.active == 1 + 10 + 5 + 4  # acme's share is 10; op:1 is a process in each hash
    assert fleet.skipped["unread"] == 20
    assert dict(fleet.backlog)["op:1:aaaaaa"] == 3  # one label, both hashes' figures
    budget = reader(redis_client, max_tenant_reports=10, max_reports=12)
    left = [budget.read().skipped["unread"] for _ in range(3)]
    assert all(n > 20 for n in left)  # the budget ran out: someone's reports unread, counted
