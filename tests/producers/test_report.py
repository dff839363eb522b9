"""The fleet report (``memstream.producers.report``): a real provider's shipper writes it to
Redis with its hooks' durations and prefetch outcomes; reports off writes nothing; the log
down skips reports and loses no shipping, a failing report never stops the shipping; a
long silence gives a new name without counting twice; and the readers' decoder takes any
bytes."""

from __future__ import annotations

import math
import time

import fakeredis
import msgspec
import pytest
import redis
from fuzzing import examples
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from provider_support import harness  # noqa: F401  (fixture)
from structlog.testing import capture_logs
from writepath import Switchable, logged_contents, logged_events, remembered, wait_for

from memstream.core import Settings, keys
from memstream.producers.events import TurnRecorded
from memstream.producers.report import (
    BUCKETS_NS,
    HOOKS,
    MAX_AGENTS,
    MAX_REPORT_BYTES,
    REPORTER_NAME,
    ROW,
    ROW_BYTES,
    AgentReport,
    Figures,
    Prefetch,
    Reporter,
    ReportError,
    Tally,
    decode_report,
    encode_report,
    pack_row,
    reporter_name,
    unpack_row,
)
from memstream.producers.stream import EventLog
from memstream.producers.writer import Writer


def reports(log: EventLog) -> dict[str, AgentReport]:
    """Every report in the log's Redis, decoded, by its reporter's name."""
    raw = log.client.hgetall(keys.agent_reports(log.prefix))
    return dict(decode_report(name, data) for name, data in raw.items())


def calls(report: AgentReport, hook: str) -> int:
    """How many calls of ``hook`` the report counts (0: none, or left out)."""
    packed = report.hooks.get(hook)
    return sum(unpack_row(packed)[:-1]) if packed else 0


@pytest.fixture
def writers():
    """Writers made by a test, closed at teardown: name it after ``event_log``, so that they
    are closed (and their last report written) before its client is."""
    made: list[Writer] = []
    yield made
    for w in made:
        w.close(timeout=0.5)


def make_writer(writers, settings, connect, every: float = 0.05) -> Writer:
    w = Writer(msgspec.structs.replace(settings, report_every_s=every), locator=connect)
    w.shipper.start()
    writers.append(w)
    return w


# -- what a provider reports -------------------------------------------------------------------
def test_a_providers_shipper_writes_its_report_with_its_hooks_and_prefetch_outcomes(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "0.05")
    p = harness.provider(agent_identity="ops-bot", user_id="u1")
    for i in range(3):
        p.on_turn_start(i + 1, f"message {i}")
        p.prefetch(f"message {i}")  # no service answers: an empty prefetch
        p.sync_turn(f"message {i}", f"answer {i}", session_id="sess-1")
    p.handle_tool_call("memstream_recent", {})
    assert len(harness.events(p)) == 3

    def reported():
        found = reports(harness.log)
        return found if any(calls(r, "sync_turn") == 3 and r.backlog == 0 for r in found.values()) else None

    found = wait_for(reported, what="a report after the three turns shipped")
    assert len(found) == 1
    name, report = next(iter(found.items()))
    assert REPORTER_NAME.fullmatch(name) and name == p.writer.shipper.reporter.name
    assert (report.tenant, report.agents, report.agents_total) == ("default", ["ops-bot"], 1)
    assert report.pid > 0 and report.host == name.rsplit(":", 2)[0]
    assert report.refused == report.invalid == 0
    assert report.prefetch == Prefetch(fresh=0, cached=0, empty=3)
    assert {"initialize", "on_turn_start", "prefetch", "sync_turn", "handle_tool_call"} <= set(report.hooks)
    for hook in ("on_turn_start", "prefetch", "sync_turn"):
        row = unpack_row(report.hooks[hook])
        assert len(row) == ROW and sum(row[:-1]) == 3 and row[-1] > 0
    assert calls(report, "handle_tool_call") == calls(report, "initialize") == 1
    assert "on_memory_write" not in report.hooks  # a hook that never ran is left out
    assert time.time() - report.at < 60 and report.started <= report.at
    assert harness.log.client.ttl(keys.agent_reports(harness.log.prefix)) > 3600


def test_a_gateways_providers_share_one_report_and_a_provider_gone_keeps_its_counts(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "0.05")
    a = harness.provider("sess-a", gateway_session_key="agent:main:telegram:dm:1")
    b = harness.provider("sess-b", gateway_session_key="agent:main:telegram:dm:2")
    assert a.writer is b.writer
    for p in (a, b):
        p.on_turn_start(1, "hello")
    wait_for(lambda: any(r.agents_total == 2 for r in reports(harness.log).values()), what="a report of both")
    a.shutdown()

    def after():
        found = list(reports(harness.log).values())
        return found if found and found[0].agents == ["agent:main:telegram:dm:2"] else None

    (report,) = wait_for(after, what="a report after one provider left")
    assert calls(report, "on_turn_start") == 2  # cumulative: the gone provider's turn stays
    assert calls(report, "initialize") == 2 and calls(report, "shutdown") == 1


def test_a_gateways_writers_one_after_another_report_under_one_name_with_cumulative_counts(harness, monkeypatch):
    """Hermes's gateway builds a provider per message; the shared writer ends when none used
    it for shutdown_timeout s (without a report: no call to the log once its last user left),
    and the next message's writer goes on with the same report and counts."""
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "0.05")
    monkeypatch.setenv("MEMSTREAM_SHUTDOWN_TIMEOUT", "0.05")
    names = set()
    for i in range(3):
        p = harness.provider(f"sess-{i}", gateway_session_key=f"agent:main:telegram:dm:{i}")
        writer = p.writer
        p.on_turn_start(1, f"message {i}")
        wait_for(
            lambda i=i: any(calls(r, "on_turn_start") == i + 1 for r in reports(harness.log).values()),
            what=f"a report of message {i}",
        )
        p.shutdown()
        wait_for(
            lambda writer=writer: writer._closed and not writer.shipper._thread.is_alive(),
            what="the writer to end after its wind-down",
        )
        names.add(writer.shipper.reporter.name)
    assert len(names) == 1
    (report,) = reports(harness.log).values()
    assert calls(report, "initialize") == 3 and report.agents_total == 1
    last = harness.provider("sess-last")
    wait_for(
        lambda: any(calls(r, "shutdown") == 3 for r in reports(harness.log).values()),
        what="the next writer's report, with the shutdowns of the earlier providers",
    )
    assert last.writer.shipper.reporter.name in names


def test_a_cli_providers_shutdown_ships_its_spool_and_writes_the_last_report_before_it_returns(harness):
    """Hermes's CLI calls shutdown as its process exits, and ``hermes -z`` then ends it with
    os._exit: no atexit handler and no thread runs after the hook returns."""
    p = harness.provider("sess-1")  # platform cli, no gateway session key
    p.on_turn_start(1, "hello")
    p.sync_turn("hello", "hi", session_id="sess-1")
    writer = p.writer
    p.shutdown()
    assert writer._closed and not writer.shipper._thread.is_alive()
    assert [e.user_text for e in logged_events(harness.log) if isinstance(e, TurnRecorded)] == ["hello"]
    (report,) = reports(harness.log).values()
    assert calls(report, "sync_turn") == calls(report, "on_turn_start") == 1
    assert (report.backlog, report.agents, report.tenant) == (0, [], writer.settings.tenant)


def test_with_reports_off_nothing_is_written_and_no_hook_is_timed(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REPORT_EVERY_S", "0")
    p = harness.provider(agent_identity="quiet")
    p.on_turn_start(1, "hello")
    p.sync_turn("hello", "hi", session_id="sess-1")
    assert len(harness.events(p)) == 1
    assert p.writer.tally is None and p._tally is None and p.writer.shipper.reporter is None
    assert "reports_sent" not in p.stats()
    writer = p.writer
    p.shutdown()
    writer.close(timeout=5)  # the thread ends: no last report either
    assert not harness.log.client.exists(keys.agent_reports(harness.log.prefix))


def test_a_writer_that_served_no_provider_reports_nothing(settings, event_log, writers):
    w = make_writer(writers, settings, lambda: event_log)
    assert w.emit(remembered("written by hand"))
    assert w.flush(10)
    time.sleep(0.3)  # several report intervals
    w.close(timeout=5)
    assert logged_contents(event_log) == ["written by hand"]
    assert not event_log.client.exists(keys.agent_reports(event_log.prefix))


def test_the_last_report_is_written_as_the_writer_closes(settings, event_log, writers):
    w = make_writer(writers, settings, lambda: event_log, every=3600)
    w.attach_agent("short-lived")
    assert w.emit(remembered("one"))
    assert w.flush(10)
    assert reports(event_log) == {}  # not due for an hour
    w.close(timeout=5)
    (report,) = reports(event_log).values()
    assert report.agents == ["short-lived"] and report.backlog == 0


class _SlowLog:
    """The log, but an append takes ``seconds`` (a call stuck in a slow server)."""

    def __init__(self, log: EventLog, seconds: float):
        self._log, self.seconds = log, seconds

    def append_batch(self, *args, **kwargs):
        time.sleep(self.seconds)
        return self._log.append_batch(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._log, name)


def test_a_writer_whose_close_stopped_waiting_ends_without_a_last_report(settings, event_log, writers):
    """Its caller may close the client the thread uses: a report then would open a
    connection nobody closes."""
    w = make_writer(writers, settings, lambda: _SlowLog(event_log, 1.0), every=3600)
    w.attach_agent("slow")
    assert w.emit(remembered("slow to ship"))
    wait_for(lambda: w.shipper.connected, what="the thread inside its slow append")
    w.close(timeout=0.1)
    wait_for(lambda: not w.shipper._thread.is_alive(), what="the thread to end")
    assert w.shipper.reporter.sent == 0
    assert not event_log.client.exists(keys.agent_reports(event_log.prefix))


# -- Redis down, a failing report ----------------------------------------------------------------
def test_while_the_log_is_down_no_report_is_tried_and_the_latest_goes_once_it_is_back(settings, event_log, writers):
    link = Switchable(event_log, down=True)
    w = make_writer(writers, settings, link)
    w.attach_agent("agent-1")
    labels = [f"e{i}" for i in range(40)]
    assert all(w.emit(remembered(x)) for x in labels)
    wait_for(lambda: w.shipper.failures >= 3, what="retries while the log is down")
    reporter = w.shipper.reporter
    assert (reporter.sent, reporter.failures) == (0, 0)
    assert not event_log.client.exists(keys.agent_reports(event_log.prefix))
    link.down = False
    assert w.flush(15)
    assert logged_contents(event_log) == labels
    wait_for(lambda: any(r.backlog == 0 for r in reports(event_log).values()), what="a report once back")
    assert reporter.failures == 0


class _NoReports:
    """A client whose pipelines (the fleet report's only use of one) fail with ``error``; the
    rest works."""

    def __init__(self, client, error: Exception):
        self._client, self._error = client, error

    def pipeline(self, *args, **kwargs):
        raise self._error

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_failing_report_never_stops_the_shipping_and_is_logged_once(settings, event_log, writers):
    refused = redis.exceptions.NoPermissionError("NOPERM no permissions to access the 'agents' key (test)")
    failing = EventLog(_NoReports(event_log.client, refused), event_log.prefix, event_log.shards)
    with capture_logs() as logs:
        w = make_writer(writers, settings, lambda: failing)
        w.attach_agent("agent-1")
        labels = [f"e{i}" for i in range(30)]
        for x in labels[:15]:
            assert w.emit(remembered(x))
        wait_for(lambda: w.shipper.reporter.failures >= 3, what="several failed reports")
        for x in labels[15:]:
            assert w.emit(remembered(x))
        assert w.flush(15)
    assert logged_contents(event_log) == labels
    stats = w.stats()
    assert stats["failures"] == 0 and stats["connected"] and stats["report_failures"] >= 3
    assert stats["reports_sent"] == 0
    assert [e["event"] for e in logs].count("report.failed") == 1


def test_redis_gone_when_a_report_is_due_skips_it_silently_and_ships_as_before(settings, event_log, writers):
    gone = redis.ConnectionError("Error 111 connecting (test)")
    failing = EventLog(_NoReports(event_log.client, gone), event_log.prefix, event_log.shards)
    with capture_logs() as logs:
        w = make_writer(writers, settings, lambda: failing)
        w.attach_agent("agent-1")
        assert w.emit(remembered("still shipped"))
        wait_for(lambda: w.shipper.reporter.skipped >= 3, what="several skipped reports")
        assert w.flush(15)
        w.close(timeout=5)  # the last report: skipped too, nothing raised
    assert logged_contents(event_log) == ["still shipped"]
    stats = w.stats()
    assert (stats["report_failures"], stats["reports_sent"], stats["failures"]) == (0, 0, 0)
    assert "report.failed" not in [e["event"] for e in logs]


class _NoRegistry(_NoReports):
    """A client whose reads of the tenants' registry (``HGETALL``: where an event or a report
    goes) fail with ``error`` while ``failing`` is set; the rest works."""

    failing = False

    def pipeline(self, *args, **kwargs):
        return self._client.pipeline(*args, **kwargs)

    def hgetall(self, *args, **kwargs):
        if self.failing:
            raise self._error
        return self._client.hgetall(*args, **kwargs)


def test_redis_gone_between_a_pass_and_the_report_never_ends_the_shipping(settings, event_log, writers):
    # the log connected and shipped; then Redis went away while a report was due: reading where
    # the report goes (the tenants' registry, its cache expired) raised, and the thread died
    # with every later event left in the spool
    client = _NoRegistry(event_log.client, redis.ConnectionError("Error 111 connecting (test)"))
    log = EventLog(client, event_log.prefix, event_log.shards)
    w = make_writer(writers, settings, lambda: log)
    w.attach_agent("agent-1")
    assert w.emit(remembered("before")) and w.flush(15)
    skipped = w.shipper.reporter.skipped
    client.failing = True
    log.registry._cache = None  # the registry's cache has expired
    wait_for(lambda: w.shipper.reporter.skipped >= skipped + 3, what="several reports postponed")
    assert w.shipper._thread is not None and w.shipper._thread.is_alive()
    assert w.emit(remembered("after"))
    client.failing = False
    assert w.flush(15)
    wait_for(lambda: w.shipper.reporter.sent >= 2, what="a report once the registry reads again")
    assert logged_contents(event_log) == ["before", "after"]


# -- a new name after a long silence --------------------------------------------------------------
def _reporter(tally: Tally, refused: list[int]) -> Reporter:
    return Reporter(
        Settings(report_every_s=5.0),
        tally,
        lambda: Figures(backlog=0, backlog_bytes=0, refused=refused[0], invalid=0, agents=["a"], served=True),
    )


def test_a_process_silent_for_half_an_hour_reports_under_a_new_name_from_its_last_written_figures(redis_client):
    tally, refused = Tally(), [2]
    reporter = _reporter(tally, refused)
    tally.hooks["sync_turn"][3] += 5
    tally.prefetch["fresh"] += 4
    assert reporter.send(redis_client, "p")
    first = reporter.name
    tally.hooks["sync_turn"][3] += 1
    tally.prefetch["fresh"] += 1
    refused[0] = 3
    reporter._written_at -= 1800  # nothing written for half an hour: a reader may have removed it
    assert reporter.send(redis_client, "p")
    assert reporter.name != first
    raw = redis_client.hgetall(keys.agent_reports("p"))
    found = dict(decode_report(n, d) for n, d in raw.items())
    old, new = found[first], found[reporter.name]
    assert (new.refused, new.prefetch.fresh, unpack_row(new.hooks["sync_turn"])[3]) == (1, 1, 1)  # since the last
    assert (old.refused + new.refused, old.prefetch.fresh + new.prefetch.fresh) == (3, 5)
    assert new.started >= old.started


def test_a_reporters_name_is_one_a_label_may_carry_whatever_the_host_is_called():
    for host in ("web-1.example.com", 'bad host"{}\n', "é" * 100, "", "..--", "a:b:c"):
        name = reporter_name(host=host, pid=4242)
        assert REPORTER_NAME.fullmatch(name), name
        assert name.split(":")[1] == "4242"
    assert reporter_name(host="h", pid=1) != reporter_name(host="h", pid=1)  # a nonce each


# -- the decoder of what is read from Redis -------------------------------------------------------
_count = st.integers(min_value=0, max_value=(1 << 63) - 1)
_rows = st.one_of(st.lists(_count, min_size=ROW, max_size=ROW).map(pack_row), st.binary(min_size=ROW_BYTES, max_size=ROW_BYTES))
valid_reports = st.builds(
    AgentReport,
    at=st.floats(min_value=0, max_value=1e11),
    started=st.floats(min_value=0, max_value=1e11),
    host=st.text(max_size=64),
    pid=st.integers(0, (1 << 32) - 1),
    tenant=st.text(max_size=64),
    agents=st.lists(st.text(max_size=64), max_size=MAX_AGENTS),
    agents_total=_count,
    backlog=_count,
    backlog_bytes=_count,
    refused=_count,
    invalid=_count,
    prefetch=st.builds(Prefetch, _count, _count, _count),
    hooks=st.dictionaries(st.sampled_from(HOOKS), _rows, max_size=4),
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30,
)
_names = st.one_of(st.binary(max_size=140), st.from_regex(REPORTER_NAME, fullmatch=True))


def _mutated(report: AgentReport, field: str, value) -> bytes:
    raw = msgspec.to_builtins(report, builtin_types=(bytes,))
    raw[field] = value
    return msgspec.msgpack.encode(raw)


@given(
    name=_names,
    data=st.one_of(
        st.binary(max_size=MAX_REPORT_BYTES + 10),
        _json.map(msgspec.msgpack.encode),
        st.tuples(valid_reports, st.sampled_from(["at", "hooks", "agents", "pid", "kind", "prefetch", "backlog"]), _json).map(
            lambda t: _mutated(*t)
        ),
        valid_reports.map(encode_report),
    ),
)
@hsettings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_bytes_read_from_redis_decode_to_a_report_within_its_bounds_or_a_report_error(name, data):
    try:
        agent, report = decode_report(name, data)
    except ReportError:
        return
    assert REPORTER_NAME.fullmatch(agent) and len(data) <= MAX_REPORT_BYTES
    assert math.isfinite(report.at) and 0 <= report.at <= 1e11
    assert len(report.agents) <= MAX_AGENTS and len(report.hooks) <= 16
    for packed in report.hooks.values():
        assert len(unpack_row(packed)) == ROW
    assert min(report.backlog, report.refused, report.invalid, report.prefetch.fresh) >= 0


@given(valid_reports)
@hsettings(max_examples=examples(100), deadline=None)
def test_a_report_within_its_bounds_reads_back_as_written(report):
    data = encode_report(report)
    if len(data) <= MAX_REPORT_BYTES:
        assert decode_report(b"host:1:abcdef", data) == ("host:1:abcdef", report)


def test_reports_of_another_shape_are_refused():
    good = AgentReport(at=time.time(), started=time.time(), hooks={"sync_turn": pack_row([0] * ROW)})
    assert decode_report("h:1:aa", encode_report(good))[1] == good
    for data in (
        _mutated(good, "hooks", {"sync_turn": b"\0" * (ROW_BYTES - 8)}),  # the bucket count differs
        _mutated(good, "hooks", {"sync_turn": [0] * ROW}),  # not packed
        _mutated(good, "hooks", {f"hook{i}": b"\0" * ROW_BYTES for i in range(17)}),
        _mutated(good, "kind", "agent.v2"),
        _mutated(good, "at", float("nan")),
        _mutated(good, "agents", ["a"] * (MAX_AGENTS + 1)),
        _mutated(good, "backlog", 1 << 63),
        b"\xc1",
        b"",
        encode_report(good) + b"x" * MAX_REPORT_BYTES,
    ):
        with pytest.raises(ReportError):
            decode_report("h:1:aa", data)
    for name in (b"", b"a b", b"x" * 200, b"\xff", b"-lead", 'a"b', "a\nb", None):
        with pytest.raises(ReportError):
            decode_report(name, encode_report(good))


def test_the_buckets_run_from_ten_microseconds_to_a_second_log_spaced():
    assert BUCKETS_NS[0] == 10_000 and BUCKETS_NS[-1] == 1_000_000_000
    assert all(1.9 < b / a < 2.6 for a, b in zip(BUCKETS_NS, BUCKETS_NS[1:]))


def test_a_mutated_field_within_its_bounds_still_reads_back():
    good = AgentReport(at=time.time(), started=time.time(), hooks={"sync_turn": pack_row([1] * ROW)})
    assert decode_report("h:1:aa", _mutated(good, "backlog", 12))[1].backlog == 12  # the mutation keeps the rows


def test_a_record_over_its_bound_drops_its_list_of_agents_and_keeps_the_rest():
    tally = Tally()
    for hook in HOOKS:
        tally.hooks[hook] = [(1 << 64) - 1] * ROW  # the widest rows there are
    wide = ["\U0001f600" * 64 + str(i) for i in range(MAX_AGENTS)]
    reporter = Reporter(
        Settings(tenant="t" * 256),
        tally,
        lambda: Figures(backlog=1, backlog_bytes=1, refused=0, invalid=0, agents=wide, served=True),
    )
    client = fakeredis.FakeRedis()
    assert reporter.send(client, "p")
    (data,) = client.hvals(keys.agent_reports("p"))
    _, report = decode_report(reporter.name, data)
    assert len(data) <= MAX_REPORT_BYTES and report.agents == [] and report.agents_total == MAX_AGENTS
    assert set(report.hooks) == set(HOOKS)
