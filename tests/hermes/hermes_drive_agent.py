"""Drive a real Hermes ``AIAgent`` for several turns (run with the Hermes venv's Python).

argv[1]: JSON {"base_url", "prompts": [...], "agent_kwargs": {...}, "trace_hooks": bool,
"turn_authors": [...]} (``trace_hooks``: also record the wall-clock times of the provider's
``on_turn_start`` and ``prefetch`` calls, as ``hooks``; ``turn_authors``: the ``turn_author``
of each prompt, Hermes 0.2x). Each turn's recall indicator line (Hermes 0.2x's
``describe_recall``, built from the provider's ``recall_status``) is recorded as
``recall_lines``. HERMES_HOME and the
MEMSTREAM_* variables come from the environment. Prints one line
``MEMSTREAM_DRIVER_RESULT <json>`` describing what the agent saw.
"""

import json
import os
import sys

import structlog

spec = json.loads(sys.argv[1])
# The provider's structured logs (warnings, hook failures) go to a file the test reads;
# inside Hermes, stdout may be redirected while the agent runs.
structlog.configure(
    processors=[
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
        structlog.processors.format_exc_info,
        structlog.processors.JSONRenderer(),
    ],
    logger_factory=structlog.PrintLoggerFactory(open(os.environ["MEMSTREAM_TEST_LOG"], "a", buffering=1)),
)

from hermes_state import SessionDB  # noqa: E402
from run_agent import AIAgent  # noqa: E402

db = SessionDB()
agent = AIAgent(
    base_url=spec["base_url"],
    api_key="sk-fake",
    provider="custom",
    api_mode="chat_completions",
    model="fake-model",
    quiet_mode=True,
    session_db=db,
    tool_delay=0,
    skip_context_files=True,
    **spec.get("agent_kwargs", {}),
)
agent.suppress_status_output = True
manager = agent._memory_manager
providers = list(manager.providers) if manager is not None else []
out = {
    "session_id": agent.session_id,
    "providers": [p.name for p in providers],
    "provider_class": [f"{type(p).__module__}.{type(p).__qualname__}" for p in providers],
    "initialized": [bool(getattr(p, "initialized", False)) for p in providers],
    "tools": sorted(t.get("function", {}).get("name", "") for t in (agent.tools or [])),
    "replies": [],
    "prompts": spec["prompts"],
    "started_at": [],
    "turn_s": [],
}
history = []
import time  # noqa: E402

if spec.get("trace_hooks"):
    # wall-clock times (comparable with the fake model server's) of the provider's turn
    # hooks: on_turn_start, and prefetch's entry, return and returned length
    out["hooks"] = []

    def _traced(provider, name):
        inner = getattr(provider, name)

        def hook(*args, **kwargs):
            entered = time.time()
            result = inner(*args, **kwargs)
            out["hooks"].append(
                {"hook": name, "at": entered, "until": time.time(), "chars": len(result) if isinstance(result, str) else None}
            )
            return result

        setattr(provider, name, hook)

    for p in providers:
        _traced(p, "on_turn_start")
        _traced(p, "prefetch")

authors = spec.get("turn_authors") or [None] * len(spec["prompts"])
out["recall_lines"] = []
for prompt, author in zip(spec["prompts"], authors):
    out["started_at"].append(time.time())
    extra = {"turn_author": author} if author is not None else {}
    res = agent.run_conversation(prompt, conversation_history=history, **extra)
    describe = getattr(manager, "describe_recall", None)
    out["recall_lines"].append(describe() if describe is not None else None)
    out["turn_s"].append(time.time() - out["started_at"][-1])
    history = res.get("messages") or history
    out["replies"].append(res.get("final_response"))
if manager is not None:
    out["flushed"] = manager.flush_pending(timeout=10)
    out["stats"] = [p.stats() for p in providers if hasattr(p, "stats")]
out["message_count"] = len(history)
from memstream.core import threads  # noqa: E402  (how the provider's threads were started)

spawner = threads.current()
out["thread_spawner"] = f"{spawner.__module__}.{spawner.__qualname__}" if spawner is not None else None
agent.shutdown_memory_provider(history)  # on_session_end + shutdown (ships the spool)
agent.close()
db.close()
print("MEMSTREAM_DRIVER_RESULT " + json.dumps(out, default=str), flush=True)
