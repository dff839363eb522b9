"""Helpers of the tests that drive the dashboard in headless Chromium (Debian's ``chromium``
package; ``.ci/run`` installs it): their marks, reading a URL, a number the page shows, and
waiting for a state (never for a time)."""

from __future__ import annotations

import time
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


def wait(predicate, timeout: float = 60.0, what: str = "the condition"):
    """``predicate()``'s first true value, asked every 0.2 s until ``timeout`` s have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} not met within {timeout} s")
