"""The least-privilege recipe on a real Valkey (ACLs need a real server: fakeredis does not
enforce them). ``memstream acl recipe`` prints the worker's and the admin's users, applied here
with ``ACL SETUSER`` as printed; the admin registers the tenants (their agent-host users).
Then each program runs with exactly its user's rights: an agent host ships and asks, the
workers and the query server project and answer (builds and drops included), the command
line does its work. Valkey's ACL LOG must hold no refusal afterwards, and each user is
refused what is not its own."""

from __future__ import annotations

import json
import shlex

import pytest
import redis
from pipeline_support import forgotten, memory, remembered, session_ended, turn, wait_for
from service_support import ms

from memstream.core import keys
from memstream.core.settings import Settings
from memstream.producers.acl import admin_rules, role_user, worker_rules
from memstream.producers.record import Record
from memstream.producers.writer import Writer
from memstream.projections import group_of

pytestmark = pytest.mark.valkey

PREFIX = "memstream"


def _drop_users(client: redis.Redis) -> None:
    for user in client.execute_command("ACL", "USERS"):
        if user not in (b"default", "default"):
            client.execute_command("ACL", "DELUSER", user)


@pytest.fixture
def users(valkey_server, tmp_path):
    """The recipe applied as printed; two tenants registered with the admin's URL. The
    command line runs in child processes, as an operator runs it."""
    root = redis.Redis.from_url(valkey_server.url)
    root.flushall()
    _drop_users(root)
    printed = ms(tmp_path / "operator", "acl", "recipe", "--json", env={"MEMSTREAM_REDIS_URL": valkey_server.url})
    recipe = {u["role"]: u for u in json.loads(printed.stdout)["users"]}
    assert set(recipe) == {"worker", "admin"}
    for u in recipe.values():
        assert root.execute_command(*shlex.split(u["command"])) in (b"OK", "OK", True)
    urls = {role: u["redis_url"] for role, u in recipe.items()}
    for tenant in ("t1", "t2"):
        added = ms(tmp_path / "operator", "tenant", "add", tenant, "--json", env={"MEMSTREAM_REDIS_URL": urls["admin"]})
        urls[tenant] = json.loads(added.stdout)["redis_url"]
    root.execute_command("ACL", "LOG", "RESET")
    try:
        yield root, urls
    finally:
        _drop_users(root)
        root.close()


# what an agent host tries, is refused and handles by design: the registry (a tenant's
# credentials sign with their own key), the operator's query channel (it asks on its own),
# the dedup record of logs shipped before tenants (the ship script checks it)
HOST_PROBES = {"command hgetall", f"key {PREFIX}:queries", f"key {PREFIX}:shipped"}


def refusals(root: redis.Redis) -> list[str]:
    """What Valkey refused since the last reset, but the agent hosts' probes: ``user reason object``."""
    out = []
    for entry in root.execute_command("ACL", "LOG"):
        fields = dict(zip(entry[::2], entry[1::2], strict=False)) if isinstance(entry, list) else entry
        got = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in fields.items()
        }
        user, what = got.get("username", ""), f"{got.get('reason')} {got.get('object')}"
        if not (user.startswith(f"{PREFIX}-") and what in HOST_PROBES):
            out.append(f"{user} {what}")
    return out


def settings_for(tmp_path, url: str, name: str, **overrides) -> Settings:
    return Settings.load(home=str(tmp_path / name), redis_url=url, embedder="hash", autostart=False, **overrides)


def test_the_recipe_names_users_no_tenant_can_take_and_bounds_keys_to_the_prefix():
    assert role_user("memstream", "worker") == "memstream+worker"
    from memstream.producers.tenants import TENANT_NAME

    assert not TENANT_NAME.match("+worker")
    for rules in (worker_rules("ms", "pw"), admin_rules("ms", "pw")):
        assert rules[:3] == ["reset", "on", ">pw"]
        assert [r for r in rules if r.startswith(("~", "%", "&", "allkeys", "allchannels", "+@", "allcommands"))] == ["~ms:*"]
        assert "resetchannels" in rules and "-@all" in rules
    assert not any(r.startswith("+acl") or r in ("+info", "+xtrim") for r in worker_rules("ms", "pw"))


def test_each_role_works_with_exactly_its_rights(tmp_path, users):
    """The provider (agent host), the workers with the query server, and the command line,
    each with its own user: everything they do is allowed, and nothing is refused."""
    from memstream.ops.worker import start_worker
    from memstream.provider.recall import Recall
    from memstream.query import FactsRequest, RecentRequest, SearchRequest

    root, urls = users
    worker_settings = settings_for(tmp_path, urls["worker"], "worker")
    worker = start_worker(worker_settings, name="w1")  # workers, query server, metrics
    try:
        # the provider of each tenant: spool, shipper, ship script, fleet report; then recall
        for tenant in ("t1", "t2"):
            host = settings_for(tmp_path, urls[tenant], f"host-{tenant}", tenant=tenant, report_every_s=0.05)
            writer = Writer(host)
            writer.attach_agent("a1")
            writer.shipper.start()
            try:
                kept = remembered(f"{tenant} keeps the kite in the shed", tenant=tenant)
                gone = remembered(f"{tenant} temporary note", tenant=tenant)
                for event in (
                    turn(f"{tenant} asks about kites", "kites fly in wind", tenant=tenant),
                    memory("add", f"{tenant} user likes kites", tenant=tenant),
                    kept,
                    gone,
                    forgotten(gone.id, tenant=tenant),
                    session_ended(tenant=tenant),
                ):
                    assert writer.emit(event)
                assert writer.flush(10.0), writer.stats()
            finally:
                writer.close()
            assert writer.stats()["report_failures"] == 0
            recall = Recall(host, lambda tenant=tenant: (tenant, "a1"))

            def found(recall=recall, tenant=tenant) -> bool:
                answer = recall.ask(SearchRequest(tenant=tenant, agent="a1", query="kite shed", scope="all"), timeout=5.0)
                texts = [r["text"] for r in answer.get("results", [])]
                return any("kite in the shed" in t for t in texts) and all(
                    t.startswith(tenant) for t in texts if "kite in the shed" in t
                )

            wait_for(found, what=f"{tenant}'s memory answered to its host")
            for request in (FactsRequest(tenant=tenant, agent="a1"), RecentRequest(tenant=tenant, agent="a1", scope="all")):
                answer = recall.ask(request, timeout=5.0)
                assert "error" not in answer, answer
        # the worker's metrics and dashboard, read as Prometheus and the page do
        import urllib.request

        for path in ("/metrics", "/api/summary"):
            with urllib.request.urlopen(worker.metrics.base_url + path, timeout=10) as reply:
                assert reply.status == 200
        # a dead letter: an unsigned event of a registered tenant
        forged = Record.of(remembered("t1 forged note", tenant="t1"))
        root.xadd(keys.events(PREFIX, 0), {"id": forged.event_id, "type": forged.type, "data": forged.data})

        # the command line, as the admin
        admin_env = {"MEMSTREAM_REDIS_URL": urls["admin"], "MEMSTREAM_TENANT": "t1"}

        def run(*argv: str, codes: tuple[int, ...] = (0,)) -> dict:
            done = ms(tmp_path / "operator", *argv, "--json", check=False, env=admin_env)
            assert done.returncode in codes, (argv, done.stdout, done.stderr)
            lines = done.stdout.strip().splitlines()  # one JSON document, or JSON lines (replay's progress)
            return json.loads(done.stdout) if len(lines) == 1 else json.loads(lines[-1]) if lines else {}

        wait_for(lambda: run("dlq")["dead_letters"], what="the forged entry dead-lettered", timeout=30)
        checks = run("doctor", codes=(0, 1))["checks"]  # 1 when its only failure is the Hermes home
        assert {name for name, c in checks.items() if not c.get("ok")} <= {"hermes"}, checks
        run("stats")
        run("projections")
        run("tenant", "list")
        assert run("search", "--scope", "all", "kite shed")
        run("add", "--sync", "--agent", "a1", "t1 added by the operator about kites")
        run("replay", "memories", "--detach")

        def rebuilt() -> bool:
            rows = [r for r in run("projections")["projections"] if r["projection"] == "memories"]
            return any(r["version"] == 2 and r["state"] == "active" for r in rows)

        wait_for(rebuilt, timeout=60, what="memories v2 built and activated by the worker")
        run("projections", "drop", "memories", "1")
        assert "kite in the shed" in ms(tmp_path / "operator", "export", env=admin_env).stdout
        run("archive")
        run("archive", "--verify")
        dead = run("dlq")["dead_letters"]
        run("dlq", "drop", dead[0]["dlq_id"])
        # forget, the whole way: the log, the projections, Redis's append-only file
        forgot = run("forget", "--match", "kite in the shed", "--tenant", "t1")
        assert forgot["events"] and forgot["aof"]["state"] == "rewritten", forgot
        assert "t1 keeps the kite in the shed" not in ms(tmp_path / "operator", "export", env=admin_env).stdout
        run("tenant", "remove", "t2")
        assert not (refused := refusals(root)), refused
    finally:
        worker.stop()
    assert not (refused := refusals(root)), refused


REFUSED_TO_ALL = [
    ("FLUSHALL",),
    ("FLUSHDB",),
    ("CONFIG", "RESETSTAT"),
    ("CONFIG", "REWRITE"),
    ("KEYS", "*"),
    ("SHUTDOWN", "NOSAVE"),
    ("CLIENT", "LIST"),
    ("CLIENT", "KILL", "ID", "1"),
    ("MONITOR",),
    ("SUBSCRIBE", "anything"),
    ("PUBLISH", "anything", "x"),
    ("ACL", "LIST"),
    ("SET", "other-app:key", "x"),
    ("GET", "other-app:key"),
    ("DEL", "other-app:key"),
    ("EVAL", "return redis.call('GET', KEYS[1])", "1", "other-app:key"),
    ("FUNCTION", "FLUSH"),
    ("SCRIPT", "FLUSH"),
    ("SLAVEOF", "NO", "ONE"),
    ("REPLICAOF", "NO", "ONE"),
    ("SAVE",),
    ("BGSAVE",),
    ("MIGRATE", "127.0.0.1", "1", "memstream:x", "0", "10"),
]


def test_the_worker_and_the_admin_are_refused_what_is_not_theirs(users):
    root, urls = users
    worker = redis.Redis.from_url(urls["worker"])
    admin = redis.Redis.from_url(urls["admin"])
    try:
        for client in (worker, admin):
            for attempt in REFUSED_TO_ALL:
                with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
                    client.execute_command(*attempt)
        # only the admin manages users, trims the log, reads the server's facts
        for attempt in (
            ("ACL", "SETUSER", "intruder", "on", ">x", "~*", "+@all"),
            ("ACL", "DELUSER", "memstream-t1"),
            ("XTRIM", f"{PREFIX}:events:0", "MAXLEN", "0"),
            ("INFO", "server"),
            ("CONFIG", "GET", "*"),
            ("CONFIG", "SET", "maxmemory", "1"),
            ("BGREWRITEAOF",),
        ):
            with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
                worker.execute_command(*attempt)
        assert admin.info("server")["redis_version"]
        assert worker.xadd(f"{PREFIX}:dlq", {"x": "1"})
    finally:
        worker.close()
        admin.close()


def test_an_agent_host_is_refused_other_tenants_data_by_redis(tmp_path, users):
    """The agent-host user of t1 may append to its own log and ask; appending anywhere else,
    reading the streams, any projection's keys or t2's answers is refused by Valkey itself,
    whatever the client sends."""
    root, urls = users
    host = redis.Redis.from_url(urls["t1"])
    try:
        assert host.xadd(keys.tenant_events(PREFIX, "t1"), {"type": "junk", "data": b"x"})  # to its own log: allowed
        for attempt in (
            ("XADD", keys.events(PREFIX, 0), "*", "type", "junk"),
            ("XADD", keys.tenant_events(PREFIX, "t2"), "*", "type", "junk"),
            ("XRANGE", keys.events(PREFIX, 0), "-", "+"),
            ("XREAD", "STREAMS", keys.events(PREFIX, 0), "0"),
            ("HGETALL", keys.facts(PREFIX, 1, "t2")),
            ("HGETALL", keys.facts(PREFIX, 1, "t1")),
            ("ZRANGE", keys.sessions(PREFIX, 1, "t2"), "0", "-1"),
            ("HGETALL", keys.positions(PREFIX, group_of("memories"))),
            ("XRANGE", keys.dlq(PREFIX), "-", "+"),
            ("BLPOP", keys.reply(keys.tenant_queries(PREFIX, "t2"), "0" * 32), "0.01"),
            ("LRANGE", keys.tenant_queries(PREFIX, "t2"), "0", "-1"),
            ("HGETALL", keys.tenants(PREFIX)),
            ("SCAN", "0"),
        ):
            with pytest.raises(redis.ResponseError, match="(?i)no permissions|permission"):
                host.execute_command(*attempt)
    finally:
        host.close()


def test_the_service_on_a_shared_redis_runs_with_the_workers_user(tmp_path, users):
    """``memstream up`` with MEMSTREAM_REDIS_URL (workers, query server, spool adoption,
    metrics) under the worker's user; the operator's ``add --sync`` is projected by it."""
    root, urls = users
    home = tmp_path / "svc"
    worker_env = {"MEMSTREAM_REDIS_URL": urls["worker"], "MEMSTREAM_TENANT": "t1"}
    started = json.loads(ms(home, "up", "--detach", "--json", env=worker_env).stdout)
    try:
        assert started["url"].startswith("redis://memstream%2Bworker:***@")
        added = json.loads(
            ms(
                home,
                "add",
                "--sync",
                "--json",
                "t1 note through the service",
                env={**worker_env, "MEMSTREAM_REDIS_URL": urls["admin"]},
            ).stdout
        )
        assert added["state"] == "searchable"
    finally:
        ms(home, "down", env=worker_env)
    assert not (refused := refusals(root)), refused
