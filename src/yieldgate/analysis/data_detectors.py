"""Detectors of what the data stream does: data exhaustion, overfitting (memorisation), a duplicated stream, a
non-i.i.d. stream and mixture drift. Pure functions over `RunSignals` (see `detectors.py` for the contract and the
thresholds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.detectors import (
    AUTOCORR_LAG1,
    DRIFT_Z,
    EPOCHS_FRESH,
    OVERFIT_AFTER,
    OVERFIT_MIN_EVALS,
    OVERFIT_NOISE_POINTS,
    OVERFIT_Z,
    PURE_BATCH_EXCESS,
    REPEAT_EXCESS,
    Finding,
    NotRun,
    RunSignals,
    _clip,
    effective_tokens,
    repeat_worth,
)
from yieldgate.analysis.fit import eval_noise, learning_noise

__all__ = ["data_exhaustion", "overfitting", "heldout_turn", "duplicated_stream", "non_iid_stream", "mixture_drift"]


def _source_tokens(sig: RunSignals) -> pd.DataFrame:
    """Cumulative tokens per source by step (columns: source names), or NotRun."""
    cols = sig.prefixed("tokens/")
    if not cols:
        raise NotRun("no per-source token counts (tokens/<source>) recorded")
    frame = sig.steps.set_index("step")[cols].ffill().fillna(0.0)
    frame.columns = [c.removeprefix("tokens/") for c in cols]
    return frame


def _unique_tokens(sig: RunSignals) -> dict[str, float]:
    recipe = sig.manifest.data if sig.manifest else None
    return {s.name: float(s.unique_tokens) for s in recipe.sources if s.unique_tokens} if recipe else {}


def data_exhaustion(sig: RunSignals) -> list[Finding]:
    """Epochs over each source's unique tokens against the repeated-data decay (Muennighoff et al. 2023:
    the next repeated token is worth e^(−R/R*) of a fresh one, R* ≈ 15.4), with the validation evidence."""
    tokens = _source_tokens(sig)
    unique = _unique_tokens(sig)
    if not unique:
        raise NotRun("the manifest declares no unique tokens per source (data.sources[].unique_tokens)")
    found = []
    for source, u in unique.items():
        if source not in tokens or u <= 0:
            continue
        epochs = tokens[source] / u
        final = float(epochs.iloc[-1])
        if final <= EPOCHS_FRESH:
            continue
        worth = repeat_worth(final)
        effective = effective_tokens(final, 1.0)  # D'/U: fresh-data equivalent in epochs
        ev: dict[str, Any] = {
            "source": source,
            "epochs": round(final, 2),
            "unique_tokens": u,
            "next_token_worth": round(worth, 3),
            "effective_epochs": round(effective, 2),
        }
        confidence = 1.0 - worth
        val = sig.val_loss(f"val/{source}")
        if len(val) >= 4:
            tail = val.iloc[len(val) // 2 :]
            ev["val_change_second_half"] = round(float(tail.iloc[-1] - tail.iloc[0]), 4)
            if tail.iloc[-1] >= tail.min():  # flat or rising on that source while training goes on
                confidence += 0.1
        start = int(epochs.index[np.argmax(epochs.to_numpy() > EPOCHS_FRESH)])
        found.append(
            Finding(
                cause="data_exhaustion",
                start_step=start,
                end_step=int(epochs.index[-1]),
                confidence=_clip(confidence),
                detector="epochs",
                evidence=ev,
                advice=f"{source} was seen {final:.1f} times: its next token is worth {worth:.2f} of a fresh one; add "
                f"unique data for it or lower its weight before buying more compute",
            )
        )
    return found


def _line(x: np.ndarray, y: np.ndarray, sigma: float) -> tuple[float, float]:
    """Change of the least-squares line through (x, y) over x's span, and its standard error for points of known
    standard deviation `sigma` (se of the slope: sigma / sqrt(Sxx))."""
    dx = x - x.mean()
    sxx = float((dx**2).sum())
    span = float(x[-1] - x[0])
    return float((dx * (y - y.mean())).sum() / sxx * span), sigma * span / math.sqrt(sxx)


def heldout_turn(sig: RunSignals) -> dict[str, Any] | None:
    """The evidence of memorisation, or None: after the best held-out (`val/loss`) evaluation the training loss
    keeps falling while the held-out loss rises or stays flat, so the train-validation gap widens beyond the
    evaluations' noise. The gap's change is the least-squares line through the gap at the evaluations from the
    best one on, against its standard error at the evaluation noise (`fit.eval_noise`, difference-based); the
    training loss is smoothed (rolling median) before it is read at the evaluation steps, and must have fallen
    beyond its own noise since the best evaluation.

    A run that recorded evaluations and no training loss (an evaluation log, a results table) has no gap: its
    evidence is the held-out loss alone, rising after its best by more than OVERFIT_Z standard errors while the
    run went on (OVERFIT_AFTER evaluations and more after it); `train_loss` in the evidence says so."""
    val = sig.val_loss()
    val = val[np.isfinite(val.to_numpy(dtype=float))]
    if len(val) < OVERFIT_MIN_EVALS:
        raise NotRun(f"{len(val)} evaluations of val/loss: overfitting needs at least {OVERFIT_MIN_EVALS}")
    has_train_loss = "loss" in sig.steps and np.isfinite(sig.steps["loss"].to_numpy(dtype=float)).any()
    steps, values = val.index.to_numpy(dtype=float), val.to_numpy(dtype=float)
    best = int(np.argmin(values))
    if len(values) - best - 1 < OVERFIT_AFTER:
        return None
    # The noise where the gap is judged: the evaluations from the best one on. Over the whole run the untrained
    # point and the steep first evaluations, which no straight line through neighbours follows, would pass for
    # noise (a character model's 5.2 -> 1.2 -> 0.84 made it 0.34, hiding a rise of 0.2). With too few evaluations
    # after the best, every trained one (`fit.learning_noise`). A curve that turns inflates the difference-based noise a
    # little (the kink at the best): the test errs towards silence.
    sigma = eval_noise(steps[best:], values[best:]) if len(values) - best >= OVERFIT_NOISE_POINTS else math.nan
    if not math.isfinite(sigma):
        sigma = learning_noise(steps, values, steps, sig.steps)[0]
    sigma = max(sigma, 1e-6 * abs(float(values[best])))
    # The line runs through the evaluations after the best one: the best itself is the minimum of noisy points,
    # biased low, and would tilt the line up on a flat curve.
    after = slice(best + 1, None)
    rise, rise_se = _line(steps[after], values[after], sigma)
    epochs = sig.epochs()
    if not has_train_loss:
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
            "epochs": None if epochs is None else round(epochs, 2),
            "last_step": int(steps[-1]),
        }
    loss = sig.column("loss", "a log without training loss")
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    width = max(len(loss) // 20, 5)
    smooth = loss.rolling(width, min_periods=1, center=True).median()
    # Standard error of the difference of two smoothed points: a median of `width` values has ~1.25 σ/√width.
    train_se = 1.25 * float(np.diff(loss.to_numpy(dtype=float)).std() / math.sqrt(2)) * math.sqrt(2 / width)
    train = np.interp(steps, smooth.index.to_numpy(dtype=float), smooth.to_numpy(dtype=float))
    growth, se = _line(steps[after], values[after] - train[after], sigma)
    train_drop = float(train[best] - train[-1])
    if not (growth > OVERFIT_Z * se and train_drop > OVERFIT_Z * train_se and rise > -rise_se):
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
        "train_loss_drop_after_best": round(train_drop, 4),
        "eval_noise": round(sigma, 5),
        "epochs": None if epochs is None else round(epochs, 2),
        "last_step": int(steps[-1]),
    }


def overfitting(sig: RunSignals) -> list[Finding]:
    """Overfitting (memorisation): the train-validation gap widens after the best held-out evaluation
    (`heldout_turn`), most telling at many epochs over few unique samples. A data-side cause: the data is
    exhausted for this model, whatever the schedule."""
    ev = heldout_turn(sig)
    if ev is None:
        return []
    epochs = ev["epochs"]
    best = ev["best_step"]
    seen = f" after {epochs:g} epochs" if epochs is not None else " then"
    more_epochs = 0.15 if epochs is not None and epochs >= 2 else 0.0
    if "gap_growth" not in ev:  # no training loss: the held-out loss's rise alone, weaker evidence than a gap
        detector, confidence = "heldout_rise", 0.4 + min(0.2, (ev["val_rise_z"] - OVERFIT_Z) / 40) + more_epochs
        advice = (
            f"the held-out loss was best at step {best} and has risen by {ev['val_change_after_best']:.3g} "
            f"({ev['val_rise_z']:g} standard errors) since{seen} while training went on: overfitting or exhausted "
            f"data (no training loss was recorded to show the gap); keep the checkpoint of step {best}, add "
            "fresh unique data or regularise before training longer"
        )
    else:
        detector, confidence = "train_val_gap", 0.5 + min(0.25, (ev["gap_growth_z"] - OVERFIT_Z) / 40) + more_epochs
        advice = (
            f"the held-out loss was best at step {best} and the train-validation gap has widened by "
            f"{ev['gap_growth']:.3g} since{seen}: the model memorises its training data; stop or keep "
            f"the checkpoint of step {best}, add fresh unique data, or regularise (weight decay, "
            "dropout, fewer epochs) before training longer"
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


def _expected_repeat(tokens: pd.DataFrame, unique: dict[str, float]) -> np.ndarray:
    """Share of each step's tokens from sources already past one epoch: the repeats the declared data explains."""
    delta = tokens.diff().fillna(tokens.iloc[[0]]).to_numpy()
    before = tokens.shift(1).fillna(0.0)
    past = np.column_stack(
        [(before[c] >= unique[c]).to_numpy() if c in unique else np.zeros(len(tokens), bool) for c in tokens.columns]
    )
    total = delta.sum(axis=1)
    return np.where(total > 0, (delta * past).sum(axis=1) / np.maximum(total, 1e-12), 0.0)


def duplicated_stream(sig: RunSignals) -> list[Finding]:
    """The stream repeats samples more than its declared unique data explains (sample ids over a window)."""
    rate = sig.column("stream/repeat_rate", "the Tracker records it from sample ids or hashes")
    unique = _unique_tokens(sig)
    expected = np.zeros(len(rate))
    note = None
    try:
        tokens = _source_tokens(sig).reindex(rate.index).ffill().fillna(0.0)
        expected = _expected_repeat(tokens, unique)
    except NotRun:
        pass
    if not unique:
        note = "no unique tokens in the manifest: every repeat counts as excess"
    excess = rate.to_numpy() - expected
    window = max(len(excess) // 5, 1)
    trailing = float(excess[-window:].mean())
    if trailing <= REPEAT_EXCESS:
        return []
    rolling = pd.Series(excess).rolling(10, min_periods=1).mean().to_numpy()
    start = int(rate.index[np.argmax(rolling > REPEAT_EXCESS)])
    ev: dict[str, Any] = {
        "repeat_rate": round(float(rate.iloc[-window:].mean()), 4),
        "explained_by_epochs": round(float(expected[-window:].mean()), 4),
        "excess": round(trailing, 4),
    }
    if note:
        ev["note"] = note
    return [
        Finding(
            cause="duplicated_stream",
            start_step=start,
            end_step=int(rate.index[-1]),
            confidence=_clip((0.5 + trailing) * (1.0 if unique else 0.7)),
            detector="repeat_rate",
            evidence=ev,
            advice="the trainer sees the same samples again and again although the data holds more: check "
            "the sampler/loader (a loop over a small subset, workers with the same seed, a resumed "
            "iterator)",
        )
    ]


def non_iid_stream(sig: RunSignals) -> list[Finding]:
    """Batches that are not i.i.d. draws of the mixture: single-source batches far above what i.i.d. draws give
    (per-source counts), or a strongly autocorrelated detrended training loss."""
    loss = sig.column("loss", "a log without training loss")
    ev: dict[str, Any] = {}
    confidence = 0.0
    try:
        tokens = _source_tokens(sig)
        counts = tokens.diff().fillna(tokens.iloc[[0]])
        per_step = counts.sum(axis=1)
        keep = per_step > 0
        counts, per_step = counts[keep], per_step[keep]
        if len(counts) >= 20:
            share = counts.sum() / per_step.sum()
            samples = per_step / max(float(_context(sig)), 1.0)
            # i.i.d. draws: P(one batch is all one source) = sum_s p_s^n.
            expected = float(np.mean([(share**n).sum() for n in samples.round().clip(lower=1)]))
            pure = float(((counts.max(axis=1) / per_step) > 0.999).mean())
            ev |= {"single_source_batches": round(pure, 3), "expected_if_iid": round(expected, 4)}
            if pure - expected > PURE_BATCH_EXCESS:
                confidence = max(confidence, _clip(0.5 + (pure - expected) / 2))
    except NotRun:
        ev["note"] = "no per-source counts: batch composition not checked"
    values = loss.to_numpy(dtype=float)
    values = values[np.isfinite(values)][20:]
    try:
        turned = heldout_turn(sig)
    except NotRun:
        turned = None
    epochs = sig.epochs()
    if turned is not None or (epochs is not None and epochs > 1):
        # Memorisation and repeated epochs make the training loss move in runs (each epoch's pass over the same
        # samples, a falling level per epoch): the autocorrelation is explained, not evidence of the stream.
        ev["loss_autocorr"] = "not read: " + (
            "the held-out loss turned (overfitting)" if turned is not None else f"{epochs:.3g} epochs"
        )
    elif len(values) >= 40:
        trend = pd.Series(values).rolling(21, center=True, min_periods=11).median().to_numpy()
        resid = values - trend
        resid = resid[np.isfinite(resid)]
        resid = resid - resid.mean()
        rho = float(np.corrcoef(resid[:-1], resid[1:])[0, 1])
        ev["loss_autocorr_lag1"] = round(rho, 3)
        if rho > AUTOCORR_LAG1:
            confidence = max(confidence, _clip(0.4 + rho - AUTOCORR_LAG1))
    if "signals/loss_var" in sig.steps:
        ev["loss_var_median"] = float(np.nanmedian(sig.steps["signals/loss_var"]))
    if confidence <= 0:
        return []
    return [
        Finding(
            cause="non_iid_stream",
            start_step=int(loss.index[0]),
            end_step=int(loss.index[-1]),
            confidence=confidence,
            detector="batch_composition",
            evidence=ev,
            advice="batches are not i.i.d. draws of the mixture: shuffle across sources and documents, and "
            "give every loader worker its own slice of one shared shuffle",
        )
    ]


def _context(sig: RunSignals) -> float:
    m = sig.manifest
    if m and m.data and m.data.sequence_length:
        return float(m.data.sequence_length)
    if m and m.model and m.model.context:
        return float(m.model.context)
    s = sig.steps
    if "samples" in s and s["samples"].notna().any() and s["samples"].max() > 0:
        return float(s["tokens"].max() / s["samples"].max())
    raise NotRun("no sequence length (manifest) or sample counts to turn tokens into samples")


def mixture_drift(sig: RunSignals) -> list[Finding]:
    """The realised share of each source drifting from the manifest's weights over the run."""
    tokens = _source_tokens(sig)
    recipe = sig.manifest.data if sig.manifest else None
    if recipe is None:
        raise NotRun("no manifest recipe: the intended weights are unknown")
    if recipe.curriculum.kind != "shuffled":
        raise NotRun(f"curriculum {recipe.curriculum.kind!r}: the intended share changes by design")
    weights = {s.name: s.weight for s in recipe.sources}
    total_w = sum(weights.values())
    total = tokens.iloc[-1].sum()
    samples = total / _context(sig)
    if samples < 50:
        raise NotRun(f"{samples:.0f} samples seen: too few to measure shares")
    worst: tuple[float, str] = (0.0, "")
    ev: dict[str, Any] = {}
    for source, w in weights.items():
        p = w / total_w
        share = float(tokens[source].iloc[-1] / total) if source in tokens else 0.0
        z = abs(share - p) / math.sqrt(max(p * (1 - p), 1e-12) / samples)
        ev[source] = {"weight": round(p, 4), "realised": round(share, 4), "z": round(z, 1)}
        worst = max(worst, (z, source))
    z, source = worst
    if z < DRIFT_Z:
        return []
    # Where it began: the first tenth of the run whose own share of the worst source is off by 3 standard errors.
    p = weights[source] / total_w
    chunks = np.array_split(np.arange(len(tokens)), 10)
    start = int(tokens.index[0])
    for idx in chunks:
        seg = tokens.iloc[[idx[0], idx[-1]]].diff().iloc[-1]
        n = seg.sum() / _context(sig)
        if n > 0 and abs(seg.get(source, 0.0) / seg.sum() - p) > 3 * math.sqrt(p * (1 - p) / n):
            start = int(tokens.index[idx[0]])
            break
    return [
        Finding(
            cause="mixture_drift",
            start_step=start,
            end_step=int(tokens.index[-1]),
            confidence=_clip(0.3 + 0.03 * z),
            detector="source_shares",
            evidence={"worst": source, **ev},
            advice=f"the realised share of {source} drifted from its manifest weight: check the pipeline's "
            "per-source sampling (a filter or loader change) before its effect reaches the evals",
        )
    ]
