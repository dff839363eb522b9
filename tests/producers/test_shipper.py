"""The shipper thread and the shared Writer, on fakeredis and on a real Valkey: the log
going away never reaches a hook, and everything spooled ships once, in order."""

from __future__ import annotations

import os
import threading
import time

import msgspec
import pytest
import redis
from writepath import Switchable, logged_contents, remembered, wait_for

from memstream.core.settings import Settings
from memstream.producers.connect import LogLocator
from memstream.producers.events import encode
from memstream.producers.shipper import Shipper
from memstream.producers.spool import Spool
from memstream.producers.stream import EventLog
from memstream.producers.writer import Writer
from memstream.service.valkey import free_port


@pytest.fixture
def writers():
    """Writers made by a test; closed (bounded) at teardown whatever happened."""
    made: list[Writer] = []
    yield made
    for w in made:
        w.close(timeout=0.5)


def make_writer(writers, settings, connect) -> Writer:
    w = Writer(settings, locator=connect)
    w.shipper.start()
    writers.append(w)
    return w


def closes_within(writer: Writer, bound: float) -> bool:
    """Close ``writer`` on another thread; fail if it has not returned after ``bound`` s."""
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(writer.close()), daemon=True)
    t.start()
    t.join(bound)
    assert not t.is_alive(), f"close() did not return within {bound}s"
    return result[0]


def test_while_the_log_is_down_emits_succeed_and_the_spool_grows(writers, settings, event_log):
    link = Switchable(event_log, down=True)
    w = make_writer(writers, settings, link)
    labels = [f"e{i}" for i in range(200)]
    assert all(w.emit(remembered(x)) for x in labels)
    wait_for(lambda: "log is down" in w.shipper.last_error, what="a failed connection attempt")
    stats = w.stats()
    assert stats["spool_unshipped_bytes"] > 0 and stats["connected"] is False
    assert stats["failures"] >= 1
    assert logged_contents(event_log) == []
    assert w.flush(timeout=0.2) is False  # bounded: gives up while the log is down


def test_when_the_log_comes_back_everything_ships_exactly_once_in_order(writers, settings, event_log):
    link = Switchable(event_log, down=True)
    w = make_writer(writers, settings, link)
    labels = [f"e{i}" for i in range(300)]
    for x in labels[:150]:
        assert w.emit(remembered(x))
    wait_for(lambda: w.shipper.failures >= 2, what="retries while down")
    for x in labels[150:]:
        assert w.emit(remembered(x))
    link.down = False
    assert w.flush(timeout=15)
    assert logged_contents(event_log) == labels
    stats = w.stats()
    assert (stats["shipped"], stats["duplicates_skipped"], stats["spool_unshipped_bytes"]) == (300, 0, 0)
    assert stats["connected"] is True


def test_a_real_locator_pointed_at_a_closed_port_fails_quietly_and_close_is_bounded(writers, settings, event_log):
    down = msgspec.structs.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0", shutdown_timeout=0.5)
    w = Writer(down)  # the real LogLocator
    w.shipper.start()
    labels = [f"e{i}" for i in range(50)]
    assert all(w.emit(remembered(x)) for x in labels)
    wait_for(lambda: "Connection" in w.shipper.last_error, what="a refused connection")
    assert w.stats()["failures"] >= 1
    assert closes_within(w, bound=down.shutdown_timeout + 5) is False
    left = list(down.spool_dir.glob("*.seg"))
    assert len(left) == 1 and left[0].stat().st_size > 0

    # the next process (a new writer on the same home) with the log reachable ships it all
    nxt = make_writer(writers, settings, lambda: event_log)
    wait_for(lambda: logged_contents(event_log) == labels, what="the left spool shipped")
    assert nxt.flush(timeout=10)
    wait_for(lambda: not left[0].exists(), what="the adopted segment deleted")
    assert logged_contents(event_log) == labels


def test_stop_with_the_log_down_returns_within_its_bound_and_keeps_the_spool(writers, settings, event_log):
    settings = msgspec.structs.replace(settings, shutdown_timeout=0.3)
    link = Switchable(event_log, down=True)
    w = make_writer(writers, settings, link)
    for i in range(20):
        w.emit(remembered(str(i)))
    assert closes_within(w, bound=settings.shutdown_timeout + 5) is False
    assert not w.shipper._thread.is_alive()
    assert w.emit(remembered("after close")) is False  # refused, not raised

    link.down = False
    nxt = make_writer(writers, settings, link)
    wait_for(lambda: logged_contents(event_log) == [str(i) for i in range(20)], what="shipped by the next writer")
    # the shipper counts a batch once its append has returned: a moment after the log holds it
    wait_for(lambda: nxt.stats()["shipped"] == 20, what="counted as shipped")


def test_close_with_the_log_up_ships_everything_first(writers, settings, event_log):
    w = make_writer(writers, settings, lambda: event_log)
    for i in range(100):
        w.emit(remembered(str(i)))
    assert closes_within(w, bound=settings.shutdown_timeout + 10) is True
    assert logged_contents(event_log) == [str(i) for i in range(100)]
    assert list(settings.spool_dir.glob("*.seg")) == []


def test_the_shipper_thread_survives_an_unexpected_error_from_connect(writers, settings, event_log):
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return event_log

    w = make_writer(writers, settings, flaky)
    w.emit(remembered("x"))
    assert w.flush(timeout=15)
    assert logged_contents(event_log) == ["x"]
    assert w.shipper.failures >= 1 and w.shipper._thread.is_alive()


def test_a_batch_the_log_rejects_is_retried_without_duplicates(tmp_path, redis_client):
    log = EventLog(redis_client, "ms")
    spool = Spool(tmp_path / "spool")
    shipper = Shipper(spool, lambda: log)
    try:
        for i in range(5):
            spool.append(encode(remembered(str(i))))
        redis_client.set(log.shipped_key("t1"), "clobbered")  # the dedup record: checked before any append
        for _ in range(3):
            shipper.ship_once()
        assert shipper.failures == 3 and "WRONGTYPE" in shipper.last_error
        assert not redis_client.exists(log.stream_key(0))
        redis_client.delete(log.shipped_key("t1"))
        shipper.ship_once()
        assert logged_contents(log) == [str(i) for i in range(5)]
    finally:
        spool.close()


def test_emit_never_raises_on_an_event_that_cannot_be_encoded(writers, settings, event_log):
    w = make_writer(writers, settings, lambda: event_log)
    assert w.emit(remembered("bad \ud800 surrogate")) is False
    assert w.emit(remembered("good")) is True
    assert w.flush(timeout=10)
    assert logged_contents(event_log) == ["good"]
    assert w.stats()["encode_errors"] == 1


def test_one_shared_writer_per_spool_and_the_last_release_closes_it(settings):
    a = Writer.shared(settings)
    b = Writer.shared(settings)
    try:
        assert a is b
        assert a.release(timeout=0.5) is True and not a._closed
    finally:
        b.release(timeout=0.5)
    assert a._closed
    c = Writer.shared(settings)
    try:
        assert c is not a
    finally:
        c.release(timeout=0.5)


def test_the_shared_writer_is_found_again_through_a_symlinked_home(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    settings = Settings.load(home=str(tmp_path / "link" / "ms-home"), autostart=False)
    a = Writer.shared(settings)  # creates the spool directory
    b = Writer.shared(settings)
    try:
        assert a is b
    finally:
        a.release(timeout=0.5)
        b.release(timeout=0.5)


def test_log_locator_raises_connection_error_without_a_url_or_service(settings):
    locator = LogLocator(settings, autostart=False)
    assert locator.url() is None
    with pytest.raises(redis.ConnectionError, match="memstream up"):
        locator()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process identity comes from /proc")
def test_a_run_file_left_by_a_crash_whose_pid_was_reused_does_not_stop_autostart(settings, monkeypatch):
    import json
    import subprocess

    from memstream.core.runfile import process_start

    settings.run_file.parent.mkdir(parents=True)
    # the crashed service's pid now belongs to another process (here: this one)
    settings.run_file.write_text(
        json.dumps({"pid": os.getpid(), "pid_start": process_start(os.getpid()) - 1, "url": "redis://127.0.0.1:1"})
    )
    spawned = []

    class Started:  # the service process, not really started
        pid = 0

        def __init__(self, args, **kw):
            spawned.append(args)

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Started)
    locator = LogLocator(settings, autostart=True)
    assert locator.url() is None
    with pytest.raises(redis.ConnectionError, match="starting one"):
        locator()
    assert spawned and spawned[0][-3:] == ["-m", "memstream", "up"]


@pytest.mark.valkey
def test_log_locator_connects_to_a_configured_url(valkey_server, settings):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    locator = LogLocator(msgspec.structs.replace(settings, redis_url=valkey_server.url))
    log = locator()
    try:
        log.append([remembered("via url")])
        assert logged_contents(EventLog(client, settings.stream_prefix)) == ["via url"]
    finally:
        log.client.close()
        client.close()


def test_close_while_the_shipper_is_stuck_in_a_call_to_the_log_keeps_the_spool_locked_until_it_returns(
    writers, settings, event_log
):
    entered, release = threading.Event(), threading.Event()

    def slow_connect():
        entered.set()
        release.wait(30)  # a log that takes longer than the shutdown bound to answer
        return event_log

    w = Writer(msgspec.structs.replace(settings, shutdown_timeout=0.3), locator=slow_connect)
    w.shipper.start()
    for i in range(5):
        w.emit(remembered(str(i)))
    assert entered.wait(10)
    assert closes_within(w, bound=5) is False  # bounded, with the thread still stuck

    # meanwhile another writer on the same spool (a gateway building its next agent)
    # must not adopt the segment the stuck thread is about to ship
    nxt = make_writer(writers, settings, lambda: event_log)
    assert nxt.spool.adopt_orphans() == []
    nxt.emit(remembered("next"))
    assert nxt.flush(10)

    release.set()
    w.shipper._thread.join(10)
    assert not w.shipper._thread.is_alive()
    assert sorted(logged_contents(event_log)) == sorted(["0", "1", "2", "3", "4", "next"])
    assert nxt.spool.adopt_orphans() == []  # shipped whole and deleted by the stuck thread


def test_two_shippers_that_lose_the_log_together_retry_on_different_schedules(tmp_path):
    def unreachable() -> EventLog:
        raise redis.ConnectionError("the log restarted")

    spools = [Spool(tmp_path / f"spool{i}") for i in range(2)]
    shippers = [Shipper(s, unreachable) for s in spools]
    try:
        for s in spools:
            s.append(encode(remembered("x")))
        schedules = []
        for shipper in shippers:
            delays = []
            for _ in range(8):
                shipper.ship_once()
                delays.append(shipper.retry_in)
            schedules.append(delays)
        for delays in schedules:  # exponential from RETRY_BASE, capped at RETRY_CAP, never 0
            for n, d in enumerate(delays, start=1):
                top = min(Shipper.RETRY_CAP, Shipper.RETRY_BASE * 2**n)
                assert top / 2 <= d <= top
        assert schedules[0] != schedules[1]
        assert all(a != b for a, b in zip(*schedules))  # jittered at every retry, the first too
    finally:
        for s in spools:
            s.close()


def test_a_locator_retrying_while_redis_is_down_keeps_one_client(settings, monkeypatch):
    # building a redis-py client holds the interpreter for about a millisecond: a retry
    # loop that built one per attempt took that from the agent's thread every time
    from memstream.producers import connect as connect_module

    built = []
    real = connect_module.redis_client
    monkeypatch.setattr(connect_module, "redis_client", lambda url, *a, **k: built.append(url) or real(url, *a, **k))
    down = msgspec.structs.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    locator = LogLocator(down)
    for _ in range(5):
        with pytest.raises(redis.ConnectionError):
            locator()
    assert len(built) == 1
    locator.close()


def test_a_retry_while_the_log_is_down_reads_nothing_from_the_spool(tmp_path, event_log, monkeypatch):
    spool = Spool(tmp_path / "spool")
    for i in range(100):
        assert spool.append(encode(remembered(f"e{i}")))
    connect = Switchable(event_log, down=True)
    shipper = Shipper(spool, connect, batch=32)
    reads = []
    real_read = spool.segments[0].read
    monkeypatch.setattr(spool.segments[0], "read", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    for _ in range(3):
        assert shipper.ship_once() == 0
    assert connect.calls == 3 and reads == []
    connect.down = False
    assert shipper.ship_once() == 100
    assert logged_contents(event_log) == [f"e{i}" for i in range(100)]
    spool.close()


def test_a_pass_sleeps_between_batches_so_a_waiting_agent_thread_gets_the_interpreter(tmp_path, event_log, monkeypatch):
    from memstream.producers import shipper as shipper_module

    spool = Spool(tmp_path / "spool")
    for i in range(100):
        assert spool.append(encode(remembered(f"e{i}")))
    sleeps: list[float] = []
    monkeypatch.setattr(shipper_module.time, "sleep", sleeps.append)
    shipper = Shipper(spool, lambda: event_log, batch=32)
    assert shipper.ship_once() == 100
    assert len(sleeps) >= 3 and all(0 < s for s in sleeps)  # 4 batches of at most 32
    spool.close()


def test_a_hook_wakes_the_shipper_only_when_it_is_parked(tmp_path, event_log):
    # an active shipper finds new records on its own; a wake-up per burst of hooks made
    # the thread ask for the interpreter in the middle of the agent's hooks
    spool = Spool(tmp_path / "spool")
    shipper = Shipper(spool, lambda: event_log)
    shipper.notify()
    assert not shipper._wake.is_set()
    shipper._parked = True
    shipper.notify()
    assert shipper._wake.is_set()
    spool.close()


def test_records_appended_while_the_shipper_runs_are_shipped_without_a_flush(writers, settings, event_log):
    w = make_writer(writers, settings, lambda: event_log)
    labels = []
    for round_ in range(5):
        for i in range(20):
            labels.append(f"r{round_}-{i}")
            assert w.emit(remembered(labels[-1]))
        wait_for(lambda: logged_contents(event_log) == labels, what=f"round {round_} shipped on its own")


def test_detach_returns_at_once_and_the_shipper_ships_everything_then_ends(settings, event_log):
    gate = threading.Event()
    entered = threading.Event()

    def slow_log():  # the log answers only once the test opens the gate
        entered.set()
        gate.wait(30)
        return event_log

    w = Writer.shared(settings)
    w.locator = slow_log
    w.shipper._connect = slow_log
    labels = [f"e{i}" for i in range(70)]
    assert all(w.emit(remembered(x)) for x in labels)
    w.shipper.flush(0.0)  # wake it: it is now inside the call to the log
    entered.wait(10)
    w.detach()  # must not wait for the log: the gate is still closed
    assert logged_contents(event_log) == [] and not w._closed
    gate.set()
    wait_for(lambda: w._closed and not w.shipper._thread.is_alive(), what="the shipper ended")
    assert logged_contents(event_log) == labels
    assert list(settings.spool_dir.glob("*.seg")) == []  # shipped segments removed


def test_release_while_the_log_hangs_gives_up_within_the_shutdown_timeout_and_keeps_the_spool(settings, event_log):
    # the provider's shutdown in Hermes's CLI: the process exits right after it returns
    quick = msgspec.structs.replace(settings, shutdown_timeout=0.2)
    gate = threading.Event()
    entered = threading.Event()

    def hanging_log():  # the log answers only once the test opens the gate (or after 30 s)
        entered.set()
        gate.wait(30)
        return event_log

    w = Writer.shared(quick)
    w.locator = w.shipper._connect = hanging_log
    labels = [f"e{i}" for i in range(10)]
    assert all(w.emit(remembered(x)) for x in labels)
    w.shipper.flush(0.0)  # wake it: it is now inside the call to the log
    assert entered.wait(10)
    try:
        assert w.release() is False  # returned while the log still hangs: nothing shipped
        assert logged_contents(event_log) == [] and w._closed and list(quick.spool_dir.glob("*.seg"))
    finally:
        gate.set()
    wait_for(lambda: not w.shipper._thread.is_alive(), what="the thread ended once the log answered")


def test_a_writer_taken_back_while_winding_down_keeps_shipping(settings, event_log):
    connect = Switchable(event_log, down=True)  # down: the wind-down cannot finish yet
    w = Writer.shared(settings)
    w.locator = w.shipper._connect = connect
    assert w.emit(remembered("before"))
    w.detach()
    again = Writer.shared(settings)  # a gateway's next agent
    try:
        assert again is w and not w._closed
        assert again.emit(remembered("after"))
        connect.down = False
        assert again.flush(15)
        assert logged_contents(event_log) == ["before", "after"]
        assert w.shipper._thread.is_alive() and not w._closed
    finally:
        again.close(timeout=0.5)


def test_what_a_detached_writer_could_not_ship_is_shipped_by_the_next_writer_of_the_process(settings, event_log):
    quick = msgspec.structs.replace(settings, shutdown_timeout=0.2)
    connect = Switchable(event_log, down=True)
    w = Writer.shared(quick)
    w.locator = w.shipper._connect = connect
    labels = [f"e{i}" for i in range(40)]
    assert all(w.emit(remembered(x)) for x in labels)
    w.detach()
    wait_for(lambda: w._closed and not w.shipper._thread.is_alive(), what="the writer gave up")
    assert logged_contents(event_log) == [] and list(quick.spool_dir.glob("*.seg"))
    nxt = Writer.shared(quick)
    assert nxt is not w
    nxt.locator = nxt.shipper._connect = lambda: event_log
    try:
        wait_for(lambda: logged_contents(event_log) == labels, what="the next writer shipped the leftovers")
    finally:
        nxt.close(timeout=0.5)


def test_what_a_detached_writer_could_not_ship_is_shipped_by_the_services_adopter(settings, event_log):
    quick = msgspec.structs.replace(settings, shutdown_timeout=0.2)
    w = Writer.shared(quick)
    w.locator = w.shipper._connect = Switchable(event_log, down=True)
    labels = [f"e{i}" for i in range(40)]
    assert all(w.emit(remembered(x)) for x in labels)
    w.detach()
    wait_for(lambda: w._closed and not w.shipper._thread.is_alive(), what="the writer gave up")
    adopter = Shipper(Spool(quick.spool_dir), lambda: event_log, name="memstream-adopter")  # as `memstream up`
    adopter.ship_once()
    assert logged_contents(event_log) == labels
    adopter.stop(1.0, close_spool=True)


def dead_process_segment(settings: Settings, labels: list[str]) -> None:
    """A segment of ``labels`` left in the spool by a process that died (its lock is free)."""
    dead = Spool(settings.spool_dir)
    for x in labels:
        assert dead.append(encode(remembered(x)))
    dead.close()


def test_a_new_writers_flush_ships_what_a_dead_process_left_in_the_spool_before_it_says_drained(writers, settings, event_log):
    labels = [f"e{i}" for i in range(7)]
    dead_process_segment(settings, labels)
    w = make_writer(writers, settings, lambda: event_log)
    assert w.flush(timeout=15)
    assert logged_contents(event_log) == labels


def test_a_new_writers_close_ships_what_a_dead_process_left_in_the_spool(settings, event_log):
    labels = [f"e{i}" for i in range(7)]
    dead_process_segment(settings, labels)
    w = Writer(settings, locator=lambda: event_log)
    w.shipper.start()
    assert closes_within(w, 30.0)
    assert logged_contents(event_log) == labels
    assert not list(settings.spool_dir.glob("*.seg"))[1:]  # the writer's own (empty) segment at most


def test_a_flush_ships_a_segment_whose_process_died_since_the_writers_last_adoption(writers, settings, event_log):
    w = make_writer(writers, settings, lambda: event_log)
    w.shipper.ADOPT_EVERY = 3600.0  # no periodic adoption during the test: the flush must look
    assert w.emit(remembered("mine"))
    assert w.flush(timeout=15)
    labels = [f"e{i}" for i in range(5)]
    dead_process_segment(settings, labels)
    assert w.flush(timeout=15)
    assert sorted(logged_contents(event_log)) == sorted(["mine", *labels])


def test_a_parked_shipper_woken_by_a_hook_waits_for_the_hooks_to_pause_before_shipping(writers, settings, event_log):
    w = make_writer(writers, settings, lambda: event_log)
    w.shipper.POLL, w.shipper.MAX_DEFER = 1.0, 30.0  # generous: a loaded machine cannot fake a pause
    wait_for(lambda: w.shipper._parked, what="the shipper parked")
    labels = []
    for i in range(30):  # a burst of hooks, 10 ms apart
        labels.append(f"b{i}")
        assert w.emit(remembered(labels[-1]))
        threading.Event().wait(0.01)
        assert w.shipper.shipped == 0  # nothing shipped in the middle of the burst
    wait_for(lambda: logged_contents(event_log) == labels, what="the burst shipped after the pause")


# --- secrets are redacted on this side, before the log -------------------------------------

SECRET = "ghp_Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jK"  # made up, in GitHub's format


def _raw_log(event_log: EventLog) -> bytes:
    """Every byte of every entry of the log's streams, as Redis holds them."""
    raw = b""
    for key in event_log.stream_keys:
        for _, fields in event_log.client.xrange(key):
            raw += b"".join(k + v if isinstance(v, bytes) else k for k, v in fields.items())
    return raw


def test_a_secret_is_redacted_before_the_event_reaches_the_log_and_the_spool_keeps_it_owner_only(writers, settings, event_log):
    link = Switchable(event_log, down=True)
    w = make_writer(writers, settings, link)
    assert w.emit(remembered(f"deploy with {SECRET} and redis://:hunter2pass@cache:6379"))
    assert w.emit(remembered("nothing secret here"))
    wait_for(lambda: w.shipper.failures >= 1, what="a failed connection attempt")
    # while the log is down the records wait in the spool: raw, in files only the owner reads
    spool_dir = w.shipper.spool.dir
    segments = list(spool_dir.glob("*.seg"))
    assert segments and any(SECRET.encode() in p.read_bytes() for p in segments)
    assert all(os.stat(p).st_mode & 0o777 == 0o600 for p in segments)
    assert os.stat(spool_dir).st_mode & 0o777 == 0o700
    link.down = False
    assert w.flush(timeout=15)
    assert logged_contents(event_log) == [
        "deploy with [REDACTED:github_token] and redis://:[REDACTED:url_password]@cache:6379",
        "nothing secret here",
    ]
    raw = _raw_log(event_log)
    assert SECRET.encode() not in raw and b"hunter2pass" not in raw
    assert w.stats()["redacted"] == 2
    w.close(timeout=5)
    assert list(spool_dir.glob("*.seg")) == []  # shipped: nothing left behind on disk


def test_redaction_runs_on_the_shipper_thread_never_on_the_thread_that_emits(writers, settings, event_log, monkeypatch):
    from memstream.text import redaction

    callers: list[str] = []
    real = redaction.redact

    def spy(text: str):
        callers.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setattr(redaction, "redact", spy)
    w = make_writer(writers, settings, lambda: event_log)
    for i in range(20):
        assert w.emit(remembered(f"note {i}: token={SECRET}"))
    assert threading.current_thread().name not in callers  # emit only spools
    assert w.flush(timeout=15)
    assert callers and set(callers) == {w.shipper.name}
    assert all("[REDACTED:" in c for c in logged_contents(event_log))


# --- a flush waits out the back-off: it never turns a failing Redis into a busy loop ---------


def _most_attempts(seconds: float) -> int:
    """The most passes the back-off schedule allows in ``seconds``: the first at once, then
    one after each shortest delay (``RETRY_BASE * 2**(n-1)``, at most ``RETRY_CAP / 2``)."""
    n, spent = 1, 0.0
    while True:
        spent += min(Shipper.RETRY_BASE * 2 ** (n - 1), Shipper.RETRY_CAP / 2)
        if spent > seconds:
            return n
        n += 1


class _CountingLog(EventLog):
    """An ``EventLog`` that counts the batches it is asked to append."""

    attempts = 0

    def append_batch(self, *args, **kwargs):
        type(self).attempts += 1
        return super().append_batch(*args, **kwargs)


def test_a_flush_against_an_unreachable_log_retries_on_the_back_off_schedule(tmp_path):
    spool = Spool(tmp_path / "spool")
    calls = []

    def unreachable() -> EventLog:
        calls.append(1)
        raise redis.ConnectionError("refused (test)")

    shipper = Shipper(spool, unreachable).start()
    try:
        spool.append(encode(remembered("x")))
        started = time.monotonic()
        assert shipper.flush(timeout=2.0) is False
        assert shipper.flush(timeout=1.0) is False  # a second flush does not reset the schedule either
        elapsed = time.monotonic() - started
        assert 1 <= len(calls) <= _most_attempts(elapsed) + 1, (len(calls), elapsed)
    finally:
        shipper.stop(0.5, close_spool=True)


@pytest.mark.valkey
def test_a_flush_against_a_valkey_out_of_memory_retries_on_the_back_off_schedule(tmp_path, valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = _CountingLog(client, "ms")
    _CountingLog.attempts = 0
    spool = Spool(tmp_path / "spool")
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)  # every write is refused: "OOM command not allowed"
    shipper = Shipper(spool, lambda: log).start()
    try:
        spool.append(encode(remembered("x")))
        started = time.monotonic()
        assert shipper.flush(timeout=2.0) is False
        elapsed = time.monotonic() - started
        assert "OutOfMemoryError" in shipper.last_error
        assert 1 <= _CountingLog.attempts <= _most_attempts(elapsed) + 1, (_CountingLog.attempts, elapsed)
        client.config_set("maxmemory", 0)
        assert shipper.flush(timeout=15)  # and it ships once Redis accepts writes again
        assert logged_contents(log) == ["x"]
    finally:
        client.config_set("maxmemory", 0)
        shipper.stop(0.5, close_spool=True)
        client.close()
