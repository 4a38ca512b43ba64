"""mjx_pbac.stats: hand-worked IQM, AULC and bold sets, cross-checked against scipy."""

import math
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
from scipy.stats import mstats

from mjx_pbac import stats

# ------------------------------------------------------------------------------------ iqm


def test_iqm_one_to_ten():
    # n = 10, linear quantile at q sits at index q (n - 1) of the sorted values:
    # q25: index 2.25 -> 3 + 0.25 (4 - 3) = 3.25;  q75: index 6.75 -> 7 + 0.75 (8 - 7) = 7.75.
    # Values in [3.25, 7.75]: 4, 5, 6, 7 -> mean 22 / 4 = 5.5.
    assert stats.iqm(np.arange(1, 11)) == (5.5, 3.25, 7.75)


def test_iqm_keeps_values_tied_with_a_quantile():
    # [1, 2, 2, 3, 4]: q25 at index 1 -> 2, q75 at index 3 -> 3. Inclusive: 2, 2, 3 -> 7/3.
    # (A strict rule lower < v < upper would keep nothing.)
    value, lower, upper = stats.iqm([4, 2, 1, 3, 2])
    assert (lower, upper) == (2.0, 3.0)
    assert value == pytest.approx(7 / 3)
    # All seeds equal: both quantiles equal that value and every seed is kept.
    assert stats.iqm([5.0, 5.0, 5.0, 5.0]) == (5.0, 5.0, 5.0)
    # n = 7, [1, 2, 3, 3, 3, 4, 5]: q25 at index 1.5 -> 2.5, q75 at index 4.5 -> 3.5; keeps 3, 3, 3.
    assert stats.iqm([1, 2, 3, 3, 3, 4, 5]) == (3.0, 2.5, 3.5)


def test_iqm_single_seed_two_seeds_and_empty():
    assert stats.iqm([7.5]) == (7.5, 7.5, 7.5)
    # [2, 6]: q25 = 2 + 0.25 * 4 = 3, q75 = 5; no value inside, so the mean of both, 4.
    assert stats.iqm([6.0, 2.0]) == (4.0, 3.0, 5.0)
    assert scipy.stats.trim_mean([6.0, 2.0], 0.25) == 4.0
    with pytest.raises(ValueError):
        stats.iqm([])


def test_quantiles_match_scipy_mquantiles():
    # numpy's "linear" method is Hyndman-Fan type 7, which mquantiles gives with alphap = betap = 1.
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 8, 10, 17):
        values = rng.normal(size=n) * 100
        _, lower, upper = stats.iqm(values)
        expected = mstats.mquantiles(values, prob=[0.25, 0.75], alphap=1, betap=1)
        np.testing.assert_allclose([lower, upper], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [5, 9, 13, 21])
def test_iqm_agrees_with_trim_mean_when_the_quantiles_fall_on_values(n):
    # n = 4k + 1 distinct values: q25 is the value at index k and q75 the one at index 3k, so the
    # inclusive rule keeps indices k..3k, exactly what trim_mean(0.25) keeps (it cuts int(n/4) = k
    # from each end).
    values = np.random.default_rng(n).normal(size=n)
    assert stats.iqm(values)[0] == pytest.approx(scipy.stats.trim_mean(values, 0.25), rel=1e-12)


def test_iqm_differs_from_trim_mean_on_skewed_values():
    values = [0, 1, 2, 10, 11, 12, 13, 50, 60, 70]
    # q25: index 2.25 -> 2 + 0.25 (10 - 2) = 4;  q75: index 6.75 -> 13 + 0.75 (50 - 13) = 40.75.
    # Kept: 10, 11, 12, 13 -> 46 / 4 = 11.5.
    assert stats.iqm(values) == (11.5, 4.0, 40.75)
    # trim_mean cuts int(0.25 * 10) = 2 per end: 2, 10, 11, 12, 13, 50 -> 98 / 6 = 16.33...
    assert scipy.stats.trim_mean(values, 0.25) == pytest.approx(98 / 6)


def test_iqm_on_one_to_ten_equals_trim_mean_but_keeps_fewer_values():
    # trim_mean keeps 3..8 (mean 5.5), the IQM keeps 4..7 (also 5.5): equal by symmetry only.
    assert stats.iqm(np.arange(1, 11))[0] == scipy.stats.trim_mean(np.arange(1, 11), 0.25) == 5.5


# ----------------------------------------------------------------------------------- aulc


def test_aulc_is_the_mean_over_evaluation_points():
    curves = [[0.0, 10.0, 20.0, 30.0], [5.0, 5.0, 5.0, 5.0], [-4.0, 0.0, 4.0, 8.0]]
    # (0 + 10 + 20 + 30) / 4 = 15;  5;  (-4 + 0 + 4 + 8) / 4 = 2.
    np.testing.assert_array_equal(stats.aulc(curves), [15.0, 5.0, 2.0])
    assert stats.aulc(curves).shape == (3,)
    with pytest.raises(ValueError):
        stats.aulc([1.0, 2.0])


# ------------------------------------------------------------------------- paired t-test


BEST = {0: 10.0, 1: 12.0, 2: 11.0, 3: 13.0}
WORSE = {0: 9.0, 1: 12.0, 2: 10.0, 3: 11.0}  # differences 1, 0, 1, 2
CLOSE = {0: 9.0, 1: 12.0, 2: 11.0, 3: 11.0}  # differences 1, 0, 0, 2


def test_paired_p_value_by_hand():
    # d = [1, 0, 1, 2]: mean 1, sample variance (0 + 1 + 0 + 1) / 3 = 2/3,
    # t = 1 / (sqrt(2/3) / sqrt(4)) = sqrt(6) = 2.449, df = 3, p = P(T_3 > sqrt 6) = 0.0459.
    p_value = stats.paired_p_value(BEST, WORSE)
    assert p_value == pytest.approx(scipy.stats.t.sf(math.sqrt(6), df=3), rel=1e-10)
    assert p_value == pytest.approx(0.04586, abs=1e-5)
    # d = [1, 0, 0, 2]: mean 0.75, variance (0.0625 + 0.5625 + 0.5625 + 1.5625) / 3 = 11/12,
    # t = 0.75 / (sqrt(11/12) / 2) = 1.5667, p = 0.1076.
    t_statistic = 0.75 / (math.sqrt(11 / 12) / 2)
    assert stats.paired_p_value(BEST, CLOSE) == pytest.approx(scipy.stats.t.sf(t_statistic, df=3), rel=1e-10)
    # Lower is better: the same test with the alternative flipped, i.e. on negated values.
    negate = lambda values: {seed: -value for seed, value in values.items()}  # noqa: E731
    assert stats.paired_p_value(negate(BEST), negate(WORSE), higher_is_better=False) == pytest.approx(p_value)


def test_paired_p_value_edge_cases():
    assert math.isnan(stats.paired_p_value([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]))  # 0/0
    assert stats.paired_p_value([2.0, 3.0, 4.0], [1.0, 2.0, 3.0]) == 0.0  # always 1 better
    assert stats.paired_p_value({0: 1.0, 1: 2.0}, {1: 2.0, 2: 3.0}) is None  # one shared seed
    assert stats.paired_p_value([5.0], [4.0]) is None


# ----------------------------------------------------------------------------------- bold


def test_bold_by_hand():
    # IQMs: BEST [10, 11, 12, 13]: q25 10.75, q75 12.25 -> mean(11, 12) = 11.5;
    # WORSE [9, 10, 11, 12] -> mean(10, 11) = 10.5;  CLOSE [9, 11, 11, 12]: q25 10.5, q75 11.25 -> 11.
    # BEST is best; WORSE p = 0.0459 < 0.05 (not bold); CLOSE p = 0.1076 (bold).
    results = {"worse": WORSE, "best": BEST, "close": CLOSE}
    assert stats.bold(results) == {"best", "close"}
    assert stats.bold(results, alpha=0.04) == {"best", "close", "worse"}
    negated = {name: {seed: -value for seed, value in values.items()} for name, values in results.items()}
    assert stats.bold(negated, higher_is_better=False) == {"best", "close"}
    # Arrays pair by position.
    assert stats.bold({name: list(values.values()) for name, values in results.items()}) == {"best", "close"}


def test_bold_pairs_on_common_seeds():
    # WORSE plus a lucky seed 7 that BEST lacks: IQM of [9, 10, 11, 12, 100] is mean(10, 11, 12) = 11
    # < 11.5, and the test pairs seeds 0-3 only (p = 0.0459): not bold.
    assert stats.bold({"best": BEST, "extra": {**WORSE, 7: 100.0}}) == {"best"}
    # No shared seeds: nothing to test, not bold.
    assert stats.bold({"best": BEST, "elsewhere": {10: 11.0, 11: 11.2}}) == {"best"}


def test_bold_identical_ties_and_single_seed():
    # Identical arrays: same IQM, both best.
    assert stats.bold({"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]}) == {"a", "b"}
    # Identical on the shared seeds, lower IQM (b lacks seed 3): p is nan -> not worse -> bold.
    # a [1, 2, 3, 10]: q25 1.75, q75 4.75 -> mean(2, 3) = 2.5;  b [1, 2, 3] -> 2.
    assert stats.bold({"a": {0: 1.0, 1: 2.0, 2: 3.0, 3: 10.0}, "b": {0: 1.0, 1: 2.0, 2: 3.0}}) == {"a", "b"}
    # One seed each: no test possible, only the best.
    assert stats.bold({"a": [5.0], "b": [4.9], "c": [5.1]}) == {"c"}
    assert stats.bold({}) == set()


def test_stats_and_report_do_not_import_jax():
    code = "import sys, mjx_pbac.stats, mjx_pbac.report; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ mean_std, Meta-World


def test_mean_std_is_the_papers_table2_spread():
    # The paper's Table 2: one success in five seeds is 0.20 ± 0.40 (population std:
    # sqrt((0.8^2 + 4 x 0.2^2) / 5) = sqrt(0.16) = 0.4; ddof = 1 would give 0.447), three 0.60 ± 0.49.
    assert stats.mean_std([1.0, 0.0, 0.0, 0.0, 0.0]) == pytest.approx((0.2, 0.4))
    assert stats.mean_std([1.0, 1.0, 1.0, 0.0, 0.0]) == pytest.approx((0.6, math.sqrt(0.24)))
    assert stats.mean_std([0.7]) == pytest.approx((0.7, 0.0))
    with pytest.raises(ValueError, match="mean_std of no values"):
        stats.mean_std([])


def test_bold_by_the_mean_picks_another_best_than_the_iqm():
    # x [0, 1, 1, 1, 1]: mean 0.8, IQM 1 (q25 = q75 = 1); y [0.9] x 5: mean and IQM 0.9;
    # z [0.8, 0.8, 0.8, 0.8, 0.79]: mean 0.798, IQM 0.8.
    results = {"x": [0.0, 1.0, 1.0, 1.0, 1.0], "y": [0.9] * 5, "z": [0.8, 0.8, 0.8, 0.8, 0.79]}
    # By the mean y is best; y - x = [0.9, -0.1, -0.1, -0.1, -0.1]: mean 0.1, sd sqrt(0.8 / 4) = 0.447,
    # t = 0.1 / (0.447 / sqrt 5) = 0.5, p = 0.32: x bold; y - z = [0.1, 0.1, 0.1, 0.1, 0.11]: t = 51,
    # p = 4e-7: z not bold.
    assert stats.bold(results, location="mean") == {"x", "y"}
    # By the IQM x is best; x - z has mean 0.002 (t = 0.01, p = 0.496), x - y mean -0.1: all bold.
    assert stats.bold(results) == stats.bold(results, location="iqm") == {"x", "y", "z"}
    assert scipy.stats.ttest_rel(results["y"], results["x"], alternative="greater").pvalue == pytest.approx(0.3217, abs=1e-4)
    with pytest.raises(ValueError, match="unknown location 'median'; valid: iqm, mean"):
        stats.bold(results, location="median")
