"""Recall inside a real Hermes Agent (``hermes-agent==0.19.0``, its own venv), end to end.

A real Valkey holds the log; a ``memstream worker`` process (hash embedder, embedded
store) projects it and answers queries; a scripted OpenAI-compatible server plays the
model and records every request. Each Hermes run is a new process (``hermes_drive_agent.py``).

1. Session 1 states facts and the model writes a memory with the built-in ``memory``
   tool; session 2, a new process, asks a related question: the request the model gets
   carries a ``<memory-context>`` block with the fact, and the turn was not held up.
2. Two agents (different ``gateway_session_key``) recall their own turns by default;
   ``memstream_search(scope="all")`` finds the other's; another tenant finds nothing.
3. The model calls ``memstream_search``, ``memstream_context`` and ``memstream_forget``;
   their results are right, and the forgotten item is no longer found.
4. With the worker stopped, turns still complete promptly and nothing is lost: when the
   worker is back, what was written is found.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import redis
import yaml

from memstream.valkey import ValkeyProcess
from workers.queries import QueryTimeout, ask

from test_hermes_e2e import (  # noqa: F401  (hermes_venv is a fixture)
    HERE, VENV_PY, _clean_env, _driver_result, _run, _tail, fake_llm, hermes_venv)

pytestmark = pytest.mark.hermes

TENANT = "acme"
BUDGET_MS = 150


class Worker:
    def __init__(self, work, url):
        self.env = _clean_env(MEMSTREAM_REDIS_URL=url, MEMSTREAM_HOME=str(work / "worker-home"),
                              MEMSTREAM_EMBEDDER="hash", MEMSTREAM_AUTOSTART="0")
        self.proc: subprocess.Popen | None = None
        self.log = work / "worker.log"

    def start(self) -> "Worker":
        self.proc = subprocess.Popen([sys.executable, "-m", "memstream", "worker", "--embedded-store",
                                      "--name", "e2e"], env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "a"))
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


@pytest.fixture(scope="module")
def stack(hermes_venv, tmp_path_factory):
    work = tmp_path_factory.mktemp("hermes-read")
    llm = fake_llm.FakeLLM(reqlog=str(work / "requests.jsonl")).start()
    valkey = ValkeyProcess(work / "valkey").start()
    worker = Worker(work, valkey.url).start()
    client = redis.Redis.from_url(valkey.url)
    homes: dict[str, object] = {}

    def hermes(name: str, prompts: list[str], tenant: str = TENANT, **agent_kwargs) -> dict:
        """One Hermes process running ``prompts`` in one session (home ``name``)."""
        home = homes.get(name)
        if home is None:
            home = work / f"home-{name}"
            home.mkdir()
            (home / "config.yaml").write_text(yaml.safe_dump(
                {"model": {"provider": "custom", "base_url": llm.url, "default": fake_llm.MODEL}}))
            homes[name] = home
        env = _clean_env(HERMES_HOME=str(home), MEMSTREAM_REDIS_URL=valkey.url, MEMSTREAM_TENANT=tenant,
                         MEMSTREAM_HOME=str(work / f"ms-{name}"), MEMSTREAM_AUTOSTART="0",
                         MEMSTREAM_SPOOL_FSYNC="never", MEMSTREAM_PREFETCH_BUDGET_MS=str(BUDGET_MS),
                         MEMSTREAM_TEST_LOG=str(work / "provider-log.jsonl"))
        proc = _run([hermes_venv / "bin" / "memstream", "install-hermes", "--home", home], 60, env=env, cwd=work)
        assert proc.returncode == 0, _tail(proc)
        spec = {"base_url": llm.url, "prompts": prompts, "agent_kwargs": {"platform": "cli", **agent_kwargs}}
        first = len(llm.chat_requests())
        out = _driver_result(_run([VENV_PY, HERE / "hermes_drive_agent.py", json.dumps(spec)], 120,
                                  env=env, cwd=work), f"hermes run {name}")
        assert out["providers"] == ["memstream"] and out["initialized"] == [True], out
        out["requests"] = llm.chat_requests()[first:]
        return out

    def search(query: str, agent: str, tenant: str = TENANT, scope: str = "current") -> list[dict]:
        answer = ask(client, "memstream", {"op": "search", "tenant": tenant, "agent": agent, "scope": scope,
                                           "query": query, "k": 10}, timeout=10)
        assert "error" not in answer, answer
        return answer["results"]

    def until_found(query: str, agent: str, needle: str, timeout: float = 30.0, **kw) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = search(query, agent, **kw)
                if any(needle in r["text"] for r in found):
                    return found
            except QueryTimeout:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not found for {agent} within {timeout}s")
            time.sleep(0.2)

    yield type("Stack", (), {"hermes": staticmethod(hermes), "search": staticmethod(search),
                             "until_found": staticmethod(until_found), "worker": worker, "llm": llm,
                             "client": client})
    worker.stop()
    client.close()
    valkey.stop()
    llm.stop()


def _injected(request: dict) -> str:
    user = [m for m in request["messages"] if m.get("role") == "user"][-1]
    content = user.get("content")
    text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content or [])
    return text.split("<memory-context>", 1)[1] if "<memory-context>" in text else ""


def test_a_new_process_recalls_the_memory_of_the_last_session_within_the_budget(stack):
    first = stack.hermes("solo", ["I live in Lisbon and my editor is Helix",
                                 "Please REMEMBER that I like green tea"], gateway_session_key="agent:solo")
    assert "memory" in [t for r in first["requests"] for t in r["tools"]]
    stack.until_found("green tea", "agent:solo", "green tea")

    second = stack.hermes("solo", ["what should I drink this afternoon, maybe some tea?"],
                          gateway_session_key="agent:solo")
    block = _injected(second["requests"][0])
    assert "green tea" in block.lower(), second["requests"][0]["messages"][-1]
    assert "## memstream recall" in block and "agent agent:solo" in block
    # not held up: prefetch returned within its budget (plus scheduling slack), with the
    # fresh answer; Hermes's own start of a turn (first request of a process) is shown beside
    stats = second["stats"][0]
    assert stats["prefetch_fresh"] == 1 and stats["prefetch_ms_max"] < BUDGET_MS + 50, stats
    print(f"prefetch {stats['prefetch_ms_max']:.1f} ms (budget {BUDGET_MS} ms); turn start -> model request: "
          f"{(second['requests'][0]['at'] - second['started_at'][0]) * 1000:.0f} ms in session 2, "
          f"{(first['requests'][0]['at'] - first['started_at'][0]) * 1000:.0f} ms in session 1 (nothing to recall)")


def test_agents_recall_their_own_memory_and_scope_all_shares_it_but_never_across_tenants(stack):
    stack.hermes("a", ["My locker code at the gym is 4711"], gateway_session_key="agent:a")
    stack.hermes("b", ["The staging cluster password rotates on Fridays"], gateway_session_key="agent:b")
    stack.until_found("locker code gym", "agent:a", "4711")
    stack.until_found("staging cluster password", "agent:b", "Fridays")

    b = stack.hermes("b", ["what is the locker code at the gym?",
                           "SEARCHALL locker code gym"], gateway_session_key="agent:b")
    assert "4711" not in _injected(b["requests"][0])  # by default, only its own memory
    shared = [r for r in b["requests"] if r["messages"][-1].get("role") == "tool"]
    assert shared and "4711" in shared[-1]["messages"][-1]["content"]  # scope=all finds agent a's

    other = stack.hermes("other", ["what is the locker code at the gym?", "SEARCHALL locker code gym"],
                         tenant="globex", gateway_session_key="agent:a")
    assert "4711" not in _injected(other["requests"][0])
    result = [r for r in other["requests"] if r["messages"][-1].get("role") == "tool"][-1]["messages"][-1]
    assert "4711" not in result["content"] and "Fridays" not in result["content"]


def test_the_model_searches_scrolls_and_forgets_through_the_tools(stack):
    stack.hermes("tools", ["Our release train leaves every second Thursday",
                           "The notes live in the wiki under ops/pages",
                           "Hotfixes need the consent of the on-call lead"], gateway_session_key="agent:t")
    stack.until_found("release train Thursday", "agent:t", "second Thursday")

    run = stack.hermes("tools", ["CHAIN release train second Thursday"], gateway_session_key="agent:t")
    assert run["replies"] == [fake_llm.CHAIN_DONE_REPLY]
    results = {}
    for r in run["requests"]:
        last = r["messages"][-1]
        if last.get("role") == "tool":
            results[len(results)] = json.loads(last["content"])
    search, context, forget = results[0], results[1], results[2]
    hit = search["results"][0]
    assert "second Thursday" in hit["text"], search
    assert [t["hit"] for t in context["turns"]][:2] == [True, False] and "wiki" in context["turns"][1]["text"]
    assert context["anchor"]["id"] == hit["id"]
    assert forget == {"ok": True, "forgotten_id": hit["id"], "tombstone": forget["tombstone"],
                      "status": forget["status"]}
    deadline = time.monotonic() + 30
    while hit["id"] in [r["id"] for r in stack.search("release train Thursday", "agent:t")]:
        assert time.monotonic() < deadline, "the forgotten turn is still found"
        time.sleep(0.2)


def test_with_the_worker_stopped_turns_complete_and_nothing_is_lost(stack):
    stack.worker.stop()
    try:
        run = stack.hermes("down", ["The backup window is 02:00 to 03:00 UTC", "what is the backup window?"],
                           gateway_session_key="agent:down")
        print("turns with the worker stopped (s):", [round(s, 2) for s in run["turn_s"]])
        assert run["replies"] == [fake_llm.reply_for(p) for p in
                                  ["The backup window is 02:00 to 03:00 UTC", "what is the backup window?"]]
        assert all(s < BUDGET_MS / 1000 + 3.0 for s in run["turn_s"]), run["turn_s"]
        assert _injected(run["requests"][-1]) == ""  # nothing to recall: no service answered
    finally:
        stack.worker.start()
    stack.until_found("backup window UTC", "agent:down", "02:00 to 03:00")
