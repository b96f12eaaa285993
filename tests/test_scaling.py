"""L(N, D) fits (Hoffmann et al. 2022, approach 3): known laws recovered, intervals that cover the truth, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from yieldgate.analysis.scaling import fit_scaling
from yieldgate.errors import InputError

TRUTH = {"E": 1.5, "A": 60.0, "alpha": 0.4, "B": 80.0, "beta": 0.35}
SIZES = (2e4, 5e4, 1.2e5, 3e5)
TARGET = (1e6, 4e6)  # 3x the largest size, 4x the most tokens: an extrapolation, as a plan makes


def law(n, d):
    return TRUTH["E"] + TRUTH["A"] / np.power(n, TRUTH["alpha"]) + TRUTH["B"] / np.power(d, TRUTH["beta"])


def probes(seed: int, sigma: float, *, seeds: int = 3, evals: int = 6, sizes=SIZES):
    """Evaluation points of `seeds` probes per size, each evaluated at `evals` token counts; the loss scattered by a
    factor exp(N(0, sigma)) per evaluation."""
    rng = np.random.default_rng(seed)
    d = np.geomspace(2e4, 1e6, evals)
    rows = [
        (n, t, law(n, t) * np.exp(rng.normal(0, sigma)), f"{n:g}/s{s}") for n in sizes for s in range(seeds) for t in d
    ]
    return [list(c) for c in zip(*rows, strict=True)]


def test_a_noiseless_law_is_recovered_and_its_optimum_is_the_constrained_minimum():
    fit = fit_scaling(*probes(0, 0.0), boots=20)
    for name, value in TRUTH.items():
        assert getattr(fit, name) == pytest.approx(value, rel=1e-3), name
    assert fit.rmse < 1e-6 and fit.sizes == [20_000, 50_000, 120_000, 300_000] and fit.points == 72
    # The closed form (Hoffmann et al., eq. 4) against a direct search along 6ND = C.
    flops = 1e13
    best = minimize_scalar(lambda logn: law(np.exp(logn), flops / 6 / np.exp(logn)), bounds=(5, 25), method="bounded")
    opt = fit.optimal(flops)
    assert opt["params"] == pytest.approx(np.exp(best.x), rel=1e-3)
    assert opt["tokens"] * opt["params"] * 6 == pytest.approx(flops)


@pytest.mark.slow
def test_a_noisy_law_is_recovered_to_the_noise_and_the_intervals_hold_the_truth():
    sigma = 0.01
    fit = fit_scaling(*probes(1, sigma), boots=100)
    # 72 points, 5 parameters: the residuals' RMS is sigma * sqrt(67/72) give or take its own sampling error
    # (~sigma / sqrt(2 * 67) ~ 9%); the noise estimate (over 67 degrees of freedom) is sigma, likewise.
    assert fit.rmse == pytest.approx(sigma * np.sqrt(67 / 72), rel=0.25)
    assert fit.noise == pytest.approx(sigma, rel=0.25)
    assert fit.resampled == "probes" and fit.boots >= 95 and not fit.notes
    for name, value in TRUTH.items():
        lo, hi = fit.intervals[name]
        assert lo <= value <= hi, (name, fit.intervals[name])
    p = fit.predict(*TARGET)
    assert p.interval[0] <= law(*TARGET) <= p.interval[1]
    assert p.measured_interval[0] <= p.interval[0] and p.interval[1] <= p.measured_interval[1]
    # The fitted loss at the target is within a few of the noise's scale of the truth (an extrapolation 3x in N).
    assert abs(np.log(p.loss / law(*TARGET))) < 3 * sigma


@pytest.mark.slow
def test_the_bootstrap_interval_covers_the_truth_in_most_of_20_draws():
    sigma, hits, alphas, betas = 0.02, 0, 0, 0
    for draw in range(20):
        fit = fit_scaling(*probes(100 + draw, sigma), boots=80, level=0.9, seed=draw)
        lo, hi = fit.predict(*TARGET).interval
        hits += lo <= law(*TARGET) <= hi
        alphas += fit.intervals["alpha"][0] <= TRUTH["alpha"] <= fit.intervals["alpha"][1]
        betas += fit.intervals["beta"][0] <= TRUTH["beta"] <= fit.intervals["beta"][1]
    # 90% intervals from 3 probes per size (a bootstrap over 3 units understates the spread by ~sqrt(2/3)): at least
    # 14 of 20 (a binomial(20, 0.9) falls below 14 with probability ~0.2%, at 0.8 with ~9%).
    assert hits >= 14 and alphas >= 14 and betas >= 14, (hits, alphas, betas)


def test_fewer_than_three_sizes_and_non_finite_losses_are_refused_in_one_line():
    with pytest.raises(InputError, match=r"at least 3 model sizes, got 2 \(N = 20,000, 50,000\)") as err:
        fit_scaling(*probes(0, 0.01, sizes=SIZES[:2]))
    assert "\n" not in str(err.value) and "models" in str(err.value)
    n, d, y, p = probes(0, 0.01)
    y[7] = float("nan")
    with pytest.raises(InputError, match=r"1 point\(s\) are not, the first in probe '20000/s1' .*loss = nan") as err:
        fit_scaling(n, d, y, p)
    assert "\n" not in str(err.value)
    y[7] = float("inf")
    with pytest.raises(InputError, match="finite positive"):
        fit_scaling(n, d, y, p)


def test_one_probe_per_size_resamples_evaluations_and_says_so():
    fit = fit_scaling(*probes(2, 0.01, seeds=1), boots=40)
    assert fit.resampled == "evaluations" and "miss the seed-to-seed spread" in fit.notes[0]
    assert fit.to_dict()["resampled"] == "evaluations" and "replicates" not in fit.to_dict()
