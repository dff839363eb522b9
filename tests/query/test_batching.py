"""The query server answers what arrives together as a batch: every request waiting on a
channel is taken in one round trip, the recalls among them go to the read side in one call
(one model call, one facts lookup), and each caller gets its own answer, the same as it
would alone. A bad request in a batch gets its error and the others their answers. Real Valkey."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import uuid

import msgspec
import pytest
import redis
from pipeline_support import wait_for

from memstream.core import keys
from memstream.core.settings import Settings
from memstream.producers import EventLog, MemoryRemembered, Scope, utcnow
from memstream.query.protocol import RERANK_SHED, Handlers, RecallAnswer, RecallRequest, SearchAnswer, Searched, SearchRequest
from memstream.query.server import QueryServer

pytestmark = pytest.mark.valkey

PREFIX = "ms"


def _envelope(request: dict, deadline: float | None = None, asked_at: float | None = None) -> tuple[str, bytes]:
    rid = uuid.uuid4().hex
    env = {"id": rid, "deadline": deadline or time.time() + 60, "req": request}
    return rid, json.dumps(env if asked_at is None else {**env, "asked_at": asked_at}).encode()


def _recall(query: str, **extra) -> dict:
    return {"op": "recall", "tenant": "t1", "agent": "a1", "session": "s1", "query": query, "k": 12, **extra}


def _typed(request: dict) -> RecallRequest:
    return msgspec.convert(request, RecallRequest)


def _answers(client: redis.Redis, channel: str, ids: list[str]) -> dict[str, dict]:
    out = {}
    for rid in ids:
        got = client.blpop([keys.reply(channel, rid)], timeout=30)
        assert got, f"no answer to {rid}"
        out[rid] = json.loads(got[1])
    return out


@pytest.fixture
def client(valkey_server):
    c = redis.Redis.from_url(valkey_server.url)
    c.flushall()
    yield c
    c.close()


def test_requests_waiting_together_reach_the_batch_handler_a_bounded_batch_at_a_time_each_with_its_own_answer(client):
    calls: list[int] = []

    def one(request: RecallRequest) -> RecallAnswer:
        return RecallAnswer(items=[{"q": request.query, "alone": True}])

    def many(requests: list[RecallRequest]) -> list[RecallAnswer]:
        calls.append(len(requests))
        return [RecallAnswer(items=[{"q": r.query}]) for r in requests]

    channel = keys.queries(PREFIX)
    sent = [_envelope(_recall(f"question {i}")) for i in range(10)]
    client.rpush(channel, *[raw for _, raw in sent])  # all waiting before the server looks
    server = QueryServer(client, PREFIX, Handlers(recall=one), threads=1, batched={"recall": many}, batch_max=4).start()
    try:
        answers = _answers(client, channel, [rid for rid, _ in sent])
    finally:
        server.stop()
    assert calls == [4, 4, 2]  # every take up to its bound, in the order they were sent
    for i, (rid, _) in enumerate(sent):
        assert answers[rid]["items"] == [{"q": f"question {i}"}]  # the batch handler's, not the single one's
    assert int(client.hget(keys.query_counters(PREFIX), "answered")) == 10


def test_a_lone_request_goes_to_the_single_handler_at_once(client):
    many_calls: list[int] = []
    server = QueryServer(
        client,
        PREFIX,
        Handlers(recall=lambda r: RecallAnswer(items=[{"q": "alone"}])),
        threads=1,
        batched={"recall": lambda rs: many_calls.append(len(rs)) or [RecallAnswer(items=[{"q": "batch"}]) for _ in rs]},
    ).start()
    try:
        rid, raw = _envelope(_recall("just me"))
        client.rpush(keys.queries(PREFIX), raw)
        assert _answers(client, keys.queries(PREFIX), [rid])[rid]["items"] == [{"q": "alone"}]
    finally:
        server.stop()
    assert many_calls == []


def test_a_batch_with_a_bad_request_answers_every_other_one(client):
    """Garbage, an expired request, an op the server does not answer and a request that
    breaks the batch handler, among good ones: each good one is answered, the breaking one
    gets its error alone (the batch is answered again one by one), nothing is lost."""

    def one(request: RecallRequest) -> RecallAnswer:
        if request.query == "boom":
            raise RuntimeError("this request breaks the handler")
        return RecallAnswer(items=[{"q": request.query}])

    def many(requests: list[RecallRequest]) -> list[RecallAnswer]:
        if any(r.query == "boom" for r in requests):
            raise RuntimeError("one request broke the batch")
        return [RecallAnswer(items=[{"q": r.query}]) for r in requests]

    channel = keys.queries(PREFIX)
    good = [_envelope(_recall(f"good {i}")) for i in range(6)]
    boom = _envelope(_recall("boom"))
    expired = _envelope(_recall("too late"), deadline=time.time() - 1)
    unsupported = _envelope({"op": "recent", "tenant": "t1", "agent": "a1"})
    garbage_id = uuid.uuid4().hex
    garbage = json.dumps({"id": garbage_id, "deadline": time.time() + 60, "req": {"op": "recall"}}).encode()
    order = [good[0][1], garbage, good[1][1], boom[1], good[2][1], expired[1], good[3][1], unsupported[1]]
    order += [b"\xff not json", good[4][1], good[5][1]]
    client.rpush(channel, *order)
    server = QueryServer(client, PREFIX, Handlers(recall=one), threads=1, batched={"recall": many}).start()
    try:
        answers = _answers(client, channel, [rid for rid, _ in good] + [boom[0], unsupported[0], garbage_id])
        wait_for(lambda: client.llen(channel) == 0, what="the channel to drain")
    finally:
        server.stop()
    for i, (rid, _) in enumerate(good):
        assert answers[rid] == {**answers[rid], "items": [{"q": f"good {i}"}]}
    assert "breaks the handler" in answers[boom[0]]["error"]
    assert "does not answer" in answers[unsupported[0]]["error"]
    assert "bad request" in answers[garbage_id]["error"]
    assert not client.exists(keys.reply(channel, expired[0]))
    counts = {k.decode(): int(v) for k, v in client.hgetall(keys.query_counters(PREFIX)).items()}
    assert counts["failed"] == 1 and counts["expired"] == 1 and counts["refused"] == 2 and counts["unsupported"] == 1


def test_a_take_with_a_recall_that_waited_past_the_bound_goes_to_the_hurried_handler(client):
    """A take in which a recall was asked (its ``asked_at``) longer ago than ``hurry_after_s``
    is answered by the op's hurried handler (the read side's: without the late interaction),
    every recall of it, since its answers leave together; each is counted ``late_shed`` and
    gets its own answer. A take in which none waited, or whose callers send no ``asked_at``,
    goes to the batch handler as before. A hurried batch that breaks is answered again one by
    one, through the hurried handler. A bound of 0 hurries nothing."""
    calls: list[tuple[str, list[str]]] = []

    def handler(name: str):
        def answer(requests: list[RecallRequest]) -> list[RecallAnswer]:
            calls.append((name, [r.query for r in requests]))
            if name == "hurried" and len(requests) > 1 and any(r.query == "boom" for r in requests):
                raise RuntimeError("one request broke the batch")
            return [RecallAnswer(items=[{"q": r.query, "by": name}]) for r in requests]

        return answer

    channel = keys.queries(PREFIX)
    now = time.time()

    def take(*asked: tuple[str, float | None]) -> list[bytes]:
        return [_envelope(_recall(q), asked_at=at)[1] for q, at in asked]

    single = lambda r: RecallAnswer(items=[{"q": r.query, "by": "single"}])  # noqa: E731
    hurried = {"recall": handler("hurried")}
    assert QueryServer(client, PREFIX, Handlers(recall=single), hurried=hurried).hurried == {}  # 0 s: never
    server = QueryServer(
        client,
        PREFIX,
        Handlers(recall=single),
        threads=1,
        batched={"recall": handler("batch")},
        hurried=hurried,
        hurry_after_s=1.0,
    )
    answers = [
        server.handle_batch(client, channel, take(("fresh", now), ("no clock", None), ("fresh too", now + 1))),
        server.handle_batch(client, channel, take(("fresh", now), ("waited", now - 5), ("no clock", None))),
        server.handle_batch(client, channel, take(("waited alone", now - 5))),
        server.handle_batch(client, channel, take(("boom", now - 5), ("after boom", now))),
    ]
    assert calls == [
        ("batch", ["fresh", "no clock", "fresh too"]),
        ("hurried", ["fresh", "waited", "no clock"]),
        ("hurried", ["waited alone"]),
        ("hurried", ["boom", "after boom"]),
        ("hurried", ["boom"]),
        ("hurried", ["after boom"]),
    ]
    by = [[(item["q"], item["by"]) for answer in batch for item in answer.items] for batch in answers]
    assert by[0] == [("fresh", "batch"), ("no clock", "batch"), ("fresh too", "batch")]
    assert by[1] == [("fresh", "hurried"), ("waited", "hurried"), ("no clock", "hurried")]
    assert by[2:] == [[("waited alone", "hurried")], [("boom", "hurried"), ("after boom", "hurried")]]
    counts = {k.decode(): int(v) for k, v in client.hgetall(keys.query_counters(PREFIX)).items()}
    assert counts["late_shed"] == 6 and counts["answered"] == 9


def _search(query: str, rerank: bool = True) -> dict:
    return {"op": "search", "tenant": "t1", "agent": "a1", "query": query, "rerank": rerank}


class _SlowSearch:
    """A search handler whose reranked searches wait for ``release``, so a test holds one
    in the rerank's lane for as long as it needs."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = threading.Event()
        self.asked: list[tuple[str, bool]] = []

    def __call__(self, request: SearchRequest) -> SearchAnswer:
        self.asked.append((request.query, request.rerank))
        if request.rerank:
            self.running.set()
            assert self.release.wait(60), "never released"
        return SearchAnswer(
            results=[{"q": request.query}], searched=Searched(scope="current", agents=["a1"]), reranked=request.rerank or None
        )


def test_a_reranked_search_goes_to_its_lane_and_the_recalls_taken_with_it_are_answered_meanwhile(client):
    search = _SlowSearch()
    channel = keys.queries(PREFIX)
    slow = _envelope(_search("rerank me"))
    recalls = [_envelope(_recall(f"question {i}")) for i in range(3)]
    client.rpush(channel, slow[1], *[raw for _, raw in recalls])  # the search first, taken in one batch
    handlers = Handlers(recall=lambda r: RecallAnswer(items=[{"q": r.query}]), search=search)
    server = QueryServer(client, PREFIX, handlers, threads=1).start()
    try:
        answers = _answers(client, channel, [rid for rid, _ in recalls])  # while the search still runs
        assert search.running.is_set() and not client.exists(keys.reply(channel, slow[0]))
        for i, (rid, _) in enumerate(recalls):
            assert answers[rid]["items"] == [{"q": f"question {i}"}]
        search.release.set()
        done = _answers(client, channel, [slow[0]])[slow[0]]
    finally:
        search.release.set()
        server.stop()
    assert done["results"] == [{"q": "rerank me"}] and done["reranked"] is True and "took_ms" in done
    assert int(client.hget(keys.query_counters(PREFIX), "answered")) == 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_the_rerank_lane_runs_below_the_serving_threads_so_a_prefetch_goes_first_where_cores_are_short(client):
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def search(request: SearchRequest) -> SearchAnswer:
        seen[request.query] = nice()
        return SearchAnswer(results=[], searched=Searched(scope="current", agents=["a1"]), reranked=request.rerank or None)

    def recall(request: RecallRequest) -> RecallAnswer:
        seen[request.query] = nice()
        return RecallAnswer(items=[])

    channel = keys.queries(PREFIX)
    asked = [_envelope(_search("reranked")), _envelope(_search("plain", rerank=False)), _envelope(_recall("prefetch"))]
    server = QueryServer(client, PREFIX, Handlers(recall=recall, search=search), threads=1).start()
    try:
        for _, raw in asked:
            client.rpush(channel, raw)
        _answers(client, channel, [rid for rid, _ in asked])
    finally:
        server.stop()
    assert seen == {"reranked": min(19, mine + QueryServer.LANE_NICE), "plain": mine, "prefetch": mine}
    assert nice() == mine  # the caller's thread unchanged


def test_with_the_rerank_lane_full_a_reranked_search_is_answered_at_once_without_the_rerank(client):
    search = _SlowSearch()
    channel = keys.queries(PREFIX)
    handlers = Handlers(recall=lambda r: RecallAnswer(items=[]), search=search)
    server = QueryServer(client, PREFIX, handlers, threads=1).start()
    held = [_envelope(_search("held")), _envelope(_search("waiting"))]
    try:
        client.rpush(channel, held[0][1])
        wait_for(search.running.is_set, what="the lane to run the first search")
        client.rpush(channel, held[1][1])  # waits in the lane's queue (SLOW_WAITING = 1)
        wait_for(lambda: server._slow.qsize() == QueryServer.SLOW_WAITING, what="the second to wait in the lane")
        shed = _envelope(_search("no time"))
        client.rpush(channel, shed[1])
        answer = _answers(client, channel, [shed[0]])[shed[0]]  # at once: the other two are still held
        assert not client.exists(keys.reply(channel, held[0][0]))
        search.release.set()
        later = _answers(client, channel, [rid for rid, _ in held])
    finally:
        search.release.set()
        server.stop()
    assert answer["results"] == [{"q": "no time"}]
    assert answer["reranked"] is False and answer["rerank_error"] == QueryServer.BUSY
    assert ("no time", False) in search.asked  # the handler was asked without the rerank
    assert all(later[rid]["reranked"] is True for rid, _ in held)  # the two handed over were reranked
    assert server.counts[RERANK_SHED] == 1 == int(client.hget(keys.query_counters(PREFIX), RERANK_SHED))


def test_stopping_the_server_answers_the_reranked_searches_its_lane_was_handed(client):
    search = _SlowSearch()
    channel = keys.queries(PREFIX)
    server = QueryServer(client, PREFIX, Handlers(recall=lambda r: RecallAnswer(items=[]), search=search), threads=1)
    server.start()
    held = [_envelope(_search("running")), _envelope(_search("waiting"))]
    stopping = threading.Thread(target=server.stop, kwargs={"timeout": 30.0})
    try:
        client.rpush(channel, held[0][1])
        wait_for(search.running.is_set, what="the lane to run the first search")
        client.rpush(channel, held[1][1])
        wait_for(lambda: server._slow.qsize() == 1, what="the second to wait in the lane")
        stopping.start()
        wait_for(lambda: not any(t.is_alive() for t in server._threads), what="the serving threads to stop")
        search.release.set()
        stopping.join(60)
    finally:
        search.release.set()
        server.stop()
    assert not stopping.is_alive()
    for rid, _ in held:  # both answered, reranked, though the server stopped while they waited
        assert client.exists(keys.reply(channel, rid))
    assert [q for q, _ in search.asked] == ["running", "waiting"]


def test_without_its_threads_running_the_server_answers_a_reranked_search_itself(client):
    search = _SlowSearch()
    search.release.set()
    server = QueryServer(client, PREFIX, Handlers(search=search), threads=1)  # not started: no lane
    rid, raw = _envelope(_search("inline"))
    client.rpush(keys.queries(PREFIX), raw)
    assert server.serve_once()
    assert _answers(client, keys.queries(PREFIX), [rid])[rid]["reranked"] is True


SUBJECTS = ["the billing service", "the VPN", "Maria's team", "the docs site"]


def _projected(tmp_path, client, valkey_server):
    """A pipeline (hash embedder) that projected memories and facts of two agents and two tenants."""
    from memstream.workers.pipeline import Pipeline, PipelineConfig

    settings = Settings.load(home=str(tmp_path / "svc"), redis_url=valkey_server.url, autostart=False, embedder="hash")
    log = EventLog(client, settings.stream_prefix, settings.shards)
    rng = random.Random(3)
    objects = ["Postgres 16", "Grafana", "Nomad", "the Berlin team", "Vault"]
    events = []
    for i in range(120):
        agent = "a1" if i % 3 else "a2"
        scope = Scope(tenant="t1" if i % 5 else "t2", agent=agent, session_id=f"{agent}-s", app="test")
        text = f"{rng.choice(SUBJECTS).capitalize()} moved to {rng.choice(objects)} in sprint {i}. My name is Ana {i}."
        events.append(MemoryRemembered(id=f"ev-{i}", occurred_at=utcnow(), scope=scope, content=text, target="memory"))
    log.append(events)
    pipeline = Pipeline(settings, log, PipelineConfig(embedder="hash", consumer="w1"))
    pipeline.drain()
    return pipeline


def test_recalls_answered_as_a_batch_equal_the_same_recalls_answered_alone(tmp_path, client, valkey_server):
    """The real read side (hash embedder, memories and facts of two agents): a batch of
    recalls, with one whose scope names nobody and one of another tenant, answers each as
    ``recall`` does alone."""
    pipeline = _projected(tmp_path, client, valkey_server)
    try:
        reads = pipeline.reads
        requests = [_recall(f"Where did {s} move to?") for s in SUBJECTS]
        requests += [_recall("What is my name?"), _recall("Grafana", scope="all"), _recall("Vault", scope="nobody")]
        requests += [_recall("Nomad", tenant="t2", agent="a2"), _recall("latest sprint", k=3)]
        alone = [msgspec.to_builtins(reads.recall(_typed(r))) for r in requests]
        together = [msgspec.to_builtins(a) for a in reads.recall_many([_typed(r) for r in requests])]
    finally:
        pipeline.stop()
    assert any(a["items"] for a in alone) and any(i["kind"] == "fact" for a in alone for i in a["items"])
    assert together == alone


def test_on_the_real_read_side_a_recall_that_breaks_its_search_fails_alone_in_its_batch(tmp_path, client, valkey_server):
    pipeline = _projected(tmp_path, client, valkey_server)
    rank = pipeline.searcher._rank

    def breaking(dense_hits, keyword_hits, **kwargs):
        if kwargs["query"] == "explode":
            raise RuntimeError("the engine failed on this search")
        return rank(dense_hits, keyword_hits, **kwargs)

    pipeline.searcher._rank = breaking  # type: ignore[method-assign]
    channel = keys.queries(PREFIX)
    sent = [_envelope(_recall(q)) for q in ("Where did the VPN move to?", "explode", "Grafana", "What is my name?")]
    client.rpush(channel, *[raw for _, raw in sent])
    handlers = pipeline.reads.handlers()
    server = QueryServer(client, PREFIX, handlers, threads=1, batched=pipeline.reads.batched()).start()
    try:
        answers = _answers(client, channel, [rid for rid, _ in sent])
    finally:
        server.stop()
        pipeline.stop()
    assert "the engine failed" in answers[sent[1][0]]["error"]
    for rid, _ in sent[:1] + sent[2:]:
        assert "error" not in answers[rid] and answers[rid]["items"]
    assert int(client.hget(keys.query_counters(PREFIX), "failed")) == 1
