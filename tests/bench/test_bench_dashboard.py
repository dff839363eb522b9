"""``memstream bench dashboard`` end to end on a short run (a real service under traffic,
headless Chromium loading its page), and the browser driver it uses leaving nothing
behind. Timings are reported, never asserted."""

from __future__ import annotations

import os

import pytest

from memstream.bench.dashboard import dashboard_bench, format_dashboard
from memstream.bench.testbed import BrowserError, Chromium, find_chromium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(find_chromium() is None, reason="chromium is absent: `apt-get install chromium` (.ci/run does)"),
]


@pytest.mark.valkey
def test_bench_dashboard_loads_the_page_of_a_service_under_traffic_and_reports_the_first_render():
    result = dashboard_bench(loads=3, rate=5.0, warmup=3.0)
    render = result["render_ms"]
    assert len(render["all"]) == 3 and all(ms > 0 for ms in render["all"])
    assert render["min"] <= render["median"] <= render["max"]
    assert result["turns_appended"] > 0 and result["summary_bytes"] > 0 and result["history_points"] >= 1
    assert "first full render" in format_dashboard(result)


def test_the_browser_answers_reports_script_errors_and_leaves_no_process_or_profile_behind(tmp_path):
    with Chromium() as browser:
        tab = browser.open("data:text/html,<title>t</title><body data-rendered=12>")
        assert tab.wait_for("document.body.dataset.rendered", timeout=10) == "12"
        with pytest.raises(BrowserError, match="nope"):
            tab.evaluate("(() => { throw new Error('nope') })()")
        shot = tab.screenshot(tmp_path / "page.png")
        pid, profile = browser.proc.pid, browser._profile
    assert shot.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the browser's process group, renderers included, is gone
    assert not profile.exists()
