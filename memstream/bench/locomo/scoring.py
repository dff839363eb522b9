"""How the locomo bench scores retrieval: recall of the evidence at k (any and all), the BM25
baseline, and two runs compared question by question (``paired``, ``paired_runs``)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from memstream.bench.locomo.data import CATEGORIES, BenchDataError, load
from memstream.bench.stats import sign_test


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


def recall_metrics(rows: list[tuple[dict[str, Any], list[str]]]) -> dict[str, Any]:
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


def count_tokens(texts: list[str]) -> int:
    from memstream.text import prompt_tokens

    return sum(prompt_tokens(t) for t in texts)


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


def question_key(q: dict[str, Any]) -> str:
    return f"{q['sample_id']}|{q['question']}"


def paired_runs(a: dict[str, Any], b: dict[str, Any], data: str | Path, k: int = 10) -> dict[str, Any]:
    """``paired`` over two results of ``locomo`` on the same split (their ``retrieved``):
    b against a, per question (``memstream bench locomo --json`` twice, then this)."""
    if a.get("split") != b.get("split"):
        raise BenchDataError(f"runs of different splits: {a.get('split')} and {b.get('split')}")
    _, questions = load(Path(data), a["split"])
    ra, rb = a["retrieved"], b["retrieved"]
    rows_a = [(q, list(ra.get(question_key(q), []))) for q in questions]
    rows_b = [(q, list(rb.get(question_key(q), []))) for q in questions]
    return paired(rows_a, rows_b, k)
