"""Scores over seeds, as the paper reports them (appendix B.3 "Evaluation methodology"; docs/design.md "Statistics").

- `iqm`: the interquartile mean across seeds, with the 25% and 75% quantiles as [lower, upper];
- `aulc`: the area under the learning curve of each seed (its mean evaluation return);
- `mean_std`: the mean and standard deviation across seeds (Meta-World's success rates, paper
  Table 2);
- `bold`: which methods a results table marks bold: the best IQM (or mean) and every method that a
  one-sided paired t-test (paired by seed) does not find significantly worse.

numpy and scipy only: this module reads numbers, never the training loop.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.stats

# What `bold` accepts per method: seed id -> value, or a sequence whose position is the seed id.
SeedValues = Mapping[int, float] | Sequence[float] | np.ndarray


def iqm(values: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """Interquartile mean over seeds: returns (iqm, lower, upper).

    lower and upper are numpy's linear quantiles at 25% and 75% (`np.quantile(v, q,
    method="linear")`, which interpolates between order statistics); the IQM is the mean of the
    values v with lower <= v <= upper, both ends inclusive. With [1, 2, ..., 10]: lower = 3.25,
    upper = 7.75 and the IQM is mean(4, 5, 6, 7) = 5.5.

    This is not `scipy.stats.trim_mean(v, 0.25)`: trim_mean cuts a fixed count, int(0.25 n) values,
    from each end of the sorted values whatever they are, while here the quantiles decide, and
    every value tied with a quantile stays in. The two agree on evenly spaced or symmetric values
    ([1..10]: trim_mean keeps 3..8, also 5.5) and differ on skewed ones: [0, 1, 2, 10, 11, 12, 13,
    50, 60, 70] gives lower = 4, upper = 40.75, IQM = mean(10..13) = 11.5, but trim_mean keeps
    [2, 10, 11, 12, 13, 50] and gives 16.33. The inclusive rule also keeps ties: [1, 2, 2, 3, 4]
    has lower = 2 and upper = 3, so the IQM is mean(2, 2, 3) = 7/3.

    Two distinct values a < b have no value inside [a + (b-a)/4, a + 3(b-a)/4]; their IQM is then
    their mean (as trim_mean gives, cutting int(0.5) = 0). A single value v gives (v, v, v).
    Non-finite values propagate (the result is nan); an empty input is refused.
    """
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise ValueError("iqm of no values")
    lower, upper = np.quantile(array, [0.25, 0.75], method="linear")
    if not (np.isfinite(lower) and np.isfinite(upper)):
        return math.nan, float(lower), float(upper)
    inside = array[(array >= lower) & (array <= upper)]
    if inside.size == 0:  # two distinct values: both lie outside [lower, upper]
        inside = array
    return float(inside.mean()), float(lower), float(upper)


def mean_std(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """(mean, standard deviation) over seeds, the standard deviation of the values themselves
    (numpy's default, ddof = 0), as the paper's Table 2 prints it: one success in five seeds,
    [1, 0, 0, 0, 0], is 0.20 ± 0.40 there (ddof = 1 would give 0.45), three in five 0.60 ± 0.49.
    Non-finite values propagate; an empty input is refused."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise ValueError("mean_std of no values")
    return float(array.mean()), float(array.std())


LOCATIONS = {"iqm": lambda values: iqm(values)[0], "mean": lambda values: mean_std(values)[0]}
"""How `bold` finds the best method: the IQM (paper Table 1) or the mean (Meta-World, Table 2)."""


def aulc(curves: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Area under the learning curve per seed: the mean over evaluation points (paper appendix B.3; docs/design.md "Statistics").

    `curves` has shape [seeds, eval_points]: each seed's mean evaluation return at each point
    (evaluations are equally spaced, so the mean is the normalised area). Returns shape [seeds].
    """
    array = np.asarray(curves, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f"aulc expects curves of shape [seeds, eval_points], got {array.shape}")
    return array.mean(axis=1)


def _as_seed_map(values: SeedValues) -> dict[int, float]:
    if isinstance(values, Mapping):
        return {int(seed): float(value) for seed, value in values.items()}
    return {seed: float(value) for seed, value in enumerate(np.asarray(values, dtype=np.float64).reshape(-1))}


def paired_p_value(best: SeedValues, other: SeedValues, higher_is_better: bool = True) -> float | None:
    """One-sided paired t-test p-value that `best` beats `other`, paired on their common seeds.

    `scipy.stats.ttest_rel(best, other, alternative="greater")` (alternative "less" when lower is
    better) over the seeds present in both. Returns None when fewer than two seeds are shared (no
    test is possible) and nan when every paired difference is zero (identical results: the t
    statistic is 0/0). A constant non-zero difference gives p = 0 (or 1) as scipy computes it.
    """
    best_map, other_map = _as_seed_map(best), _as_seed_map(other)
    common = sorted(set(best_map) & set(other_map))
    if len(common) < 2:
        return None
    best_values = np.array([best_map[seed] for seed in common])
    other_values = np.array([other_map[seed] for seed in common])
    if np.all(best_values == other_values):
        return math.nan
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # scipy warns about precision loss when the differences are (nearly) constant; the
        # p-value it returns is still the right limit (0 or 1).
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy.stats.ttest_rel(
            best_values, other_values, alternative="greater" if higher_is_better else "less"
        )
    return float(result.pvalue)


def bold(
    results: Mapping[str, SeedValues],
    higher_is_better: bool = True,
    alpha: float = 0.05,
    location: str = "iqm",
) -> set[str]:
    """The methods a results table marks bold (paper, appendix "Statistical Significance").

    `results` maps a method name to its per-seed values, either {seed id: value} or an array whose
    position is the seed id (so arrays pair position by position). `location` says how the best
    is found: "iqm" (Table 1) or "mean" (Meta-World's success rates, Table 2). Bold are:

    - the best method: the highest IQM or mean (lowest if not `higher_is_better`); every method
      whose score ties the best exactly is bold too, and the first of them in `results` order is
      "the best" the others are tested against;
    - every other method for which `paired_p_value(best, other)` >= `alpha`, i.e. the one-sided
      paired t-test does not find it significantly worse. The test pairs the seeds the two share
      (so methods with different seed counts compare on the common seeds). A nan p-value
      (identical values on every shared seed) counts as not worse: bold.
    - With fewer than two shared seeds (e.g. a single seed per method) nothing can be tested and
      only the best is bold.

    Methods with no values, or a nan score, are never bold.
    """
    if location not in LOCATIONS:
        raise ValueError(f"unknown location {location!r}; valid: {', '.join(LOCATIONS)}")
    scores: dict[str, float] = {}
    for name, values in results.items():
        seed_map = _as_seed_map(values)
        if seed_map:
            score = LOCATIONS[location](list(seed_map.values()))
            if not math.isnan(score):
                scores[name] = score
    if not scores:
        return set()
    target = max(scores.values()) if higher_is_better else min(scores.values())
    tied = [name for name, score in scores.items() if score == target]
    best = tied[0]
    chosen = set(tied)
    for name in scores:
        if name in chosen:
            continue
        p_value = paired_p_value(results[best], results[name], higher_is_better)
        if p_value is not None and (math.isnan(p_value) or p_value >= alpha):
            chosen.add(name)
    return chosen
