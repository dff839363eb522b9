"""Throughput of the pure processing stages: redact, boilerplate, chunk, facts.

``stages_throughput(turns)`` times each stage over the same texts (each turn is its user
text, its assistant text and its tool results, as a projection worker sees them) and
returns turns/s, MB/s and what each stage found. ``synthetic_turns(n)`` makes ``n``
agent-style turns: requests, acknowledgements, slash commands, personal statements,
answers with code, tracebacks, JSON and URLs, tool output, some Chinese, Japanese and
Korean, and secrets in about 3% of turns. ``--locomo DIR`` adds the LoCoMo chat turns
(read from the directory given, never shipped).

Command line: ``memstream bench stages --turns 10000 [--locomo DIR]`` prints one
JSON object. Timing belongs here, not in the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from memstream.core import argtypes
from memstream.text import BoilerplateFilter, chunk, extract_facts, redact

__all__ = ["add_arguments", "run", "stages_throughput", "synthetic_turns"]

_USER = [
    "Can you look at why the billing worker keeps crashing on start? It started after the migration.",
    "Please refactor the retry logic in producers/shipper.py so it backs off exponentially.",
    "I live in Lisbon now, so schedule the reports for 9am WET.",
    "We decided to use Postgres 16 for the queue. Let's go with pgmq.",
    "Never force-push to main. Always run the tests before committing.",
    "The staging DB is at db-staging.internal:5432 and Grafana is at https://grafana.example.com/d/abc",
    "I prefer short answers, and I hate walls of text.",
    "What's the difference between XREADGROUP with > and with 0?",
    "ok",
    "thanks!",
    "continue",
    "👍",
    "/new",
    "/model gpt-4o",
    "great, thanks a lot",
    "好的",
    "谢谢",
    "はい",
    "계속",
    "我们的数据库在上海的服务器上，请帮我检查一下连接池的配置是否正确。",
    "明日までにデプロイのスクリプトを直してください。ステージング環境で確認します。",
    "배포 스크립트에서 환경 변수를 읽는 부분을 고쳐 주세요.",
    "My name is Priya and I work at Shopify as a backend engineer.",
    "Our stack is FastAPI, Celery, Redis and React. We're on Python 3.11.",
]
_ASSISTANT_PARTS = [
    "The crash comes from a stale configuration map: the worker still reads `DATABASE_HOST` "
    "from the old ConfigMap, so it connects to a host that no longer exists.",
    "```python\ndef backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:\n"
    "    return min(cap, base * 2 ** attempt) * random.uniform(0.5, 1.0)\n```",
    'Traceback (most recent call last):\n  File "/srv/app/worker.py", line 88, in run\n'
    "    conn = pool.get()\nredis.exceptions.ConnectionError: Error 111 connecting to "
    "cache.internal:6379. Connection refused.",
    "Here is the plan:\n\n1. Drain the queue.\n2. Apply migration 0042.\n3. Restart the "
    "workers one at a time and watch the lag in Grafana.",
    '{"service": "billing", "replicas": 3, "image": "registry.example.com/billing:2.3.1", "env": {"LOG_LEVEL": "info"}}',
    "See https://redis.io/docs/latest/commands/xautoclaim/ for the exact semantics; the third "
    "element lists ids whose entries were deleted.",
    "I checked commit 9f2c1e7a3b4d5e6f708192a3b4c5d6e7f8091a2b: it only touched the README.",
    "XREADGROUP with `0` re-reads this consumer's pending entries; with `>` it reads entries "
    "never delivered to any consumer of the group. Start with `0`, then switch to `>`.",
    "配置看起来是正确的，但是最大连接数设置得太低了。建议把 max_connections 调到 50。",
]
_TOOL = [
    "$ kubectl get pods -n billing\nNAME                       READY   STATUS    RESTARTS\n"
    "billing-7d9f8b6c5-x2k4l   1/1     Running   0\nbilling-7d9f8b6c5-z9p8q   0/1     CrashLoopBackOff   7",
    "total 48\ndrwxr-xr-x  5 app app 4096 Nov 22 07:47 .\n-rw-r--r--  1 app app  670 Nov 22 07:47 Makefile",
    "PASS tests/test_shipper.py::test_batch_is_shipped_once (0.02s)\n212 passed, 3 skipped in 14.2s",
]
_SECRETS = [
    "export OPENAI_API_KEY=sk-proj-AbC123def456GHI789jkl012MNO345pqr678",
    "DATABASE_URL=postgres://billing:S3cr3tPassw0rd@db.internal:5432/billing",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0",
    "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456",
]


def synthetic_turns(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` deterministic agent-style turns: ``{"user", "assistant", "tools"}``."""
    rnd = random.Random(seed)
    turns = []
    for _ in range(n):
        user = rnd.choice(_USER)
        parts = rnd.sample(_ASSISTANT_PARTS, rnd.randint(1, 5))
        tools = rnd.sample(_TOOL, rnd.randint(0, 2))
        if rnd.random() < 0.03:
            (tools or parts).append(rnd.choice(_SECRETS))
        turns.append({"user": user, "assistant": "\n\n".join(parts), "tools": tools})
    return turns


def locomo_turns(directory: Path) -> list[dict[str, Any]]:
    path = directory / "locomo10_turns.jsonl"
    texts = [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]
    return [{"user": t, "assistant": "", "tools": []} for t in texts]


def _time(fn: Callable[[Any], Any], items: Sequence[Any]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    results = [fn(x) for x in items]
    return time.perf_counter() - start, results


def stages_throughput(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds, turns/s and MB/s per stage over ``turns``, with what each stage found."""
    texts = [[t["user"], t["assistant"], *t["tools"]] for t in turns]
    mb = sum(len(s.encode()) for ts in texts for s in ts) / 1e6
    user_mb = sum(len(ts[0].encode()) for ts in texts) / 1e6
    f = BoilerplateFilter()
    report: dict[str, Any] = {"turns": len(turns), "megabytes": round(mb, 2)}

    def per_turn(fn: Callable[[str], Any]) -> Callable[[list[str]], list[Any]]:
        return lambda ts: [fn(s) for s in ts]

    for name, fn in [
        ("redact", per_turn(redact)),
        ("boilerplate", lambda ts: f.reason(ts[0])),
        ("chunk", per_turn(chunk)),
        ("facts", lambda ts: extract_facts(ts[0]) + extract_facts("\n\n".join(ts[1:]), speaker="assistant")),
    ]:
        seconds, results = _time(fn, texts)
        stage_mb = user_mb if name == "boilerplate" else mb  # the filter reads the user's text only
        stage: dict[str, Any] = {
            "seconds": round(seconds, 3),
            "turns_per_s": round(len(turns) / seconds),
            "mb_per_s": round(stage_mb / seconds, 1),
        }
        if name == "redact":
            stage["redactions"] = sum(n for rs in results for _, n in rs)
        elif name == "boilerplate":
            stage["skipped"] = {r: results.count(r) for r in sorted(set(results) - {None})}
        elif name == "chunk":
            stage["chunks"] = sum(len(cs) for rs in results for cs in rs)
        else:
            stage["facts"] = sum(len(fs) for fs in results)
        report[name] = stage
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench stages``'s arguments (``python -m memstream.bench.stages`` takes the same)."""
    parser.add_argument(
        "--turns", type=argtypes.int_between(1, 10_000_000), default=10_000, help="synthetic turns (default 10000)"
    )
    parser.add_argument("--locomo", type=Path, help="directory holding locomo10_turns.jsonl: also measure on its turns")


def run(args: argparse.Namespace) -> int:
    """Print one JSON line per input: the stages' throughput on it."""
    print(json.dumps({"synthetic": stages_throughput(synthetic_turns(args.turns))}))
    if args.locomo:
        print(json.dumps({"locomo": stages_throughput(locomo_turns(args.locomo))}))
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m memstream.bench.stages", description=(__doc__ or "").split("\n")[0])
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))
