"""The write side of the tenant boundary on a real Valkey (ACLs need a real server). With
the credentials ``memstream tenant add`` gives, a host appends to its tenant's own log and
nothing else: whatever it does to the keys it may write (trim, delete, expire, explicit
ids, garbage in its counters, a flood of reports) harms only its own tenant, is detected,
and never stops another tenant's appends, projections or the operator's commands."""

from __future__ import annotations

import json
import time

import msgspec
import pytest
import redis
from metrics_support import scrape, value
from pipeline_support import remembered
from tenant_support import PREFIX, host_log, host_settings, log_ids, settled, tenant_fleet
from writepath import wait_for

from memstream.core import derived_event_id, keys
from memstream.producers.record import Record
from memstream.producers.writer import Writer
from memstream.query import Answer, Handlers

pytestmark = pytest.mark.valkey

MAX_ID = "18446744073709551615-18446744073709551615"


class _Echo(Answer):
    """An answer that says which tenant the handler was asked in."""

    tenant: str


@pytest.fixture
def fleet(tmp_path, valkey_server):
    with tenant_fleet(tmp_path, valkey_server) as got:
        yield got


def search(client, tenant, query, **extra):
    from memstream.query import SearchRequest, ask

    return ask(client, PREFIX, SearchRequest(tenant=tenant, query=query, scope="all", **extra), timeout=5.0)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``memstream ARGV`` in this process: (exit code, stdout, stderr). What the pipeline's
    threads logged before it (structlog's default prints) is not in them."""
    from memstream import cli

    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def found(client, tenant, query, text) -> bool:
    return any(text in r["text"] for r in search(client, tenant, query, k=20)["results"])


# -- finding 1: the shared log -------------------------------------------------------------------
def test_a_tenant_can_neither_trim_nor_delete_nor_exhaust_a_log_another_tenant_appends_to(fleet, tmp_path):
    root, pipeline, urls, hosts = fleet
    shared = keys.events(PREFIX, 0)
    root.xadd(shared, {"id": "operator-1", "type": "junk", "data": b"x"})
    before = root.xlen(shared)
    for attempt in (
        ("XADD", shared, "MAXLEN", "0", "*", "type", "junk", "data", "x"),
        ("XADD", shared, "MINID", MAX_ID, "*", "type", "junk", "data", "x"),
        ("XADD", shared, MAX_ID, "type", "junk", "data", "x"),
        ("XTRIM", shared, "MAXLEN", "0"),
        ("DEL", shared),
        ("UNLINK", shared),
        ("EXPIRE", shared, "1"),
        ("RENAME", shared, f"{PREFIX}:t:acme:mine"),
    ):
        with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
            hosts["acme"].execute_command(*attempt)
    assert root.xlen(shared) == before and root.ttl(shared) == -1
    # globex appends and is projected, and so is acme
    for tenant, text in (("globex", "globex keeps the herons fed"), ("acme", "acme paints the falcons blue")):
        log = host_log(urls[tenant], tenant, tmp_path)
        log.append_batch([Record.of(remembered(text, tenant=tenant), seq=1)], segment=f"seg-{tenant}")
    wait_for(lambda: found(root, "globex", "herons fed", "herons"), what="globex's memory found")
    wait_for(lambda: found(root, "acme", "falcons blue", "falcons"), what="acme's memory found")


def test_a_tenant_that_exhausts_its_own_log_harms_only_itself_and_doctor_reports_it(fleet, tmp_path, monkeypatch, capsys):
    from memstream.ops import doctor
    from memstream.service import Metrics

    root, pipeline, urls, hosts = fleet
    # the one log acme may append to, exhausted: nothing can follow the largest id
    hosts["acme"].execute_command("XADD", f"{PREFIX}:t:acme:events", MAX_ID, "type", "junk", "data", "x")
    writer = Writer(host_settings(tmp_path, urls["acme"], "acme"))
    writer.shipper.start()
    try:
        assert writer.emit(remembered("acme note that cannot be appended", tenant="acme"))
        assert not writer.flush(3.0)  # refused by its own log: it stays in acme's spool
    finally:
        writer.close()
    assert writer.stats()["shipped"] == 0
    other = remembered("globex note after acme broke its log", tenant="globex")
    host_log(urls["globex"], "globex", tmp_path).append_batch([Record.of(other, seq=1)], segment="seg-g")
    wait_for(lambda: found(root, "globex", "broke its log", "globex note"), what="globex projected")
    wait_for(lambda: settled(root, pipeline), what="every consumer settled")

    settings = pipeline.settings
    report = doctor(settings)
    logs = report["checks"]["logs"]
    assert logs["state"] == "warning" and "acme" in logs["warning"] and "exhausted" in logs["warning"], logs
    assert logs["broken"] == {f"{PREFIX}:t:acme:events": "exhausted"}
    text = scrape(Metrics(pipeline.events, settings))
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_logs_broken", reason="exhausted") == 1
    # the command line prints the report (no error line instead of it), as text and as JSON
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", settings.redis_url)
    _, out, err = run(capsys, "doctor")
    assert "logs" in out and "exhausted" in out and "error:" not in err, (out, err)
    _, out, _ = run(capsys, "doctor", "--json")
    assert json.loads(out)["checks"]["logs"]["state"] == "warning"


def test_an_operators_log_at_the_largest_id_is_read_by_doctor_stats_and_export(fleet, monkeypatch, capsys):
    """The operator's log (only the operator and the workers may append to it) at the
    largest id: the workers dead-letter the entry, and every reader still answers."""
    root, pipeline, urls, hosts = fleet
    root.execute_command("XADD", keys.events(PREFIX, 0), MAX_ID, "type", "junk", "data", "x")
    wait_for(lambda: settled(root, pipeline), what="the entry delivered to every group")
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", pipeline.settings.redis_url)
    for argv in (["doctor", "--json"], ["stats", "--json"], ["stats"], ["export"]):
        _, _, err = run(capsys, *argv)
        assert "error:" not in err, (argv, err)
    checks = json.loads(run(capsys, "doctor", "--json")[1])["checks"]
    assert checks["streams"]["ok"] and checks["projections"]["ok"], checks


# -- finding 2: counters --------------------------------------------------------------------------
def test_a_garbage_counter_never_makes_a_host_append_twice_nor_breaks_a_reader(fleet, tmp_path, monkeypatch, capsys):
    from memstream.service import Metrics

    root, pipeline, urls, hosts = fleet
    # every counter any shipper adds to, with NaN in it (acme can write its own; the shared ones
    # only the operator can now, but a reader trusts none of them)
    for key in (
        keys.types(PREFIX),
        keys.spool_counters(PREFIX),
        f"{PREFIX}:t:acme:types",
        f"{PREFIX}:t:acme:counters:spool",
    ):
        for field in ("memory.remembered", "turn.recorded", "refused", "unreplicated", "write_errors"):
            root.hset(key, field, "NaN")
    writer = Writer(host_settings(tmp_path, urls["acme"], "acme"))
    writer.shipper.start()
    events = [remembered(f"acme counted note {i}", tenant="acme") for i in range(5)]
    try:
        for event in events:
            assert writer.emit(event)
        assert writer.flush(10.0), writer.stats()
    finally:
        writer.close()
    in_log = log_ids(root)
    assert [in_log.get(e.id) for e in events] == [1] * 5, in_log
    assert writer.stats()["shipped"] == 5
    wait_for(lambda: settled(root, pipeline), what="applied")
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", pipeline.settings.redis_url)
    code, out, _ = run(capsys, "stats", "--json")
    stats = json.loads(out)
    # the garbage stays garbage (left out, counted), every other count is summed
    assert code == 0 and stats["unreadable_counters"] >= 5 and "memory.remembered" not in stats["types"], stats
    code, out, err = run(capsys, "stats")
    assert code == 0 and "error:" not in err and "counters left out" in out
    text = scrape(Metrics(pipeline.events, pipeline.settings))
    assert value(text, "memstream_redis_up") == 1
    assert value(text, "memstream_counters_unreadable") >= 5


# -- finding 4: point identity --------------------------------------------------------------------
def test_an_event_reusing_another_tenants_id_never_replaces_its_point(fleet, tmp_path):
    """acme appends, correctly signed with its own credentials, an event whose id is one of
    globex's (a derived id of an import is computed from guessable inputs): globex's item
    stays globex's, and acme's is acme's."""
    root, pipeline, urls, hosts = fleet
    shared_id = derived_event_id(1_700_000_000_000, "hermes", "memory", "globex", "a1", "memory", "the vault code", 0)
    theirs = msgspec.structs.replace(remembered("globex vault code is 4711", tenant="globex"), id=shared_id)
    host_log(urls["globex"], "globex", tmp_path).append_batch([Record.of(theirs, seq=1)], segment="seg-g")
    wait_for(lambda: found(root, "globex", "vault code", "4711"), what="globex's memory")
    mine = msgspec.structs.replace(remembered("acme says the vault code is 0000", tenant="acme"), id=shared_id)
    host_log(urls["acme"], "acme", tmp_path).append_batch([Record.of(mine, seq=1)], segment="seg-a")
    wait_for(lambda: found(root, "acme", "vault code", "0000"), what="acme's memory")
    wait_for(lambda: settled(root, pipeline), what="applied")
    assert found(root, "globex", "vault code", "4711")
    assert not found(root, "globex", "vault code", "0000")
    assert not found(root, "acme", "vault code", "4711")


# -- finding 10: the fleet's reports ---------------------------------------------------------------
def _report(tmp_path, url: str, tenant: str) -> None:
    """A host of ``tenant`` that served an agent ships an event and writes its fleet report."""
    writer = Writer(host_settings(tmp_path, url, tenant, report_every_s=0.05))
    writer.attach_agent("ops-bot")
    writer.shipper.start()
    try:
        assert writer.emit(remembered(f"{tenant} reports", tenant=tenant))
        assert writer.flush(10.0)
        wait_for(lambda: writer.shipper.reporter.sent >= 1, what=f"{tenant}'s report")
    finally:
        writer.close()


def test_a_tenant_cannot_delete_or_expire_the_reports_of_other_tenants(fleet, tmp_path):
    from memstream.service.fleet import FleetReader

    root, pipeline, urls, hosts = fleet
    _report(tmp_path, urls["globex"], "globex")
    for key in (keys.agent_reports(PREFIX), keys.agent_reports_retired(PREFIX), f"{PREFIX}:t:globex:agents"):
        for attempt in (("DEL", key), ("UNLINK", key), ("EXPIRE", key, "1"), ("HSET", key, "x", "y")):
            with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
                hosts["acme"].execute_command(*attempt)
    fleet_now = FleetReader(root, PREFIX, top=10, active_within=60).read()
    assert fleet_now.active == 1


def test_a_flood_of_forged_reports_costs_a_scrape_at_most_its_tenants_share(fleet, tmp_path):
    from memstream.service.fleet import MAX_TENANT_REPORTS, FleetReader

    root, pipeline, urls, hosts = fleet
    _report(tmp_path, urls["globex"], "globex")
    # 20,000 forged reports in every report key acme may write
    flooded = 0
    for key in (keys.agent_reports(PREFIX), f"{PREFIX}:t:acme:agents"):
        try:
            for start in range(0, 20_000, 1000):
                hosts["acme"].hset(key, mapping={f"forged:{i}:x": b"\x81\xa1a\x01" * 8 for i in range(start, start + 1000)})
            flooded += 1
        except redis.exceptions.NoPermissionError:
            continue
    assert flooded == 1
    fleet_now = FleetReader(root, PREFIX, top=10, active_within=60).read()
    assert fleet_now.active == 1  # globex's report is read
    read = fleet_now.skipped["malformed"] + fleet_now.skipped["oversized"] + fleet_now.skipped["ahead"]
    assert read <= MAX_TENANT_REPORTS, fleet_now.skipped
    assert fleet_now.skipped["unread"] >= 20_000 - MAX_TENANT_REPORTS


def test_a_tenants_channel_of_another_type_never_stops_the_answers_to_the_others(valkey_server):
    """A tenant's user may make its own query channel (or an answer key) a hash: the query
    server leaves that channel out and answers every other channel, without backing off."""
    from tenant_support import drop_users

    from memstream.producers.tenants import TenantRegistry
    from memstream.query.client import tenant_channel
    from memstream.query.server import QueryServer

    root = redis.Redis.from_url(valkey_server.url)
    root.flushall()
    drop_users(root)
    prefix = "qs"
    try:
        registry = TenantRegistry(root, prefix)
        for name in ("evil", "honest"):
            registry.add(name)
        server = QueryServer(root, prefix, Handlers(search=lambda request: _Echo(tenant=request.tenant)))
        root.hset(tenant_channel(prefix, "evil"), "a", "b")  # as evil's own user may
        rid = "1" * 32
        envelope = {"id": rid, "deadline": time.time() + 30, "req": {"op": "search", "tenant": "x", "query": "kites"}}
        root.rpush(tenant_channel(prefix, "honest"), json.dumps(envelope))
        assert server.serve_once(timeout=0.05)
        answer = root.lpop(keys.reply(tenant_channel(prefix, "honest"), rid))
        assert json.loads(answer)["tenant"] == "honest"
        # an answer key of evil's made a hash before its request: no answer there, and no failure
        evil_rid = "2" * 32
        root.hset(keys.reply(tenant_channel(prefix, "evil"), evil_rid), "a", "b")
        root.delete(tenant_channel(prefix, "evil"))
        root.rpush(tenant_channel(prefix, "evil"), json.dumps({**envelope, "id": evil_rid}))
        server._channels_at = 0.0  # the channels looked at again (every TENANTS_EVERY s)
        assert server.serve_once(timeout=0.05)
    finally:
        drop_users(root)
        root.close()
