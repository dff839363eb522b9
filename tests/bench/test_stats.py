"""The benchmarks' one percentile definition and their paired sign test."""

import math

import pytest

from memstream.bench.stats import latency_summary, percentile, sign_test


def test_percentile_is_nearest_rank_a_time_that_really_occurred():
    values = [5, 1, 4, 2, 3]
    assert percentile(values, 0.5) == 3
    assert percentile(values, 0.99) == 5
    assert percentile(values, 0.2) == 1 and percentile(values, 0.21) == 2
    samples = list(range(1, 1001))
    assert percentile(samples, 0.99) == 990 and percentile(samples, 0.999) == 999


def test_percentile_of_nothing_is_nan_and_a_summary_of_nothing_has_no_figures():
    assert math.isnan(percentile([], 0.5))
    assert latency_summary([]) == {"n": 0}
    assert latency_summary([1.0, 2.0, 3.0, 10.0]) == {"n": 4, "p50": 2.5, "p95": 10.0, "p99": 10.0, "max": 10.0}


def test_sign_test_is_the_exact_two_sided_binomial_of_the_discordant_pairs():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == sign_test(0, 5) == 2 / 32
    assert sign_test(10, 10) == 1.0
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
