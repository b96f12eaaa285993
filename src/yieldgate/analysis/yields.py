"""Data yield and capability yield per tranche of accepted tokens.

A tranche is the span of accepted tokens between two evaluations. Its data yield is the validation-loss
improvement it bought per billion tokens, per device-hour, per dollar and per kWh; its capability yield is
the change of each eval task's score per billion tokens. Yields are never interpolated between evaluations;
a negative yield (learning went backwards) is reported as negative; a figure whose inputs a run lacks is
None with the reason, never estimated.

What real runs lack is said, never filled in:
- **no token counts** (the Hugging Face Trainer's default): tranches are spans of steps, the yield per
  thousand steps is given, and the per-billion-token figure is missing with the reason;
- **no device count**: the per-device-hour figure is per wall-hour of the job (`time_unit` says which);
- **training loss only** (`metric` `loss`): tranches between points of the smoothed training loss, with a
  note that it is not held out.

**Noise.** Each tranche's improvement is the difference of two evaluations, each off the smooth curve by the
evaluation noise (`fit.learning_noise`: from the run's trained evaluations, step 0 and warm-up left out): `band` is
the interval that noise allows around it (`stats.evaluation_difference`, at `level`), `yield_band` the same per
billion tokens (per thousand steps without token counts), and `within_noise` says the band holds 0: that tranche's
gain (or loss) is not told from noise. Where the harness reported each evaluation's standard error (lm-eval's
`*_stderr`), the band is built from those two instead (`stats.reported_difference`): a curve through a few
checkpoints estimates its noise with one or two degrees of freedom, and called a ten-standard-error gain "within
noise". A capability that moved against the followed metric is listed in `disagreements` unless its own reported
standard errors hold the change (at `level` family-wise over the run's capabilities). **Schedule.** `spans_lr_decay`
marks a tranche whose end is at an LR below 90% of the peak so far (the `fit.stable_phase` rule): its yield mixes
data with annealing, and a cooldown's gain is no data yield.

Functions take plain DataFrames (the ledger's `steps` and `evals` frames) and return plain data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.fit import PowerLaw, learning_noise
from yieldgate.analysis.points import (
    TRAIN_LOSS,
    cost_from_price,
    eval_points,
    exactly_at_steps,
    portfolio_curves,
    sampled_at_steps,
    train_loss_points,
)
from yieldgate.errors import InputError
from yieldgate.names import LOSS_METRIC, VAL_TASK

__all__ = ["Tranche", "YieldReport", "tranche_yields", "AXES", "DEVICE_HOUR", "TRANCHE_LEVEL"]

TRANCHE_LEVEL = 0.9
"""Coverage of a tranche's noise band; the overfitting detector reads the step after a held-out best at the same
level, so that `diagnose` and `yield` agree on it."""

BILLION = 1e9
J_PER_KWH = 3.6e6
DEVICE_HOUR = "device-hour"
WALL_HOUR = "wall-hour (device count unknown)"
# What a tranche spans, by axis: its yield's label, the Tranche figure that holds it, and the span it is per.
AXES = {
    "tokens": ("per B tokens", "yield_per_btok", BILLION),
    "steps": ("per 1k steps", "yield_per_kstep", 1000.0),
    "epochs": ("per epoch", "yield_per_epoch", 1.0),
}


@dataclass
class Tranche:
    """One tranche: its span, the loss at both ends, and the yields it bought."""

    start_step: int
    end_step: int
    start_tokens: float
    end_tokens: float
    loss_start: float
    loss_end: float
    yield_per_btok: float | None
    yield_per_kstep: float | None
    """Improvement per thousand optimizer steps: there when token counts are not."""
    yield_per_device_hour: float | None
    yield_per_dollar: float | None
    yield_per_kwh: float | None
    yield_per_epoch: float | None = None
    """Improvement per epoch, in place of `yield_per_kstep` on a run whose steps count epochs (a Keras or YOLO log)."""
    per_source: dict[str, dict[str, float | None]] = field(default_factory=dict)
    capability: dict[str, dict[str, float | None]] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    band: tuple[float, float] | None = None
    """Interval of the improvement (loss_start - loss_end, or the rise of a score) that the evaluation noise allows,
    at the report's `level`; None when the noise could not be estimated (fewer than three evaluations)."""
    yield_band: tuple[float, float] | None = None
    """`band` per billion tokens (per thousand steps on a step axis, per epoch on an epoch axis)."""
    within_noise: bool | None = None
    """The band holds 0: the tranche's change is not told from evaluation noise."""
    band_from: str | None = None
    """What the band is built from: `reported` (the two evaluations' standard errors) or `curve` (the noise
    around the fitted curve); None without a band."""
    spans_lr_decay: bool | None = None
    """The LR at the tranche's end is below 90% of its peak so far (None: no LR recorded)."""
    vs_expected: float | None = None
    """The tranche's learning against the report's law (`YieldReport.law`): against the run's own law, its
    improvement over the law's over the same tokens; against a baseline's (`expected_from`), the tokens the baseline
    needs for the same loss drop over the tranche's tokens (at equal loss). 1 is learning on the law, 0.5 half of
    it. None without a law, where the law is flat, or where it expects no gain."""


@dataclass
class YieldReport:
    """The tranches of one run, and why any figure is missing."""

    run: str
    task: str
    metric: str
    unit: str
    tranches: list[Tranche]
    missing: dict[str, str] = field(default_factory=dict)
    axis: str = "tokens"
    """What a tranche spans: `tokens`; `steps` when the run has no token counts, `epochs` when its steps count
    epochs (`AXES`)."""
    time_unit: str = DEVICE_HOUR
    """What `yield_per_device_hour` is per: a device-hour, or a wall-hour when the device count is unknown."""
    notes: list[str] = field(default_factory=list)
    eval_noise: float | None = None
    """Standard deviation of one evaluation around the smooth curve (`fit.eval_noise`)."""
    level: float = TRANCHE_LEVEL
    """Coverage of each tranche's `band`."""
    batch: dict[str, Any] | None = None
    """The batch beside the gradient noise scale (`batch.batch_advice`), where the run recorded it."""
    law: dict[str, Any] | None = None
    """The fitted loss(tokens) = E + B * tokens^-beta each tranche's `vs_expected` divides by, with the run it was
    fitted on (`run`) and its quality (`fit.PowerLaw.to_dict`)."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    """The yield of each stage of a staged curriculum (`curriculum.stage_yields`); [] for any other recipe."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "task": self.task,
            "metric": self.metric,
            "unit": self.unit,
            "axis": self.axis,
            "time_unit": self.time_unit,
            "missing": self.missing,
            "notes": self.notes,
            "eval_noise": self.eval_noise,
            "level": self.level,
            "batch": self.batch,
            "law": self.law,
            "tranches": [t.__dict__ for t in self.tranches],
            "stages": self.stages,
        }

    @property
    def per(self) -> str:
        """What each tranche's yield is per, on the report's axis: `per B tokens`, `per 1k steps`, `per epoch`."""
        return AXES[self.axis][0]

    def rate(self, tranche: Tranche) -> float | None:
        """A tranche's yield on the report's axis (`per`)."""
        return getattr(tranche, AXES[self.axis][1])


def _merge_points(points: pd.DataFrame, min_tokens: float | None) -> pd.DataFrame:
    """Keep evaluation points so that consecutive kept points are at least `min_tokens` apart."""
    if not min_tokens:
        return points
    keep = [0]
    for i in range(1, len(points)):
        if points["tokens"].iloc[i] - points["tokens"].iloc[keep[-1]] >= min_tokens:
            keep.append(i)
    if keep[-1] != len(points) - 1 and len(keep) > 1:
        keep[-1] = len(points) - 1  # the last, short remainder joins the previous tranche
    return points.iloc[keep].reset_index(drop=True)


def _improvement(start: float, end: float, higher_is_better: bool) -> float:
    return end - start if higher_is_better else start - end


def _per(value: float, amount: float) -> float | None:
    return value / amount if amount and math.isfinite(amount) and amount > 0 and math.isfinite(value) else None


@dataclass
class _Remarks:
    """What a report says beside its figures, in the order the sections find it: notes, and each missing figure
    with its reason."""

    notes: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Spend:
    """The cumulative spend at each evaluation step (NaN where unknown)."""

    wall: np.ndarray
    cost: np.ndarray
    energy: np.ndarray


@dataclass(frozen=True)
class _Measure:
    """How each tranche is measured: on which axis, against which noise and law, with which spend, and beside which
    other series (`_other_series`, by step)."""

    task: str
    metric: str
    axis: str
    epochs: bool
    higher_is_better: bool
    noise: float
    noise_dof: int
    level: float
    devices: int | None
    spend: _Spend
    decayed: list[bool | None]
    others: dict[str, pd.DataFrame]
    law: PowerLaw | None
    law_is_baseline: bool = False
    """The law is another run's: tranches are set against it at equal loss, not at equal tokens."""


def _noise(points: pd.DataFrame, steps: pd.DataFrame, x: np.ndarray, said: _Remarks) -> tuple[float, int]:
    """The run's evaluation noise and its degrees of freedom (`fit.learning_noise`), with what the report says of
    it: bands from reported standard errors, too few evaluations, or the untrained ones left out."""
    noise, noise_dof, left_out = learning_noise(x, points["value"].to_numpy(dtype=float), points["step"], steps)
    reported = "stderr" in points and bool(np.isfinite(points["stderr"].to_numpy(dtype=float)).all())
    if reported:
        said.notes.append("noise bands from the standard errors the evaluations reported, not from the curve")
    elif not math.isfinite(noise):
        said.missing["band"] = f"{len(points)} evaluations: the evaluation noise needs three or more"
    elif left_out:
        said.notes.append(
            f"noise bands from the {noise_dof + 2} trained evaluations: step 0 and warm-up ({left_out}) left out, "
            "where the curve bends too fast to read noise from"
        )
    return noise, noise_dof


def tranche_yields(
    run: str,
    steps: pd.DataFrame,
    evals: pd.DataFrame,
    *,
    task: str = VAL_TASK,
    metric: str = LOSS_METRIC,
    tranche_tokens: float | None = None,
    devices: int | None = 1,
    price_per_device_hour: float | None = None,
    level: float = TRANCHE_LEVEL,
    law: PowerLaw | None = None,
    law_is_baseline: bool = False,
    epochs: bool = False,
) -> YieldReport:
    """Yields of each tranche between consecutive evaluations of `task`/`metric` (merged to at least
    `tranche_tokens` tokens when given), with per-source losses (`<task>/<source>`) and capability yields
    (every other task of the run) over the same spans. `task` empty and `metric` `loss`: the training loss.
    `devices` None: the device count is unknown, and time is counted in wall-hours of the job. `level`: coverage
    of each tranche's noise band. `law`: a fitted loss curve each tranche's improvement is set against
    (`Tranche.vs_expected`): the run's own (learning against its trend), or with `law_is_baseline` a reference
    run's (against a baseline, at equal loss). `epochs`: the run's steps count epochs, so that without token counts
    its tranches are spans of epochs."""
    if tranche_tokens is not None and not (math.isfinite(tranche_tokens) and tranche_tokens > 0):
        raise InputError(f"tranche_tokens must be a number > 0, got {tranche_tokens}")
    stats.check_level(level)
    said = _Remarks()
    points = _curve_points(run, steps, evals, task, metric, said)
    axis, points = _axis(run, points, epochs, tranche_tokens, said)
    curves = _version_curves(points, said)
    longest = max(reversed(curves), key=len)  # the longest curve, the latest among equals
    x = longest["tokens" if axis == "tokens" else "step"].to_numpy(dtype=float)
    noise, noise_dof = _noise(longest, steps, x, said)
    points = pd.concat([_merge_points(c, tranche_tokens) for c in curves]).reset_index(drop=True)
    if len(points) < 2:
        raise InputError(
            f"run {run!r} has {len(points)} evaluation of {task or 'training'} {metric}"
            f"{' with a token count' if axis == 'tokens' else ''}; a yield needs two"
        )
    spans = [i for i in range(1, len(points)) if _same_portfolio(points, i)]
    if not spans:
        raise InputError(
            f"run {run!r} has no two evaluations of {task or 'training'} {metric} with one portfolio version "
            f"({', '.join(c['portfolio'].iloc[0] for c in curves)}); a yield needs two of one version"
        )
    measure = _Measure(
        task=task,
        metric=metric,
        axis=axis,
        epochs=epochs,
        higher_is_better=bool(points["higher_is_better"].iloc[0]),
        noise=noise,
        noise_dof=noise_dof,
        level=level,
        devices=devices,
        spend=_spend(steps, points["step"].to_numpy(), devices, price_per_device_hour, said),
        decayed=_decayed(steps, points["step"].to_numpy()),
        others={k: series.set_index("step") for k, series in _other_series(evals, steps, task, metric).items()},
        law=None if law is not None and law.flat else law,
        law_is_baseline=law_is_baseline,
    )
    if law is not None and law.flat:
        said.missing["vs_expected"] = f"the law is flat ({law.poor}): it expects almost no gain to set tranches against"
    tranches = [_tranche(measure, points, i) for i in spans]
    # A loss is in nats per token only where the run counts tokens (a language model's cross-entropy); a run that
    # counts steps or epochs (Keras, YOLO) logs whatever its model minimises: a squared error, a box loss.
    unit = metric if metric != LOSS_METRIC else "nats/token" if axis == "tokens" else "the loss as logged"
    return YieldReport(
        run=run,
        task=task,
        metric=metric,
        unit=unit,
        tranches=tranches,
        missing=said.missing,
        axis=axis,
        time_unit=DEVICE_HOUR if devices is not None else WALL_HOUR,
        notes=said.notes,
        eval_noise=noise if math.isfinite(noise) else None,
        level=level,
    )


def _curve_points(
    run: str, steps: pd.DataFrame, evals: pd.DataFrame, task: str, metric: str, said: _Remarks
) -> pd.DataFrame:
    """The points tranches run between: the evaluations of `task`/`metric`, or points of the training loss."""
    if not task and metric == TRAIN_LOSS:
        points = train_loss_points(steps)
        said.notes.append(
            "training loss, not held out: a falling training loss is not proof of learning (a model "
            "that memorises shows it too); each point is the mean over a tenth of the logged steps"
        )
        if points.empty:
            raise InputError(f"run {run!r} has fewer than 2 logged training losses; nothing to take yields of")
    else:
        points = eval_points(evals, steps, task, metric, by_portfolio=True)
    if points.empty:
        known = sorted({f"{t}/{m}" for t, m in zip(evals["task"], evals["metric"], strict=True)})
        raise InputError(
            f"run {run!r} has no evaluations of {task}/{metric}; it has: {', '.join(known) or 'none'}"
            + ("; the training loss is metric 'loss'" if "loss" in steps and steps["loss"].notna().any() else "")
        )
    return points


def _same_portfolio(points: pd.DataFrame, i: int) -> bool:
    """Points `i - 1` and `i` were taken with one portfolio version (always, for a curve that records none)."""
    return "portfolio" not in points or points["portfolio"].iloc[i] == points["portfolio"].iloc[i - 1]


def _version_curves(points: pd.DataFrame, said: _Remarks) -> list[pd.DataFrame]:
    """The run's curve cut at each change of portfolio version (`portfolio_curves`), with a note per change: a new
    curve starts there, and the tranche across it (when no step was evaluated with both) is not computed."""
    curves = portfolio_curves(points)
    for before, after in zip(curves[:-1], curves[1:], strict=True):
        old, new = before.iloc[-1], after.iloc[0]
        across = (
            f"both were evaluated at step {int(new['step'])}, so no tranche spans the change"
            if old["step"] == new["step"]
            else f"the tranche from step {int(old['step'])} to step {int(new['step'])} spans both versions and is "
            "not computed (its difference would be the change of ruler, not learning)"
        )
        said.notes.append(
            f"the evaluation portfolio changed from {old['portfolio']} to {new['portfolio']} at step "
            f"{int(new['step'])}: a new curve starts there; {across}"
        )
    if len(curves) > 1:
        longest = max(reversed(curves), key=len)
        said.notes.append(
            f"the evaluation noise is read from the longest curve of one version ({longest['portfolio'].iloc[0]}, "
            f"{len(longest)} evaluations)"
        )
    return curves


def _axis(
    run: str, points: pd.DataFrame, epochs: bool, tranche_tokens: float | None, said: _Remarks
) -> tuple[str, pd.DataFrame]:
    """What the tranches span (`AXES`): tokens, else steps or epochs when the run counts no tokens; with the points
    that have a token count, on the token axis."""
    if points["tokens"].isna().all():
        axis = "epochs" if epochs else "steps"
        said.missing["yield_per_btok"] = (
            "no token counts in this run (import with tokens_per_step or tokens_per_sample "
            f"to count them); tranches are spans of {axis}, with yields {AXES[axis][0]}"
        )
        if tranche_tokens:
            raise InputError(f"run {run!r} has no token counts: tranche_tokens cannot merge its tranches")
        return axis, points
    if points["tokens"].isna().any():
        said.missing["yield_per_btok"] = (
            "some evaluations have no token count (neither in the eval record nor the steps)"
        )
        points = points.dropna(subset=["tokens"])
    return "tokens", points


def _spend(
    steps: pd.DataFrame, at: np.ndarray, devices: int | None, price_per_device_hour: float | None, said: _Remarks
) -> _Spend:
    """Wall time, cost (recorded, else from the price per device-hour) and energy at the steps `at`."""
    wall = exactly_at_steps(steps, "wall_s", at)
    cost = exactly_at_steps(steps, "cost_usd", at)
    energy = sampled_at_steps(steps, "energy_j", at)
    if np.isnan(wall).all():
        said.missing["yield_per_device_hour"] = "no wall-clock time recorded at the evaluation steps"
    elif devices is None:
        said.notes.append(
            "device count unknown: yields per device-hour are per wall-hour of the job (give the count at "
            "import, devices=N, or in the manifest's hardware.device_count)"
        )
    if np.isnan(cost).all():
        if price_per_device_hour is not None and not np.isnan(wall).all() and devices is not None:
            cost = cost_from_price(wall, devices, price_per_device_hour)
        else:
            said.missing["yield_per_dollar"] = "no cost recorded and no price per device-hour in the manifest"
    if np.isnan(energy).all():
        said.missing["yield_per_kwh"] = "no energy recorded (needs NVML or RAPL)"
    return _Spend(wall=wall, cost=cost, energy=energy)


def _tranche(m: _Measure, points: pd.DataFrame, i: int) -> Tranche:
    """The tranche between points `i - 1` and `i`: its yields, its noise band, and the other series over it."""
    a, b = points.iloc[i - 1], points.iloc[i]
    gain = _improvement(a["value"], b["value"], m.higher_is_better)
    wall, cost, energy = m.spend.wall, m.spend.cost, m.spend.energy
    tranche = Tranche(
        start_step=int(a["step"]),
        end_step=int(b["step"]),
        start_tokens=float(a["tokens"]),
        end_tokens=float(b["tokens"]),
        loss_start=float(a["value"]),
        loss_end=float(b["value"]),
        yield_per_btok=_per(gain, (b["tokens"] - a["tokens"]) / BILLION),
        yield_per_kstep=None if m.epochs else _per(gain, (b["step"] - a["step"]) / 1000.0),
        yield_per_epoch=_per(gain, b["step"] - a["step"]) if m.epochs else None,
        yield_per_device_hour=_per(gain, (wall[i] - wall[i - 1]) / 3600.0 * (m.devices or 1)),
        yield_per_dollar=_per(gain, cost[i] - cost[i - 1]),
        yield_per_kwh=_per(gain, (energy[i] - energy[i - 1]) / J_PER_KWH),
        spans_lr_decay=m.decayed[i],
    )
    law = m.law
    if law is not None and m.axis == "tokens" and not m.higher_is_better and a["tokens"] > 0:
        tranche.vs_expected = _vs_law(law, m.law_is_baseline, a, b, gain)
    _set_band(tranche, m, a, b, gain, "stderr" in points)
    _set_others(tranche, m, a, b, gain)
    return tranche


def _vs_law(law: PowerLaw, baseline: bool, a: pd.Series, b: pd.Series, gain: float) -> float | None:
    """The tranche's learning against the law. Its own law: the improvement over the law's over the same tokens
    (the law has no value at 0 tokens). A baseline's law: at equal loss, the tokens the baseline needs for the same
    drop (from the tranche's start loss to its end loss) over the tranche's tokens, an effective-token multiplier.
    At equal tokens a run that lags its baseline is set against the baseline's flatter, later stretch of curve and
    reads as on the law while it needs three times the tokens. None where the law cannot say (a loss at or below
    the baseline's floor, no gain expected)."""
    if not baseline:
        expected = float(law(float(a["tokens"])) - law(float(b["tokens"])))
        return gain / expected if expected > 0 and math.isfinite(gain) else None
    start, end = law.tokens_at(float(a["value"])), law.tokens_at(float(b["value"]))
    spent = float(b["tokens"] - a["tokens"])
    if start is None or end is None or spent <= 0:
        return None
    return (end - start) / spent


def _set_band(tranche: Tranche, m: _Measure, a: pd.Series, b: pd.Series, gain: float, reported: bool) -> None:
    """The tranche's noise band: from the two evaluations' reported standard errors where there are, else from the
    evaluation noise around the curve."""
    band = stats.reported_difference(gain, a["stderr"], b["stderr"], m.level) if reported else None
    band = band or stats.evaluation_difference(gain, m.noise, m.noise_dof, m.level)
    if band is None:
        return
    tranche.band_from = "reported" if band.kind == "reported" else "curve"
    span = (b["tokens"] - a["tokens"] if m.axis == "tokens" else b["step"] - a["step"]) / AXES[m.axis][2]
    tranche.band = (band.low, band.high)
    tranche.within_noise = stats.verdict(band) == "within noise"
    if span > 0:
        tranche.yield_band = (band.low / span, band.high / span)


def _set_others(tranche: Tranche, m: _Measure, a: pd.Series, b: pd.Series, gain: float) -> None:
    """The other series over the tranche: per-source losses of the followed task, and capabilities, with a
    disagreement where a capability moved against the followed metric beyond its reported noise."""
    for key, s in m.others.items():
        if a["step"] not in s.index or b["step"] not in s.index:
            continue  # not evaluated at both ends of this tranche: no figure, never interpolated
        start, end = float(s.loc[a["step"], "value"]), float(s.loc[b["step"], "value"])
        change = _improvement(start, end, bool(s["higher_is_better"].iloc[0]))
        # Held family-wise over the tranche's capabilities: MMLU alone is 57 tasks, and at 90% each a tenth of
        # those that did not move would be listed as moving.
        moved = stats.reported_difference(
            change, s.loc[a["step"], "stderr"], s.loc[b["step"], "stderr"], stats.family_level(m.level, len(m.others))
        )
        entry = {
            "start": start,
            "end": end,
            "yield_per_btok": _per(change, (b["tokens"] - a["tokens"]) / BILLION),
            **(
                {"yield_per_epoch": _per(change, b["step"] - a["step"])}
                if m.epochs
                else {"yield_per_kstep": _per(change, (b["step"] - a["step"]) / 1000.0)}
            ),
        }
        sub_task = key.rpartition("/")[0]
        if key.endswith(f"/{m.metric}") and sub_task.startswith(f"{m.task}/"):
            tranche.per_source[sub_task.removeprefix(f"{m.task}/")] = entry
            continue
        tranche.capability[key] = entry
        told = moved is None or stats.verdict(moved) != "within noise"  # no reported error: as measured
        if math.isfinite(gain) and math.isfinite(change) and gain * change < 0 and told:
            tranche.disagreements.append(
                f"{m.task}/{m.metric} {'improved' if gain > 0 else 'worsened'} while {key} "
                f"{'improved' if change > 0 else 'worsened'}"
            )


DECAYED = 0.9
"""A tranche spans an LR decay when the LR at its end is below this share of the peak so far (`fit.stable_phase`)."""


def _decayed(steps: pd.DataFrame, ends: np.ndarray) -> list[bool | None]:
    """For each step of `ends`: the LR there (the last recorded at or before it) is below DECAYED x its peak up to
    then; None where no LR is recorded up to it. One pass over the LR column for all the ends (a scan per tranche
    took seconds at a million steps)."""
    if "lr" not in steps or steps["lr"].isna().all():
        return [None] * len(ends)
    lr = steps[["step", "lr"]].dropna().sort_values("step", kind="stable")
    at, values = lr["step"].to_numpy(), lr["lr"].to_numpy(dtype=float)
    peak = np.maximum.accumulate(values)
    last = np.searchsorted(at, ends, side="right") - 1  # the last recorded LR at or before each end
    return [None if k < 0 else bool(values[k] < DECAYED * peak[k]) for k in last]


def _other_series(evals: pd.DataFrame, steps: pd.DataFrame, task: str, metric: str) -> dict[str, pd.DataFrame]:
    """Every other evaluated series, by `task/metric` (a standard error is its metric's, never a series: the ledger
    keeps it beside the value)."""
    out = {}
    for (t, m), _ in evals.groupby(["task", "metric"], sort=True):
        if (t, m) != (task, metric):
            out[f"{t}/{m}"] = eval_points(evals, steps, t, m)
    return out
