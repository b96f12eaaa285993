"""Cause detectors of `yieldgate diagnose`: pure functions over one run's plain data, each returning findings.

Every detector takes a `RunSignals` (step records with extras as columns, eval records, the manifest, the
run's measurement notes) and returns a list of `Finding`s, or raises `NotRun` naming the signal it lacks:
a detector never reports "no problem found" for a signal it did not see.

The thresholds are named constants. They were set on the calibration seeds 0-2 of the fault-injection suite
(`benchmarks/bench_diagnose.py --seeds 0 1 2`) and frozen before the suite was scored on fresh seeds
(100 and up); each comment says what separated the faulted runs from the clean ones there.

The cheap detectors (`spikes.loss_spikes`, `nonfinite_and_skipped`, `stall`) need only the trailing window of
core step columns: the Tracker can run them online through `diagnose.online_findings`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.manifest import Manifest
from yieldgate.names import STEP_UNIT

__all__ = [
    "CAUSES",
    "SEVERITY",
    "Finding",
    "NotRun",
    "RunSignals",
    "nonfinite_and_skipped",
    "stall",
    "repeat_worth",
    "effective_tokens",
]

CAUSES = (
    "data_exhaustion",
    "duplicated_stream",
    "non_iid_stream",
    "schedule",
    "damaged_update",
    "infrastructure_stall",
    "undertrained",
    "throughput_altered_learning",
    "mixture_drift",
    "early_warning",
    "overfitting",
    "transient_spike",
    "stalled",
)
SEVERITY = {"transient_spike": "low", "early_warning": "low"}
"""Causes that are notes whatever their confidence (an outlier batch the run recovered from); every other is "high"."""

# -- frozen thresholds ------------------------------------------------------------------------------------
SPIKE_WINDOW = 128
"""Trailing steps of the spike baseline (OLMo-core's loss-spike window)."""
SPIKE_SIGMA = 6.0
"""A spike is above mean + 6σ of the trailing window (OLMo-core's k). Calibration: corrupted batches reach
z > 20 on the loss; clean runs never passed z = 6 on loss or gradient norm."""
SPIKE_MIN_HISTORY = 20
"""Steps of history a spike test needs."""
SPIKE_LEVEL = 16
"""Trailing steps whose mean is the local level a spike is measured from."""
GRAD_SPIKE_SIGMA = 25.0
"""k for the gradient norm, which is heavy-tailed at probe scale: clean calibration runs reached z = 18, the
corrupted batches 54-344 (their loss: 78-100 against k = 6)."""
RECURRING_SPIKES = 3
"""This many separate spikes that do not recover are an unstable schedule, not one damaged update."""
RECOVER_STEPS = 10
"""A spike has recovered when the loss is back within 2σ of its level before the spike within this many steps."""
RATCHET_SIGMA = 4.0
"""...and the mean of the SPIKE_LEVEL steps after that stays within 4 standard errors (σ/√SPIKE_LEVEL) of the level
before: a loss level that ratchets up after a spike is a damaged update, not an outlier batch."""
R_STAR = 15.4
"""Muennighoff et al. (2023): repeated-data decay constant."""
EPOCHS_FRESH = 4.0
"""Up to ~4 epochs a repeated token is worth ~0.82 of a fresh one: below this, repetition is not a finding."""
REPEAT_EXCESS = 0.05
"""Repeat rate above what the declared unique data explains (trailing mean). Calibration: clean 0.0 (no
source passes one epoch), looping sampler 1.0, a source at 40 epochs ~0.0 once its epochs are subtracted."""
PURE_BATCH_EXCESS = 0.3
"""Share of single-source batches above what i.i.d. draws from the realised mixture give. Calibration:
clean ~0.0, source-ordered stream ~1.0, drifting mixture < 0.05."""
AUTOCORR_LAG1 = 0.45
"""Lag-1 autocorrelation of the detrended training loss, alone enough to call a stream non-i.i.d.
Calibration: clean 0.13-0.18, source-ordered 0.27-0.32, drifting 0.09-0.23: the loss alone separates
poorly at probe scale, so this only fires on a strong signal."""
WAIT_FRACTION = 0.25
"""Data-wait share of step time (trailing median) that makes a stall. Calibration: clean <= 0.07, a loader
sleeping 10 ms per step 0.48-0.70."""
WAIT_RISE = 0.15
"""...and by how much it must exceed the run's early share."""
THROUGHPUT_DROP = 0.5
"""Tokens/s below this fraction of the early rate, sustained, is a stall even without data wait."""
STALL_MIN_STEPS = 10
"""Consecutive steps a stall must last."""
WARMUP_START = 0.5
"""A first-step LR at or above half the peak means no warm-up (calibration: WSD warm-up starts at 1/12)."""
EARLY_JUMP_SIGMA = 6.0
"""A rise of the loss in the first tenth of the run this many robust standard deviations of its step-to-step changes
above their median is early instability (plain noise clears 6σ about once in 10^9 steps)."""
UNTRAINED_START = 0.8
"""A run whose first logged loss is at least this share of ln(vocabulary size) started untrained
(from random weights; a fine-tune of a pretrained model starts far below): only there is a missing warm-up a cause
without early instability in the loss."""
ENTROPY_COLLAPSE = 0.25
"""Activation entropy (softmax over a layer's output features, `track.signals.activation_entropy`) below this share
of its maximum, ln(width): outputs so peaked that they concentrate in a few features or have grown large (the
measure is not scale-invariant), the high-LR instability of Wortsman et al. (2023). Calibration: clean 0.99 of
ln(16), LR x30 <= 0.004."""
PLATEAU_RATIO = 0.05
"""Peak-LR phase progress below 5% of the progress before it: learning stalled at the peak LR (too high).
Calibration: clean 0.2-0.4, LR x30 <= 0.01."""
PLATEAU_T = -3.0
"""...and the least-squares slope of the loss over the phase's second half is not below -3 standard errors: a loss
still falling beyond its noise has not stalled, however slowly it falls."""
PLATEAU_SHARE = 0.25
"""...in a peak-LR phase that covers at least a quarter of the run (WSD's stable phase ~75%, cosine's top 5% of LR
~15%)."""
COOLDOWN_DROP_SIGMA = 3.0
"""A cooldown after a plateau that lowers the loss by more than 3 standard errors (and 1% of its level) says the
schedule was the limit; one that does not, the data."""
SLOW_DROP = 0.10
"""Loss fell by less than 10% of its start over the whole run while still falling: LR too low.
Calibration: clean 31-35%, LR /100 2.5%."""
TOKENS_PER_PARAM = 20.0
"""Chinchilla: ~20 tokens per parameter is compute-optimal."""
UNDERTRAINED_FACTOR = 2.0
"""'Far below' 20 tokens per parameter: under 20 / 2 = 10."""
DRIFT_Z = 6.0
"""Whole-run share of a source this many binomial standard errors from its weight is drift (clean max ~2.5)."""
OVERFIT_MIN_EVALS = 5
"""Held-out evaluations the overfitting test needs: enough for a noise estimate (three interior points) and a best
point with OVERFIT_AFTER after it (a fine-tune evaluated every 1,000 of 5,000 steps has five)."""
OVERFIT_AFTER = 3
"""Evaluations after the best held-out point before a widening gap is read."""
OVERFIT_STEP_AFTER = 2
"""Evaluations after the best held-out point before a step is read: the jump, and one that shows it stayed up."""
OVERFIT_NOISE_POINTS = 5
"""Evaluations from the held-out best on (three interior points) from which the evaluation noise is estimated;
fewer, and it comes from every trained evaluation."""
OVERFIT_Z = 3.0
"""The train-validation gap must grow by this many standard errors after the held-out best (the gap of a healthy
run stays level: train and held-out loss fall together)."""
LOW_CONFIDENCE = 0.3
"""Findings at or below this confidence are notes, not alarms (the clean-run target counts those above)."""


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One diagnosis: a cause over a step span, with a confidence, the numbers behind it and one line of advice."""

    cause: str
    start_step: int
    end_step: int
    confidence: float
    evidence: dict[str, Any]
    advice: str
    detector: str

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.cause, "high")

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"finding cause must be one of {', '.join(CAUSES)}, got {self.cause!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "confidence": round(self.confidence, 3),
            "severity": self.severity,
            "evidence": self.evidence,
            "advice": self.advice,
            "detector": self.detector,
        }


class NotRun(Exception):
    """A detector could not run: the message says which signal is missing."""


@dataclass
class RunSignals:
    """One run's data, as the detectors read it."""

    steps: pd.DataFrame
    """One row per step: `step`, core columns, and extras (`signals/...`, `tokens/<source>`, ...) as columns."""
    evals: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Eval records as `Ledger.evals` returns them."""
    manifest: Manifest | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    recorded_nan: dict[str, np.ndarray] = field(default_factory=dict)
    """Steps where a core column holds a recorded NaN (`steps` cannot tell it from a missing value)."""
    peers: dict[str, pd.Series] = field(default_factory=dict)
    """Training loss by step of other runs that read the same data in the same order (run name -> loss)."""
    cooldowns: dict[str, pd.DataFrame] = field(default_factory=dict)
    """Step records (`step`, `loss`, `lr`) of runs that continue this one with the LR cooled down (run meta
    `cooldown_of`, `probe.cooldown`), by run name: the discriminating experiment of a plateau, run apart."""
    resumes: list[dict[str, Any]] = field(default_factory=list)
    """Bodies of the run's `resume` events, oldest first (an import's: `old`, `resume` and `redone` steps)."""

    def final_step(self) -> int | None:
        """The last step of the run's last attempt where its relaunch stopped short of where the attempt before it
        had got (`redone` < `old` in the last restart an import found): the rows after it are an abandoned attempt's,
        or another run's that the log mixes in, not this run's timeline. None where there is none."""
        bodies = [b for b in self.resumes if isinstance(b.get("redone"), dict) and isinstance(b.get("old"), dict)]
        if not bodies:
            return None
        redone, old = bodies[-1]["redone"].get("step"), bodies[-1]["old"].get("step")
        return int(redone) if redone is not None and old is not None and redone < old else None

    def column(self, name: str, why: str) -> pd.Series:
        """A recorded column indexed by step (non-recorded rows dropped), or NotRun."""
        if name not in self.steps or not self.steps[name].notna().any():
            raise NotRun(f"no {name!r} recorded ({why})")
        return self.steps.set_index("step")[name].dropna()

    def prefixed(self, prefix: str) -> list[str]:
        return [c for c in self.steps.columns if c.startswith(prefix) and self.steps[c].notna().any()]

    def epochs(self) -> float | None:
        """Epochs over the unique data at the end of the run, when known: the steps themselves where they count
        epochs (run meta `step_unit`: a Keras or YOLO log, one row per epoch), the largest imported
        `imported/epoch` (a trainer's own epoch counter), else the accepted tokens over the manifest's unique
        tokens."""
        if self.meta.get(STEP_UNIT) == "epoch" and len(self.steps):
            return float(self.steps["step"].max() - self.steps["step"].min() + 1)
        if "imported/epoch" in self.steps and self.steps["imported/epoch"].notna().any():
            return float(self.steps["imported/epoch"].max())
        sources = self.manifest.data.sources if self.manifest and self.manifest.data else []
        unique = sum(s.unique_tokens or 0 for s in sources)
        if (
            unique > 0
            and all(s.unique_tokens for s in sources)
            and "tokens" in self.steps
            and self.steps["tokens"].notna().any()
        ):
            return float(self.steps["tokens"].max()) / unique
        return None

    def val_loss(self, task: str = "val") -> pd.Series:
        e = self.evals
        if e.empty:
            return pd.Series(dtype=float)
        sel = e[(e["task"] == task) & (e["metric"] == "loss")].sort_values("step")
        return pd.Series(sel["value"].to_numpy(), index=sel["step"].astype(int).to_numpy())


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def effective_tokens(drawn: float, unique: float) -> float:
    """The fresh tokens that `drawn` tokens passed over `unique` ones are worth: D' = U + U·R*·(1 − e^(−R/R*)),
    R = D/U − 1 (Muennighoff et al. 2023, eq. 5)."""
    if drawn <= unique:
        return float(drawn)
    if unique <= 0:
        return 0.0
    return unique + unique * R_STAR * -math.expm1(-(drawn / unique - 1) / R_STAR)


def repeat_worth(epochs: float, r_star: float = R_STAR) -> float:
    """Value of the next repeated token relative to a fresh one after `epochs` epochs: e^(−R/R*), R = epochs − 1
    repetitions (the derivative of D' = U + U·R*·(1 − e^(−R/R*)), Muennighoff et al. 2023)."""
    return math.exp(-max(epochs - 1.0, 0.0) / r_star)


# -- damaged update -----------------------------------------------------------------------------------------


def _nonfinite_evals(evals: pd.DataFrame) -> list[Finding]:
    """Held-out evaluations whose value is NaN or infinite, one finding per task and metric: a model whose weights went
    non-finite evaluates to NaN even where its training loss was logged finite (or not logged at all)."""
    if evals.empty or "value" not in evals:
        return []
    values = evals["value"].to_numpy(dtype=float, na_value=np.nan)
    bad = evals[~np.isfinite(values)]
    found = []
    for (task, metric), rows in bad.groupby(["task", "metric"], sort=True):
        steps = rows["step"].to_numpy(dtype=int)
        where = (
            f"step {steps[0]:,}" if len(steps) == 1 else f"{len(steps):,} evaluations, steps {steps[0]:,}-{steps[-1]:,}"
        )
        found.append(
            Finding(
                cause="damaged_update",
                start_step=int(steps[0]),
                end_step=int(steps[-1]),
                confidence=0.95,
                detector="nonfinite_eval",
                evidence={"eval": f"{task}/{metric}", "nonfinite_evaluations": int(len(steps))},
                advice=f"{task}/{metric} evaluated to NaN or infinity at {where}: the weights went non-finite; find "
                "the update that overflowed, guard it (skip it) and check precision and LR",
            )
        )
    return found


def nonfinite_and_skipped(sig: RunSignals) -> list[Finding]:
    """NaN/Inf loss, gradient norm or held-out evaluation, mixed-precision skipped steps and loss-scale collapse,
    vanishing gradients."""
    s = sig.steps.set_index("step")
    have = [
        c for c in ("loss", "grad_norm", "signals/skipped_steps", "signals/loss_scale") if c in s and s[c].notna().any()
    ]
    found = _nonfinite_evals(sig.evals)
    if not have and not found:
        raise NotRun("no loss, grad_norm or loss-scale columns recorded")
    for name in ("loss", "grad_norm"):
        if name in have:
            values = s[name].to_numpy(dtype=float)
            bad = np.union1d(s.index[np.isinf(values)].to_numpy(), sig.recorded_nan.get(name, np.empty(0, np.int64)))
            # Spans of consecutive *logged* steps (a log every 10 steps makes 1,200 and 1,210 neighbours).
            logged = s.index[s[name].notna().to_numpy() | np.isin(s.index, bad)].to_numpy()
            where_bad = np.searchsorted(logged, bad)
            for first, last in _runs(where_bad):
                start, end = int(logged[first]), int(logged[last])
                count = last - first + 1
                where = f"step {start:,}" if count == 1 else f"{count:,} logged steps, {start:,}-{end:,}"
                found.append(
                    Finding(
                        cause="damaged_update",
                        start_step=start,
                        end_step=end,
                        confidence=0.95,
                        detector=f"nonfinite_{name}",
                        evidence={"signal": name, "nonfinite_steps": count},
                        advice=f"non-finite {name} at {where}: find the batch or layer that overflowed; "
                        "guard the update (skip it) and check precision and LR",
                    )
                )
    if "signals/skipped_steps" in have:
        skipped = s["signals/skipped_steps"].dropna()
        rises = skipped.index[np.diff(skipped.to_numpy(), prepend=skipped.iloc[0]) > 0].to_numpy()
        scale = s["signals/loss_scale"].dropna() if "signals/loss_scale" in have else None
        for start, end in _runs(rises, gap=5):
            before = skipped.loc[: start - 1]
            ev: dict[str, Any] = {"skipped_steps": int(skipped.loc[end] - (before.iloc[-1] if len(before) else 0.0))}
            if scale is not None:
                scale_before, scale_after = scale.loc[: start - 1], scale.loc[end:]
                ev["loss_scale_before"] = float(scale_before.iloc[-1]) if len(scale_before) else None
                ev["loss_scale_after"] = float(scale_after.iloc[0]) if len(scale_after) else None
            found.append(
                Finding(
                    cause="damaged_update",
                    start_step=int(start),
                    end_step=int(end),
                    confidence=_clip(0.6 + 0.1 * ev["skipped_steps"]),
                    detector="skipped_steps",
                    evidence=ev,
                    advice="the loss scaler skipped steps on inf/NaN gradients and backed its scale off: "
                    "find the overflowing layer; bf16 or a lower LR avoids fp16 overflow",
                )
            )
    if "grad_norm" in have and sig.manifest and sig.manifest.model and sig.manifest.model.params:
        rms = s["grad_norm"].to_numpy(dtype=float) / math.sqrt(sig.manifest.model.params)
        tiny = s.index[np.isfinite(rms) & (rms < 1e-7)].to_numpy()  # within ~10x of Adam's epsilon (1e-8)
        if len(tiny) >= STALL_MIN_STEPS:
            found.append(
                Finding(
                    cause="damaged_update",
                    start_step=int(tiny[0]),
                    end_step=int(tiny[-1]),
                    confidence=0.7,
                    detector="vanishing_gradients",
                    evidence={"grad_rms_min": float(np.nanmin(rms)), "steps": len(tiny)},
                    advice="gradients vanish toward the optimizer's epsilon: updates are noise; check the "
                    "loss scale, initialisation and normalisation",
                )
            )
    return found


def _runs(steps: np.ndarray, gap: int = 1) -> list[tuple[int, int]]:
    """Consecutive runs of sorted step numbers, merging gaps up to `gap`."""
    out: list[tuple[int, int]] = []
    for st in steps.astype(int).tolist():
        if out and st - out[-1][1] <= gap:
            out[-1] = (out[-1][0], st)
        else:
            out.append((st, st))
    return out


# -- infrastructure stall ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timing:
    """A run's step timing as the stall detector reads it: per kind of stall (`data_wait`, `throughput`), the
    rolling and the per-step condition, with the early baselines (`evidence`)."""

    frame: pd.DataFrame
    """The step records by step, tokens/s per step where tokens and step time are recorded."""
    masks: dict[str, tuple[np.ndarray, np.ndarray]]
    evidence: dict[str, Any]
    wait_share: np.ndarray | None
    """Data-wait share of each step's time (None: not recorded)."""
    rate: np.ndarray | None
    """Tokens/s of each step (None: not recorded)."""


def stall(sig: RunSignals) -> list[Finding]:
    """Data-wait share of step time rising, or tokens/s dropping, while learning per token is unchanged."""
    timing = _timing(sig)
    n = len(timing.frame)
    found: list[Finding] = []
    covered = np.zeros(n, dtype=bool)
    # A data-wait stall first; a tokens/s drop is reported apart, over the steps the wait does not explain.
    for kind in ("data_wait", "throughput"):
        if kind not in timing.masks:
            continue
        flagged, raw = timing.masks[kind]
        idx = np.flatnonzero(flagged & ~covered)
        if not len(idx):
            continue
        first, last = int(idx[0]), n - 1 if flagged[-1] else int(idx[-1])
        while first > 0 and raw[first - 1]:  # the rolling median flags a stall about half a window after its onset
            first -= 1
        covered[first : last + 1] = True
        found.append(_stall_finding(sig, timing, kind, first, last))
    return found


def _timing(sig: RunSignals) -> _Timing:
    """The data-wait share and tokens/s of each step, their rolling medians and early baselines; NotRun without
    timing or with too few steps."""
    s = sig.steps.set_index("step")
    has_wait = all(c in s and s[c].notna().any() for c in ("data_wait_s", "step_s"))
    has_rate = "tokens_per_s" in s and s["tokens_per_s"].notna().any()
    if all(c in s and s[c].notna().any() for c in ("tokens", "step_s")):
        # Per-step rate: the windowed tokens_per_s column smears one slow step (an eval) over its window.
        s = s.assign(tokens_per_s=s["tokens"].diff() / s["step_s"])
        has_rate = True
    if not has_wait and not has_rate:
        raise NotRun("no timing recorded (step_s with data_wait_s, or tokens_per_s)")
    n = len(s)
    if n < 4 * STALL_MIN_STEPS:
        raise NotRun(f"{n} steps recorded; a stall needs at least {4 * STALL_MIN_STEPS}")
    early = slice(2, max(n // 5, STALL_MIN_STEPS + 2))
    masks: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # kind -> (rolling condition, per-step condition)
    ev: dict[str, Any] = {}
    frac = rate = None
    if has_wait:
        frac = (s["data_wait_s"] / s["step_s"]).to_numpy(dtype=float)
        rolling = pd.Series(frac).rolling(STALL_MIN_STEPS, min_periods=STALL_MIN_STEPS).median().to_numpy()
        base = float(np.nanmedian(frac[early]))
        masks["data_wait"] = (
            (rolling > WAIT_FRACTION) & (rolling > base + WAIT_RISE),
            (frac > WAIT_FRACTION) & (frac > base + WAIT_RISE),
        )
        ev |= {"wait_fraction_early": round(base, 4)}
    if has_rate:
        rate = s["tokens_per_s"].to_numpy(dtype=float)
        rolling_rate = pd.Series(rate).rolling(STALL_MIN_STEPS, min_periods=STALL_MIN_STEPS).median().to_numpy()
        base_rate = float(np.nanmedian(rate[early]))
        masks["throughput"] = (rolling_rate < THROUGHPUT_DROP * base_rate, rate < THROUGHPUT_DROP * base_rate)
        ev |= {"tokens_per_s_early": round(base_rate, 1)}
    return _Timing(frame=s, masks=masks, evidence=ev, wait_share=frac, rate=rate)


def _stall_finding(sig: RunSignals, timing: _Timing, kind: str, first: int, last: int) -> Finding:
    """A stall of `kind` over the rows `first`-`last`: the input pipeline (data wait), or the compute side slowing
    (a note unless the device says it throttled)."""
    s, span = timing.frame, slice(first, last + 1)
    steps = s.index.to_numpy()
    here = dict(timing.evidence, signal=kind)
    if timing.wait_share is not None:
        here["wait_fraction_during"] = round(float(np.nanmedian(timing.wait_share[span])), 4)
    if timing.rate is not None:
        here["tokens_per_s_during"] = round(float(np.nanmedian(timing.rate[span])), 1)
    here["learning_per_token_ratio"] = _learning_ratio(sig, int(steps[first]))
    if kind == "data_wait":
        confidence = 0.9
        advice = (
            "the input pipeline stalled, not learning: the data-wait share of step time rose; add loader "
            "workers/prefetch and check storage; changing the data or the schedule will not help"
        )
    else:
        # Slower steps without more data wait: on a shared host that is contention as often as a stall (the
        # calibration runs, two to a 2-core host, saw step time double for a quarter of a run), so a note,
        # unless the device says it throttled. The loader is not the cause: its wait did not rise.
        throttled = "device/throttle_reasons" in s and bool((s["device/throttle_reasons"].iloc[span] > 0).any())
        confidence = 0.8 if throttled else LOW_CONFIDENCE
        here["device_throttled"] = throttled
        wait = (
            f" while the data-wait share went from {here['wait_fraction_early']:.0%} to "
            f"{here['wait_fraction_during']:.0%}"
            if timing.wait_share is not None
            else ""
        )
        advice = f"steps got slower{wait}: the compute side slowed, not the loader; " + (
            "the device reports throttling: check its cooling and power limits"
            if throttled
            else "a note: on a shared host this is contention as often as a fault; check what else ran"
        )
    return Finding(
        cause="infrastructure_stall",
        start_step=int(steps[first]),
        end_step=int(steps[last]),
        confidence=confidence,
        detector=f"stall_{kind}",
        evidence=here,
        advice=advice,
    )


def _learning_ratio(sig: RunSignals, at: int) -> float | None:
    """Validation-loss decrease per token after `at` over before it (None: too few evaluations)."""
    val = sig.val_loss()
    if len(val) < 4 or "tokens" not in sig.steps:
        return None
    tokens = sig.steps.set_index("step")["tokens"]
    tok = pd.Series([float(tokens.get(st, 0.0)) if st else 0.0 for st in val.index], index=val.index)
    before, after = val[val.index <= at], val[val.index >= at]
    if len(before) < 2 or len(after) < 2:
        return None
    rate = lambda v: (v.iloc[0] - v.iloc[-1]) / max(tok[v.index[-1]] - tok[v.index[0]], 1.0)  # noqa: E731
    r0 = rate(before)
    return round(float(rate(after) / r0), 3) if r0 > 0 else None
