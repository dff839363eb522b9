"""The dashboard's headline tiles in a real browser, in the states where they used to disagree
with the streams and the versions: a replay (a building version shown apart, then the
retired one folded away), a forget and an archive. In each state, once it has settled (no
traffic, every version caught up), every tile shows what ``/api/summary``'s headline says,
and the headline what ``/metrics`` reports: the active versions only, the entries in the
streams, what forget removed from them. Also: no axis label is clipped, and at 1400×1400
the tables below the charts are on screen. A screenshot after the replay is kept in the
test's directory (and copied to ``$MEMSTREAM_SCREENSHOT_DIR`` when that is set)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

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

pytestmark = MARKS

SHOWN = (
    "Array.from(document.querySelectorAll('[data-metric]'))"
    ".map(e => [e.dataset.metric, e.dataset.group === undefined ? null : e.dataset.group, e.dataset.value, e.textContent])"
)
# every tick label of every chart: [chart, text, its box's left and right, the chart's width]
TICKS = (
    "Array.from(document.querySelectorAll('figure.chart svg')).flatMap(svg => {"
    " const width = svg.viewBox.baseVal.width;"
    " return Array.from(svg.querySelectorAll('text.tick')).map(t => {"
    "  const b = t.getBBox(); return [svg.parentNode.id, t.textContent, b.x, b.x + b.width, width]; }); })"
)


def _states(text: str) -> dict[str, str]:
    return {s.labels["group"]: s.labels["state"] for s in samples(text, "memstream_projection_state") if s.value == 1}


def _settled(metrics_url: str, appended: int | None = None) -> str | None:
    """/metrics when every running version has applied every entry (and the streams hold
    ``appended`` entries when given), else None."""
    text = get_text(metrics_url)
    running = {g for g, state in _states(text).items() if state in ("active", "building")}
    if not running:
        return None
    for g in running:
        if value(text, "memstream_projection_lag_entries", group=g) != 0:
            return None
        if value(text, "memstream_projection_pending_entries", group=g) != 0:
            return None
    if appended is not None and sum(s.value for s in samples(text, "memstream_stream_entries")) != appended:
        return None
    return text


class Dashboard:
    """The page in a tab, the service's summary and its metrics."""

    def __init__(self, tab, base: str) -> None:
        self.tab, self.base, self.metrics_url = tab, base, base + "/metrics"

    def shown(self) -> tuple[float, dict[tuple[str, str | None], tuple[str, str]]]:
        sampled, rows = self.tab.evaluate(f"[document.body.dataset.sampledAt, {SHOWN}]")
        return float(sampled), {(m, g): (v, text) for m, g, v, text in rows}

    def settled(self) -> tuple[dict, dict, str]:
        """Once the service has settled: what the page shows, the summary of the same sample
        (taken after it settled) and /metrics read after that sample."""
        text = wait_for(lambda: _settled(self.metrics_url), timeout=120, what="every version to catch up", every=POLL_S)
        since = time.time()
        wait_for(lambda: self.shown()[0] > since + 0.1, timeout=30, what="the page to show a sample taken since", every=POLL_S)
        # the page and the summary each move on every 2 s: on a busy machine several looks may
        # fall between the page's refresh and the next sample, so look until a deadline
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            sampled, shown = self.shown()
            summary = json.loads(get_text(self.base + "/api/summary"))
            if summary["sampled_at"] == sampled:
                text = get_text(self.metrics_url)
                return shown, summary, text
            time.sleep(0.05)
        raise AssertionError("the page never showed the summary's newest sample")

    def check_tiles(self) -> tuple[dict, dict, str]:
        """Each tile against the summary's headline, and the headline against /metrics."""
        shown, summary, text = self.settled()
        h = summary["headline"]
        states = _states(text)
        active = {g for g, state in states.items() if state == "active"}
        building = {g for g, state in states.items() if state == "building"}
        rows = {r["group"]: r for r in summary["projections"]}
        # the headline against /metrics: the active versions, the streams, forget's count
        assert set(h["serving"]) == active
        assert h["log_entries"] == sum(s.value for s in samples(text, "memstream_stream_entries"))
        assert h["forgotten"] == value(text, "memstream_forgotten_total", place="stream_entries")
        assert h["lag_entries"]["value"] == max(value(text, "memstream_projection_lag_entries", group=g) for g in active) == 0
        assert h["lag_entries"]["group"] in active and h["lag_seconds"]["group"] in active
        assert h["dead_letters"] == sum(s.value for s in samples(text, "memstream_projection_dead_letters"))
        assert {b["group"] for b in h["building"]} == building
        for b in h["building"]:
            done = value(text, "memstream_replay_applied_entries", group=b["group"])
            assert b["fraction"] == done / value(text, "memstream_replay_log_entries", group=b["group"]) == 1.0
        # rates: per active version, never a sum over versions
        assert h["applied"]["group"] in active and h["applied"]["versions"] == len(active)
        assert h["applied"]["per_s"] == min(rows[g]["applied_per_s"] for g in active)
        if h["freshness_p95"] is not None:
            assert h["freshness_p95"]["group"] in active
            assert h["freshness_p95"]["value"] == max(
                rows[g]["freshness_p95"] for g in active if rows[g]["freshness_p95"] is not None
            )

        # the page against the headline
        def tile(name: str) -> float | None:
            return number(shown[(name, None)][0])

        assert tile("events_in_per_s") == h["events_in_per_s"] == summary["events_in"]["per_s"]
        assert tile("log_entries") == h["log_entries"]
        assert (tile("forgotten") if ("forgotten", None) in shown else None) == h["forgotten"]
        assert tile("events_out_per_s") == h["applied"]["per_s"]
        assert shown[("events_out_group", None)][0] == h["applied"]["group"]
        assert tile("max_lag_entries") == h["lag_entries"]["value"]
        assert tile("max_lag_seconds") == h["lag_seconds"]["value"]
        assert tile("max_freshness_p95") == (h["freshness_p95"]["value"] if h["freshness_p95"] else None)
        assert tile("dead_letters_total") == h["dead_letters"]
        if h["building"]:
            (build,) = h["building"]
            assert tile("build_fraction") == build["fraction"]
            assert shown[("build_group", None)][0] == build["group"]
            assert number(shown[("build_freshness_p95", build["group"])][0]) == build["freshness_p95"]
        else:
            assert tile("build_fraction") is None and shown[("build_fraction", None)][1] == "none"
        # the chart's legend reads the input rate the tile does (its points to 4 significant digits)
        legend, rate = number(shown[("chart:events_in", None)][0]), h["events_in_per_s"]
        assert legend == (None if rate is None else float(f"{rate:.4g}"))
        return shown, summary, text


def test_the_tiles_tell_what_serves_now_after_a_replay_a_forget_and_an_archive(tmp_path):
    home = tmp_path / "home"
    ms(home, "up", "--detach")
    try:
        info = read_run_file(home / "run" / "service.json")
        assert info and info["metrics"]
        base = info["metrics"][: -len("/metrics")]
        settings = Settings.load(home=str(home), autostart=False, embedder="hash")
        traffic = Traffic(settings, rate=40.0, searches=False).start()
        wait_for(lambda: traffic.appended >= 60, what="60 turns appended", timeout=60, every=POLL_S)
        assert traffic.stop(20.0), "the writer did not ship every turn"
        appended = traffic.appended
        wait_for(lambda: _settled(info["metrics"], appended), timeout=120, what="every version to apply every turn", every=POLL_S)

        # a replay of turns, activated by hand: the build is shown apart while it waits
        ms(home, "replay", "turns", "--detach", "--activate", "manual")
        v1, v2 = group_of("turns"), "turns.v2"
        wait_for(
            lambda: _states(get_text(info["metrics"])).get(v2) == "building", timeout=120, what="turns.v2 to build", every=POLL_S
        )

        with Chromium(CHROMIUM, width=1400, height=1400) as browser:
            tab = browser.open()
            tab.navigate(base + "/")
            assert float(tab.wait_for(RENDERED, timeout=60)) > 0
            page = Dashboard(tab, base)

            shown, summary, _ = page.check_tiles()
            building_shot = tab.screenshot(tmp_path / "dashboard-building.png", full_page=False)
            assert [b["group"] for b in summary["headline"]["building"]] == [v2]
            assert v2 not in summary["headline"]["serving"] and v1 in summary["headline"]["serving"]
            assert summary["headline"]["log_entries"] == appended

            # activated: the former version is retired, folded away in the table and the charts
            ms(home, "projections", "activate", "turns", "2")
            wait_for(
                lambda: _states(get_text(info["metrics"])).get(v1) == "retired",
                timeout=120,
                what="turns.v1 to retire",
                every=POLL_S,
            )
            shown, summary, _ = page.check_tiles()
            assert v2 in summary["headline"]["serving"] and v1 not in summary["headline"]["serving"]
            assert summary["headline"]["building"] == []
            assert tab.evaluate("document.getElementById('retired-toggle').dataset.retired") == "1"
            table_groups = (
                "Array.from(document.querySelectorAll('#projections tbody td[data-metric=state]')).map(e => e.dataset.group)"
            )
            legend_groups = "Array.from(document.querySelectorAll('.legend [data-group]')).map(e => e.dataset.group)"
            assert v1 not in tab.evaluate(table_groups) and v2 in tab.evaluate(table_groups)
            assert v1 not in tab.evaluate(legend_groups) and v2 in tab.evaluate(legend_groups)
            tab.evaluate("document.getElementById('retired-toggle').click()")
            assert v1 in tab.evaluate(table_groups) and v1 in tab.evaluate(legend_groups)
            tab.evaluate("document.getElementById('retired-toggle').click()")
            assert v1 not in tab.evaluate(table_groups)

            # at 1400×1400 the tables below the charts are on screen, and every axis label whole
            assert tab.evaluate("document.getElementById('streams-panel').getBoundingClientRect().top") < 1400
            assert tab.evaluate("window.scrollY") == 0
            for chart, text, left, right, width in tab.evaluate(TICKS):
                assert left >= 0 and right <= width, (chart, text, left, right, width)
            shot = tab.screenshot(tmp_path / "dashboard-after-replay.png", full_page=False)

            # a freshness axis up to 33 min 20 s: its labels fit (they were cut to "3 min 20 s")
            drawn = tab.evaluate(
                "(() => { const now = Date.now() / 1000;"
                " window.memstreamChart('chart-freshness', [now - 60, now], [{key: 'x', label: 'x', colour: '#000',"
                " values: [1500, 2000], metric: 'test', last: 2000}], window.memstreamFormat.seconds, {time: true});"
                f" return {TICKS}.filter(t => t[0] === 'chart-freshness'); }})()"
            )
            assert [text for _, text, *_ in drawn if ":" not in text] == ["0 s", "10 min", "20 min", "30 min", "40 min"]
            for chart, text, left, right, width in drawn:
                assert left >= 0 and right <= width, (chart, text, left, right, width)

            # forget: the stream loses entries, the tile says so and how many were forgotten
            forgotten = ms(home, "forget", "--match", "Deploy 7 of", "--json")
            assert json.loads(forgotten.stdout)["removed"]["stream_entries"] == 1, forgotten.stdout
            shown, summary, text = page.check_tiles()
            assert summary["headline"]["forgotten"] == 1
            assert summary["events_in"]["total"] > summary["headline"]["log_entries"]  # appended counts what forget removed

            # archive: the oldest entries leave the streams for the archive files
            client = redis.Redis.from_url(info["url"])
            stream = summary["streams"][0]["stream"]
            middle = client.xrange(stream, count=30)[-1][0].decode()
            client.close()
            ms(home, "archive", "--before", middle)
            wait_for(
                lambda: (
                    sum(s.value for s in samples(get_text(info["metrics"]), "memstream_stream_entries"))
                    < summary["headline"]["log_entries"]
                ),
                what="the archive to trim the stream",
                timeout=60,
                every=POLL_S,
            )
            shown, after, text = page.check_tiles()
            assert after["headline"]["log_entries"] < summary["headline"]["log_entries"]
    finally:
        ms(home, "down", check=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("MEMSTREAM_SCREENSHOT_DIR"):
        target = Path(os.environ["MEMSTREAM_SCREENSHOT_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / "dashboard-after-replay.png")
        shutil.copy(building_shot, target / "dashboard-building.png")
