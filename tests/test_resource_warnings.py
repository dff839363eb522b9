"""The suite's rule for what a test leaves open: a ResourceWarning is an error
(pyproject.toml's filterwarnings), and tests/conftest.py collects the garbage as each test
ends, so an object dropped unclosed in a reference cycle fails the test that dropped it, in
its teardown, not whichever test the collector happened to run in next."""

from __future__ import annotations

import gc
from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")

LEAKS = """
import gc

def test_leaks(tmp_path):
    gc.disable()  # only the suite's own collection at the end of the test may find it
    cycle = {"file": open(tmp_path / "left-open", "w")}
    cycle["self"] = cycle

def test_next():
    gc.enable()
"""


def test_an_unclosed_file_in_a_cycle_fails_the_test_that_dropped_it(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_leaks=LEAKS)
    was_enabled = gc.isenabled()
    try:
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "error")
    finally:
        if was_enabled:
            gc.enable()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaks*", "*ResourceWarning: unclosed file*left-open*"])
