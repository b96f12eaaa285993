"""Overfitting (memorisation): after its best evaluation the held-out loss turns up while the training loss still
falls. Two shapes of one turn, each read against the evaluation noise:

- a widening gap (`_gap_line`): the train-validation gap grows along a line through the evaluations after the best,
  as in a fine-tune that overfits a little more at every evaluation;
- a step (`_step`): the held-out loss jumps at the evaluation after its best and stays up, as in a multi-epoch
  fine-tune at an epoch boundary (the training loss drops where the data repeats, the held-out loss jumps), often
  with only a few evaluations after the best. It is read as `yield` reads the tranche after the best: against the
  run's evaluation noise (`fit.learning_noise`) at the tranche band's level (`yields.TRANCHE_LEVEL`), so the two
  agree: a tranche after the best that `yield` calls negative beyond its noise, with every later evaluation also
  worse than the best beyond it, is a step.

Either needs the training loss to have fallen since the best, judged on the smoothed loss (`_train_drop`: means of
many logged values, not one batch's noise). With only two to four evaluations (a fine-tune evaluated once an epoch)
their noise cannot be measured: a rise at every evaluation after the best beyond FEW_EVALS_RISE of it, while the
training loss falls, is overfitting at a lower confidence (`_few_rise`). Pure functions over `RunSignals` (see
`detectors.py`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.detectors import (
    OVERFIT_AFTER,
    OVERFIT_MIN_EVALS,
    OVERFIT_NOISE_POINTS,
    OVERFIT_STEP_AFTER,
    OVERFIT_Z,
    Finding,
    NotRun,
    RunSignals,
    _clip,
)
from yieldgate.analysis.fit import eval_noise, learning_noise
from yieldgate.analysis.yields import TRANCHE_LEVEL

__all__ = ["FEW_EVALS_RISE", "overfitting", "heldout_turn"]

FEW_EVALS_RISE = 0.02
"""With two to four held-out evaluations (fewer than OVERFIT_MIN_EVALS, too few to measure their noise) each one after
the best must be above it by more than this share of it. In the real corpus, a fine-tune on a plateau rises by at most
0.54% from one evaluation to the next (Whisper tiny, 100 evaluations), one that overfits by 3.5-18% (Whisper small,
5 evaluations): tests/test_overfitting_few_evals.py recomputes both."""


def _line(x: np.ndarray, y: np.ndarray, sigma: float) -> tuple[float, float]:
    """Change of the least-squares line through (x, y) over x's span, and its standard error for points of known
    standard deviation `sigma` (se of the slope: sigma / sqrt(Sxx))."""
    dx = x - x.mean()
    sxx = float((dx**2).sum())
    span = float(x[-1] - x[0])
    return float((dx * (y - y.mean())).sum() / sxx * span), sigma * span / math.sqrt(sxx)


def _scatter(x: np.ndarray, y: np.ndarray) -> float:
    """Standard deviation of logged values around their own least-squares line (a trend is not scatter)."""
    slope, intercept = np.polyfit(x, y, 1)
    return float(np.sqrt(((y - slope * x - intercept) ** 2).sum() / (len(y) - 2)))


def _train_drop(loss: pd.Series, best_step: float) -> tuple[float, float]:
    """How far the training loss fell from the best held-out evaluation to the end of the run, on the smoothed loss:
    the mean of the `m` logged values up to the best step less the mean of the last `m` (m: half the shorter of the
    two stretches), and its standard error, each mean's scatter around its stretch's own line over √m (the noise
    where it is read: a fine-tune's loss is noisier early than late). Fewer than three values in a stretch: the
    run's step-to-step noise, std(diff)/√2. Against one batch's noise (the difference of two rolling medians of a
    few values), a fine-tune whose loss drops by 0.3 at an epoch boundary, logged with 0.15 of scatter, read as not
    falling."""
    x, y = loss.index.to_numpy(dtype=float), loss.to_numpy(dtype=float)
    before = int((x <= best_step).sum())
    m = max(min(before, len(y) - before) // 2, 1)
    start = slice(max(before - m, 0), max(before, 1))
    end = slice(len(y) - m, None)
    if m >= 3:
        var = (_scatter(x[start], y[start]) ** 2 + _scatter(x[end], y[end]) ** 2) / m
    else:
        var = 2.0 * (float(np.diff(y).std()) / math.sqrt(2.0)) ** 2 / m if len(y) > 2 else 0.0
    return float(y[start].mean() - y[end].mean()), math.sqrt(var)


def heldout_turn(sig: RunSignals) -> dict[str, Any] | None:
    """The evidence of memorisation, or None: after the best held-out (`val/loss`) evaluation the held-out loss
    turns up, a widening gap (`_gap_line`) or a step (`_step`), while the training loss falls (`_train_drop`).

    A run that recorded evaluations and no training loss (an evaluation log, a results table) has no gap: its
    evidence is the held-out loss alone, rising after its best by more than OVERFIT_Z standard errors while the
    run went on (OVERFIT_AFTER evaluations and more after it); `train_loss` in the evidence says so."""
    val = sig.val_loss()
    val = val[np.isfinite(val.to_numpy(dtype=float))]
    if len(val) < 2:
        raise NotRun(f"{len(val)} evaluations of val/loss: overfitting needs at least 2")
    steps, values = val.index.to_numpy(dtype=float), val.to_numpy(dtype=float)
    best = int(np.argmin(values))
    epochs = sig.epochs()
    common = {"epochs": None if epochs is None else round(epochs, 2), "last_step": int(steps[-1])}
    has_train_loss = "loss" in sig.steps and np.isfinite(sig.steps["loss"].to_numpy(dtype=float)).any()
    if len(val) < OVERFIT_MIN_EVALS:
        if not has_train_loss:
            raise NotRun(
                f"{len(val)} evaluations of val/loss and no training loss: the held-out loss alone needs at least "
                f"{OVERFIT_MIN_EVALS}"
            )
        few = _few_rise(sig, steps, values, best)
        return None if few is None else few | common
    if not has_train_loss:
        alone = _rise_alone(sig, steps, values, best)
        return None if alone is None else alone | common
    loss = sig.column("loss", "a log without training loss")
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    drop, drop_se = _train_drop(loss, float(steps[best]))
    if not drop > OVERFIT_Z * drop_se:  # the training loss did not fall since the best: no memorisation to read
        return None
    turn = _gap_line(sig, steps, values, best, loss) or _step(sig, steps, values, best)
    if turn is None:
        return None
    noise = {"eval_noise": turn.pop("eval_noise")}
    return turn | {"train_loss_drop_after_best": round(drop, 4), "train_drop_se": round(drop_se, 5)} | noise | common


def _few_rise(sig: RunSignals, steps: np.ndarray, values: np.ndarray, best: int) -> dict[str, Any] | None:
    """Two to four evaluations (a fine-tune evaluated once an epoch): their noise cannot be measured, so the held-out
    loss must rise after its best by more than FEW_EVALS_RISE of it at every later evaluation, while the training
    loss falls beyond its own noise (`_train_drop`, the same test as with many evaluations). Weaker evidence than a
    gap read against measured noise: the finding says so, at a lower confidence."""
    after = values[best + 1 :]
    if not len(after):
        return None
    floor = FEW_EVALS_RISE * abs(float(values[best]))
    if not (after - values[best] > floor).all():
        return None
    loss = sig.column("loss", "a log without training loss")
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    drop, drop_se = _train_drop(loss, float(steps[best]))
    if not drop > OVERFIT_Z * drop_se:
        return None
    return {
        "best_step": int(steps[best]),
        "best_val_loss": round(float(values[best]), 4),
        "last_val_loss": round(float(values[-1]), 4),
        "val_rise_least": round(float(np.min(after) - values[best]), 4),
        "rise_floor": round(floor, 5),
        "evaluations": len(values),
        "evaluations_after_best": len(after),
        "few_evaluations": f"{len(values)} evaluations: too few to measure their noise; each later one above the "
        f"best by more than {FEW_EVALS_RISE:.0%} of it",
        "train_loss_drop_after_best": round(drop, 4),
        "train_drop_se": round(drop_se, 5),
    }


def _gap_noise(sig: RunSignals, steps: np.ndarray, values: np.ndarray, best: int) -> float:
    """The noise the gap's line is judged against: that of the evaluations from the best one on. Over the whole run
    the untrained point and the steep first evaluations, which no straight line through neighbours follows, would
    pass for noise (a character model's 5.2 -> 1.2 -> 0.84 made it 0.34, hiding a rise of 0.2). With too few
    evaluations after the best, every trained one (`fit.learning_noise`). A curve that turns inflates the
    difference-based noise a little (the kink at the best): the test errs towards silence."""
    sigma = eval_noise(steps[best:], values[best:]) if len(values) - best >= OVERFIT_NOISE_POINTS else math.nan
    if not math.isfinite(sigma):
        sigma = learning_noise(steps, values, steps, sig.steps)[0]
    return max(sigma, 1e-6 * abs(float(values[best])))


def _rise_alone(sig: RunSignals, steps: np.ndarray, values: np.ndarray, best: int) -> dict[str, Any] | None:
    """No training loss: the held-out loss's line through the evaluations after the best rises beyond OVERFIT_Z
    standard errors. The line leaves the best itself out: the minimum of noisy points is biased low, and would tilt
    the line up on a flat curve."""
    if len(values) - best - 1 < OVERFIT_AFTER:
        return None
    sigma = _gap_noise(sig, steps, values, best)
    rise, rise_se = _line(steps[best + 1 :], values[best + 1 :], sigma)
    if not rise > OVERFIT_Z * rise_se:
        return None
    return {
        "best_step": int(steps[best]),
        "best_val_loss": round(float(values[best]), 4),
        "last_val_loss": round(float(values[-1]), 4),
        "val_change_after_best": round(rise, 4),
        "val_rise_z": round(rise / rise_se, 2),
        "train_loss": "not recorded: the held-out loss alone",
        "eval_noise": round(sigma, 5),
    }


def _gap_line(
    sig: RunSignals, steps: np.ndarray, values: np.ndarray, best: int, loss: pd.Series
) -> dict[str, Any] | None:
    """The train-validation gap widens: its least-squares line through the evaluations after the best (OVERFIT_AFTER
    or more) grows by more than OVERFIT_Z standard errors at the evaluation noise (`_gap_noise`), the training loss
    smoothed (rolling median) before it is read at the evaluation steps, and the held-out loss does not fall."""
    if len(values) - best - 1 < OVERFIT_AFTER:
        return None
    sigma = _gap_noise(sig, steps, values, best)
    after = slice(best + 1, None)
    rise, rise_se = _line(steps[after], values[after], sigma)
    window = max(len(loss) // 20, 5)
    smooth = loss.rolling(window, min_periods=1, center=True).median()
    train = np.interp(steps, smooth.index.to_numpy(dtype=float), smooth.to_numpy(dtype=float))
    # The gap holds the smoothed training loss too: a rolling median of `window` batches scatters by about
    # sqrt(pi/2) * batch noise / sqrt(window) (the batch noise read robustly, as the MAD of the residuals).
    batch = 1.4826 * float(np.median(np.abs((loss - smooth).to_numpy(dtype=float))))
    gap_sigma = math.hypot(sigma, math.sqrt(math.pi / 2) * batch / math.sqrt(window))
    growth, se = _line(steps[after], values[after] - train[after], gap_sigma)
    if not (growth > OVERFIT_Z * se and rise > -rise_se):
        return None
    return {
        "best_step": int(steps[best]),
        "best_val_loss": round(float(values[best]), 4),
        "last_val_loss": round(float(values[-1]), 4),
        "val_change_after_best": round(rise, 4),
        "gap_at_best": round(float(values[best] - train[best]), 4),
        "gap_at_end": round(float(values[-1] - train[-1]), 4),
        "gap_growth": round(growth, 4),
        "gap_growth_z": round(growth / se, 2),
        "eval_noise": round(sigma, 5),
    }


def _step(sig: RunSignals, steps: np.ndarray, values: np.ndarray, best: int) -> dict[str, Any] | None:
    """The held-out loss jumps after its best and stays up: each of the OVERFIT_STEP_AFTER or more evaluations after
    the best is worse than the best beyond the band `yield` puts on a tranche (`stats.evaluation_difference` at the
    run's evaluation noise, `fit.learning_noise`, and TRANCHE_LEVEL). Every one, not their mean: the best is the
    minimum of noisy points, and on a flat curve one or two later points clear it by chance."""
    after = values[best + 1 :]
    if len(after) < OVERFIT_STEP_AFTER:
        return None
    sigma, dof, _ = learning_noise(steps, values, steps, sig.steps)
    bands = [stats.evaluation_difference(float(v - values[best]), sigma, dof, TRANCHE_LEVEL) for v in after]
    if any(b is None or not b.low > 0 for b in bands):
        return None
    first = bands[0]
    assert first is not None  # every band is there (checked above)
    z = float(np.min(after) - values[best]) / (sigma * math.sqrt(2.0))
    return {
        "best_step": int(steps[best]),
        "best_val_loss": round(float(values[best]), 4),
        "last_val_loss": round(float(values[-1]), 4),
        "val_jump_after_best": round(float(after[0] - values[best]), 4),
        "val_jump_band": [round(first.low, 4), round(first.high, 4)],
        "val_rise_least": round(float(np.min(after) - values[best]), 4),
        "val_rise_z": round(z, 2),
        "evaluations_after_best": len(after),
        "eval_noise": round(sigma, 5),
        "noise_dof": dof,
        "level": TRANCHE_LEVEL,
    }


def overfitting(sig: RunSignals) -> list[Finding]:
    """Overfitting (memorisation): the held-out loss turns up after its best evaluation while training goes on
    (`heldout_turn`), most telling at many epochs over few unique samples. A data-side cause: the data is
    exhausted for this model, whatever the schedule."""
    ev = heldout_turn(sig)
    if ev is None:
        return []
    epochs = ev["epochs"]
    best = ev["best_step"]
    seen = f" after {epochs:g} epochs" if epochs is not None else " then"
    more_epochs = 0.15 if epochs is not None and epochs >= 2 else 0.0
    keep = (
        f"stop or keep the checkpoint of step {best}, add fresh unique data, or regularise (weight decay, dropout, "
        "fewer epochs) before training longer"
    )
    if "few_evaluations" in ev:  # two to four evaluations: a rise against a floor, not measured noise
        detector = "heldout_rise_few"
        confidence = 0.35 + 0.05 * min(ev["evaluations_after_best"], 3) + more_epochs / 3
        advice = (
            f"the held-out loss was best at step {best} and is higher at each of the {ev['evaluations_after_best']} "
            f"evaluation(s) after it (by {ev['val_rise_least']:.3g} at least) while the training loss fell{seen}: "
            f"overfitting, read on {ev['evaluations']} evaluations only (evaluate more often to confirm); keep the "
            f"checkpoint of step {best}, add fresh unique data or regularise before training longer"
        )
    elif "train_loss" in ev:  # no training loss: the held-out loss's rise alone, weaker evidence than a gap
        detector, confidence = "heldout_rise", 0.4 + min(0.2, (ev["val_rise_z"] - OVERFIT_Z) / 40) + more_epochs
        advice = (
            f"the held-out loss was best at step {best} and has risen by {ev['val_change_after_best']:.3g} "
            f"({ev['val_rise_z']:g} standard errors) since{seen} while training went on: overfitting or exhausted "
            f"data (no training loss was recorded to show the gap); keep the checkpoint of step {best}, add "
            "fresh unique data or regularise before training longer"
        )
    elif "gap_growth" in ev:
        detector, confidence = "train_val_gap", 0.5 + min(0.25, (ev["gap_growth_z"] - OVERFIT_Z) / 40) + more_epochs
        advice = (
            f"the held-out loss was best at step {best} and the train-validation gap has widened by "
            f"{ev['gap_growth']:.3g} since{seen}: the model memorises its training data; {keep}"
        )
    else:
        detector, confidence = "heldout_step", 0.5 + min(0.25, ev["val_rise_z"] / 40) + more_epochs
        advice = (
            f"the held-out loss was best at step {best}, jumped by {ev['val_jump_after_best']:.3g} at the next "
            f"evaluation and stayed up ({ev['evaluations_after_best']} evaluations, each worse beyond the "
            f"evaluation noise) while the training loss fell{seen}: the model memorises its training data; {keep}"
        )
    return [
        Finding(
            cause="overfitting",
            start_step=best,
            end_step=ev["last_step"],
            confidence=_clip(confidence),
            detector=detector,
            evidence=ev,
            advice=advice,
        )
    ]
