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
from tenant_support import host_log, tenant_fleet

from memstream.core import keys
from memstream.core.settings import Settings
from memstream.producers.record import Record
from memstream.producers.report import decode_report
from memstream.producers.tenants import TenantError, TenantRegistry
from memstream.producers.writer import Writer
from memstream.query import (
    ContextRequest,
    CountRequest,
    FactsRequest,
    QueryRefused,
    RecentRequest,
    SearchRequest,
    ask,
    tenant_channel,
)

pytestmark = pytest.mark.valkey

PREFIX = "memstream"


@pytest.fixture
def fleet(tmp_path, valkey_server):
    """Two registered tenants, a running pipeline (hash embedder), and each tenant's
    host client built from the URL its `tenant add` printed."""
    with tenant_fleet(tmp_path, valkey_server) as got:
        yield got


def applied_everywhere(admin, pipeline) -> bool:
    for c in pipeline.consumers:
        for key in c.events.stream_keys:
            for g in admin.xinfo_groups(key):
                if g["name"].decode() == c.group and (g["pending"] or g["lag"]):
                    return False
    return True


def search(client, tenant, query, **extra):
    return ask(client, PREFIX, SearchRequest(tenant=tenant, query=query, scope="all", **extra), timeout=5.0)


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
    for request in (FactsRequest(tenant="globex"), RecentRequest(tenant="globex", scope="all")):
        answer = ask(hosts["acme"], PREFIX, request, timeout=5.0)
        assert "heron" not in json.dumps(answer), answer
    # counts of every tenant's items are the operator's only
    assert "error" in ask(hosts["acme"], PREFIX, CountRequest(tenant="acme"), timeout=5.0)
    assert "items" in ask(admin, PREFIX, CountRequest(), timeout=5.0)
    # the operator still asks for any tenant
    assert any("heron" in r["text"] for r in search(admin, "globex", "secret plan heron")["results"])


ATTEMPTS = [
    ("XADD", f"{PREFIX}:events:0", "*", "type", "junk"),
    ("XADD", f"{PREFIX}:t:globex:events", "*", "type", "junk"),
    ("DEL", f"{PREFIX}:events:0"),
    ("EXPIRE", f"{PREFIX}:agents", "1"),
    ("HSET", f"{PREFIX}:types", "memory.written", "NaN"),
    ("HSET", f"{PREFIX}:counters:spool", "refused", "NaN"),
    ("HSET", f"{PREFIX}:agents", "x", "y"),
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
    # acme's host claims globex: the ship script is refused (globex's log and dedup record
    # are not acme's keys), and so is an append to any stream but acme's own log
    acme = host_log(creds["acme"], "acme", tmp_path)
    forged = remembered("globex must wire money to account 666", tenant="globex")
    with pytest.raises(redis.exceptions.NoPermissionError):
        acme.append_batch([Record.of(forged, seq=1)], segment="seg-forge")
    rec = Record.of(forged)
    for stream in (keys.events(PREFIX, 0), keys.tenant_events(PREFIX, "globex")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            hosts["acme"].xadd(stream, {"id": rec.event_id, "type": rec.type, "data": rec.data})
    # so it appends globex's event to its own log: signed with its own key, and unsigned
    own = keys.tenant_events(PREFIX, "acme")
    hosts["acme"].xadd(own, {"id": rec.event_id, "type": rec.type, "data": rec.data, "sig": acme.signer("acme", rec.data)})
    raw = remembered("globex prefers the forged vendor", tenant="globex")
    rec = Record.of(raw)
    hosts["acme"].xadd(own, {"id": rec.event_id, "type": rec.type, "data": rec.data})
    # an unregistered tenant's event from a registered host
    ghost = Record.of(remembered("ghost tenant memory", tenant="ghost"))
    hosts["acme"].xadd(own, {"id": ghost.event_id, "type": ghost.type, "data": ghost.data})
    # and in the operator's stream, where tenants' hosts appended before they had logs: the
    # operator appends, without the tenant's signature
    unsigned = Record.of(remembered("globex note nobody signed", tenant="globex"))
    admin.xadd(keys.events(PREFIX, 0), {"id": unsigned.event_id, "type": unsigned.type, "data": unsigned.data})
    good = remembered("globex real memory about herons", tenant="globex")
    host_log(creds["globex"], "globex", tmp_path).append_batch([Record.of(good, seq=1)], segment="seg-ok")
    wait_for(lambda: applied_everywhere(admin, pipeline), what="all applied")

    from memstream.workers.deadletters import DeadLetters

    dead = DeadLetters(admin, PREFIX).list()
    by_id = {}
    for d in dead:
        by_id.setdefault(d["id"], []).append(d["error"])
    for eid in (forged.id, raw.id, ghost.event_id, unsigned.event_id):
        assert len(by_id.get(eid, [])) == len(pipeline.consumers), (eid, by_id)
        assert all(e.startswith("forged:") for e in by_id[eid])
    assert good.id not in by_id
    found = search(admin, "globex", "money account vendor herons nobody")["results"]
    texts = " ".join(r["text"] for r in found)
    assert "herons" in texts and "666" not in texts and "forged vendor" not in texts and "nobody signed" not in texts


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
    # a Struct is not checked when it is made: the client checks it as the server will
    for bad in (
        SearchRequest(tenant="acme", query=""),
        SearchRequest(tenant="acme", query="x", k=0),
        SearchRequest(tenant="acme", query="x", k=10_000),
        SearchRequest(tenant="acme", query="x" * 70_000),
        ContextRequest(tenant="acme", id="x" * 500),
        {"op": "search", "tenant": "acme", "query": "x"},  # a dict is not a request
    ):
        with pytest.raises(QueryRefused):
            ask(hosts["acme"], PREFIX, bad, timeout=2.0)
    with pytest.raises(QueryRefused):
        ask(hosts["acme"], PREFIX, CountRequest(), timeout=float("nan"))


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
    stream = keys.tenant_events(PREFIX, "acme")  # the one log acme may append to
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


def test_a_host_writes_its_fleet_report_with_tenant_credentials_and_cannot_read_anyone_elses(fleet, tmp_path):
    admin, pipeline, creds, hosts = fleet
    settings = Settings.load(home=str(tmp_path / "agent"), redis_url=creds["acme"], tenant="acme", autostart=False)
    writer = _reporting_writer(settings)
    reports = keys.tenant_agent_reports(PREFIX, "acme")
    try:
        assert writer.emit(remembered("acme note about reports", tenant="acme"))
        assert writer.flush(10.0), writer.stats()
        name = writer.shipper.reporter.name
        wait_for(lambda: admin.hexists(reports, name), what="the host's report")
    finally:
        writer.close()
    _, report = decode_report(name, admin.hget(reports, name))
    assert report.tenant == "acme" and report.agents == ["ops-bot"]
    assert writer.stats()["report_failures"] == 0
    assert not admin.exists(keys.agent_reports(PREFIX))
    for key in (keys.agent_reports(PREFIX), keys.tenant_agent_reports(PREFIX, "globex")):
        with pytest.raises(redis.ResponseError, match="(?i)no permissions"):
            hosts["acme"].hget(key, name)


def test_a_tenant_user_of_an_older_release_is_named_by_doctor_until_updated(fleet, tmp_path):
    """A user made with the rules of an older release (it may append to the operator's
    streams, add to the shared counters, write the fleet's reports): its hosts ship into
    their own log all the same, doctor fails naming it, and ``memstream tenant update``
    gives it the current rules, keeping its password."""
    from memstream.ops import doctor

    admin, pipeline, creds, hosts = fleet
    user = f"{PREFIX}-acme"
    older = [
        "%W~" + keys.events_pattern(PREFIX),
        "~" + keys.types(PREFIX),
        "~" + keys.spool_counters(PREFIX),
        "%W~" + keys.agent_reports(PREFIX),
    ]
    admin.execute_command("ACL", "SETUSER", user, *older)
    assert hosts["acme"].xadd(keys.events(PREFIX, 0), {"type": "junk", "data": b"x"})  # what it could do
    writer = _reporting_writer(
        Settings.load(home=str(tmp_path / "agent"), redis_url=creds["acme"], tenant="acme", autostart=False)
    )
    try:
        for i in range(3):
            assert writer.emit(remembered(f"acme note {i} from an older user", tenant="acme"))
        assert writer.flush(10.0), writer.stats()
    finally:
        writer.close()
    assert admin.xlen(keys.tenant_events(PREFIX, "acme")) == 3
    checks = doctor(pipeline.settings)["checks"]
    assert checks["tenants"]["state"] == "failed" and "acme" in checks["tenants"]["error"], checks["tenants"]
    assert "memstream tenant update" in checks["tenants"]["error"]
    assert TenantRegistry(admin, PREFIX).update() == ["acme", "globex"]
    assert doctor(pipeline.settings)["checks"]["tenants"]["state"] == "ok"
    with pytest.raises(redis.exceptions.NoPermissionError):
        hosts["acme"].xadd(keys.events(PREFIX, 0), {"type": "junk", "data": b"x"})
    assert redis.Redis.from_url(creds["acme"]).ping()  # the same password


# --- add --sync with a tenant's credentials -------------------------------------------------

PASTED = "ghp_Zq8xR2vB7nK4mW1pT6yH3cJ9dF5gL0sA2eUu"  # made up, in GitHub's format


def _entries_of(admin, event_id: str) -> list[dict]:
    found = []
    streams = [*admin.scan_iter(match=f"{PREFIX}:events:*", _type="stream"), keys.tenant_events(PREFIX, "acme")]
    for key in streams:
        for _, fields in admin.xrange(key):
            if fields.get(b"id") == event_id.encode():
                found.append(fields)
    return found


def test_add_sync_with_a_tenants_credentials_appends_redacted_and_checks_through_its_query_channel(fleet, monkeypatch, capsys):
    from memstream import cli

    admin, pipeline, creds, hosts = fleet
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", creds["acme"])
    monkeypatch.setenv("MEMSTREAM_TENANT", "acme")
    code = cli.main(["add", "--sync", "--json", "--agent", "a1", f"acme keeps the ladder in the barn, token {PASTED}"])
    added = json.loads(capsys.readouterr().out)
    assert code == 0, added
    assert added["state"] == "searchable" and added["checked"] is True
    entries = _entries_of(admin, added["id"])
    assert len(entries) == 1
    assert PASTED.encode() not in entries[0][b"data"] and b"[REDACTED:github_token]" in entries[0][b"data"]


def test_add_sync_with_a_tenants_credentials_and_no_query_server_says_the_append_landed(fleet, monkeypatch, capsys):
    from memstream import cli

    admin, pipeline, creds, hosts = fleet
    pipeline.stop()  # nobody answers the tenant's queries and nothing is projected
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", creds["acme"])
    monkeypatch.setenv("MEMSTREAM_TENANT", "acme")
    code = cli.main(["add", "--sync", "--json", "--timeout", "1", "--agent", "a1", "acme keeps the rake in the shed"])
    captured = capsys.readouterr()
    added = json.loads(captured.out)
    assert code == 0, captured
    assert added["checked"] is False and added["state"].startswith("logged (could not check"), added
    assert "is in the log; adding it again would add it twice" in captured.err
    assert len(_entries_of(admin, added["id"])) == 1


def test_an_add_whose_reply_was_lost_is_sent_again_and_lands_once(fleet, tmp_path, monkeypatch):
    from memstream.ops import add as add_ops

    admin, pipeline, creds, hosts = fleet
    settings = Settings.load(home=str(tmp_path / "h"), redis_url=creds["acme"], tenant="acme", autostart=False)
    eventlog = host_log(creds["acme"], "acme", tmp_path)
    event, _ = add_ops.memory_event(
        settings, "acme stores the tarp in the loft", "TEXT", False, tenant=None, agent="a1", session=None, target="memory"
    )
    real = add_ops.append_through_door
    calls = []

    def reply_lost(*args, **kwargs):  # the append lands, its reply does not come back
        calls.append(1)
        got = real(*args, **kwargs)
        if len(calls) == 1:
            raise redis.ConnectionError("connection reset after the append (test)")
        return got

    monkeypatch.setattr(add_ops, "append_through_door", reply_lost)
    assert add_ops._append_once(eventlog, event, settings) == ""  # the second attempt found it there
    assert len(calls) == 2 and len(_entries_of(admin, event.id)) == 1
