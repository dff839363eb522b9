"""``memstream bench locomo``: evidence recall on LoCoMo, through memstream's real paths.

Protocol (the team's retrieval benchmark notes, section 2): one index per conversation
(here: one agent scope per ``sample_id``, tenant ``bench``); the unit is a dialog turn,
its text ``"<speaker>: <text>"`` plus ``" [shares <caption>]"``; the query is the question
verbatim; gold = ``gold_dia_ids`` (questions without evidence excluded); categories 1-4
are the headline, 5 is reported apart.

What runs: a real Valkey and the real pipeline (turns projection, the configured
embedder, the embedded store) in a temp home. Every turn goes in as a ``TurnRecorded``
event (``occurred_at`` = its session's date-time, a second per turn), through
``EventLog.append`` and ``Pipeline.drain``; every question goes through the query path
prefetch and ``memstream_search`` use: a request on the query list (``memstream.query.ask``, op
``search``, kind ``turns``, scope ``current``) answered by the pipeline's query server. Latency is
measured around ``ask`` (warm, one client).

Baselines on the same questions, in the same run: BM25 (Porter-stemmed, stop words out:
the tokeniser of ``memstream.projections.sparse``; k1 1.2, b 0.75, in memory) and dense-only (the
same embedder, cosine over the plain unit texts). memstream's ratio to each is reported.

The data is CC BY-NC: pass its directory; nothing of it ships with memstream.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from memstream.bench.command import BenchError, show
from memstream.bench.stats import percentile, sign_test
from memstream.core import PermanentError, Settings, new_event_id
from memstream.producers import EventLog, Scope, TurnRecorded, redis_client
from memstream.service import ValkeyProcess

__all__ = [
    "locomo",
    "format_locomo",
    "format_compare",
    "paired",
    "paired_runs",
    "parse_options",
    "SPLITS",
    "TARGETS",
    "add_arguments",
    "run",
]

SPLITS = {
    "dev": ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47"),
    "test": ("conv-48", "conv-49", "conv-50"),
}
SPLITS["all"] = SPLITS["dev"] + SPLITS["test"]
TARGETS = {"any@10": 85.0, "all@10": 70.0, "p95_ms": 50.0}
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


class BenchDataError(PermanentError, ValueError):
    """The benchmark's data files are missing or not what the benchmark reads."""


def _when(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(data: Path, split: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turns and questions of the split (BenchDataError if the files are not LoCoMo's)."""
    turns_file, qrels_file = data / "locomo10_turns.jsonl", data / "locomo10_qrels.jsonl"
    for f in (turns_file, qrels_file):
        if not f.exists():
            raise BenchDataError(
                f"{f} not found: --data is the LoCoMo directory with locomo10_turns.jsonl and locomo10_qrels.jsonl"
            )
    convs = set(SPLITS[split])
    try:
        turns = [t for t in map(json.loads, turns_file.read_text().splitlines()) if t["sample_id"] in convs]
        qs = [q for q in map(json.loads, qrels_file.read_text().splitlines()) if q["sample_id"] in convs and q["gold_dia_ids"]]
    except (ValueError, KeyError) as exc:
        raise BenchDataError(f"not LoCoMo data: {type(exc).__name__}: {exc}") from exc
    if not turns or not qs:
        raise BenchDataError(f"no turns or questions of the {split} split ({', '.join(sorted(convs))}) in {data}")
    return turns, qs


def unit_text(t: dict[str, Any]) -> str:
    caption = t.get("blip_caption")
    return f"{t['speaker']}: {t['text']}" + (f" [shares {caption}]" if caption else "")


class BM25:
    def __init__(self, docs: list[tuple[str, str]], k1: float = 1.2, b: float = 0.75):
        from memstream.projections import tokenize

        self.tokenize = tokenize
        self.ids = [i for i, _ in docs]
        self.tfs = [Counter(tokenize(text)) for _, text in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lens) / max(1, len(self.lens))
        df = Counter(tok for tf in self.tfs for tok in tf)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[str]:
        terms = [t for t in set(self.tokenize(query)) if t in self.idf]
        scores = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            for t in terms:
                f = tf.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.lens[i] / self.avg))
            if s > 0:
                scores.append((s, i))
        scores.sort(reverse=True)
        return [self.ids[i] for _, i in scores[:k]]


def _metrics(rows: list[tuple[dict[str, Any], list[str]]]) -> dict[str, Any]:
    """Recall_any/all@5/@10, NDCG@10 per category and for 1-4 and 1-5 (in %)."""

    def score(subset: list[tuple[dict[str, Any], list[str]]]) -> dict[str, float]:
        n = len(subset)
        if not n:
            return {"n": 0}
        out: dict[str, float] = {"n": n}
        for k in (5, 10):
            out[f"any@{k}"] = round(100 * sum(bool(set(q["gold_dia_ids"]) & set(got[:k])) for q, got in subset) / n, 1)
            out[f"all@{k}"] = round(100 * sum(set(q["gold_dia_ids"]) <= set(got[:k]) for q, got in subset) / n, 1)
        ndcg = 0.0
        for q, got in subset:
            gold = set(q["gold_dia_ids"])
            dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(got[:10]) if d in gold)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
            ndcg += dcg / idcg
        out["ndcg@10"] = round(100 * ndcg / n, 1)
        return out

    result: dict[str, Any] = {"cats_1_4": score([r for r in rows if r[0]["category"] != 5]), "cats_1_5": score(rows)}
    result["per_category"] = {f"{c} {name}": score([r for r in rows if r[0]["category"] == c]) for c, name in CATEGORIES.items()}
    return result


def _tokens(texts: list[str]) -> int:
    from memstream.text import prompt_tokens

    return sum(prompt_tokens(t) for t in texts)


def parse_options(text: str) -> dict[str, Any]:
    """``"a=1,b=true"`` -> ``{"a": 1, "b": True}`` (ints, ``true``/``false``, else text);
    ``BenchDataError`` for an item without ``=``. The projection validates the names."""
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BenchDataError(f"--compare takes OPTION=VALUE[,...], got {item!r}")
        v: Any = value.strip()
        if v.lower() in ("true", "false"):
            v = v.lower() == "true"
        else:
            try:
                v = int(v)
            except ValueError:
                pass
        out[name.strip()] = v
    return out


def paired(
    rows_a: list[tuple[dict[str, Any], list[str]]], rows_b: list[tuple[dict[str, Any], list[str]]], k: int = 10
) -> dict[str, Any]:
    """Per question, b against a: questions b gets and a misses (wins), the reverse
    (losses), and the two-sided sign test's p, for any@k and all@k, on categories 1-4 and
    per category."""

    def hit(q: dict[str, Any], got: list[str], metric: str) -> bool:
        gold = set(q["gold_dia_ids"])
        return bool(gold & set(got[:k])) if metric == "any" else gold <= set(got[:k])

    groups = {"cats_1_4": lambda c: c != 5, **{f"{c} {n}": (lambda c0: lambda c: c == c0)(c) for c, n in CATEGORIES.items()}}
    out: dict[str, Any] = {}
    for group, keep in groups.items():
        for metric in ("any", "all"):
            wins = losses = 0
            for (q, a), (_, b) in zip(rows_a, rows_b):
                if keep(q["category"]):
                    ha, hb = hit(q, a, metric), hit(q, b, metric)
                    wins += hb and not ha
                    losses += ha and not hb
            out.setdefault(group, {})[f"{metric}@{k}"] = {"wins": wins, "losses": losses, "p": round(sign_test(wins, losses), 4)}
    return out


def _question_key(q: dict[str, Any]) -> str:
    return f"{q['sample_id']}|{q['question']}"


def paired_runs(a: dict[str, Any], b: dict[str, Any], data: str | Path, k: int = 10) -> dict[str, Any]:
    """``paired`` over two results of ``locomo`` on the same split (their ``retrieved``):
    b against a, per question (``memstream bench locomo --json`` twice, then this)."""
    if a.get("split") != b.get("split"):
        raise BenchDataError(f"runs of different splits: {a.get('split')} and {b.get('split')}")
    _, questions = load(Path(data), a["split"])
    ra, rb = a["retrieved"], b["retrieved"]
    rows_a = [(q, list(ra.get(_question_key(q), []))) for q in questions]
    rows_b = [(q, list(rb.get(_question_key(q), []))) for q in questions]
    return paired(rows_a, rows_b, k)


def locomo(
    data: str | Path, split: str = "dev", embedder: str = "onnx-minilm", k: int = 10, compare: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The benchmark. With ``compare`` (turns projection options), a second version of the
    turns projection (v2, with those options) is rebuilt from the same events beside v1
    (the default options) by its own consumer group, readers are switched to it, and the
    same questions are asked again: both are reported, and compared per question."""
    import numpy as np

    from memstream.projections import TurnsProjection, configured_embedder
    from memstream.query import ask
    from memstream.workers import Consumer, Pipeline, PipelineConfig

    if compare is not None:
        try:
            TurnsProjection.validate_options(compare)
        except ValueError as exc:
            raise BenchDataError(str(exc)) from exc

    if split not in SPLITS:
        raise BenchDataError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    turns, questions = load(Path(data), split)
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-locomo-"))
    server = ValkeyProcess(root / "valkey").start()
    out: dict[str, Any] = {
        "benchmark": "locomo",
        "split": split,
        "conversations": list(SPLITS[split]),
        "embedder": embedder,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "unit": "dialog turn; indexed text: '[date] User: <speaker>: <text>' + the start of the previous turn",
        "query": "question verbatim",
        "targets": TARGETS,
    }
    try:
        settings = Settings.load(home=str(root / "home"), redis_url=server.url, autostart=False, embedder=embedder)
        client = redis_client(server.url, timeout=60)
        log = EventLog(client, settings.stream_prefix, settings.shards)
        pipeline = Pipeline(settings, log, PipelineConfig(embedder=embedder, consumer="bench"))
        pipeline.queries.start()
        event_to_dia: dict[str, str] = {}
        events = []
        seq: Counter[tuple[Any, Any]] = Counter()
        for t in turns:
            key = (t["sample_id"], t["session"])
            seq[key] += 1
            eid = new_event_id()
            event_to_dia[eid] = t["dia_id"]
            events.append(
                TurnRecorded(
                    id=eid,
                    occurred_at=_when(t["session_date_time"]) + timedelta(seconds=seq[key]),
                    scope=Scope(
                        tenant="bench", agent=t["sample_id"], session_id=f"{t['sample_id']}-s{t['session']}", app="bench"
                    ),
                    turn_index=seq[key],
                    user_text=unit_text(t),
                    assistant_text="",
                    author=t["speaker"],
                )
            )
        started = time.perf_counter()
        for i in range(0, len(events), 500):
            log.append(events[i : i + 500])
        pipeline.drain()
        out["index"] = {
            "turns": len(events),
            "points": pipeline.store.count("turns"),
            "build_s": round(time.perf_counter() - started, 1),
        }

        def memstream_top(q: dict[str, Any]) -> tuple[list[str], list[str], float]:
            request = {
                "op": "search",
                "tenant": "bench",
                "agent": q["sample_id"],
                "scope": "current",
                "query": q["question"],
                "k": k,
                "kind": "turns",
            }
            t0 = time.perf_counter()
            answer = ask(client, settings.stream_prefix, request, timeout=30)
            took = (time.perf_counter() - t0) * 1000
            if "error" in answer:
                raise RuntimeError(f"search failed: {answer['error']}")
            results = answer["results"]
            return [event_to_dia.get(r["id"], "?") for r in results], [r["text"] for r in results], took

        def run_questions() -> tuple[list[tuple[dict[str, Any], list[str]]], dict[str, Any]]:
            for q in questions[:10]:  # warm the path
                memstream_top(q)
            rows, latencies, tokens5, tokens10 = [], [], [], []
            for q in questions:
                dia, texts, took = memstream_top(q)
                rows.append((q, dia))
                latencies.append(took)
                tokens5.append(_tokens(texts[:5]))
                tokens10.append(_tokens(texts[:10]))
            lat = sorted(latencies)
            return rows, {
                "metrics": _metrics(rows),
                "latency_ms": {"p50": round(statistics.median(lat), 1), "p95": round(percentile(lat, 0.95), 1), "n": len(lat)},
                "injected_tokens": {
                    "at_5_mean": round(statistics.mean(tokens5), 1),
                    "at_10_mean": round(statistics.mean(tokens10), 1),
                },
            }

        rows, v1 = run_questions()
        out["memstream"] = v1["metrics"]
        # per question, the dia ids memstream returned: two runs (e.g. two embedders) are
        # compared question by question with ``paired_runs``
        out["retrieved"] = {_question_key(q): dia for q, dia in rows}
        out["latency_ms"] = v1["latency_ms"]
        out["injected_tokens"] = v1["injected_tokens"]
        if compare is not None:
            v2 = TurnsProjection(
                pipeline.store,
                pipeline.embedder,
                client,
                settings.stream_prefix,
                options=compare,
                version=TurnsProjection.version + 1,
            )
            started = time.perf_counter()
            Consumer(log, v2, "bench", max_text_bytes=settings.max_text_bytes).drain()
            build_s = round(time.perf_counter() - started, 1)
            pipeline.store.set_active_version("turns", v2.version)  # readers switch to v2
            rows2, second = run_questions()
            out["compare"] = {
                "v1": {
                    "version": TurnsProjection.version,
                    "options": dict(TurnsProjection.OPTIONS),
                    "collection": pipeline.projection("turns").collection,
                    "build_s": out["index"]["build_s"],
                    "points": pipeline.store.count(pipeline.projection("turns").collection),
                    **v1,
                },
                "v2": {
                    "version": v2.version,
                    "options": v2.options,
                    "collection": v2.collection,
                    "build_s": build_s,
                    "points": pipeline.store.count(v2.collection),
                    **second,
                },
                "paired": paired(rows, rows2, k),
            }
        pipeline.queries.stop()
        pipeline.stop()

        # baselines: the same questions, the plain unit texts, one index per conversation
        model = configured_embedder(settings, embedder)
        by_conv: dict[str, list[dict[str, Any]]] = {}
        for t in turns:
            by_conv.setdefault(t["sample_id"], []).append(t)
        bm25 = {c: BM25([(t["dia_id"], unit_text(t)) for t in ts]) for c, ts in by_conv.items()}
        vectors = {
            c: (np.asarray(model.embed([unit_text(t) for t in ts]), dtype=np.float32), [t["dia_id"] for t in ts])
            for c, ts in by_conv.items()
        }

        def dense_top(q: dict[str, Any]) -> list[str]:
            matrix, ids = vectors[q["sample_id"]]
            v = np.asarray(model.embed([q["question"]])[0], dtype=np.float32)
            sims = matrix @ v / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(v) + 1e-9)
            return [ids[i] for i in np.argsort(-sims)[:k]]

        baselines: dict[str, Callable[[dict[str, Any]], list[str]]] = {
            "bm25": lambda q: bm25[q["sample_id"]].top(q["question"], k),
            "dense": dense_top,
        }
        out["baselines"] = {name: _metrics([(q, fn(q)) for q in questions]) for name, fn in baselines.items()}
        ours = out["memstream"]["cats_1_4"]
        out["ratios"] = {
            name: {
                m: round(ours[m] / b["cats_1_4"][m], 3) if b["cats_1_4"].get(m) else None for m in ("any@10", "all@10", "ndcg@10")
            }
            for name, b in out["baselines"].items()
        }
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    ours = out["memstream"]["cats_1_4"]
    out["verdict"] = {
        "any@10": ours["any@10"] >= TARGETS["any@10"],
        "all@10": ours["all@10"] >= TARGETS["all@10"],
        "p95_ms": out["latency_ms"]["p95"] <= TARGETS["p95_ms"],
        "note": "targets apply to the test split" if split != "test" else "",
    }
    return out


def format_locomo(r: dict[str, Any]) -> str:
    def row(name: str, m: dict[str, Any]) -> str:
        return (
            f"  {name:<24} n={m['n']:>5}  any@5 {m['any@5']:>5}  any@10 {m['any@10']:>5}  "
            f"all@5 {m['all@5']:>5}  all@10 {m['all@10']:>5}  ndcg@10 {m['ndcg@10']:>5}"
        )

    lines = [
        f"memstream bench locomo  ({r['date']}, split {r['split']}, embedder {r['embedder']}, "
        f"{r['index']['turns']} turns indexed in {r['index']['build_s']} s)",
        row("memstream cats 1-4", r["memstream"]["cats_1_4"]),
        row("memstream cats 1-5", r["memstream"]["cats_1_5"]),
    ]
    for name, m in r["memstream"]["per_category"].items():
        if m.get("n"):
            lines.append(row(f"  cat {name}", m))
    for name, b in r["baselines"].items():
        lines.append(row(f"{name} cats 1-4", b["cats_1_4"]))
    for name, ratio in r["ratios"].items():
        lines.append(f"  ratio to {name}: " + ", ".join(f"{m} {v}" for m, v in ratio.items()))
    lines.append(
        f"  query latency p50 {r['latency_ms']['p50']} ms p95 {r['latency_ms']['p95']} ms; "
        f"injected tokens at 5: {r['injected_tokens']['at_5_mean']}, at 10: {r['injected_tokens']['at_10_mean']}"
    )
    if "compare" in r:
        lines += format_compare(r["compare"])
    v = r["verdict"]
    lines.append(
        "  targets (test split: any@10 >= 85, all@10 >= 70, p95 <= 50 ms): "
        + ", ".join(f"{m} {'met' if ok else 'MISSED'}" for m, ok in v.items() if m != "note")
        + (f" ({v['note']})" if v["note"] else "")
    )
    return "\n".join(lines)


def format_compare(c: dict[str, Any]) -> list[str]:
    """v1 and v2 of the turns projection side by side, and their per-question comparison."""
    lines = ["", "turns projection, v1 against v2 rebuilt from the same events (readers switched to v2):"]
    for v in ("v1", "v2"):
        options = ", ".join(f"{k}={val}" for k, val in c[v]["options"].items())
        lines.append(f"  {v} ({c[v]['collection']}, {c[v]['points']} points, built in {c[v]['build_s']} s): {options}")
    metrics = ("any@10", "all@10", "ndcg@10")
    lines.append(f"  {'':<22}" + "".join(f"{v + ' ' + m:>14}" for m in metrics for v in ("v1", "v2")) + f"{'all@10 +/-  p':>18}")
    groups = ["cats_1_4", "cats_1_5"] + list(c["v1"]["metrics"]["per_category"])
    for g in groups:
        m1 = c["v1"]["metrics"].get(g) or c["v1"]["metrics"]["per_category"][g]
        m2 = c["v2"]["metrics"].get(g) or c["v2"]["metrics"]["per_category"][g]
        if not m1.get("n"):
            continue
        test = c["paired"].get(g, {}).get("all@10")
        sign = f"+{test['wins']} -{test['losses']}  {test['p']:.3f}" if test else ""
        lines.append(
            f"  {g + ' (n=' + str(m1['n']) + ')':<22}"
            + "".join(f"{mm[m]:>14}" for m in metrics for mm in (m1, m2))
            + f"{sign:>18}"
        )
    for v in ("v1", "v2"):
        lat, tok = c[v]["latency_ms"], c[v]["injected_tokens"]
        lines.append(f"  {v}: query p50 {lat['p50']} ms, p95 {lat['p95']} ms; injected tokens at 10: {tok['at_10_mean']}")
    return lines


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench locomo``'s arguments."""
    parser.add_argument("--data", default="", help="the LoCoMo directory (locomo10_turns.jsonl, locomo10_qrels.jsonl): required")
    parser.add_argument("--split", default="dev", choices=["dev", "test", "all"], help="conversations to run (default dev)")
    parser.add_argument("--embedder", default="onnx-minilm", help="embedder of the benchmark's pipeline (default onnx-minilm)")
    parser.add_argument(
        "--compare",
        default=None,
        metavar="OPTION=VALUE[,...]",
        help="also rebuild the turns projection as v2 with these options from the same "
        "events and report v1 and v2 side by side (an empty value: v2 with the defaults)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    if not args.data:
        raise BenchError("bench locomo needs --data DIR (the LoCoMo directory: locomo10_turns.jsonl, locomo10_qrels.jsonl)")
    try:
        compare = parse_options(args.compare) if args.compare is not None else None
        result = locomo(args.data, split=args.split, embedder=args.embedder or "onnx-minilm", compare=compare)
    except BenchDataError as exc:
        raise BenchError(str(exc)) from exc
    return show(args, result, format_locomo(result))
