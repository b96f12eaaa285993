from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.analysis.fit import (
    _squared_residuals,
    eval_noise,
    fit_power_law,
    forecast,
    stable_phase,
    tokens_at_marginal_yield,
)


def curve(tokens, e=2.0, b=40.0, beta=0.3):
    return e + b * np.power(tokens, -beta)


def test_fit_recovers_a_clean_power_law():
    d = np.geomspace(1e6, 1e9, 12)
    law = fit_power_law(d, curve(d))
    assert law.E == pytest.approx(2.0, rel=1e-3) and law.beta == pytest.approx(0.3, rel=1e-3)
    assert law.poor is None and law.r2 > 0.999


def test_one_wild_evaluation_does_not_drag_the_fit():
    d = np.geomspace(1e6, 1e9, 12)
    y = curve(d)
    y[5] += 1.0  # one broken eval
    law = fit_power_law(d, y)
    assert law.beta == pytest.approx(0.3, rel=0.05)


def test_poor_fits_say_so():
    d = np.geomspace(1e6, 1e9, 8)
    noise = np.random.default_rng(0).normal(0, 1.0, size=8)
    assert "R^2" in fit_power_law(d, 3 + noise).poor
    assert "too few" in fit_power_law(d[:3], curve(d[:3])).poor


def test_forecast_interval_contains_the_next_tranche_and_threshold_inverts():
    rng = np.random.default_rng(1)
    d = np.geomspace(1e6, 5e8, 15)
    y = curve(d) + rng.normal(0, 0.003, size=len(d))
    result = forecast(d, y, next_tokens=5e8, threshold_per_btok=0.05, level=0.95)
    truth = curve(5e8) - curve(1e9)
    assert result.interval[0] <= truth <= result.interval[1]
    assert result.gain == pytest.approx(truth, rel=0.1)
    assert result.fit.marginal_yield(result.threshold_tokens) == pytest.approx(0.05)
    assert tokens_at_marginal_yield(result.fit, 0.05) == result.threshold_tokens


def test_stable_phase_of_wsd_and_cosine():
    steps = pd.DataFrame({"step": np.arange(1, 1001)})
    wsd = np.minimum(np.arange(1, 1001) / 100, 1.0)
    wsd[900:] = np.linspace(1.0, 0.0, 100)
    steps["lr"] = wsd
    mask, note = stable_phase(steps, np.array([50, 100, 300, 500, 800, 950, 1000]))
    # warm-up until step 90 (0.9 x peak) and the decay from step 911 (below 0.9 x peak) are both left out
    assert mask.tolist() == [False, True, True, True, True, False, False] and "stable from step 90 to 911" in note
    steps["lr"] = np.cos(np.linspace(0, np.pi / 2, 1000))
    mask, note = stable_phase(steps, np.array([100, 300, 500, 800]))
    assert "mixes data yield with annealing" in note
    steps["lr"] = np.nan
    assert "no learning rate" in stable_phase(steps, np.array([1]))[1]


@pytest.mark.slow
def test_forecast_intervals_are_calibrated():
    """80% intervals contain the next tranche's true gain about 80% of the time (noisy synthetic curves)."""
    hits = 0
    for seed in range(20):
        d = np.geomspace(1e6, 5e8, 12)
        y = curve(d) + np.random.default_rng(seed).normal(0, 0.004, size=len(d))
        result = forecast(d, y, next_tokens=5e8, boots=150)
        hits += result.interval[0] <= curve(5e8) - curve(1e9) <= result.interval[1]
    assert 13 <= hits <= 20


def test_eval_noise_sees_the_noise_and_not_a_misshapen_curve():
    rng = np.random.default_rng(3)
    d = np.linspace(1e6, 2e7, 60)
    assert eval_noise(d, curve(d) + rng.normal(0, 0.02, size=len(d))) == pytest.approx(0.02, rel=0.25)
    # A loss that drops slowly first, then faster (a small model leaving its plateau), without noise: a power
    # law fits it badly, yet no evaluation is noisy, and the estimate says so.
    x = np.linspace(1.5e4, 1.35e5, 9)
    y = 5.5 - 0.9 / (1 + np.exp(-(x - 7e4) / 2e4))
    assert fit_power_law(x, y).rmse > 5 * eval_noise(x, y)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    drop=st.floats(0.3, 6.5),
    beta=st.floats(0.15, 0.8),
    floor=st.floats(1.5, 4.0),
    evals=st.integers(20, 60),
    sigma=st.sampled_from([0.003, 0.01, 0.03]),
)
def test_eval_noise_is_the_injected_noise_on_steep_and_gentle_curves_alike(drop, beta, floor, evals, sigma):
    """Issue #44 item 3: the noise of one evaluation, read from residuals against a local fit, is within 20% of the
    noise injected whether the curve falls 0.3 or 6.5 nats (9.5 -> 3.1) over the run: the difference-based estimate
    kept the steep curve's bend (0.022 for a true 0.010). The median over 15 draws of the noise, so that the test
    holds the estimator's bias, not one draw's luck (one estimate from 20 points scatters by ~15%)."""
    tokens = np.linspace(1.0, 100.0, evals) * 1e6
    curve_ = floor + drop * (tokens / tokens[0]) ** -beta
    rng = np.random.default_rng(evals)
    estimates = [eval_noise(tokens, curve_ + rng.normal(0, sigma, size=evals)) for _ in range(15)]
    assert float(np.median(estimates)) == pytest.approx(sigma, rel=0.2), (curve_[0], curve_[-1])


@pytest.mark.slow
def test_forecast_check_on_a_real_probe(tmp_path):
    """The fast variant of benchmarks/bench_forecast.py (10 seeds, >= 8 must hold): one of its probes, seed 6,
    whose measured gain sits inside the interval there, checked end to end."""
    from yieldgate.analysis.runs import forecast_check
    from yieldgate.data.recipe import resolve
    from yieldgate.ledger import Ledger
    from yieldgate.manifest import parse_manifest
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    recipe = {
        "sources": [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "milton", "weight": 0.4}],
        "tokenizer": {"name": "bpe-512", "vocab_size": 512},
    }
    data = resolve(parse_manifest({"data": recipe}).data, seed=0, max_chars_per_source=1_500_000)
    db = str(tmp_path / "f.db")
    train_probe(data, ProbeConfig(tokens=300_000, seed=6, evals=20, eval_sequences=64, threads=2), run="p", ledger=db)
    with Ledger(db, readonly=True) as ledger:
        check = forecast_check(ledger, "p")
    assert check["fitted"] == 9 and check["stable"] == 16
    assert check["held"], check
    assert 0 < check["forecast"] and check["high"] - check["low"] < 0.15  # an interval that says something


@pytest.mark.slow
def test_eval_noise_of_replicates_is_their_pooled_scatter():
    # Final losses of three seeds at each of three budgets: the scatter within a budget is the noise.
    rng = np.random.default_rng(5)
    d = np.repeat([1e5, 2e5, 4e5], 40)
    y = curve(d) + rng.normal(0, 0.05, size=len(d))
    assert eval_noise(d, y) == pytest.approx(0.05, rel=0.15)
    assert math.isfinite(forecast(d, y, next_tokens=4e5).interval[0])


def _bend(evals: int, spacings: float, depth: float) -> tuple[np.ndarray, np.ndarray]:
    """A power law that drops by `depth` halfway through the run, over about `spacings` evaluation spacings (a small
    model leaving its plateau)."""
    tokens = np.linspace(1.0, 100.0, evals) * 1e6
    t = tokens / tokens[-1]
    width = spacings / (evals - 1)
    return tokens, 3.0 + 2.0 * (tokens / tokens[0]) ** -0.4 - depth / (1 + np.exp(-(t - 0.5) / width))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    evals=st.integers(10, 40),
    spacings=st.floats(0.5, 3.0),
    depth=st.floats(0.0, 0.4),
    sigma=st.sampled_from([0.003, 0.01]),
)
def test_leaving_a_bend_out_never_reads_the_noise_low_nor_above_the_plain_reading(evals, spacings, depth, sigma):
    """Whatever the bend (none, gentle, a step between two evaluations), the estimate is never above the mean of
    every squared residual, and never reads the noise low: the median over 9 draws is at least 0.85 of the noise
    injected (a cut at 3 of the median's sigmas read smooth 16-evaluation curves 18% low)."""
    tokens, curve_ = _bend(evals, spacings, depth)
    rng = np.random.default_rng(evals)
    estimates = []
    for _ in range(9):
        y = curve_ + rng.normal(0, sigma, size=evals)
        estimates.append(eval_noise(tokens, y))
        assert estimates[-1] <= math.sqrt(float(np.mean(_squared_residuals(tokens, y)))) * (1 + 1e-12)
    assert float(np.median(estimates)) >= 0.85 * sigma


def test_a_bend_of_the_curve_is_not_read_as_noise():
    """A drop of 0.4 within half an evaluation spacing, 40 evaluations, noise 0.003: no local polynomial follows
    it, and its few residuals were read as noise, 4 times the noise (0.026 on a real 200k-token probe whose other
    evaluations scatter by 0.005: 3 of its 10 tranches "within noise"). Left out, the reading is within 1.6 times
    the noise (the neighbours' fits still lean on the step)."""
    tokens, curve_ = _bend(40, 0.5, 0.4)
    rng = np.random.default_rng(40)
    draws = [curve_ + rng.normal(0, 0.003, size=40) for _ in range(9)]
    plain = np.median([math.sqrt(float(np.mean(_squared_residuals(tokens, y)))) for y in draws])
    read = np.median([eval_noise(tokens, y) for y in draws])
    assert plain > 3.5 * 0.003 and read < 1.6 * 0.003


def test_without_a_bend_the_noise_is_the_mean_of_every_residual():
    """Where no residual stands out (normal noise on a smooth curve), the estimate is the plain one: nothing left
    out, the same number as before the bend was looked for."""
    rng = np.random.default_rng(7)
    d = np.linspace(1e6, 2e7, 30)
    y = curve(d) + rng.normal(0, 0.01, size=len(d))
    squares = _squared_residuals(d, y)
    assert eval_noise(d, y) == pytest.approx(math.sqrt(float(np.mean(squares))), rel=1e-12)
