"""Bootstrap 95% intervals: they bracket the mean, shrink with more data, are reproducible, and pair questions."""
import numpy as np
import pytest

from rag.evaluation.bootstrap import bootstrap_ci, paired_difference_ci


def test_the_interval_brackets_the_mean_of_the_values():
    values = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    ci = bootstrap_ci(values)
    assert ci.mean == pytest.approx(0.7) and ci.n == 10
    assert 0.3 < ci.low < 0.7 < ci.high <= 1.0


def test_identical_values_give_a_zero_width_interval():
    ci = bootstrap_ci([0.5] * 20)
    assert (ci.low, ci.mean, ci.high) == pytest.approx((0.5, 0.5, 0.5))


def test_more_questions_give_a_narrower_interval():
    rng = np.random.default_rng(1)
    few, many = bootstrap_ci(rng.random(20)), bootstrap_ci(rng.random(2000))
    assert many.high - many.low < (few.high - few.low) / 4


def test_the_interval_of_a_known_proportion_matches_the_normal_approximation():
    values = [1] * 50 + [0] * 50   # p = 0.5, n = 100 → half-width ≈ 1.96 · sqrt(0.25 / 100) ≈ 0.098
    ci = bootstrap_ci(values, resamples=5000)
    assert ci.high - ci.mean == pytest.approx(0.098, abs=0.015)
    assert ci.mean - ci.low == pytest.approx(0.098, abs=0.015)


def test_the_same_values_always_give_the_same_interval():
    values = list(np.random.default_rng(3).random(40))
    assert bootstrap_ci(values) == bootstrap_ci(values)


def test_missing_values_are_left_out_and_no_values_give_none():
    assert bootstrap_ci([1.0, None, 0.0]).n == 2
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([None, None]) is None


def test_a_paired_difference_keeps_questions_together():
    # b is a + 0.1 on every question: the paired interval is exactly −0.1 although each mean varies widely.
    a = list(np.random.default_rng(4).random(30))
    diff = paired_difference_ci(a, [x + 0.1 for x in a])
    assert (diff.low, diff.mean, diff.high) == pytest.approx((-0.1, -0.1, -0.1))


def test_a_paired_difference_drops_questions_missing_on_either_side():
    assert paired_difference_ci([1, None, 1], [0, 1, None]).n == 1
    with pytest.raises(ValueError):
        paired_difference_ci([1, 0], [1])
