"""Helpers of the tests that drive the dashboard in headless Chromium (Debian's ``chromium``
package; ``.ci/run`` installs it): their marks, reading a URL, a number the page shows, and
waiting for a state (never for a time)."""

from __future__ import annotations

import urllib.request

import pytest

from memstream.bench.testbed import find_chromium

CHROMIUM = find_chromium()
# a real service (Valkey) and a browser: slow by nature; skipped where Chromium is absent
MARKS = [
    pytest.mark.valkey,
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is absent: `apt-get install chromium` (.ci/run does)"),
]


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


def number(shown: str | None) -> float | None:
    """A figure as the page carries it in ``data-value`` ("null": unknown)."""
    return None if shown in (None, "null") else float(shown)


# how often a browser test looks again (``writepath.wait_for``'s ``every``): a look at the page
# or the service is a DevTools or HTTP round trip
POLL_S = 0.2
