"""Detectors of how the run learns: the schedule (LR too high, too low, no warm-up), a plateau at constant LR
(stalled, cause undetermined until a cooldown tells the schedule from the data), an undertrained model, a
throughput change that altered learning, and early warnings in the learning signals. Pure functions over
`RunSignals` (see `detectors.py` for the contract and the thresholds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.detectors import (
    COOLDOWN_DROP_SIGMA,
    EARLY_JUMP_SIGMA,
    ENTROPY_COLLAPSE,
    LOW_CONFIDENCE,
    PLATEAU_RATIO,
    PLATEAU_SHARE,
    PLATEAU_T,
    SLOW_DROP,
    TOKENS_PER_PARAM,
    UNDERTRAINED_FACTOR,
    UNTRAINED_START,
    WARMUP_START,
    Finding,
    NotRun,
    RunSignals,
    _clip,
)

__all__ = ["schedule", "undertrained", "throughput_altered_learning", "early_warnings"]


def _median_update_ratio(sig: RunSignals) -> float | None:
    cols = sig.prefixed("signals/update_ratio/")
    if not cols:
        return None
    return float(np.nanmedian(sig.steps[cols].to_numpy(dtype=float)))


def _slope_t(values: np.ndarray) -> float:
    """t statistic of the least-squares slope of `values` against their index (residual standard error)."""
    x = np.arange(len(values), dtype=float)
    slope, intercept = np.polyfit(x, values, 1)
    resid = values - (slope * x + intercept)
    se = math.sqrt(float((resid**2).sum()) / max(len(values) - 2, 1) / float(((x - x.mean()) ** 2).sum()))
    return float(slope / se) if se > 0 else (0.0 if slope == 0 else math.copysign(math.inf, slope))


@dataclass(frozen=True)
class _Curve:
    """The loss and LR columns as the schedule detector reads them."""

    loss: pd.Series
    lr: pd.Series
    values: np.ndarray
    """The loss by step, NaN included."""
    peak: float
    """The peak LR."""
    start_loss: float
    """The mean loss over the first five steps."""

    @property
    def n(self) -> int:
        return len(self.loss)

    @property
    def tenth(self) -> int:
        """A tenth of the steps, at least 5: the stretch read at either end of the run."""
        return max(self.n // 10, 5)


def schedule(sig: RunSignals) -> list[Finding]:
    """Learning rate too high (the loss rises at the peak LR, or activations collapse there), too low (a slow,
    steady descent), a missing warm-up (the first step at the peak LR), and a plateau at the peak LR, from the lr
    and loss columns. A plateau is "stalled, cause undetermined" (`_plateau`) unless a cooldown after it, or an
    activation collapse, says which. Never "too high" and "too low" at once."""
    loss = sig.column("loss", "a log without training loss")
    lr = sig.column("lr", "a log without the learning rate")
    last = sig.final_step()  # rows past it are another attempt's (or run's) that the log mixes in: not this curve
    if last is not None:
        loss, lr = loss.loc[:last], lr.loc[:last]
    n = len(loss)
    if n < 40:
        raise NotRun(f"{n} steps with a loss: the schedule needs at least 40")
    values = loss.to_numpy(dtype=float)
    curve = _Curve(loss, lr, values, peak=float(lr.max()), start_loss=float(np.nanmean(values[:5])))
    found = []
    warmup = _no_warmup(sig, curve)
    if warmup is not None:
        found.append(warmup)
    at_peak, stalled = _peak_phase(sig, curve)
    found += at_peak
    too_high = any(f.detector == "lr_too_high" for f in found)
    # Too low: a descent that is slow over the run yet steady (its tail still falls beyond the noise), never beside
    # a too-high finding or a plateau.
    if not too_high and not stalled:
        too_low = _too_low(sig, curve)
        if too_low is not None:
            found.append(too_low)
    return found


def _untrained_loss(sig: RunSignals) -> float | None:
    """ln(vocabulary size): the loss of a model that predicts every token alike, where a run from scratch starts
    (None: the manifest gives no vocabulary size)."""
    model = sig.manifest.model if sig.manifest else None
    tokenizer = sig.manifest.data.tokenizer if sig.manifest and sig.manifest.data else None
    vocab = (model.vocab_size if model else None) or (tokenizer.vocab_size if tokenizer else None)
    return math.log(vocab) if vocab and vocab > 1 else None


def _early_jump(early: np.ndarray) -> bool:
    """The loss rose from one step to the next beyond its step-to-step noise: a rise more than EARLY_JUMP_SIGMA robust
    standard deviations (1.4826 x the median absolute deviation) above the median change. Against three times the
    median absolute change, one step of plain batch noise in 40 cleared it (a Gaussian difference passes 2σ one time
    in 44), and a noisy fine-tune read as unstable."""
    if len(early) < 4:
        return False
    d = np.diff(early)
    centre = float(np.median(d))
    spread = 1.4826 * float(np.median(np.abs(d - centre)))
    return bool(((d > 0) & (d - centre > EARLY_JUMP_SIGMA * spread)).any())


def _no_warmup(sig: RunSignals, c: _Curve) -> Finding | None:
    """Missing warm-up: the schedule itself says so; early instability in the loss (a jump, or most early steps
    clipped) makes it a finding (0.85). Without it, a missing warm-up is a cause only where the model started
    untrained (its first loss near ln(vocabulary), `UNTRAINED_START` of it or more: Adam's first steps at the peak
    LR from random weights, 0.6); a fine-tune, or a run whose start is not known to be untrained, gets a note
    (LOW_CONFIDENCE): nothing in its loss says the schedule cost it anything. A warm-up that is there but short (the
    first step at half the peak or more, below it: a 2-step ramp of a 49-step probe) is a note too unless the run was
    unstable early."""
    first_lr = float(c.lr.iloc[0])
    if first_lr < WARMUP_START * c.peak:
        return None
    unstable = _early_jump(c.values[np.isfinite(c.values)][: c.tenth])
    clip = sig.steps["clipped"].iloc[: c.tenth].mean() if "clipped" in sig.steps else np.nan
    damaged = unstable or (not np.isnan(clip) and clip > 0.5)
    ramp = first_lr < c.peak * (1 - 1e-9)
    evidence: dict[str, Any] = {
        "peak_lr": c.peak,
        "first_lr": first_lr,
        "early_loss_jump": unstable,
        "early_clipped_share": None if np.isnan(clip) else round(float(clip), 3),
    }
    untrained = _untrained_loss(sig)
    first_loss = float(c.values[np.isfinite(c.values)][0])
    from_scratch = untrained is not None and first_loss >= UNTRAINED_START * untrained
    if damaged or ramp or from_scratch:
        confidence = 0.85 if damaged else LOW_CONFIDENCE if ramp else 0.6
        advice = (
            f"a short warm-up: the first step ran at {first_lr / c.peak:.0%} of the peak LR; warm up over the first "
            "~1-5% of steps"
            if ramp
            else "no warm-up: the first step ran at the peak LR; warm up over the first ~1-5% of steps"
        )
    else:
        evidence |= {
            "first_loss": round(first_loss, 4),
            "untrained_loss": None if untrained is None else round(untrained, 4),
        }
        confidence = LOW_CONFIDENCE
        advice = (
            "a note: the first step ran at the peak LR (no warm-up), and the loss shows no early instability and "
            f"{'did not start' if untrained is not None else 'is not known to start'} untrained (a fine-tune needs "
            "little warm-up): nothing says the schedule cost this run"
        )
    return Finding(
        cause="schedule",
        start_step=int(c.lr.index[0]),
        end_step=int(c.lr.index[min(c.n // 10, c.n - 1)]),
        confidence=confidence,
        detector="no_warmup",
        evidence=evidence,
        advice=advice,
    )


def _peak_phase(sig: RunSignals, c: _Curve) -> tuple[list[Finding], bool]:
    """The peak-LR phase (steps at >= 95% of the peak, its first tenth skipped: the end of warm-up's descent): the
    loss rising there or the activations collapsing (LR too high), or a plateau (`_plateau`); and whether it
    stalled."""
    at_peak = c.lr.index[c.lr.to_numpy() >= 0.95 * c.peak]
    phase = c.loss.loc[at_peak[0] : at_peak[-1]] if len(at_peak) else c.loss.iloc[:0]
    phase = phase[np.isfinite(phase.to_numpy(dtype=float))]
    collapsed = _entropy_collapse(sig)
    if len(phase) < 40:
        return [], False
    phase = phase.iloc[len(phase) // 10 :]
    q = np.array_split(phase.to_numpy(dtype=float), 4)
    first_q, last_q = float(q[0].mean()), float(q[-1].mean())
    step_noise = float(np.std(np.diff(phase.to_numpy(dtype=float)))) / np.sqrt(2)
    noise = step_noise / np.sqrt(len(q[0]))  # standard error of a quarter's mean
    before = c.start_loss - first_q  # what the run learned before the peak phase settled
    progress = first_q - last_q
    ratio = progress / before if before > 0 else np.nan
    slope_t = _slope_t(phase.to_numpy(dtype=float)[len(phase) // 2 :])
    ev = {
        "peak_lr": c.peak,
        "loss_start": round(c.start_loss, 4),
        "peak_phase_first_quarter": round(first_q, 4),
        "peak_phase_last_quarter": round(last_q, 4),
        "progress_ratio": round(float(ratio), 4),
        "second_half_slope_t": round(slope_t, 2),
    }
    start, end = int(phase.index[0]), int(phase.index[-1])
    if progress < -3 * noise and progress < -0.01 * abs(first_q):
        advice = "LR too high: the loss rises at the peak LR; lower the peak LR (try /3-/10)"
        return [_too_high(start, end, {**ev, "diverging": True}, advice)], False
    if before > 0 and collapsed is not None:
        advice = (
            "LR too high: learning stalled at the peak LR while the activations collapsed (Wortsman et al. 2023); "
            "lower the peak LR (try /3-/10) and compare a short probe"
        )
        return [_too_high(start, end, {**ev, "act_entropy_share": collapsed}, advice)], False
    if slope_t > PLATEAU_T and not ratio >= PLATEAU_RATIO and len(phase) >= PLATEAU_SHARE * c.n:
        # Flat within its noise, after learning little (or nothing) in a long constant-LR phase: a plateau. The
        # few peak steps of a cosine schedule are no constant-LR phase, and its decay no cooldown experiment.
        return _plateau(sig, c.loss, c.lr, phase, q[-1], step_noise, ev), True
    return [], False


def _too_high(start: int, end: int, evidence: dict[str, Any], advice: str) -> Finding:
    return Finding(
        cause="schedule",
        start_step=start,
        end_step=end,
        confidence=0.9,
        detector="lr_too_high",
        evidence=evidence,
        advice=advice,
    )


def _too_low(sig: RunSignals, c: _Curve) -> Finding | None:
    """LR too low: a slow descent over the run whose tail still falls beyond the noise."""
    end_loss = float(np.nanmean(c.values[-c.tenth :]))
    drop = (c.start_loss - end_loss) / c.start_loss if c.start_loss > 0 else np.nan
    tail = c.values[np.isfinite(c.values)][-c.n // 4 :]
    tail_t = _slope_t(tail) if len(tail) > 5 else 0.0
    if not (0 <= drop < SLOW_DROP and tail_t < PLATEAU_T):
        return None
    ratio_u = _median_update_ratio(sig)
    return Finding(
        cause="schedule",
        start_step=int(c.loss.index[0]),
        end_step=int(c.loss.index[-1]),
        confidence=0.75 + (0.15 if ratio_u is not None and ratio_u < 2e-3 else 0.0),
        detector="lr_too_low",
        evidence={
            "peak_lr": c.peak,
            "relative_loss_drop": round(float(drop), 4),
            "tail_slope_t": round(tail_t, 2),
            "update_ratio_median": ratio_u,
        },
        advice="LR too low: the loss falls slowly and steadily, far from where it could be; raise "
        "the peak LR (try x3-x10) and compare a short probe",
    )


COOLDOWN = (
    "cool the LR down from the plateau over a short stretch (~10% of the steps so far) and evaluate: for a "
    "probe, run probe.cooldown.cooldown_probe(source_run=<run>, cooldown_tokens=<~10% of its tokens>), which "
    "diagnose reads back as the run's cooldown"
)


def _cooldown_after(
    sig: RunSignals, loss: pd.Series, lr: pd.Series, start: int, end: int
) -> tuple[pd.Series, str | None]:
    """The finite losses of a cooldown after the plateau (LR below half the peak): the run's own steps after `end`,
    else those of the last linked cooldown run (`RunSignals.cooldowns`) that starts after the plateau began."""
    peak = float(lr.max())
    after = loss.loc[end + 1 :]
    cool = after[(lr.reindex(after.index) < 0.5 * peak).to_numpy() & np.isfinite(after.to_numpy(dtype=float))]
    if len(cool) >= 10:
        return cool, None
    for name, frame in reversed(list(sig.cooldowns.items())):
        frame = frame.dropna(subset=["loss", "lr"])
        if not len(frame) or frame["step"].min() <= start:
            continue  # branched off before the plateau began: it says nothing about the plateau
        frame = frame[(frame["lr"] < 0.5 * peak) & np.isfinite(frame["loss"])]
        if len(frame) >= 10:
            return frame.set_index("step")["loss"], name
    return cool, None


def _plateau(
    sig: RunSignals, loss: pd.Series, lr: pd.Series, phase: pd.Series, last_q: np.ndarray, step_noise: float, ev: dict
) -> list[Finding]:
    """A plateau at the peak LR. A cooldown after it is the discriminating experiment, already run: in the run, or in
    a linked run that continues it with the LR cooled down (`probe.cooldown`, meta `cooldown_of`). A drop beyond
    COOLDOWN_DROP_SIGMA standard errors means the LR's noise floor was the limit (schedule), none means the data.
    Without one the cause is undetermined: a `stalled` finding ranking the candidates and naming the experiment."""
    start, end = int(phase.index[0]), int(phase.index[-1])
    cool, linked = _cooldown_after(sig, loss, lr, start, end)
    plateau = float(last_q.mean())
    if len(cool) >= 10:
        tail = cool.to_numpy(dtype=float)[-max(len(cool) // 4, 5) :]
        drop = plateau - float(tail.mean())
        se = step_noise * math.sqrt(1 / len(last_q) + 1 / len(tail))
        here = {
            **ev,
            "cooldown_from_step": int(cool.index[0]),
            "cooldown_drop": round(drop, 4),
            "cooldown_drop_se": round(se, 5),
        }
        where = "once the LR cooled down"
        if linked is not None:
            here["cooldown_run"] = linked
            where = f"in the cooldown run {linked!r}"
        if drop > COOLDOWN_DROP_SIGMA * se and drop > 0.01 * abs(plateau):
            return [
                Finding(
                    cause="schedule",
                    start_step=start,
                    end_step=int(cool.index[-1]),
                    confidence=0.8,
                    detector="plateau_cooldown",
                    evidence=here,
                    advice=f"the loss plateaued at the peak LR and fell by {drop:.3g} {where}: "
                    "the LR's noise floor was the limit; lower the peak LR or cool down earlier",
                )
            ]
        return [
            Finding(
                cause="data_exhaustion",
                start_step=start,
                end_step=int(cool.index[-1]),
                confidence=0.7,
                detector="plateau_cooldown",
                evidence=here,
                advice=f"the loss plateaued at the peak LR and did not fall {where} (by {drop:.3g}, within "
                f"{COOLDOWN_DROP_SIGMA:g} standard errors of {se:.2g}): the data (for this model), not "
                "the schedule, is the limit; add fresh data before more compute",
            )
        ]
    epochs = sig.epochs()
    candidates = [
        {
            "cause": "schedule",
            "why": "the loss sits at the noise floor the constant LR sets; a lower LR would go lower",
        },
        {
            "cause": "data_exhaustion",
            "why": "the data has no more to teach this model"
            + (f" ({epochs:.3g} epochs over it)" if epochs is not None else ""),
        },
    ]
    if epochs is not None and epochs > 1:
        candidates.reverse()  # repeated data makes the data the likelier limit
    return [
        Finding(
            cause="stalled",
            start_step=start,
            end_step=end,
            confidence=0.5,
            detector="plateau",
            evidence={**ev, "candidates": candidates, "experiment": COOLDOWN},
            advice=f"learning stalled at constant LR from step {start}, cause undetermined: "
            f"{candidates[0]['cause']} or {candidates[1]['cause']}; to tell them apart, {COOLDOWN}: a "
            "drop means the schedule was the limit, no drop means the data",
        )
    ]


def _entropy_collapse(sig: RunSignals) -> float | None:
    """Median activation entropy as a share of its maximum ln(width), when below ENTROPY_COLLAPSE; else None."""
    cols = sig.prefixed("signals/act_entropy/")
    width = sig.manifest.model.width if sig.manifest and sig.manifest.model else None
    if not cols or not width or width < 2:
        return None
    share = float(np.nanmedian(sig.steps[cols].to_numpy(dtype=float))) / float(np.log(width))
    return round(share, 4) if share < ENTROPY_COLLAPSE else None


def undertrained(sig: RunSignals) -> list[Finding]:
    """Tokens per parameter far below Chinchilla's ~20 at the end of the run. Parameters from the manifest's
    `model.params`, else from the model the Tracker held (the run's `model` meta)."""
    m = sig.manifest.model if sig.manifest else None
    params = m.params if m is not None and m.params else (sig.meta.get("model") or {}).get("params")
    if not params:
        raise NotRun("no parameter count: the manifest gives no model.params and no model was handed to the Tracker")
    tokens = sig.column("tokens", "accepted tokens per step")
    per_param = float(tokens.iloc[-1]) / params
    if per_param >= TOKENS_PER_PARAM / UNDERTRAINED_FACTOR:
        return []
    return [
        Finding(
            cause="undertrained",
            start_step=int(tokens.index[0]),
            end_step=int(tokens.index[-1]),
            confidence=_clip(0.4 + 0.5 * (1 - per_param * UNDERTRAINED_FACTOR / TOKENS_PER_PARAM)),
            detector="tokens_per_param",
            evidence={"tokens": float(tokens.iloc[-1]), "params": params, "tokens_per_param": round(per_param, 2)},
            advice=f"{per_param:.1f} tokens per parameter, far below ~{TOKENS_PER_PARAM:.0f}: train longer or "
            "use a smaller model before reading its loss as the data's limit",
        )
    ]


def throughput_altered_learning(sig: RunSignals) -> list[Finding]:
    """The small-batch baseline check's verdict (`track.batch_check`), when one is recorded as run meta
    `batch_check` (the fields of `BatchCheckResult`)."""
    check = sig.meta.get("batch_check")
    if not isinstance(check, dict) or "altered" not in check:
        raise NotRun(
            "no small-batch baseline check recorded for this run (run meta 'batch_check', the fields of "
            "track.batch_check.BatchCheckResult)"
        )
    if not check["altered"]:
        return []
    steps = sig.steps["step"]
    ev = {
        k: check.get(k)
        for k in (
            "relative_loss",
            "standard_error",
            "baseline_learning_per_token",
            "candidate_learning_per_token",
            "tokens",
        )
    }
    return [
        Finding(
            cause="throughput_altered_learning",
            start_step=int(steps.min()) if len(steps) else 0,
            end_step=int(steps.max()) if len(steps) else 0,
            confidence=0.9,
            detector="batch_check",
            evidence=ev,
            advice="the throughput change costs learning per token beyond noise: keep the small-batch setting, "
            "or retune LR for the new batch before trusting its tokens/s",
        )
    ]


HEURISTIC = (
    "a learning signal moving before the validation loss (a falling gradient noise scale, collapsing entropy "
    "or update ratios, more clipping) is a heuristic early warning, not an established cause; its lead is "
    "measured on the fault suite by benchmarks/bench_diagnose.py"
)


def _first_cross(series: pd.Series, level: float, below: bool) -> int | None:
    hit = series[series < level] if below else series[series > level]
    return int(hit.index[0]) if len(hit) else None


def early_warnings(sig: RunSignals) -> list[Finding]:
    """Learning signals that may move before the validation loss does: gradient noise scale falling, activation
    entropy collapsing, update/weight ratios collapsing, a rising share of clipped steps. Each is compared
    between the second and the last quarter of the run, with its lead over the validation loss when that moved.

    A heuristic, labelled so (evidence `heuristic`, advice "heuristic"): that a falling gradient noise scale comes
    before a degrading validation loss is an observation, not an established law; its lead on the fault suite is
    measured, not assumed (`benchmarks/bench_diagnose.py` prints it). No advice rests on it beyond watching."""
    s = sig.steps.set_index("step")
    signals: dict[str, pd.Series] = {}
    if "signals/gns" in s and s["signals/gns"].notna().sum() >= 8:
        signals["gns"] = s["signals/gns"].dropna()
    for prefix, name in (("signals/act_entropy/", "act_entropy"), ("signals/update_ratio/", "update_ratio")):
        cols = [c for c in s.columns if c.startswith(prefix)]
        if cols and s[cols].notna().any(axis=1).sum() >= 8:
            series = s[cols].median(axis=1).dropna()
            if name == "update_ratio" and "lr" in s:
                # Per unit of LR: a schedule's cooldown lowers the ratio by design, a stalled layer does not follow it.
                series = (series / s["lr"].reindex(series.index)).dropna()
            signals[name] = series
    if "clipped" in s and s["clipped"].notna().sum() >= 40:
        signals["clipped_share"] = s["clipped"].dropna().rolling(20, min_periods=10).mean().dropna()
    if not signals:
        raise NotRun("no learning signals recorded (signals/gns, act_entropy, update_ratio, clipped)")
    val = sig.val_loss()
    val_turn = None
    if len(val) >= 3:
        # The validation loss "turns" where it first rises 1% above its best so far (eval noise stays below that).
        best = np.minimum.accumulate(val.to_numpy())
        rising = val.index[val.to_numpy() > 1.01 * best]
        val_turn = int(rising[0]) if len(rising) else None
    found = []
    for name, series in signals.items():
        quarters = np.array_split(series.to_numpy(dtype=float), 4)
        mid, last = float(np.nanmedian(quarters[1])), float(np.nanmedian(quarters[-1]))
        falling = name != "clipped_share"
        if falling:
            moved = mid > 0 and last < 0.5 * mid  # collapsed to under half of its mid-run level
            at = _first_cross(series, 0.5 * mid, below=True) if moved else None
        else:
            moved = last > max(0.2, 2 * mid)
            at = _first_cross(series, max(0.2, 2 * mid), below=False) if moved else None
        if not moved or at is None:
            continue
        lead = (val_turn - at) if val_turn is not None else None
        how = "fell to under half its mid-run level" if falling else "rose"
        turned = (
            f", {lead} steps before the validation loss turned"
            if lead is not None
            else "; the validation loss has not turned"
        )
        found.append(
            Finding(
                cause="early_warning",
                start_step=at,
                end_step=int(series.index[-1]),
                confidence=0.45 if lead is not None and lead > 0 else 0.25,
                detector=f"early_{name}",
                evidence={
                    "signal": name,
                    "mid_run": mid,
                    "last_quarter": last,
                    "val_loss_turned_at": val_turn,
                    "lead_steps": lead,
                    "heuristic": HEURISTIC,
                },
                advice=f"heuristic early warning: {name} {how} from step {at}{turned}; that this signal "
                "leads the validation loss is a heuristic, not a verdict: act on the validation "
                "loss, not on it",
            )
        )
    return found
