"""The provider with what Hermes 0.2x adds, and without it (0.19): agent contexts (cron jobs
and subagents write nothing of the user's memory unless asked), the turn's author, the whole
previous entry of a memory write, the trivial-prompt gate, the recall indicator, the reason
for being unavailable, the identity signature, threads started through Hermes's helper, and
inputs Hermes already scrubbed of secrets.

The real Hermes runs in tests/hermes/ (both versions); here the members Hermes would hand
over are put in ``memstream.provider._base`` by the test.
"""

from __future__ import annotations

import contextvars
import json
import threading

import pytest
from provider_support import harness  # noqa: F401  (fixture)

from memstream.core import threads
from memstream.producers.events import DelegationCompleted, MemoryWritten, SessionEnded, TurnAuthor, TurnRecorded
from memstream.provider import _base
from memstream.provider.prefetch import Prefetcher
from memstream.provider.provider import MemstreamProvider
from memstream.provider.recall import Query


def write_everything(p: MemstreamProvider) -> dict:
    """Every hook and tool that records something, once."""
    p.on_turn_start(1, "deploy the staging cluster")
    p.sync_turn("deploy the staging cluster", "done", session_id="s-1")
    p.on_memory_write("add", "user", "likes green tea", {"session_id": "s-1", "tool_call_id": "c1"})
    p.on_delegation("summarise", "three findings", child_session_id="child")
    p.on_session_end([{"role": "user", "content": "x"}])
    return json.loads(p.handle_tool_call("memstream_remember", {"content": "the deploy key is in vault"}))


@pytest.mark.parametrize("context", ["cron", "subagent"])
def test_a_cron_job_or_subagent_writes_nothing_by_default_and_recalls_its_agent_s_memory(harness, context):
    primary = harness.provider("s-0", gateway_session_key="agent:ops")
    primary.sync_turn("hello", "hi", session_id="s-0")
    p = harness.provider("s-1", agent_context=context, gateway_session_key="agent:ops")
    answer = write_everything(p)
    assert "records nothing for a " + context in answer["error"], answer
    events = harness.events(primary)
    assert [e.scope.session_id for e in events] == ["s-0"]  # only the primary agent's turn
    assert p.stats()["not_recorded"] >= 4
    assert p._asking_as()[1] == "agent:ops"  # recall reads the agent's memory


def test_with_record_non_primary_a_cron_job_writes_under_a_scope_of_its_own(harness, monkeypatch):
    monkeypatch.setenv("MEMSTREAM_RECORD_NON_PRIMARY", "true")
    p = harness.provider("s-1", agent_context="cron", gateway_session_key="agent:ops")
    answer = write_everything(p)
    assert answer["ok"] is True, answer
    events = harness.events(p)
    kinds = {type(e) for e in events}
    assert {TurnRecorded, MemoryWritten, DelegationCompleted, SessionEnded} <= kinds
    assert {e.scope.agent for e in events} == {"agent:ops#cron"}
    assert p._asking_as()[1] == "agent:ops"


def test_the_primary_agent_and_hermes_0_19_without_a_context_record_as_before(harness):
    p = harness.provider("s-1", agent_context="primary", gateway_session_key="agent:ops")
    old = harness.provider("s-2", gateway_session_key="agent:ops")
    old._context, old._writes = "primary", True
    assert write_everything(p)["ok"] is True
    assert {e.scope.agent for e in harness.events(p)} == {"agent:ops"}


def test_the_turn_s_author_is_recorded_from_sync_turn_or_from_on_turn_start(harness):
    p = harness.provider("s-1", user_name="Ada")
    p.on_turn_start(1, "first", author_id="u-9", author_name="Grace", author_is_bot=False)
    p.sync_turn("first", "ok", session_id="s-1")
    p.on_turn_start(2, "second")
    p.sync_turn("second", "ok", session_id="s-1", turn_author={"id": "bot:ops/deployer", "name": "Lin", "is_bot": True})
    p.on_turn_start(3, "third")
    p.sync_turn("third", "ok", session_id="s-1")
    turns = sorted((e for e in harness.events(p) if isinstance(e, TurnRecorded)), key=lambda t: t.turn_index)
    assert [(t.author, t.turn_author) for t in turns] == [
        ("Grace", TurnAuthor(id="u-9", name="Grace")),
        ("Lin", TurnAuthor(id="bot:ops/deployer", name="Lin", is_bot=True)),
        ("Ada", None),  # no author named for the turn: the session's user, as on Hermes 0.19
    ]


def test_a_replace_carries_the_whole_previous_entry_when_hermes_gives_it(harness):
    p = harness.provider("s-1")
    p.on_memory_write("replace", "user", "prefers metric", {"old_text": "imperial", "previous_content": "prefers imperial units"})
    p.on_memory_write("remove", "user", "", {"old_text": "green tea"})
    first, second = [e for e in harness.events(p) if isinstance(e, MemoryWritten)]
    assert (first.old_text, first.content) == ("prefers imperial units", "prefers metric")
    assert second.old_text == "green tea"  # Hermes 0.19 (and older 0.2x callers): old_text as given


class AnsweringRecall:
    """The recall thread's side, answered at once with ``items``."""

    def __init__(self, items):
        self.items = items
        self.submitted: list[str] = []

    def submit(self, text, session, k=12, *, warm=False):
        self.submitted.append(text)
        q = Query(text=text, session=session, warm=warm)
        q.items = list(self.items)
        q.done.set()
        return q

    def latest(self, session):
        return None

    def unreachable(self):
        return ""

    def close(self):
        pass


def items(n: int) -> list[dict]:
    return [
        {"id": f"m{i}", "kind": "memory", "text": f"fact number {i}", "agent": "a", "at": "2026-11-22T05:03:04Z"}
        for i in range(n)
    ]


def test_trivial_prompts_start_no_recall_where_hermes_has_the_gate(harness, monkeypatch):
    p = harness.provider("s-1")
    recall = AnsweringRecall(items(2))
    p.recall.close()
    p.recall = recall
    monkeypatch.setattr(_base, "is_trivial_prompt", lambda text: text.strip().lower() in ("ok", "thanks"))
    p.on_turn_start(1, "thanks")
    assert p.prefetch("thanks") == "" and recall.submitted == []
    assert p.recall_status() is None
    p.on_turn_start(2, "what do I drink?")
    assert "fact number 1" in p.prefetch("what do I drink?")
    monkeypatch.setattr(_base, "is_trivial_prompt", None)  # Hermes 0.19: no gate
    p.on_turn_start(3, "ok")
    assert recall.submitted == ["what do I drink?", "ok"]


def test_recall_status_counts_what_the_last_prefetch_injected_and_says_when_degraded(harness):
    p = harness.provider("s-1")
    p.recall.close()
    p.recall = AnsweringRecall(items(3))
    p.on_turn_start(1, "what do I drink?")
    assert "fact number 2" in p.prefetch("what do I drink?")
    status = p.recall_status()
    assert (status.provider_label, status.count) == ("memstream", 3)
    p.recall = AnsweringRecall([])
    p.on_turn_start(2, "anything else?")
    p.prefetch("anything else?")
    assert p.recall_status() is None  # never a stale count
    # an earlier answer served while the service is down, with events waiting in the spool
    pre = Prefetcher(lambda key: None)
    pre.last = ("cached", 2)
    p.prefetcher = pre
    p.recall.unreachable = lambda: "Redis unreachable: ConnectionError"
    p.writer.backlog = lambda: 7
    status = p.recall_status()
    assert status.count == 2
    assert status.provider_label == "memstream (from an earlier recall; service unreachable; 7 events not yet shipped)"


def test_identity_signature_changes_with_the_tenant_and_never_shows_the_url_s_password(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path))
    monkeypatch.setenv("MEMSTREAM_TENANT", "acme")
    p = MemstreamProvider()
    assert p.is_available() and p.unavailable_reason() == ""
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", "redis://:hunter2@db:6379/0")
    signature = p.identity_signature()
    assert signature["memstream.tenant"] == "acme" and "hunter2" not in json.dumps(signature)
    monkeypatch.setenv("MEMSTREAM_TENANT", "globex")
    assert p.identity_signature() != signature
    status = p.get_status_config({})
    assert status["tenant"] == "globex" and "hunter2" not in json.dumps(status)


def test_background_threads_start_through_hermes_s_helper_and_carry_its_context(harness, monkeypatch):
    profile: contextvars.ContextVar[str] = contextvars.ContextVar("profile", default="none")
    seen: dict[str, str] = {}

    def spawn_context_thread(target, *, name, daemon=True):  # Hermes 0.2x's helper, in brief
        ctx = contextvars.copy_context()

        def run():
            seen[name] = profile.get()
            return target()

        return threading.Thread(target=lambda: ctx.run(run), name=name, daemon=daemon)

    monkeypatch.setattr(_base, "spawn_context_thread", spawn_context_thread)
    try:
        profile.set("work")
        p = harness.provider("s-1")
        p.sync_turn("hello", "hi", session_id="s-1")
        harness.events(p)
        assert seen.get("memstream-recall") == "work", seen
        assert any(name.startswith("memstream-ship") and value == "work" for name, value in seen.items()), seen
    finally:
        threads.use(None)


HERMES_SCRUBBED = [
    "my token is «redacted:ghp_…» and the key «redacted-secret»",
    "export OPENAI_API_KEY=*** then run it",
    "Authorization: Bearer [redacted]",
    "-----BEGIN [REDACTED PRIVATE KEY]",
    "the value sk-pro...abcd was masked by its prefix and suffix",
]


@pytest.mark.parametrize("text", HERMES_SCRUBBED)
def test_text_hermes_already_scrubbed_is_recorded_as_it_came_with_nothing_failing(harness, text):
    p = harness.provider("s-1")
    p.on_turn_start(1, text)
    p.sync_turn(text, f"echo: {text}", session_id="s-1", messages=[{"role": "user", "content": text}])
    p.on_memory_write("add", "user", text, {"session_id": "s-1"})
    turn, write = harness.events(p)
    assert (turn.turn_index, turn.user_text, turn.assistant_text, write.content) == (1, text, f"echo: {text}", text)
    stats = p.stats()
    assert not stats.get("hook_errors") and not stats.get("malformed") and not stats.get("coerced"), stats
