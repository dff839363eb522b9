"""A scripted OpenAI-compatible chat-completions server (stdlib only) for the Hermes test.

Behaviour, keyed on the request's messages:
  - the user text starts with ``CHAIN <query>`` and the memstream tools are offered: a
    ``memstream_search`` call for the query, then ``memstream_context`` and
    ``memstream_forget`` on the first result's id (read from the search result the
    request carries), then the final text ``CHAIN_DONE_REPLY``
  - the user text starts with ``SEARCHALL <query>``: one ``memstream_search`` call with
    ``scope="all"``, then ``TOOL_DONE_REPLY``
  - the user text starts with ``SEARCH <query>`` / ``FORGET <id>`` / ``KEEP <text>`` /
    ``MEMO <text>`` and that tool is offered: one ``memstream_search`` (default scope),
    ``memstream_forget``, ``memstream_remember`` (target user) or built-in ``memory``
    (add, target memory) call with that argument, then ``TOOL_DONE_REPLY``
  - the last message is a tool result        -> final text ``TOOL_DONE_REPLY``
  - the last user text contains ``REMEMBER`` -> a ``memory`` tool call (add, target user,
    content ``REMEMBER_CONTENT``), if the request offers the ``memory`` tool
  - otherwise                                -> ``reply_for(last user text)``
Answers both ``stream: true`` (SSE) and plain requests, ``GET /v1/models``; anything else
is a 404 (Hermes probes ``/api/show``; a 404 is fine). Every request is recorded
(``FakeLLM.requests``, and as JSON lines in ``reqlog`` if given).

Use in-process (``FakeLLM().start()`` -> ``.url``, ``.stop()``) or as a script
(``python fake_llm_server.py PORT [REQLOG]``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"
REMEMBER_CONTENT = "User prefers green tea."
TOOL_DONE_REPLY = "Noted: I saved that to memory."
CHAIN_DONE_REPLY = "Searched, looked around, forgot."


def reply_for(user_text: str) -> str:
    return f"ACK[{user_text}]"


def tool_call_id(rid: int) -> str:
    return f"call_fake_{rid}"


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _strip_injected(text: str) -> str:
    # Hermes appends recalled memory to the API copy of the user message.
    return text.split("\n\n<memory-context>", 1)[0]


def last_user_text(messages: list) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return _strip_injected(_text(m.get("content")))
    return ""


def _call(rid: int, name: str, args: dict) -> dict:
    return {"tool": {"id": tool_call_id(rid), "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}}


def _tool_results(messages: list) -> list[tuple[str, str]]:
    """(tool name, result text) of this turn's tool calls, in order."""
    names = {}
    out = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            names[call.get("id")] = call.get("function", {}).get("name")
        if m.get("role") == "tool":
            out.append((names.get(m.get("tool_call_id"), ""), _text(m.get("content"))))
        if m.get("role") == "user":
            out = []
    return out


def _chain(user: str, messages: list, rid: int) -> dict:
    done = _tool_results(messages)
    if not done:
        return _call(rid, "memstream_search", {"query": user.split(" ", 1)[1], "kind": "all"})
    name, result = done[-1]
    try:
        first = json.loads(result)
    except ValueError:
        return {"text": f"bad tool result: {result[:200]}"}
    if name == "memstream_search":
        hits = first.get("results") or []
        if not hits:
            return {"text": "nothing found"}
        return _call(rid, "memstream_context", {"id": hits[0]["id"], "before": 1, "after": 1})
    if name == "memstream_context":
        search = json.loads(done[0][1])
        return _call(rid, "memstream_forget", {"id": search["results"][0]["id"], "reason": "test"})
    return {"text": CHAIN_DONE_REPLY}


# one tool call, then TOOL_DONE_REPLY: prefix -> (tool, its arguments from the rest of the text)
ONE_CALL = {
    "SEARCH ": ("memstream_search", lambda rest: {"query": rest}),
    "FORGET ": ("memstream_forget", lambda rest: {"id": rest, "reason": "test"}),
    "KEEP ": ("memstream_remember", lambda rest: {"content": rest, "target": "user"}),
    "MEMO ": ("memory", lambda rest: {"action": "add", "target": "memory", "content": rest}),
}


def decide(body: dict, rid: int) -> dict:
    messages = body.get("messages") or []
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    last = messages[-1] if messages else {}
    user = last_user_text(messages)
    if user.startswith("CHAIN ") and "memstream_search" in tools:
        return _chain(user, messages, rid)
    if user.startswith("SEARCHALL ") and "memstream_search" in tools and last.get("role") != "tool":
        return _call(rid, "memstream_search", {"query": user.split(" ", 1)[1], "scope": "all"})
    for prefix, (name, args) in ONE_CALL.items():
        if user.startswith(prefix) and name in tools and last.get("role") != "tool":
            return _call(rid, name, args(user[len(prefix) :].strip()))
    if last.get("role") == "tool":
        return {"text": TOOL_DONE_REPLY}
    if "REMEMBER" in user and "memory" in tools:
        args = {"action": "add", "target": "user", "content": REMEMBER_CONTENT}
        return {
            "tool": {"id": tool_call_id(rid), "type": "function", "function": {"name": "memory", "arguments": json.dumps(args)}}
        }
    return {"text": reply_for(user)}


class FakeLLM:
    def __init__(self, port: int = 0, reqlog: str | None = None):
        self.requests: list[dict] = []
        self.reqlog = reqlog
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeLLM:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    def _record(self, path: str, body: dict) -> int:
        with self._lock:
            rid = len(self.requests) + 1
            row = {
                "rid": rid,
                "path": path,
                "stream": bool(body.get("stream")),
                "at": time.time(),
                "tools": [t.get("function", {}).get("name") for t in body.get("tools") or []],
                "messages": body.get("messages") or [],
            }
            self.requests.append(row)
            if self.reqlog:
                with open(self.reqlog, "a") as f:
                    f.write(json.dumps(row) + "\n")
            return rid

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, obj, code=200):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    return self._json(
                        {
                            "object": "list",
                            "data": [{"id": MODEL, "object": "model", "owned_by": "fake", "context_length": 131072}],
                        }
                    )
                self._json({"error": "not found"}, 404)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = {}
                rid = fake._record(self.path, body)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._json({"error": "unsupported"}, 404)
                d = decide(body, rid)
                model = body.get("model") or MODEL
                cid = f"chatcmpl-{rid}"
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                if "tool" in d:
                    msg = {"role": "assistant", "content": None, "tool_calls": [d["tool"]]}
                    finish = "tool_calls"
                else:
                    msg = {"role": "assistant", "content": d["text"]}
                    finish = "stop"
                if not body.get("stream"):
                    return self._json(
                        {
                            "id": cid,
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": model,
                            "usage": usage,
                            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                        }
                    )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

                def event(choices):
                    self.wfile.write(b"data: " + json.dumps({**base, "choices": choices}).encode() + b"\n\n")
                    self.wfile.flush()

                event([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
                if "tool" in d:
                    event([{"index": 0, "delta": {"tool_calls": [{"index": 0, **d["tool"]}]}, "finish_reason": None}])
                else:
                    event([{"index": 0, "delta": {"content": d["text"]}, "finish_reason": None}])
                event([{"index": 0, "delta": {}, "finish_reason": finish}])
                self.wfile.write(b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


if __name__ == "__main__":
    server = FakeLLM(int(sys.argv[1]) if len(sys.argv) > 1 else 0, sys.argv[2] if len(sys.argv) > 2 else None)
    print(server.url, flush=True)
    server.serve_forever()
