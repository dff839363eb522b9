"""memstream bench redaction: its figures hang together (no timings asserted)."""

from __future__ import annotations

import json

import pytest

from memstream.bench.redaction import _detect_secrets, format_redaction, redaction_bench


def test_the_benchmark_reports_recall_false_positives_and_speed(tmp_path):
    turns = tmp_path / "locomo10_turns.jsonl"
    turns.write_text("\n".join(json.dumps({"text": t}) for t in ["Hey Mel!", "I went hiking, the key was patience."]))
    r = redaction_bench(data=tmp_path, rounds=1, detect_secrets=False)
    row = r["detectors"]["memstream"]
    assert row["tuned"]["redacted"] >= row["tuned"]["secrets"] - 1 and row["tuned"]["secrets"] >= 600
    assert row["heldout"]["secrets"] >= 90 and row["heldout"]["recall"] >= 0.97
    assert row["ordinary"]["turns"] >= 5000 and row["ordinary"]["share"] <= 0.002
    assert row["digests_tuned"]["changed"] == row["digests_heldout"]["changed"] == 0
    assert row["locomo"] == {"turns": 2, "changed": 0, "share": 0.0}
    s = r["speed"]
    assert s["redact_texts_per_s"] > 0 and s["ship_events_per_s_redacting"] > 0 and s["ship_cost_ratio"] > 0
    text = format_redaction(r)
    assert "memstream" in text and "texts/s" in text and "held-out" in text


def test_detect_secrets_is_scored_as_a_line_redactor():
    pytest.importorskip("detect_secrets")
    ds = _detect_secrets()
    assert ds is not None
    out = ds(['hello\napi_key = "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"\nbye', "nothing here"])
    assert out == ["hello\n[REDACTED]\nbye", "nothing here"]


def test_a_baseline_redaction_file_is_scored_on_the_same_corpus():
    import memstream.text.redaction as current

    r = redaction_bench(rounds=1, detect_secrets=False, baseline=current.__file__)
    assert r["detectors"]["baseline redaction.py"] == r["detectors"]["memstream"]
    assert r["speed"]["ship_events_per_s_before"] > 0 and r["speed"]["ship_throughput_vs_before"] > 0
    assert "the baseline's" in format_redaction(r)
