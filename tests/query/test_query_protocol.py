"""The query protocol against any request: a clear refusal or a handler's answer, never an
exception in the server, never a handler for an op outside the table, never an answer
in a key the request chose. Property-based (hypothesis) on fakeredis; the same server
loop on a real Valkey."""

from __future__ import annotations

import json
import time
import uuid

import fakeredis
import msgspec
import pytest
import redis
from fuzzing import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstream.query.client import ask, operator_channel
from memstream.query.protocol import (
    MAX_ENVELOPE_BYTES,
    OPS,
    Answer,
    CountAnswer,
    CountRequest,
    Handlers,
    QueryRefused,
    Refusal,
    Request,
    SearchAnswer,
    Searched,
    decode_envelope,
)
from memstream.query.server import QueryServer

PREFIX = "ms"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)

request_dicts = st.fixed_dictionaries(
    {"op": st.sampled_from(list(OPS) + ["shell", "os.system", "", "__init__"]) | st.text(max_size=10)},
    optional={
        k: json_values
        for k in (
            "tenant",
            "agent",
            "session",
            "scope",
            "query",
            "k",
            "kind",
            "id",
            "before",
            "after",
            "limit",
            "subject",
            "history",
            "extra",
        )
    },
)


class Ok(Answer):
    ok: bool


def recording_server(client) -> tuple[QueryServer, list[Request]]:
    seen: list[Request] = []

    def handler(request: Request) -> Answer:
        seen.append(request)
        return Ok(ok=True)

    return QueryServer(client, PREFIX, Handlers(**{op: handler for op in OPS})), seen


def _counted(request) -> CountAnswer:
    return CountAnswer(items={})


def _no_results(request) -> SearchAnswer:
    return SearchAnswer(results=[], searched=Searched(scope=request.scope, agents=None))


@given(st.binary(max_size=2000))
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
def test_any_bytes_decode_to_an_envelope_or_a_refusal(raw):
    try:
        env = decode_envelope(raw)
    except QueryRefused as exc:
        assert str(exc)
        assert exc.request_id == "" or len(exc.request_id) == 32
    else:
        assert env.req.__struct_config__.tag in OPS


@given(request_dicts, st.booleans())
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_any_request_is_answered_or_refused_and_handlers_see_only_valid_ones(req, expired):
    client = fakeredis.FakeRedis()
    server, seen = recording_server(client)
    rid = uuid.uuid4().hex
    deadline = time.time() + (-1 if expired else 30)
    raw = json.dumps({"id": rid, "deadline": deadline, "req": req}, default=str).encode()
    out = server.handle(client, operator_channel(PREFIX), raw)
    reply = client.lpop(f"{PREFIX}:reply:{rid}")
    refused = int(client.hget(f"{PREFIX}:counters:queries", "refused") or 0)
    if reply is None:  # no answer: expired, or not JSON at all (Infinity...): then counted
        assert out is None and not seen
        assert expired or refused == 1
        return
    answer = json.loads(reply)
    if expired:  # an expired request is answered only to say it is malformed
        assert "error" in answer and refused == 1 and not seen
        return
    if seen:
        (typed,) = seen
        request = msgspec.to_builtins(typed)  # plain data
        assert request["op"] in OPS and answer.get("ok") is True
        assert request["tenant"] or request["op"] == "count"
        for key in ("k", "limit", "before", "after"):
            if key in request:
                assert isinstance(request[key], int) and not isinstance(request[key], bool)
    else:
        assert "error" in answer
    # nothing else was written but the counters and the answer
    assert {k.decode() for k in client.keys("*")} <= {f"{PREFIX}:counters:queries"}


def test_an_answer_goes_beside_the_channel_never_where_the_request_says(redis_client):
    server, _ = recording_server(redis_client)
    raw = json.dumps(
        {"id": "../../" + "a" * 26, "deadline": time.time() + 5, "req": {"op": "count"}, "reply": "ms:facts:t1"}
    ).encode()
    assert server.handle(redis_client, operator_channel(PREFIX), raw) is None
    assert not redis_client.exists("ms:facts:t1")
    counters = redis_client.hgetall(f"{PREFIX}:counters:queries")
    assert int(counters[b"refused"]) == 1


def test_an_oversized_request_is_refused_with_its_reason(redis_client):
    server, seen = recording_server(redis_client)
    rid = uuid.uuid4().hex
    raw = json.dumps(
        {"id": rid, "deadline": time.time() + 5, "req": {"op": "search", "tenant": "t", "query": "x" * MAX_ENVELOPE_BYTES}}
    ).encode()
    server.handle(redis_client, operator_channel(PREFIX), raw)
    assert not seen
    assert "limit" in json.loads(redis_client.lpop(f"{PREFIX}:reply:{rid}"))["error"]


def test_a_server_on_a_client_that_decodes_replies_refuses_an_oversized_request_by_its_id():
    """A client made with decode_responses pops text: the envelope is read as its UTF-8
    bytes, so an oversized one is refused with its id like any other."""
    client = fakeredis.FakeRedis(decode_responses=True)
    server, seen = recording_server(client)
    rid = uuid.uuid4().hex
    client.rpush(
        operator_channel(PREFIX),
        json.dumps(
            {"id": rid, "deadline": time.time() + 5, "req": {"op": "search", "tenant": "t", "query": "x" * MAX_ENVELOPE_BYTES}}
        ),
    )
    assert server.serve_once()
    assert not seen
    assert "limit" in json.loads(client.lpop(f"{PREFIX}:reply:{rid}"))["error"]


def test_every_answer_is_counted_once_with_its_reply_in_one_round_trip(redis_client):
    server, seen = recording_server(redis_client)
    sent = []
    execute = redis.client.Pipeline.execute

    def recorded(pipe, *args, **kwargs):
        sent.append([c[0][0] for c in pipe.command_stack])
        return execute(pipe, *args, **kwargs)

    for n in range(3):
        rid = uuid.uuid4().hex
        raw = json.dumps({"id": rid, "deadline": time.time() + 5, "req": {"op": "count"}}).encode()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(redis.client.Pipeline, "execute", recorded)
            server.handle(redis_client, operator_channel(PREFIX), raw)
        assert json.loads(redis_client.lpop(f"{PREFIX}:reply:{rid}"))["ok"] is True
        assert int(redis_client.hget(f"{PREFIX}:counters:queries", "answered")) == n + 1
    assert len(seen) == 3 and server.counts == {"answered": 3}
    assert sent == [["RPUSH", "EXPIRE", "HINCRBY"]] * 3


def test_a_failing_handler_answers_an_error_and_the_server_goes_on(redis_client):
    def boom(request):
        raise RuntimeError("store on fire")

    server = QueryServer(redis_client, PREFIX, Handlers(count=boom, search=_no_results))
    for op, body in (("count", {}), ("search", {"tenant": "t", "query": "q"})):
        rid = uuid.uuid4().hex
        server.handle(
            redis_client,
            operator_channel(PREFIX),
            json.dumps({"id": rid, "deadline": time.time() + 5, "req": {"op": op, **body}}).encode(),
        )
        answer = json.loads(redis_client.lpop(f"{PREFIX}:reply:{rid}"))
        assert ("error" in answer) == (op == "count")


def test_the_server_reports_the_seconds_of_each_handler_by_operation_and_nothing_for_a_refusal(redis_client):
    from metrics_support import Recorder, observing

    def boom(request):
        raise RuntimeError("store on fire")

    server = QueryServer(redis_client, PREFIX, Handlers(count=boom, search=_no_results))
    with observing(Recorder()) as seen:
        for op, body in (("count", {}), ("search", {"tenant": "t", "query": "q"}), ("search", {"query": "q"})):
            server.handle(
                redis_client,
                operator_channel(PREFIX),
                json.dumps({"id": uuid.uuid4().hex, "deadline": time.time() + 5, "req": {"op": op, **body}}).encode(),
            )
        server.handle(redis_client, operator_channel(PREFIX), b"not json")
    assert [op for op, _ in seen.answers] == ["count", "search"]  # a failing handler too; no tenant: refused
    assert all(seconds >= 0 for _, seconds in seen.answers)


def test_a_server_cannot_be_given_a_handler_for_an_op_outside_the_protocol(redis_client):
    with pytest.raises(TypeError):
        QueryServer(redis_client, PREFIX, {"os.system": lambda r: {}})
    with pytest.raises(TypeError):
        Handlers(**{"os.system": lambda r: Refusal(error="")})


def test_the_handlers_table_has_one_field_for_each_op_of_the_protocol():
    import dataclasses

    assert tuple(f.name for f in dataclasses.fields(Handlers)) == OPS


@pytest.mark.valkey
def test_the_server_threads_survive_garbage_and_keep_answering(valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    server = QueryServer(client, PREFIX, Handlers(count=_counted), threads=2).start()
    try:
        for junk in (
            b"",
            b"\x00\xff",
            b"{",
            b"[1,2]",
            b"x" * 100_000,
            json.dumps({"id": "0" * 32, "deadline": "soon", "req": {}}).encode(),
        ):
            client.rpush(operator_channel(PREFIX), junk)
        assert "items" in ask(client, PREFIX, CountRequest(), timeout=5.0)
        with pytest.raises(QueryRefused):
            ask(client, PREFIX, CountRequest(), timeout=-1)
    finally:
        server.stop()


def nested(depth: int, request_id: str = "") -> bytes:
    """An envelope under the size bound whose request nests ``depth`` lists deep."""
    head = f'{{"id":"{request_id or uuid.uuid4().hex}","deadline":{time.time() + 60},"req":{{"op":"recall","query":"q","tenant":"t"}},"x":'
    return head.encode() + b"[" * depth + b"]" * depth + b"}"


def test_a_request_nested_deeper_than_the_decoders_go_is_refused_with_its_id():
    raw = nested(30_000, "a" * 32)
    assert len(raw) < MAX_ENVELOPE_BYTES
    with pytest.raises(QueryRefused) as refused:
        decode_envelope(raw)
    assert refused.value.request_id == "a" * 32  # read from its head: the decoder that skips fields recurses


@pytest.mark.valkey
def test_deeply_nested_requests_are_refused_and_counted_and_never_back_the_server_off(valkey_server):
    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    server = QueryServer(client, PREFIX, Handlers(count=_counted), threads=2).start()
    try:
        pipe = client.pipeline(transaction=False)
        for _ in range(1000):
            pipe.rpush(operator_channel(PREFIX), nested(30_000))
        pipe.execute()
        deadline = time.monotonic() + 60
        while server.counts.get("refused", 0) < 1000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.counts.get("refused", 0) == 1000
        assert int(client.hget(f"{PREFIX}:counters:queries", "refused")) == 1000
        assert server.backoffs == 0  # a request is never taken for a Redis failure
        assert "items" in ask(client, PREFIX, CountRequest(), timeout=5.0)
    finally:
        server.stop()


def test_a_refused_request_leaves_its_kind_and_size_in_the_log_never_its_values(redis_client):
    from structlog.testing import capture_logs

    server, _ = recording_server(redis_client)
    secret = "hunter2-in-the-kind-field"
    request_id = uuid.uuid4().hex
    raw = json.dumps(
        {"id": request_id, "deadline": time.time() + 60, "req": {"op": "search", "tenant": "t", "query": "q", "kind": secret}}
    ).encode()
    with capture_logs() as logs:
        assert server.handle(redis_client, operator_channel(PREFIX), raw) is None
    assert [e["event"] for e in logs] == ["queries.refused"]
    assert logs[0]["kind"] == "bad" and logs[0]["bytes"] == len(raw)
    assert secret not in repr(logs)
    # the asker still hears why
    answer = json.loads(redis_client.lpop(f"{PREFIX}:reply:{request_id}"))
    assert secret in answer["error"]


def test_a_failing_handler_leaves_the_errors_type_in_the_log_never_its_message(redis_client):
    from structlog.testing import capture_logs

    secret = "the-query-text-quoted-by-an-error"

    def failing(request) -> SearchAnswer:
        raise ValueError(f"cannot search {request.query}")

    server = QueryServer(redis_client, PREFIX, Handlers(search=failing))
    raw = json.dumps(
        {"id": uuid.uuid4().hex, "deadline": time.time() + 60, "req": {"op": "search", "tenant": "t", "query": secret}}
    ).encode()
    with capture_logs() as logs:
        answer = server.handle(redis_client, operator_channel(PREFIX), raw)
    assert isinstance(answer, Refusal) and secret in answer.error
    assert [e["event"] for e in logs] == ["queries.failed"] and secret not in repr(logs)


def test_every_bound_the_protocol_allows_is_one_the_handlers_accept(tmp_path):
    """Each integer bound is written once (the protocol's type): a request at the bound that
    the decoder admits is answered by its handler, not refused."""
    import msgspec.inspect as inspect
    from pipeline_support import make_pipeline

    from memstream.producers.stream import EventLog
    from memstream.query.protocol import most

    pipeline = make_pipeline(tmp_path / "home", EventLog(fakeredis.FakeRedis(), "ms", 1))
    handlers = pipeline.reads.handlers()
    checked = []
    try:
        for cls in Request.__args__:
            op = cls.__struct_config__.tag
            for field in inspect.type_info(cls).fields:
                if not isinstance(field.type, inspect.IntType):
                    continue
                top = most(op, field.name)
                request = {"op": op, "tenant": "t1", field.name: top}
                if op in ("recall", "search"):
                    request["query"] = "where is the datacenter"
                if op == "context":
                    request["id"] = "no-such-item"
                env = {"id": uuid.uuid4().hex, "deadline": time.time() + 60, "req": request}
                typed = decode_envelope(json.dumps(env).encode()).req  # the protocol admits it
                handler = handlers.of(op)
                if handler is None:  # count: the pipeline's, not a read op
                    continue
                answer = handler(typed)
                assert isinstance(answer, Answer), (op, field.name, answer)
                assert not isinstance(answer, Refusal) or "no turn, memory or fact" in answer.error, (op, field.name, answer)
                checked.append(f"{op}.{field.name}")
    finally:
        pipeline.stop()
    assert "facts.limit" in checked and "search.k" in checked
