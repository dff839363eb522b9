"""The dashboard in a real browser: headless Chromium (Debian's ``chromium`` package;
``.ci/run`` installs it) loads ``/`` of a running service (``memstream up``, the hash
embedder) while turns are appended through the producers' writer and searches answered,
and its charts and tables show the numbers ``/api/summary`` and ``/metrics`` report;
once the traffic stops, the page (refreshing itself) shows exactly what ``/metrics`` does.
A screenshot of the page is kept in the test's directory, and copied to
``$MEMSTREAM_SCREENSHOT_DIR`` when that is set."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import redis
from browser_support import CHROMIUM, MARKS, POLL_S, get_text, number
from metrics_support import samples, value
from service_support import ms
from writepath import wait_for

from memstream.bench.dashboard import RENDERED, Traffic
from memstream.bench.testbed import Chromium
from memstream.core.runfile import read_run_file
from memstream.core.settings import Settings
from memstream.projections import group_of
from memstream.workers.deadletters import DeadLetters

pytestmark = MARKS

# every number the page shows: [metric, group or null, unformatted value]
SHOWN = (
    "Array.from(document.querySelectorAll('[data-metric]'))"
    ".map(e => [e.dataset.metric, e.dataset.group === undefined ? null : e.dataset.group, e.dataset.value])"
)


class Page:
    """The page in a tab: what it shows, by (metric, group)."""

    def __init__(self, tab) -> None:
        self.tab = tab

    def shown(self) -> tuple[float, dict[tuple[str, str | None], str]]:
        """The sample time the page shows and its numbers, read together."""
        sampled, rows = self.tab.evaluate(f"[document.body.dataset.sampledAt, {SHOWN}]")
        return float(sampled), {(m, g): v for m, g, v in rows}

    def consistent_with_summary(self, base: str) -> tuple[dict, dict]:
        """The page's numbers and the summary of the same sample (the page refreshes every
        2 s and the sampler samples every 2 s: read both until they agree on the sample)."""
        for _ in range(50):
            sampled, shown = self.shown()
            summary = json.loads(get_text(base + "/api/summary"))
            if summary["sampled_at"] == sampled:
                return shown, summary
            time.sleep(0.1)
        raise AssertionError("the page never showed the summary's newest sample")


@pytest.fixture
def service(tmp_path):
    home = tmp_path / "home"
    ms(home, "up", "--detach")
    info = read_run_file(home / "run" / "service.json")
    assert info and info["metrics"]
    yield home, info
    ms(home, "down", check=False)


def _check_against_summary(shown: dict, summary: dict) -> None:
    """Every figure of the summary is on the page, in its table or chart, with its value."""
    for row in summary["projections"]:
        g = row["group"]
        assert shown[("state", g)] == row["state"]
        for figure in (
            "lag_entries",
            "lag_seconds",
            "pending",
            "dead_letters",
            "consumers",
            "applied_per_s",
            "freshness_p50",
            "freshness_p95",
        ):
            assert number(shown[(figure, g)]) == row[figure], (figure, g)
        if row["replay"]:
            assert number(shown[("replay_fraction", g)]) == row["replay"]["fraction"]
    for s in summary["streams"]:
        assert number(shown[("stream_entries", s["stream"])]) == s["entries"]
    for etype, figures in summary["events_in"]["by_type"].items():
        assert number(shown[("events_total", etype)]) == figures["total"]
        assert number(shown[("events_per_s", etype)]) == figures["per_s"]
    assert number(shown[("events_in_per_s", None)]) == summary["events_in"]["per_s"]
    for outcome, figures in summary["queries"]["outcomes"].items():
        assert number(shown[("queries_total", outcome)]) == figures["total"]
    for op, figures in summary["queries"]["latency"].items():
        assert number(shown[("query_p95", op)]) == figures["p95"]
    assert number(shown[("redis_up", None)]) == (1 if summary["redis_up"] else 0)
    # the charts: each line's newest point, as the legend shows it
    history = summary["history"]
    for figure in ("lag_entries", "lag_seconds", "dead_letters", "freshness_p95", "events_out"):
        for g, values in history[figure].items():
            newest = next((v for v in reversed(values) if v is not None), None)
            assert number(shown[(f"chart:{figure}", g)]) == newest, (figure, g)
    newest_in = next((v for v in reversed(history["events_in"]) if v is not None), None)
    assert number(shown[("chart:events_in", None)]) == newest_in


def test_the_dashboard_shows_in_a_browser_the_numbers_the_service_reports(service, tmp_path):
    home, info = service
    base = info["metrics"][: -len("/metrics")]
    settings = Settings.load(home=str(home), autostart=False, embedder="hash")
    traffic = Traffic(settings, rate=10.0).start()
    try:
        client = redis.Redis.from_url(info["url"])
        DeadLetters(client, "memstream").add(group_of("facts"), "memstream:events:0", "1-1", {b"data": b"\xff"}, "malformed", 1)
        client.close()
        ms(home, "replay", "turns", "--detach", "--activate", "manual")
        wait_for(
            lambda: (
                (s := json.loads(get_text(base + "/api/summary")))["events_in"]["per_s"]
                and s["queries"]["latency"]
                and len(s["history"]["t"]) >= 4
            ),
            what="the service to show traffic",
            timeout=60,
            every=POLL_S,
        )

        with Chromium(CHROMIUM, width=1400, height=1000) as browser:
            tab = browser.open()
            tab.navigate(base + "/")
            rendered = float(tab.wait_for(RENDERED, timeout=60))
            assert rendered > 0
            page = Page(tab)

            # under traffic: the page shows the summary's sample, and /metrics read after it
            shown, summary = page.consistent_with_summary(base)
            after = get_text(info["metrics"])
            _check_against_summary(shown, summary)
            assert summary["events_in"]["per_s"] > 0 and number(shown[("events_in_per_s", None)]) > 0
            assert tab.evaluate("document.querySelectorAll('#chart-events path.line').length") >= 2
            assert tab.evaluate("document.querySelectorAll('#projections tbody tr').length") == len(summary["projections"])
            for row in summary["projections"]:
                g = row["group"]
                assert row["state"] == next(
                    s.labels["state"] for s in samples(after, "memstream_projection_state", group=g) if s.value == 1
                )
                assert row["consumers"] == value(after, "memstream_projection_consumers", group=g)
            stream = summary["streams"][0]["stream"]
            assert summary["streams"][0]["entries"] <= value(after, "memstream_stream_entries", stream=stream)
            turns_v2 = next(r for r in summary["projections"] if r["state"] == "building")
            assert turns_v2["replay"]["total"] > 0

            # the traffic stops: the page, refreshing itself, comes to show what /metrics does
            assert traffic.stop(20.0), "the writer did not ship every turn"
            appended = traffic.appended

            def caught_up() -> str | None:
                text = get_text(info["metrics"])
                groups = {s.labels["group"] for s in samples(text, "memstream_projection_lag_entries")}
                done = all(
                    value(text, "memstream_projection_lag_entries", group=g) == 0
                    and value(text, "memstream_projection_pending_entries", group=g) == 0
                    for g in groups
                )
                return text if done and value(text, "memstream_stream_entries", stream=stream) == appended else None

            wait_for(caught_up, what="every version to apply every turn", timeout=60, every=POLL_S)
            quiet = time.time()
            time.sleep(0.5)
            wait_for(
                lambda: page.shown()[0] > quiet + 0.1,
                timeout=30,
                what="the page to show a sample after the traffic",
                every=POLL_S,
            )
            shown, summary = page.consistent_with_summary(base)
            text = get_text(info["metrics"])
            _check_against_summary(shown, summary)
            assert number(shown[("stream_entries", stream)]) == value(text, "memstream_stream_entries", stream=stream) == appended
            assert (
                number(shown[("events_total", "turn.recorded")])
                == value(text, "memstream_events_appended_total", type="turn.recorded")
                == appended
            )
            for row in summary["projections"]:
                g = row["group"]
                for figure, metric in (
                    ("lag_entries", "memstream_projection_lag_entries"),
                    ("pending", "memstream_projection_pending_entries"),
                    ("dead_letters", "memstream_projection_dead_letters"),
                    ("consumers", "memstream_projection_consumers"),
                ):
                    assert number(shown[(figure, g)]) == value(text, metric, group=g), (figure, g)
            assert number(shown[("dead_letters", group_of("facts"))]) == 1
            assert number(shown[("dead_letters_total", None)]) == 1
            assert number(shown[("queries_total", "answered")]) == value(text, "memstream_queries_total", outcome="answered") >= 1
            v2 = next(r for r in summary["projections"] if r["state"] == "building")["group"]
            assert (
                number(shown[("replay_fraction", v2)])
                == 1.0
                == value(text, "memstream_replay_applied_entries", group=v2)
                / value(text, "memstream_replay_log_entries", group=v2)
            )
            fleet_empty = tab.evaluate("!document.getElementById('fleet-empty').hidden")
            if summary["fleet"] is None:  # no agent reports in this registry
                assert fleet_empty and "no agent reports yet" in tab.evaluate("document.body.innerText")
            else:
                assert not fleet_empty
                assert number(shown[("agents_active", None)]) == summary["fleet"]["agents_active"]
            shot = tab.screenshot(tmp_path / "dashboard.png")
    finally:
        traffic.stop(5.0)
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("MEMSTREAM_SCREENSHOT_DIR"):
        target = Path(os.environ["MEMSTREAM_SCREENSHOT_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / "dashboard.png")


FORMATTED = [  # (formatter, value, what a person reads)
    ("seconds", 0, "0 s"),
    ("seconds", 0.0005, "0.5 ms"),
    ("seconds", 0.0025, "2.5 ms"),
    ("seconds", 0.005, "5 ms"),
    ("seconds", 0.0075, "7.5 ms"),
    ("seconds", 0.045, "45 ms"),
    ("seconds", 2.5, "2.5 s"),
    ("seconds", 5, "5 s"),
    ("seconds", 200, "3 min 20 s"),
    ("seconds", 300, "5 min"),  # no "0 s" on a round figure (an axis's ticks)
    ("seconds", 2000, "33 min 20 s"),
    ("seconds", 3600, "1 h"),
    ("seconds", 5400, "1 h 30 min"),
    ("seconds", None, "—"),
    ("rate", 0, "0 /s"),
    ("rate", 2.5, "2.5 /s"),
    ("rate", 5, "5 /s"),
    ("rate", 22.4, "22 /s"),
    ("rate", 12500, "12.5k /s"),
    ("count", 1234567, "1,234,567"),
    ("bytes", 1536, "1.5 KiB"),
    ("percent", 0.5, "50%"),
]


def test_the_page_formats_numbers_for_people(service):
    _, info = service
    with Chromium(CHROMIUM) as browser:
        tab = browser.open(info["metrics"][: -len("/metrics")] + "/")
        tab.wait_for("window.memstreamFormat", timeout=30)
        shown = tab.evaluate(f"{json.dumps(FORMATTED)}.map(([f, v]) => window.memstreamFormat[f](v))")
    assert shown == [text for _, _, text in FORMATTED]
