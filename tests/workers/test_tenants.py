"""The tenant boundary on a real Valkey: an agent host configured for one tenant, with
the credentials ``memstream tenant add`` gave it, cannot read another tenant's items by
any request it can craft, cannot append in another tenant's name, and cannot make the
service run code. (ACLs need a real server: fakeredis does not enforce them.)"""

from __future__ import annotations

import json
import time
import uuid

import msgspec
import pytest
import redis
from pipeline_support import remembered, wait_for
from structlog.testing import capture_logs

from memstream.core import keys
from memstream.core.settings import Settings
from memstream.producers.connect import event_log
from memstream.producers.report import decode_report
from memstream.producers.stream import EventLog, Record
from memstream.producers.tenants import TenantError, TenantRegistry, acl_rules
from memstream.producers.writer import Writer
from memstream.query.client import ask, tenant_channel
from memstream.query.protocol import QueryRefused

pytestmark = pytest.mark.valkey

PREFIX = "memstream"


def tenant_url(server, user: str, password: str) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/0"


@pytest.fixture
def fleet(tmp_path, valkey_server):
    """Two registered tenants, a running pipeline (hash embedder), and each tenant's
    host client built from the URL its `tenant add` printed."""
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    admin = redis.Redis.from_url(valkey_server.url)
    admin.flushall()
    for user in admin.execute_command("ACL", "USERS"):
        if user != b"default":
            admin.execute_command("ACL", "DELUSER", user)
    registry = TenantRegistry(admin, PREFIX)
    creds = {}
    for name in ("acme", "globex"):
        tenant, password = registry.add(name)
        creds[name] = tenant_url(valkey_server, tenant.user, password)
    settings = Settings.load(home=str(tmp_path / "svc"), redis_url=valkey_server.url, autostart=False, embedder="hash")
    pipeline = Pipeline(
        settings, event_log(admin, valkey_server.url, settings), PipelineConfig(embedder="hash", consumer="w1")
    ).start()
    hosts = {name: redis.Redis.from_url(url) for name, url in creds.items()}
    try:
        yield admin, pipeline, creds, hosts
    finally:
        pipeline.stop()
        for c in hosts.values():
            c.close()
        for name in creds:
            admin.execute_command("ACL", "DELUSER", f"{PREFIX}-{name}")


def host_log(url: str, tenant: str, tmp_path) -> EventLog:
    settings = Settings.load(home=str(tmp_path / f"h-{tenant}"), redis_url=url, tenant=tenant, autostart=False)
    client = redis.Redis.from_url(url)
    return event_log(client, url, settings)


def applied_everywhere(admin, pipeline) -> bool:
    for c in pipeline.consumers:
        for key in c.log.stream_keys:
            for g in admin.xinfo_groups(key):
                if g["name"].decode() == c.group and (g["pending"] or g["lag"]):
                    return False
    return True


def search(client, tenant, query, **extra):
    return ask(client, PREFIX, {"op": "search", "tenant": tenant, "query": query, "scope": "all", **extra}, timeout=5.0)


def test_a_host_appends_and_asks_for_its_own_tenant_only(fleet, tmp_path):
    admin, pipeline, creds, hosts = fleet
    acme = host_log(creds["acme"], "acme", tmp_path)
    globex = host_log(creds["globex"], "globex", tmp_path)
    acme.append_batch([Record.of(remembered("acme launch code is blue falcon", tenant="acme"), seq=1)], segment="seg-a")
    globex.append_batch([Record.of(remembered("globex secret plan is green heron", tenant="globex"), seq=1)], segment="seg-g")
    wait_for(lambda: applied_everywhere(admin, pipeline), what="both events applied")

    # its own: found
    mine = search(hosts["acme"], "acme", "launch code falcon")
    assert any("blue falcon" in r["text"] for r in mine["results"]), mine
    # another tenant named in the request: answered in the channel's tenant, never globex's
    theirs = search(hosts["acme"], "globex", "secret plan heron")
    assert not any("heron" in r["text"] for r in theirs["results"]), theirs
    for op in ({"op": "facts"}, {"op": "recent", "scope": "all"}):
        answer = ask(hosts["acme"], PREFIX, {**op, "tenant": "globex"}, timeout=5.0)
        assert "heron" not in json.dumps(answer), answer
    # counts of every tenant's items are the operator's only
    assert "error" in ask(hosts["acme"], PREFIX, {"op": "count", "tenant": "acme"}, timeout=5.0)
    assert "items" in ask(admin, PREFIX, {"op": "count"}, timeout=5.0)
    # the operator still asks for any tenant
    assert any("heron" in r["text"] for r in search(admin, "globex", "secret plan heron")["results"])


ATTEMPTS = [
    ("XRANGE", f"{PREFIX}:events:0", "-", "+"),
    ("XREAD", "STREAMS", f"{PREFIX}:events:0", "0"),
    ("HGETALL", f"{PREFIX}:tenants"),
    ("KEYS", "*"),
    ("SCAN", "0"),
    ("HGETALL", f"{PREFIX}:facts:v1:globex"),
    ("HGETALL", f"{PREFIX}:facts:globex"),
    ("ZRANGE", f"{PREFIX}:sessions:v1:globex", "0", "-1"),
    ("SMEMBERS", f"{PREFIX}:tombstones:globex"),
    ("XRANGE", f"{PREFIX}:dlq", "-", "+"),
    ("RPUSH", f"{PREFIX}:queries", "{}"),
    ("RPUSH", f"{PREFIX}:t:globex:queries", "{}"),
    ("BLPOP", f"{PREFIX}:t:globex:reply:" + "0" * 32, "0.01"),
    ("RPUSH", "rq:queue:memstream:queries", "x"),
    ("CONFIG", "GET", "*"),
    ("ACL", "LIST"),
    ("FLUSHALL",),
    ("SUBSCRIBE", "anything"),
    ("EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')", "1", f"{PREFIX}:events:0"),
    ("EVAL", "return redis.call('XRANGE', ARGV[1], '-', '+')", "0", f"{PREFIX}:events:0"),
    ("HSET", f"{PREFIX}:t:globex:shipped", "seg", "999999"),
    ("HGETALL", f"{PREFIX}:agents"),
    ("HSCAN", f"{PREFIX}:agents", "0"),
    ("HGET", f"{PREFIX}:agents", "any"),
    ("HGETALL", f"{PREFIX}:agents:retired"),
    ("HINCRBY", f"{PREFIX}:agents:retired", "refusals", "-100"),
]


def test_a_tenants_credentials_cannot_reach_anything_else(fleet):
    admin, pipeline, creds, hosts = fleet
    for attempt in ATTEMPTS:
        with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
            hosts["acme"].execute_command(*attempt)


def test_an_event_appended_in_another_tenants_name_is_dead_lettered(fleet, tmp_path):
    admin, pipeline, creds, hosts = fleet
    # acme's host claims globex: the ship script refuses (globex's dedup record is not
    # acme's key), so it appends by hand, signed with its own key
    acme = host_log(creds["acme"], "acme", tmp_path)
    forged = remembered("globex must wire money to account 666", tenant="globex")
    with pytest.raises(redis.exceptions.NoPermissionError):
        acme.append_batch([Record.of(forged, seq=1)], segment="seg-forge")
    rec = Record.of(forged)
    hosts["acme"].xadd(
        f"{PREFIX}:events:0", {"id": rec.event_id, "type": rec.type, "data": rec.data, "sig": acme.signer("acme", rec.data)}
    )
    # and the same with no signature at all, straight XADD
    raw = remembered("globex prefers the forged vendor", tenant="globex")
    rec = Record.of(raw)
    hosts["acme"].xadd(f"{PREFIX}:events:0", {"id": rec.event_id, "type": rec.type, "data": rec.data})
    # an unregistered tenant's event from a registered host
    ghost = Record.of(remembered("ghost tenant memory", tenant="ghost"))
    hosts["acme"].xadd(f"{PREFIX}:events:0", {"id": ghost.event_id, "type": ghost.type, "data": ghost.data})
    good = remembered("globex real memory about herons", tenant="globex")
    host_log(creds["globex"], "globex", tmp_path).append_batch([Record.of(good, seq=1)], segment="seg-ok")
    wait_for(lambda: applied_everywhere(admin, pipeline), what="all applied")

    from memstream.workers.deadletters import DeadLetters

    dead = DeadLetters(admin, PREFIX).list()
    by_id = {}
    for d in dead:
        by_id.setdefault(d["id"], []).append(d["error"])
    for event in (forged, raw, ghost):
        eid = event.id if hasattr(event, "id") else event.event_id
        assert len(by_id.get(eid, [])) == len(pipeline.consumers), (eid, by_id)
        assert all(e.startswith("forged:") for e in by_id[eid])
    assert good.id not in by_id
    found = search(admin, "globex", "money account vendor herons")["results"]
    texts = " ".join(r["text"] for r in found)
    assert "herons" in texts and "666" not in texts and "forged vendor" not in texts


def test_a_host_writes_through_its_spool_with_tenant_credentials(fleet, tmp_path):
    """The real write path (spool, shipper, ship script) works under the tenant's ACL."""
    admin, pipeline, creds, hosts = fleet
    settings = Settings.load(home=str(tmp_path / "agent"), redis_url=creds["acme"], tenant="acme", autostart=False)
    writer = Writer(settings)
    writer.shipper.start()
    try:
        for i in range(5):
            assert writer.emit(remembered(f"acme note {i} about turbines", tenant="acme"))
        assert writer.flush(10.0), writer.stats()
    finally:
        writer.close()
    wait_for(lambda: applied_everywhere(admin, pipeline), what="applied")
    found = search(hosts["acme"], "acme", "turbines", k=10)["results"]
    assert len({r["text"] for r in found if "turbines" in r["text"]}) == 5
    # its dedup records are its own
    assert admin.exists(f"{PREFIX}:t:acme:shipped") or not list(tmp_path.glob("agent/spool/*.seg"))


def test_no_request_from_redis_chooses_code(fleet, tmp_path):
    """rq-style jobs naming functions run nowhere; requests naming other ops are refused."""
    admin, pipeline, creds, hosts = fleet
    marker = tmp_path / "pwned"
    from rq import Queue
    from rq.serializers import JSONSerializer

    # the operator's credentials, even: there is no rq worker to run it
    Queue(f"{PREFIX}:queries", connection=admin, serializer=JSONSerializer).enqueue("os.system", f"touch {marker}")
    # a raw envelope naming a function as its op, on the tenant's own channel
    rid = uuid.uuid4().hex
    channel = tenant_channel(PREFIX, "acme")
    hosts["acme"].rpush(
        channel, json.dumps({"id": rid, "deadline": time.time() + 5, "req": {"op": "os.system", "cmd": f"touch {marker}"}})
    )
    got = hosts["acme"].blpop([f"{PREFIX}:t:acme:reply:{rid}"], timeout=5)
    assert got is not None and "error" in json.loads(got[1])
    # garbage of every kind: answered with an error when an id can be read, counted always
    for junk in (b"\xff\xfe", b"{}", b"[]", b"null", b"x" * 70_000, json.dumps({"id": rid}).encode()):
        hosts["acme"].rpush(channel, junk)
    wait_for(lambda: not admin.llen(channel), what="junk consumed")
    time.sleep(0.5)
    assert not marker.exists()
    counters = {k.decode(): int(v) for k, v in admin.hgetall(f"{PREFIX}:counters:queries").items()}
    assert counters.get("refused", 0) >= 7, counters
    # and the servers still answer
    assert "results" in search(hosts["acme"], "acme", "anything")


def test_requests_out_of_their_limits_are_refused_before_sending(fleet):
    admin, pipeline, creds, hosts = fleet
    for bad in (
        {"op": "search", "tenant": "acme", "query": ""},
        {"op": "search", "tenant": "acme", "query": "x", "k": 0},
        {"op": "search", "tenant": "acme", "query": "x", "k": 10_000},
        {"op": "context", "tenant": "acme", "id": "x" * 500},
        {"op": "shell", "tenant": "acme"},
        {"op": "search", "tenant": "acme", "query": "x", "unknown_field": 1},
    ):
        with pytest.raises(QueryRefused):
            ask(hosts["acme"], PREFIX, bad, timeout=2.0)
    with pytest.raises(QueryRefused):
        ask(hosts["acme"], PREFIX, {"op": "count"}, timeout=float("nan"))


def test_tenant_names_cannot_widen_a_key_pattern(fleet):
    admin, pipeline, creds, hosts = fleet
    registry = TenantRegistry(admin, PREFIX)
    for bad in ("*", "a*", "a b", "", "a:b", "x" * 65, "a\nb", "[ab]", "-lead"):
        with pytest.raises(TenantError):
            registry.add(bad)
    with pytest.raises(TenantError):
        registry.add("acme")  # exists: --rotate to re-key


def test_a_removed_tenant_can_no_longer_connect(fleet):
    admin, pipeline, creds, hosts = fleet
    assert TenantRegistry(admin, PREFIX).remove("globex")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(creds["globex"]).ping()


def test_doctor_with_a_tenants_credentials_says_so_and_passes(fleet, tmp_path, monkeypatch, capsys):
    from memstream import cli

    admin, pipeline, creds, hosts = fleet
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", creds["acme"])
    monkeypatch.setenv("MEMSTREAM_TENANT", "acme")
    code = cli.main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = report["checks"]
    assert checks["tenants"]["credentials"].startswith("a tenant's")
    assert checks["queries"]["answering"] is True
    assert checks["redis"]["ok"] and checks["streams"]["ok"]
    assert creds["acme"].split(":")[2].split("@")[0] not in json.dumps(report)  # the password
    failing = {name for name, c in checks.items() if not c.get("ok")}
    assert failing <= {"hermes"} and code == (1 if failing else 0)  # no Hermes home in tests
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", pipeline.settings.redis_url)
    monkeypatch.delenv("MEMSTREAM_TENANT")
    cli.main(["doctor", "--json"])
    assert json.loads(capsys.readouterr().out)["checks"]["tenants"]["registered"] == 2


def test_a_hostile_host_with_tenant_credentials_stalls_nothing(fleet, tmp_path):
    """Undecodable, oversized and forged entries from a tenant's host: each dead-lettered
    with its reason or clipped, and the next good event of another tenant is projected."""
    from memstream.producers.events import encode
    from memstream.workers.deadletters import DeadLetters

    admin, pipeline, creds, hosts = fleet
    acme = host_log(creds["acme"], "acme", tmp_path)
    stream = f"{PREFIX}:events:0"
    good = Record.of(remembered("a short acme note", tenant="acme"))
    poison = [
        {"type": b"\xff\xfe", "data": good.data, "id": good.event_id},
        {b"\xff": b"\x00", "type": "memory.remembered", "data": good.data},
        {"type": "memory.remembered", "data": b"\xc1" * 64, "id": "x"},
        {
            "type": "turn.recorded",
            "data": good.data,
            "id": good.event_id,
            "sig": acme.signer("acme", good.data),
        },  # body of another type
    ]
    for fields in poison:
        hosts["acme"].xadd(stream, fields)
    big = remembered("oversized " + "y" * (8 << 20), tenant="acme")
    data = encode(big)
    hosts["acme"].xadd(stream, {"id": big.id, "type": "memory.remembered", "data": data, "sig": acme.signer("acme", data)})
    after = remembered("globex note after the storm about kites", tenant="globex")
    host_log(creds["globex"], "globex", tmp_path).append_batch([Record.of(after, seq=1)], segment="seg-after")
    wait_for(lambda: applied_everywhere(admin, pipeline), what="everything applied")

    dead = DeadLetters(admin, PREFIX).list(count=1000)
    assert len(dead) == len(poison)  # admission's verdict: one letter each, every group's
    assert all(d["error"].startswith(("malformed", "rejected")) for d in dead), [d["error"] for d in dead]
    assert any("kites" in r["text"] for r in search(hosts["globex"], "globex", "kites")["results"])
    huge = [r for r in search(hosts["acme"], "acme", "oversized", k=5)["results"] if r["id"] == big.id]
    assert huge and len(huge[0]["text"].encode()) <= pipeline.settings.max_text_bytes
    assert all(t.is_alive() for t in pipeline._threads)


def _reporting_writer(settings: Settings) -> Writer:
    writer = Writer(msgspec.structs.replace(settings, report_every_s=0.05))
    writer.attach_agent("ops-bot")
    writer.shipper.start()
    return writer


def test_a_host_writes_its_fleet_report_with_tenant_credentials_and_cannot_read_anyones(fleet, tmp_path):
    admin, pipeline, creds, hosts = fleet
    settings = Settings.load(home=str(tmp_path / "agent"), redis_url=creds["acme"], tenant="acme", autostart=False)
    writer = _reporting_writer(settings)
    try:
        assert writer.emit(remembered("acme note about reports", tenant="acme"))
        assert writer.flush(10.0), writer.stats()
        name = writer.shipper.reporter.name
        wait_for(lambda: admin.hexists(f"{PREFIX}:agents", name), what="the host's report")
    finally:
        writer.close()
    _, report = decode_report(name, admin.hget(f"{PREFIX}:agents", name))
    assert report.tenant == "acme" and report.agents == ["ops-bot"]
    assert writer.stats()["report_failures"] == 0
    with pytest.raises(redis.ResponseError, match="(?i)no permissions"):
        hosts["acme"].hget(f"{PREFIX}:agents", name)


def test_a_tenant_registered_before_fleet_reports_ships_as_before_and_logs_the_refused_report_once(fleet, tmp_path):
    admin, pipeline, creds, hosts = fleet
    user = f"{PREFIX}-acme"
    older = [
        r for r in acl_rules(PREFIX, "acme", "unused") if r.startswith(("~", "%")) and r != "%W~" + keys.agent_reports(PREFIX)
    ]
    admin.execute_command("ACL", "SETUSER", user, "resetkeys", *older)
    settings = Settings.load(home=str(tmp_path / "agent"), redis_url=creds["acme"], tenant="acme", autostart=False)
    with capture_logs() as logs:
        writer = _reporting_writer(settings)
        try:
            for i in range(5):
                assert writer.emit(remembered(f"acme note {i} before reports", tenant="acme"))
            wait_for(lambda: writer.shipper.reporter.failures >= 2, what="refused reports")
            assert writer.flush(10.0), writer.stats()
        finally:
            writer.close()
    stats = writer.stats()
    assert stats["shipped"] == 5 and stats["failures"] == 0 and stats["reports_sent"] == 0
    assert [e["event"] for e in logs].count("report.failed") == 1
    assert not admin.exists(f"{PREFIX}:agents")
