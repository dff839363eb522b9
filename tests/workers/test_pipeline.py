"""The projection pipeline end to end: the log in, the projections and search out.

Runs on fakeredis (burst mode: ``Pipeline.drain``) and on a real Valkey; the store is the
embedded qdrant-edge store under the test's home, the embedder the hash embedder.
"""

from __future__ import annotations

import pytest
import structlog
from pipeline_support import (
    all_applied,
    delegation,
    forgotten,
    make_pipeline,
    memory,
    points,
    remembered,
    session_ended,
    texts,
    turn,
    wait_for,
)

from memstream.core import keys
from memstream.producers.record import Record
from memstream.producers.stream import EventLog
from memstream.projections.counters import Counters
from memstream.projections.facts_table import FactsTable
from memstream.projections.registry import PROJECTIONS, group_names
from memstream.projections.turns import TurnsProjection
from memstream.query import CountRequest
from memstream.workers.consumer import Consumer
from memstream.workers.deadletters import DeadLetters


@pytest.fixture
def pipeline(tmp_path, event_log):
    p = make_pipeline(tmp_path / "pipe-home", event_log)
    yield p
    p.stop()


def _facts_key(event_log, tenant: str) -> str:
    return keys.facts(event_log.prefix, FactsTable.version, tenant)


def _event_ids(store, collection: str, tenant: str) -> list[str]:
    return [pt.payload["event_id"] for pt in points(store, collection, tenant)]


# -- 1. exactly once ------------------------------------------------------------------------
def test_every_substantive_event_is_projected_exactly_once_and_boilerplate_is_only_counted(pipeline, event_log):
    substantive = [turn(f"Please remember that build number {i} used compiler flag O{i}", index=i) for i in range(12)]
    boilerplate = [turn("thanks", "ok"), turn("ok", "👍"), turn("thank you!", "Got it.")]
    delegated = [delegation("summarise the release notes", "Three fixes and one feature.")]
    adds = [memory("add", f"Fact number {i}: the cache lives on disk {i}") for i in range(5)]
    events = substantive[:6] + boilerplate + adds + delegated + [session_ended()] + substantive[6:]
    event_log.append(events)

    handled = pipeline.drain()

    assert handled == len(pipeline.consumers) * len(events)  # every group read every entry
    assert pipeline.drain() == 0
    turns = _event_ids(pipeline.store, "turns", "t1")
    assert sorted(turns) == sorted(e.id for e in substantive + delegated)  # no duplicate, none missing
    assert sorted(_event_ids(pipeline.store, "memories", "t1")) == sorted(e.id for e in adds)
    assert pipeline.store.count("turns") == len(substantive) + len(delegated)
    counters = Counters(event_log.client, event_log.prefix, "turns.v1").get()
    assert counters["skipped_boilerplate"] == len(boilerplate)
    assert counters["points"] == len(substantive) + len(delegated)
    assert event_log.client.xlen(event_log.stream_keys[0]) == len(events)  # the log keeps them all
    assert all_applied(event_log)


def test_the_pipeline_consumes_exactly_the_registered_groups(pipeline, event_log):
    assert [p.name for p in pipeline.projections] == [row.name for row in PROJECTIONS]
    assert [c.group for c in pipeline.consumers] == list(group_names())
    event_log.append([turn("The staging database runs Postgres 16"), memory("add", "Deploys go out on Tuesdays")])
    pipeline.drain()
    created = {g["name"].decode() for key in event_log.stream_keys for g in event_log.client.xinfo_groups(key)}
    assert created == set(group_names())
    assert set(pipeline._count(CountRequest()).items) == {row.group for row in PROJECTIONS if row.vectors}
    # readers use the active version's tables: the ones its projection writes
    assert pipeline.reads.sessions.version == pipeline.projection("sessions").index.version == 1
    assert pipeline.reads.facts.version == pipeline.projection("facts").table.version == 1
    # asked as its class: that class, or a clear error
    assert pipeline.projection("turns", TurnsProjection).collection
    with pytest.raises(TypeError, match="'facts' is a FactsProjection, not a TurnsProjection"):
        pipeline.projection("facts", TurnsProjection)
    with pytest.raises(KeyError):
        pipeline.projection("no-such-projection")


def test_redelivering_the_whole_log_changes_no_projection(pipeline, event_log):
    event_log.append(
        [turn("The staging database runs Postgres 16"), memory("add", "Deploys go out on Tuesdays"), turn("I live in Berlin")]
    )
    pipeline.drain()
    before = (
        {p.id: dict(p.payload) for p in points(pipeline.store, "turns", "t1")},
        {p.id: dict(p.payload) for p in points(pipeline.store, "memories", "t1")},
        event_log.client.hgetall(_facts_key(event_log, "t1")),
        pipeline.reads.sessions.recent("t1", None, 10),
    )
    assert before[3] and before[3][0]["turns"] >= 0

    for c in pipeline.consumers:  # replay from the start of the log, as a rebuild would
        event_log.client.xgroup_setid(event_log.stream_keys[0], c.group, "0")
    assert pipeline.drain() == 3 * len(pipeline.consumers)

    after = (
        {p.id: dict(p.payload) for p in points(pipeline.store, "turns", "t1")},
        {p.id: dict(p.payload) for p in points(pipeline.store, "memories", "t1")},
        event_log.client.hgetall(_facts_key(event_log, "t1")),
        pipeline.reads.sessions.recent("t1", None, 10),
    )
    assert after == before


@pytest.mark.valkey
def test_started_pipeline_projects_events_appended_while_it_runs(tmp_path, valkey_server):
    import redis

    client = redis.Redis.from_url(valkey_server.url)
    client.flushall()
    log = EventLog(client, "memstream")
    pipe = make_pipeline(tmp_path / "pipe-home", log).start()
    try:
        events = [turn(f"Service number {i} listens on port {8000 + i}") for i in range(20)]
        for i in range(0, 20, 5):
            log.append(events[i : i + 5])
        wait_for(lambda: all_applied(log), what="every group to apply the log")
        assert sorted(_event_ids(pipe.store, "turns", "t1")) == sorted(e.id for e in events)
    finally:
        pipe.stop()
        client.close()


# -- 5. unknown event types ----------------------------------------------------------------------
def test_an_unknown_newer_event_type_is_skipped_with_a_warning_and_acked(tmp_path, event_log):
    from memstream.projections.embedders.factory import get_embedder
    from memstream.projections.stores.qdrant import QdrantStore

    store = QdrantStore()
    projection = TurnsProjection(store, get_embedder("hash"), event_log.client, event_log.prefix)
    consumer = Consumer(event_log, projection, "w1")
    first, last = turn("The first substantive turn about Kubernetes"), turn("The last turn about Nomad")
    event_log.append([first])
    key = event_log.stream_keys[0]
    event_log.client.xadd(
        key, {"id": "01900000-0000-7000-8000-000000000000", "type": "memory.compacted", "data": b"\x81\xa1x\x01"}
    )
    event_log.append([last])

    with structlog.testing.capture_logs() as logs:
        consumer.drain()

    assert consumer.stats.skipped_unknown == 1
    assert consumer.stats.dead_lettered == 0
    assert [l["event_type"] for l in logs if l["event"] == "consumer.unknown_event_type"] == ["memory.compacted"]
    assert event_log.client.xpending(key, consumer.group)["pending"] == 0
    assert sorted(_event_ids(store, "turns", "t1")) == sorted([first.id, last.id])
    store.close()


# -- 6. supersession ---------------------------------------------------------------------------
def test_a_move_supersedes_the_old_location_which_stays_as_history_with_provenance(pipeline, event_log):
    berlin = turn("I live in Berlin", when=0)
    lisbon = turn("I moved to Lisbon", when=60)
    event_log.append([berlin, lisbon])
    pipeline.drain()

    current = pipeline.facts.query("t1", key="location")
    assert [(f.value, f.event_ids) for f in current] == [("Lisbon", [lisbon.id])]
    history = {f.value: f for f in pipeline.facts.query("t1", key="location", history=True)}
    assert set(history) == {"Berlin", "Lisbon"}
    assert history["Berlin"].valid_to == lisbon.occurred_at.timestamp()
    assert history["Berlin"].superseded_by == history["Lisbon"].id
    assert history["Berlin"].event_ids == [berlin.id]
    assert history["Lisbon"].current

    table = event_log.client.hgetall(_facts_key(event_log, "t1"))
    event_log.append([berlin, lisbon])  # the same events delivered again
    pipeline.drain()
    assert event_log.client.hgetall(_facts_key(event_log, "t1")) == table


def test_an_older_statement_replayed_after_a_newer_one_never_becomes_current(pipeline, event_log):
    berlin = turn("I live in Berlin", when=0)
    lisbon = turn("I moved to Lisbon", when=60)
    event_log.append([lisbon])
    pipeline.drain()
    event_log.append([berlin])  # arrives late
    pipeline.drain()

    assert [f.value for f in pipeline.facts.query("t1", key="location")] == ["Lisbon"]
    old = [f for f in pipeline.facts.query("t1", key="location", history=True) if f.value == "Berlin"]
    assert len(old) == 1
    assert old[0].valid_to == lisbon.occurred_at.timestamp()
    assert old[0].event_ids == [berlin.id]


# -- 7. memory-tool semantics ---------------------------------------------------------------------
def test_memory_tool_writes_apply_as_hermes_memory_tool_does(pipeline, event_log):
    dark = "User prefers dark mode in every editor"
    events = [
        memory("add", dark, when=0),
        memory("add", dark, when=1),  # duplicate: no second entry
        memory("add", "Project deadline is March 3", when=2),
        memory("add", "Runs the CI on GitHub Actions", when=3),
        memory("replace", "User prefers light mode in every editor", old_text="dark mode", when=4),
        memory("remove", "", old_text="deadline", when=5),
        memory("replace", "Deploys happen on Fridays", old_text="no such entry", when=6),
        memory("add", "Uses vim in the terminal", when=7),
        memory("add", "Uses tmux in the terminal", when=8),
        memory("remove", "", old_text="in the terminal", when=9),  # ambiguous: the oldest goes
    ]
    event_log.append(events)
    pipeline.drain()

    assert texts(pipeline.store, "memories", "t1") == {
        "User prefers light mode in every editor",
        "Runs the CI on GitHub Actions",
        "Deploys happen on Fridays",
        "Uses tmux in the terminal",
    }
    counters = Counters(event_log.client, event_log.prefix, "memories.v1").get()
    assert counters["duplicate_adds"] == 1
    assert counters["unmatched"] == 1
    assert counters["ambiguous_matches"] == 1
    assert DeadLetters(event_log.client, event_log.prefix).count() == 0


def test_facts_of_a_removed_or_replaced_memory_entry_are_retracted(pipeline, event_log):
    berlin = memory("add", "I live in Berlin", target="user", when=0)
    tea = memory("add", "I prefer green tea", target="user", when=1)
    name = memory("add", "My name is Ada", target="user", when=2)
    event_log.append([berlin, tea, name])
    pipeline.drain()
    current = {(f.key, f.value) for f in pipeline.facts.query("t1")}
    assert {("location", "Berlin"), ("name", "Ada")} <= current
    assert any("tea" in v for k, v in current if k != "location")

    event_log.append(
        [
            memory("remove", "", old_text="Berlin", target="user", when=3),
            memory("replace", "I prefer black coffee", old_text="green tea", target="user", when=4),
        ]
    )
    pipeline.drain()
    every = pipeline.facts.query("t1", history=True)
    assert not any(berlin.id in f.event_ids or tea.id in f.event_ids for f in every)
    current = {(f.key, f.value) for f in pipeline.facts.query("t1")}
    assert ("name", "Ada") in current  # the untouched entry keeps its fact
    assert not any(k == "location" for k, _ in current)
    assert any("coffee" in v for _, v in current) and not any("tea" in v for _, v in current)
    pipeline.drain()  # nothing pending: a second drain changes nothing
    assert {(f.key, f.value) for f in pipeline.facts.query("t1")} == current


def test_remembered_and_forgotten_items_leave_every_projection_and_search(pipeline, event_log):
    kept = remembered("The staging host is called alpha-seven")
    gone = remembered("The backup bucket is called zebra-archive")
    rust = turn("I prefer Rust for command line tools, and zebra-archive holds the backups")
    event_log.append([kept, gone, rust])
    pipeline.drain()
    assert {r["id"] for r in pipeline.searcher.search("zebra-archive", tenant="t1", agent="a1")} >= {gone.id, rust.id}
    assert any(rust.id in f.event_ids for f in pipeline.facts.query("t1", history=True))

    event_log.append([forgotten(gone.id), forgotten(rust.id)])
    pipeline.drain()

    assert texts(pipeline.store, "memories", "t1") == {kept.content}
    assert rust.id not in _event_ids(pipeline.store, "turns", "t1")
    assert not any(rust.id in f.event_ids for f in pipeline.facts.query("t1", history=True))
    found = pipeline.searcher.search("zebra-archive backup bucket Rust", tenant="t1", agent="a1")
    assert {r["id"] for r in found} & {gone.id, rust.id} == set()
    assert all("zebra" not in r["text"] for r in found)


def test_a_tombstone_applied_before_its_event_keeps_it_out_of_every_projection(pipeline, event_log):
    """With several shards, or in a replay, a tombstone can be read before what it names."""
    gone_turn = turn("My name is Ada and the backup bucket is zebra-archive", index=1)
    gone_memory = remembered("The user prefers green tea")
    kept = turn("I live in Lisbon", when=1, index=2)
    event_log.append([forgotten(gone_turn.id), forgotten(gone_memory.id), gone_turn, gone_memory, kept])
    pipeline.drain()

    assert _event_ids(pipeline.store, "turns", "t1") == [kept.id]
    assert texts(pipeline.store, "memories", "t1") == set()
    assert not any({gone_turn.id, gone_memory.id} & set(f.event_ids) for f in pipeline.facts.query("t1", history=True))
    bookends = pipeline.reads.sessions.recent("t1", "a1", 5)
    assert [(b["first"]["id"], b["last"]["id"]) for b in bookends] == [(kept.id, kept.id)]
    # a fact forgotten by its own id stays forgotten when its event is replayed
    fact = next(f for f in pipeline.facts.query("t1") if kept.id in f.event_ids)
    event_log.append([forgotten(fact.id)])
    pipeline.drain()
    assert all(f.id != fact.id for f in pipeline.facts.query("t1", history=True))
    for c in pipeline.consumers:
        event_log.client.xgroup_setid(event_log.stream_keys[0], c.group, "0")
    pipeline.drain()
    assert all(f.id != fact.id for f in pipeline.facts.query("t1", history=True))
    assert _event_ids(pipeline.store, "turns", "t1") == [kept.id]


def test_every_point_records_the_sparse_version_that_made_its_keyword_vector(pipeline, event_log):
    from memstream.projections.sparse import VERSION

    event_log.append([turn("We deploy on Thursdays"), remembered("The office plant needs water")])
    pipeline.drain()
    made = points(pipeline.store, "turns", "t1") + points(pipeline.store, "memories", "t1")
    assert len(made) == 2
    assert {p.payload["sparse_version"] for p in made} == {VERSION}


def _keyword_hits(pipeline, words: str) -> list[str]:
    """Event ids whose indexed unit (not only their own text) matches ``words`` by keyword."""
    from memstream.projections.sparse import sparse_vector
    from memstream.projections.stores.port import Filter

    collection = pipeline.store.collection_for_read("turns")
    hits = pipeline.store.search(collection, sparse=sparse_vector(words), filter=Filter(tenant="t1"), limit=20)
    return [h.payload["event_id"] for h in hits]


def test_a_forgotten_turn_leaves_no_trace_in_the_turns_around_it(pipeline, event_log):
    """A turn's unit quotes the turn before it: forgetting that turn re-indexes its
    successor without it, whether the forget comes after both, between them, or (a replay)
    before either."""
    first = turn("We deploy on Thursdays", index=1)
    secret = turn("The vault passphrase hint is marmalade-orbit", index=2, when=1)
    after = turn("Also the staging host is alpha-seven", index=3, when=2)
    event_log.append([first, secret, after])
    pipeline.drain()
    assert _keyword_hits(pipeline, "marmalade-orbit") == [secret.id, after.id]  # the unit quotes it

    event_log.append([forgotten(secret.id)])
    pipeline.drain()
    assert _keyword_hits(pipeline, "marmalade-orbit") == []
    assert _keyword_hits(pipeline, "staging alpha-seven") == [after.id]  # re-indexed, not lost
    context = event_log.client.hgetall(f"{event_log.prefix}:turn_context:v1:t1:s1")
    assert not any(b"marmalade" in v for v in context.values())

    # the successor arrives after the forget: the context entry is gone
    late_secret = turn("My locker code is 4471 tangerine-comet", index=4, when=3)
    event_log.append([late_secret])
    pipeline.drain()
    event_log.append([forgotten(late_secret.id), turn("Lunch is at noon", index=5, when=4)])
    pipeline.drain()
    assert _keyword_hits(pipeline, "tangerine-comet") == []

    # a replay: every projection reads the log again from the start, tombstones included
    for c in pipeline.consumers:
        event_log.client.xgroup_setid(event_log.stream_keys[0], c.group, "0")
    event_log.client.delete(f"{event_log.prefix}:turn_context:v1:t1:s1")
    pipeline.drain()
    assert _keyword_hits(pipeline, "marmalade-orbit") == []
    assert _keyword_hits(pipeline, "tangerine-comet") == []
    assert _keyword_hits(pipeline, "staging alpha-seven") == [after.id]


def test_forgetting_and_memory_writes_never_cross_tenants(pipeline, event_log):
    theirs = memory("add", "Tenant one keeps its secrets in vault-one", tenant="t1")
    their_turn = turn("Tenant one deploys with Terraform", tenant="t1")
    event_log.append([theirs, their_turn])
    pipeline.drain()

    event_log.append(
        [
            forgotten(theirs.id, tenant="t2"),
            forgotten(their_turn.id, tenant="t2"),
            memory("remove", "", old_text="vault-one", tenant="t2"),
            memory("replace", "Tenant two took it over", old_text="Tenant one", tenant="t2"),
        ]
    )
    pipeline.drain()

    assert texts(pipeline.store, "memories", "t1") == {theirs.content}
    assert _event_ids(pipeline.store, "turns", "t1") == [their_turn.id]
    assert texts(pipeline.store, "memories", "t2") == {"Tenant two took it over"}


# -- 8. CJK keyword search -----------------------------------------------------------------------------
CJK = [
    ("내일오후세시에서울역에서팀장님과회의가있어요", "서울역"),
    ("我们下周三在上海浦东机场集合然后去杭州", "浦东机场"),
    ("週末に東京タワーへ行ってから浅草で天ぷらを食べた", "東京タワー"),
]


def test_keyword_search_finds_korean_chinese_and_japanese_phrases_inside_unspaced_text(pipeline, event_log):
    targets = [turn(text) for text, _ in CJK]
    distractors = [turn(f"Release {i} of the service went out without incident on schedule") for i in range(6)]
    event_log.append(distractors[:3] + targets + distractors[3:])
    pipeline.drain()

    for target, (_, query) in zip(targets, CJK):
        results = pipeline.searcher.search(query, tenant="t1", agent="a1", k=3, kinds=("turns",))
        assert results and results[0]["id"] == target.id, query


# -- 9. redaction --------------------------------------------------------------------------------------
SECRETS = {
    "openai": "sk-proj-" + "Q7x9Lm2Vb8Nc4Kd6Jf1Hg3Ts5Rw0Py" * 2,
    "aws": "AKIA" + "Z7Q2M4X8N6B1V3C5",
    "pem": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "x" * 40,
}
PEM = f"-----BEGIN PRIVATE KEY-----\n{SECRETS['pem']}\nAbCdEf0123456789\n-----END PRIVATE KEY-----"


def test_keys_pasted_into_turns_and_memories_reach_no_projection_and_no_search_result(pipeline, event_log):
    # appended raw (append_batch, not the log's door): as another host's events may come, so
    # that the projections' own redaction is what is tested
    event_log.append_batch(
        [
            Record.of(e)
            for e in (
                turn(
                    f"My name is Dana and my OpenAI key is {SECRETS['openai']} for the billing bot",
                    f"I will use {SECRETS['aws']} as the AWS access key id",
                ),
                turn(f"Here is the deploy key, keep it:\n{PEM}\nIt is for the billing server."),
                memory("add", f"The AWS key of the billing account is {SECRETS['aws']}"),
                remembered(f"I live in Porto and my key is {SECRETS['openai']}"),
            )
        ]
    )
    assert SECRETS["aws"].encode() in b"".join(v for _, _, f in event_log.entries() for v in f.values())
    pipeline.drain()

    stored = [p.payload for c in ("turns", "memories") for p in points(pipeline.store, c, "t1")]
    assert len(stored) == 4
    facts = b"".join(v for v in event_log.client.hgetall(_facts_key(event_log, "t1")).values())
    found = pipeline.searcher.search("billing key AWS OpenAI deploy Porto Dana", tenant="t1", agent="a1", k=20)
    assert found
    haystacks = [repr(stored), facts.decode(), repr(found)]
    for name, secret in SECRETS.items():
        for where, hay in zip(("points", "facts", "search"), haystacks):
            assert secret not in hay, f"{name} key leaked into {where}"
            assert secret[:20] not in hay, f"part of the {name} key leaked into {where}"
    assert "[REDACTED" in repr(stored)


# -- 10. scope -------------------------------------------------------------------------------------------
def test_search_scope_current_all_or_one_agent_and_never_another_tenant(pipeline, event_log):
    mine = turn("The nightly backup job writes to the orchid volume", agent="a1")
    other = turn("The nightly backup job of the mobile team writes to the orchid volume too", agent="a2")
    foreign = turn("Our nightly backup job also writes to an orchid volume", tenant="t2", agent="a1")
    event_log.append([mine, other, foreign])
    pipeline.drain()

    def ids(**kw) -> set[str]:
        return {r["id"] for r in pipeline.searcher.search("nightly backup orchid volume", kinds=("turns",), **kw)}

    assert ids(tenant="t1", agent="a1", scope="current") == {mine.id}
    assert ids(tenant="t1", agent="a1", scope="all") == {mine.id, other.id}
    assert ids(tenant="t1", agent="a1", scope="a2") == {other.id}
    assert ids(tenant="t2", agent="a1", scope="all") == {foreign.id}
    assert ids(tenant="t3", agent="a1", scope="all") == set()


def test_time_questions_favour_newer_items_and_repeated_texts_come_back_once(pipeline, event_log):
    old = remembered("The deploy target is the staging cluster alpha", when=0)
    new = remembered("The deploy target is the staging cluster beta", when=600)
    twice = [remembered("The backup bucket is called zebra-archive", when=i) for i in (1, 2)]
    event_log.append([new, old, *twice])
    pipeline.drain()

    latest = pipeline.searcher.search(
        "what is the latest deploy target staging cluster", tenant="t1", agent="a1", kinds=("memories",)
    )
    assert [r["id"] for r in latest[:2]] == [new.id, old.id]
    found = pipeline.searcher.search("backup bucket zebra-archive", tenant="t1", agent="a1", kinds=("memories",))
    assert [r["text"] for r in found].count("The backup bucket is called zebra-archive") == 1


def test_a_question_that_names_a_person_favours_that_persons_turns(pipeline, event_log, monkeypatch):
    """Several people in one conversation (a gateway group, a shared agent): "what did
    Caroline take up?" asks for Caroline's words, not for replies that mention her."""
    import msgspec

    from memstream.query import ranking as query

    def said(author: str, text: str, index: int):
        return msgspec.structs.replace(turn(text, "", index=index, when=index), author=author)

    hers = said("Caroline", "I took up a pottery class last week, the class is great", 1)
    unrelated = [said("Melanie", f"My garden has {n} tomato plants this year", 2 + n) for n in range(6)]
    reply = said("Melanie", "Caroline, your pottery class sounds fun", 9)
    event_log.append([hers, reply, *unrelated])
    pipeline.drain()

    def ranked(q: str) -> list[str]:
        return [r["id"] for r in pipeline.searcher.search(q, tenant="t1", agent="a1", kinds=("turns",))]

    question = "What class did Caroline take up?"
    assert ranked(question)[0] == hers.id
    # naming everyone singles out no one: the keyword-heavy reply comes first again
    assert ranked("What class did Caroline or Melanie take up?")[0] == reply.id
    monkeypatch.setattr(query, "AUTHOR_WEIGHT", 0.0)
    assert ranked(question)[0] == reply.id  # without the weight the reply wins


def test_only_a_name_that_singles_someone_out_counts():
    from memstream.query.ranking import named_authors

    assert named_authors("What did Ada say about the release?", {"Ada Lovelace", "Bob"}) == {"Ada Lovelace"}
    assert named_authors("what does the user like?", {"user"}) == set()  # one author: nothing to single out
    assert named_authors("did Ada and Bob agree?", {"Ada", "Bob"}) == set()
    assert named_authors("what did Ada say?", {"", "Bob"}) == set()
    assert named_authors("what did adam say?", {"Ada", "Bob"}) == set()  # whole words only


def test_the_query_server_runs_as_many_threads_as_the_settings_say(tmp_path, event_log):
    from pipeline_support import pipeline_settings

    from memstream.workers.pipeline import Pipeline, PipelineConfig

    settings = pipeline_settings(tmp_path / "home", stream_prefix=event_log.prefix, shards=event_log.shards, query_threads=3)
    p = Pipeline(settings, event_log, PipelineConfig(embedder="hash", consumer="w1"))
    try:
        p.queries.start()
        assert p.queries.threads == 3
        assert len([t for t in p.queries._threads if t.is_alive()]) == 3
    finally:
        p.queries.stop()
        p.stop()
