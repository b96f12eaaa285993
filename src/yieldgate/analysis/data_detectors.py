"""Detectors of what the data stream does: data exhaustion, a duplicated stream, a non-i.i.d. stream and mixture
drift (overfitting, memorisation, has its own module: `overfitting.py`). Pure functions over `RunSignals` (see
`detectors.py` for the contract and the thresholds).
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
    PURE_BATCH_EXCESS,
    REPEAT_EXCESS,
    Finding,
    NotRun,
    RunSignals,
    _clip,
    effective_tokens,
    repeat_worth,
)
from yieldgate.analysis.overfitting import heldout_turn

__all__ = ["data_exhaustion", "duplicated_stream", "non_iid_stream", "mixture_drift"]


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
