"""Realistic Hermes inputs for the hot-path bench: a turn's messages with a growing
transcript and tool results, and a memory write with Hermes's metadata."""

from __future__ import annotations

import json
from typing import Any

# -- realistic Hermes inputs ---------------------------------------------------------------
_TOOL_RESULT = "total 48\ndrwxr-xr-x  7 user user 4096 May 15 10:11 .\n" + "".join(
    f"-rw-r--r--  1 user user {1000 + k * 37:5d} May 15 10:{k:02d} module_{k:02d}.py\n" for k in range(24)
)  # ~1.4 KB, an `ls -la`-like tool output (the event keeps a 1,000-char brief)


def _turn_messages(i: int, session: str) -> tuple[str, str, list[dict[str, Any]]]:
    """User text, final answer and the 4 messages Hermes appends for one tool-using turn."""
    user = (
        f"Turn {i}: can you check which modules in the project directory changed since "
        f"yesterday and summarise what the largest one does? Keep it short, please."
    )
    call_id = f"call_{session[-6:]}_{i:06d}"
    args = json.dumps({"command": f"ls -la --time-style=long-iso src/pkg{i % 7}", "timeout": 30})
    answer = (
        f"I listed src/pkg{i % 7}: 24 modules, the largest is module_23.py (1,851 bytes) — it "
        "holds the retry policy of the HTTP client: exponential back-off with jitter, a "
        "ceiling of 30 s and a circuit breaker that opens after five consecutive failures. "
        "Three modules changed since yesterday (module_03, module_11 and module_17); the "
        "diff is mostly renamed helpers and one new test. Want me to open any of them?"
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": user},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": args}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": _TOOL_RESULT},
        {"role": "assistant", "content": answer},
    ]
    return user, answer, messages


def _memory_write(i: int, session: str) -> tuple[str, str, str, dict[str, Any]]:
    """(action, target, content, metadata) as Hermes's memory tool bridge passes them."""
    metadata = {
        "write_origin": "assistant_tool",
        "execution_context": "foreground",
        "session_id": session,
        "platform": "cli",
        "tool_name": "memory",
        "tool_call_id": f"call_mem_{session[-6:]}_{i:06d}",
    }
    if i % 5 == 4:
        metadata["old_text"] = f"prefers answers under {i % 9 + 3} lines"
        return (
            "replace",
            "user",
            f"User prefers answers under {i % 9 + 4} lines and code blocks with file paths; dislikes emoji.",
            metadata,
        )
    return (
        "add",
        "memory" if i % 3 else "user",
        f"Project note {i}: the build uses `make test`; the embedded Valkey listens on "
        f"127.0.0.1 and the spool lives under ~/.memstream/spool (checked turn {i}).",
        metadata,
    )


class Inputs:
    """Every argument of every call, built before the timed loop."""

    def __init__(self, n: int, session: str):
        self.session = session
        self.turns = [_turn_messages(i, session) for i in range(n)]
        self.writes = [_memory_write(i, session) for i in range(n)]
