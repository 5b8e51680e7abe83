"""The statistics of `rqa compare`: a known difference is found, identical runs give p = 1 and
a zero-width interval, the bootstrap interval covers the truth at about its nominal rate, Holm
on known p-values, and the seed-level test."""

import numpy as np
import pytest

from retrieval_qa.analysis.significance import (
    holm,
    paired_bootstrap,
    randomisation_test,
    seed_test,
)


def test_a_known_difference_is_detected():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, 500)
    diff = (a + 0.1 + rng.normal(0, 0.2, 500)) - a  # B is 0.1 better on average
    low, high = paired_bootstrap(diff)
    assert 0 < low < 0.1 < high
    assert randomisation_test(diff) < 0.001


def test_identical_runs_give_p_one_and_a_zero_width_interval():
    diff = np.zeros((300, 3))
    low, high = paired_bootstrap(diff)
    assert low.tolist() == high.tolist() == [0, 0, 0]
    assert randomisation_test(diff).tolist() == [1.0, 1.0, 1.0]


def test_no_difference_is_not_significant_and_output_is_deterministic():
    rng = np.random.default_rng(4)
    diff = rng.normal(0, 1, 200)
    diff -= diff.mean()  # exactly no mean difference
    assert randomisation_test(diff) > 0.9
    assert randomisation_test(diff) == randomisation_test(diff)
    assert paired_bootstrap(diff) == paired_bootstrap(diff)


def test_bootstrap_interval_covers_the_true_difference_at_about_the_nominal_rate():
    rng = np.random.default_rng(5)
    true, n, reps = 0.3, 60, 200
    covered = 0
    for r in range(reps):  # skewed per-question differences (like RR differences)
        diff = rng.exponential(true, n)
        low, high = paired_bootstrap(diff, samples=1000, seed=r)
        covered += low <= true <= high
    assert 0.9 <= covered / reps <= 0.99


def test_several_metrics_at_once_equal_one_at_a_time():
    rng = np.random.default_rng(6)
    diff = rng.normal(0.05, 1, (150, 2))
    low, high = paired_bootstrap(diff)
    p = randomisation_test(diff)
    for i in range(2):
        assert paired_bootstrap(diff[:, i]) == (pytest.approx(low[i]), pytest.approx(high[i]))
        assert randomisation_test(diff[:, i]) == pytest.approx(p[i])


def test_holm_on_known_p_values():
    # sorted 0.01, 0.03, 0.04, 0.5 -> 4*0.01, 3*0.03, max(2*0.04, 0.09), max(0.5, 0.09)
    assert holm([0.04, 0.01, 0.5, 0.03]).tolist() == pytest.approx([0.09, 0.04, 0.5, 0.09])
    assert holm([0.5, 0.6]).tolist() == pytest.approx([1.0, 1.0])
    assert holm([0.02]).tolist() == [0.02]


def test_seed_test():
    out = seed_test([20.1, 20.9, 21.3], [25.0, 25.6, 26.4])
    assert out["n_a"] == out["n_b"] == 3 and out["permutation_relabellings"] == 20
    assert out["welch_p"] < 0.01
    assert out["permutation_p"] == pytest.approx(0.1)  # 2 of 20 relabellings: the floor
    single = seed_test([20.0], [25.0])
    assert single["welch_p"] is None and "one seed" in single["note"]
    assert seed_test([1.0, 2.0], [1.0, 2.0])["permutation_p"] == 1.0
