"""Honest comparison of two runs or two seed groups: aligned at equal tokens, time, compute or cost, with an
interval from the seeds, and the speedup taken apart.

Time-to-target decomposition (DESIGN.md, "speedups multiply"):
    speedup.time              = time_to_target(A) / time_to_target(B)
    speedup.throughput        = (tokens_to_target(B) / time_to_target(B)) / (tokens_to_target(A) / time_to_target(A))
    speedup.sample_efficiency = tokens_to_target(A) / tokens_to_target(B)
so that time = throughput x sample_efficiency exactly; beside it, what reaching the target costs:
    speedup.cost              = cost_to_target(A) / cost_to_target(B)
This is what tells "faster" from "learns more per token".

The target follows the metric's direction: a loss is reached at or below it, an accuracy at or above it.
Runs without token counts are aligned on steps (and said to be); ranges that do not overlap give no point
and say so, never "no difference". Without token counts the wall clock still counts: time to target is read at
the step the run reached the target, and where a step is the same amount of data on both sides the time speedup
splits the same way into steps (epochs) to target and steps/s (two keys the speedup has only then):
    speedup.time = speedup.steps_per_s x speedup.step_efficiency
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.conditions import contention, contention_warnings, host_confounders
from yieldgate.analysis.confounders import batch_check_arguments, manifest_confounders, step_data_differences
from yieldgate.analysis.points import TRAIN_LOSS, UNVERSIONED, cost_from_price, eval_points, train_loss_points
from yieldgate.analysis.verdict import verdict
from yieldgate.errors import InputError, check_choice
from yieldgate.manifest import Manifest
from yieldgate.names import LOSS_METRIC, VAL_TASK

__all__ = ["RunData", "Comparison", "compare", "run_curve", "crossing", "time_at"]

Axis = Literal["tokens", "time", "compute", "cost", "steps", "epochs"]
AXIS_COLUMN = {
    "tokens": "tokens",
    "time": "wall_s",
    "compute": "flops",
    "cost": "cost_usd",
    "steps": "step",
    "epochs": "step",  # runs whose steps count epochs (`RunData.epochs`)
}
PRIMARIES = ("learning", "throughput")
"""What a comparison's verdict leads with (`primary`): learning per token, or tokens per second."""
_TRAIN_CURVE_POINTS = 40
LEVEL = 0.95
"""Family-wise level of a comparison's aligned points (Bonferroni over the points that enter the verdict)."""


@dataclass
class RunData:
    """What the comparison needs of one run, read from the ledger by the caller."""

    name: str
    steps: pd.DataFrame
    evals: pd.DataFrame
    manifest: Manifest | None = None
    flops_per_token: float | None = None
    epochs: bool = False
    """Its steps count epochs (run meta `step_unit`: a Keras or YOLO log), not optimizer steps."""
    objective: str | None = None
    """Why its loss is not a cross-entropy (preference or RL fine-tuning: `objective.not_cross_entropy`); None when
    nothing says so."""
    host: pd.DataFrame | None = None
    """Its host telemetry (`conditions.HOST_KEYS`, long form: step, key, value), for the host confounders; None:
    not read."""


@dataclass
class Comparison:
    a: str
    b: str
    aligned_on: str
    metric: str
    target_loss: float | None
    tokens_to_target: dict[str, float | None]
    time_to_target_s: dict[str, float | None]
    steps_to_target: dict[str, float | None]
    """Steps (epochs, where the steps count them) to the target, each side's mean over its seeds."""
    cost_to_target_usd: dict[str, float | None]
    """Each side's dollars to the target, mean over its seeds (recorded cost_usd, else the manifest's price per
    device-hour over its wall time); None where a run has neither."""
    speedup: dict[str, float | None]
    """time, throughput and sample efficiency (B over A; time = throughput x sample efficiency), cost (A's dollars to
    the target over B's: how many times cheaper B reaches it), and steps/s x step efficiency without token counts."""
    effective_token_multiplier: float | None
    points: list[dict[str, Any]]
    confounders: list[dict[str, Any]]
    warnings: list[str]
    notes: list[str]
    seeds: dict[str, int]
    primary: str
    verdict: str
    runs: dict[str, list[str]] = field(default_factory=dict)
    batch_check: dict[str, Any] | None = None
    """When the sides differ in batch size, accumulation or precision: the small-batch check that measures whether
    that altered learning (`batch_check_arguments`)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_curve(
    run: RunData, task: str = VAL_TASK, metric: str = LOSS_METRIC, *, by_portfolio: bool = False
) -> pd.DataFrame:
    """The run's evaluations of `task`/`metric` with every axis: tokens, wall_s, flops, cost_usd (recorded, else
    from the manifest's price per device-hour; NaN where the run lacks it), in step order. `by_portfolio`: one point
    per step and portfolio version (`points.eval_points`), for a caller that keeps one version."""
    if not task and metric == TRAIN_LOSS:  # the training loss: means over stretches of the logged steps
        points = train_loss_points(run.steps, n=_TRAIN_CURVE_POINTS)
    else:
        points = eval_points(run.evals, run.steps, task, metric, by_portfolio=by_portfolio)
    steps = run.steps.set_index("step") if len(run.steps) else pd.DataFrame()
    out = points.rename(columns={"value": "loss"})
    for column in ("wall_s", "cost_usd"):
        from_steps = steps[column].reindex(points["step"]).to_numpy(dtype=float) if column in steps else np.nan
        out[column] = from_steps
    if "wall_s" in run.evals:
        recorded = run.evals[(run.evals.task == task) & (run.evals.metric == metric)]
        recorded = recorded.drop_duplicates("step", keep="last")
        by_step = recorded.set_index("step")["wall_s"].reindex(points["step"]).to_numpy(dtype=float)
        out["wall_s"] = np.where(np.isnan(by_step), out["wall_s"], by_step)
    hw = run.manifest.hardware if run.manifest else None
    if out["cost_usd"].isna().all() and hw is not None and hw.price_per_device_hour is not None:
        # No cost recorded: the manifest's price, as `yield` reads it.
        out["cost_usd"] = cost_from_price(
            out["wall_s"].to_numpy(dtype=float), hw.device_count, hw.price_per_device_hour
        )
    out["flops"] = out["tokens"] * run.flops_per_token if run.flops_per_token else np.nan
    return out.reset_index(drop=True)


def crossing(x: np.ndarray, y: np.ndarray, target: float, higher_is_better: bool = False) -> float | None:
    """First x at which the curve y(x), linear between points, reaches `target` (y <= target for a loss,
    y >= target for a metric that rises), or None."""
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    hits = np.nonzero(y >= target if higher_is_better else y <= target)[0]
    if len(hits) == 0:
        return None
    i = hits[0]
    if i == 0:
        return float(x[0])
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return float(x0 + (y0 - target) / (y0 - y1) * (x1 - x0))


def time_at(run: RunData, curve: pd.DataFrame, column: str, value: float, what: str = "wall_s") -> float | None:
    """Wall time (or `what`: `cost_usd`) when the run's `column` (tokens, or step) was at `value`: from its step rows
    (dense), else its eval points (which carry the cost a price per device-hour gives)."""
    for frame in (run.steps, curve):
        if what not in frame or column not in frame:
            continue
        sub = frame[[column, what]].dropna().sort_values(column)
        if len(sub) >= 2 and sub[column].iloc[0] <= value <= sub[column].iloc[-1]:
            return float(np.interp(value, sub[column], sub[what]))
    return None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known and len(known) == len(values) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den not in (None, 0) else None


@dataclass
class _Sides:
    """Both sides' runs, each with its curve (`run_curve`)."""

    a: list[RunData]
    b: list[RunData]
    curves: dict[int, pd.DataFrame]

    @property
    def runs(self) -> list[RunData]:
        return self.a + self.b

    def curve(self, run: RunData) -> pd.DataFrame:
        return self.curves[id(run)]


@dataclass
class _Remarks:
    """What a comparison says beside its numbers, in the order its sections find it."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _ToTarget:
    """One side's tokens, steps and wall time to the target, averaged over its seeds (None: not every seed has one)."""

    tokens: float | None
    time: float | None
    steps: float | None
    cost: float | None = None
    """Dollars to the target (recorded cost_usd, else the manifest's price per device-hour)."""


def compare(
    a: list[RunData],
    b: list[RunData],
    *,
    names: tuple[str, str] = ("a", "b"),
    at: Axis = "tokens",
    target_loss: float | None = None,
    task: str = VAL_TASK,
    metric: str = LOSS_METRIC,
    primary: Literal["learning", "throughput"] = "learning",
    n_points: int = 6,
    level: float = LEVEL,
    family_wise: bool = True,
) -> Comparison:
    """Compare group A with group B (each a list of seeds of one configuration); see the module docstring. Each
    aligned point's interval of the difference is at `level`, family-wise over the points (Bonferroni) unless
    `family_wise` is off (`stats`)."""
    check_choice("at", at, AXIS_COLUMN)
    check_choice("primary", primary, PRIMARIES)
    if not a or not b:
        raise InputError("compare needs at least one run on each side")
    said = _Remarks()
    sides = _sides(a, b, task, metric, said)
    hib = _higher_is_better(sides, task, metric)
    at = _axis(sides, at, said)
    points = _aligned_points(sides, at, n_points, level, family_wise, said)
    if len(a) < 2 and len(b) < 2:
        said.notes.append("one seed per side: no noise floor is known, so no difference can be called real")

    what = "loss" if metric == LOSS_METRIC else f"value of {metric} ({'higher' if hib else 'lower'} is better)"
    if target_loss is None:
        # The worst best value across all runs: every run reaches it, so every side has a time to target.
        bests = [float(sides.curve(r)["loss"].max() if hib else sides.curve(r)["loss"].min()) for r in sides.runs]
        target_loss = min(bests) if hib else max(bests)
        said.notes.append(f"target {what} {target_loss:.6g}: the worst best across runs (every run reaches it)")
    ta, tb = (
        _to_target(side, group, sides, target_loss, hib, f"{what} {target_loss:.6g}", at, said)
        for side, group in zip(names, (a, b), strict=True)
    )
    speedup = _speedup(ta, tb, (a[0].manifest, b[0].manifest), at, said)
    multiplier = _effective_multiplier(sides, names, hib, what, said)
    confounders, confound_warnings = manifest_confounders(
        a[0].manifest, b[0].manifest, (a[0].name, b[0].name), (len(a), len(b)), metric
    )
    said.warnings += confound_warnings
    host = host_confounders([(r.steps, r.host) for r in a], [(r.steps, r.host) for r in b])
    if host:
        said.warnings.append(
            f"the sides ran under different host conditions ({', '.join(h['field'] for h in host)}): a difference "
            "in time or throughput may be the hosts', not the change under test"
        )
    confounders += host
    sides_host = {n: [(r.steps, r.host) for r in g] for n, g in zip(names, (a, b), strict=True)}
    said.warnings += contention_warnings(contention(sides_host))  # a busy host: time-axis verdicts unreliable
    return Comparison(
        a=names[0],
        b=names[1],
        aligned_on=at,
        metric=f"{task}/{metric}",
        target_loss=target_loss,
        tokens_to_target={names[0]: ta.tokens, names[1]: tb.tokens},
        time_to_target_s={names[0]: ta.time, names[1]: tb.time},
        steps_to_target={names[0]: ta.steps, names[1]: tb.steps},
        cost_to_target_usd={names[0]: ta.cost, names[1]: tb.cost},
        speedup=speedup,
        effective_token_multiplier=multiplier,
        points=points,
        confounders=confounders,
        warnings=said.warnings,
        notes=said.notes,
        seeds={names[0]: len(a), names[1]: len(b)},
        primary=primary,
        verdict=verdict(names, primary, speedup, points, at, len(a), len(b), level),
        runs={names[0]: [r.name for r in a], names[1]: [r.name for r in b]},
        batch_check=batch_check_arguments(a[0].manifest, b[0].manifest),
    )


def _sides(a: list[RunData], b: list[RunData], task: str, metric: str, said: _Remarks) -> _Sides:
    """Every run's curve of `task`/`metric`, of one portfolio version (`_one_portfolio`); refused where a run has
    fewer than two evaluations of it."""
    sides = _Sides(a, b, {id(r): run_curve(r, task, metric, by_portfolio=True) for r in a + b})
    _one_portfolio(sides, f"{task}/{metric}", said)
    for r in sides.runs:
        c = sides.curve(r)
        if c["loss"].isna().all() or len(c) < 2:
            raise InputError(
                f"run {r.name!r} has fewer than two evaluations of {task or 'training'}/{metric}: nothing to align"
            )
    return sides


def _one_portfolio(sides: _Sides, key: str, said: _Remarks) -> None:
    """Keep in every curve only the evaluations of one portfolio version that every run has: two versions' values are
    two rulers (another held-out set, another harness), and a difference across them is not one of learning. The
    latest version the runs share (by where the first run of A starts it), with a warning that names it, where any
    run has more than one; refused when the runs share none. A training-loss curve has no portfolio."""
    held = {
        id(r): list(dict.fromkeys(sides.curve(r)["portfolio"])) for r in sides.runs if "portfolio" in sides.curve(r)
    }
    # A run whose evaluations name no portfolio at all (an import, an API run) says nothing of its ruler: it
    # constrains no version, and is compared as it is.
    held = {k: v for k, v in held.items() if v != [UNVERSIONED]}
    if len({v for versions in held.values() for v in versions}) < 2:
        return
    listing = "; ".join(f"{r.name}: {', '.join(held[id(r)])}" for r in sides.runs if id(r) in held)
    common = [v for v in held[id(sides.runs[0])] if all(v in versions for versions in held.values())]
    if not common:
        raise InputError(
            f"the runs evaluate {key} with no portfolio version in common ({listing}): values of two versions do not "
            "compare; evaluate both sides with one version"
        )
    chosen = common[-1]
    said.warnings.append(
        f"the runs evaluate {key} with more than one portfolio version ({listing}): compared on {chosen} only, the "
        "latest they share; the other versions' evaluations are left out"
    )
    for r in sides.runs:
        if id(r) in held:
            curve = sides.curve(r)
            sides.curves[id(r)] = curve[curve["portfolio"] == chosen].reset_index(drop=True)


def _higher_is_better(sides: _Sides, task: str, metric: str) -> bool:
    """The metric's direction, which every run must record alike."""
    hib = bool(sides.curve(sides.a[0])["higher_is_better"].iloc[0])
    if any(bool(sides.curve(r)["higher_is_better"].iloc[0]) != hib for r in sides.runs):
        raise InputError(
            f"{task}/{metric} is recorded as rising in some runs and falling in others: fix its "
            "direction at import (higher_is_better) before comparing"
        )
    return hib


def _axis(sides: _Sides, at: Axis, said: _Remarks) -> Axis:
    """The axis asked for, or steps (epochs) when tokens were asked for and a run records no token counts."""
    if at != "tokens" or all(sides.curve(r)["tokens"].notna().sum() >= 2 for r in sides.runs):
        return at
    lacking = [r.name for r in sides.runs if sides.curve(r)["tokens"].notna().sum() < 2]
    at = "epochs" if all(r.epochs for r in sides.runs) else "steps"
    said.notes.append(
        f"aligned on {at}: {', '.join(lacking)} record no token counts "
        + (
            "(equal epochs are equal data only over the same data set)"
            if at == "epochs"
            else "(equal steps are equal tokens only at equal batch size and sequence length)"
        )
    )
    return at


_LACKING = {
    "time": "wall-clock time",
    "compute": "FLOPs per token (model shape in the manifest)",
    "cost": "cost (cost_usd, or a price per device-hour)",
    "steps": "steps",
    "epochs": "epochs",
}
"""What a run lacks that has no values on an axis (token counts for the rest)."""


def _aligned_points(
    sides: _Sides, at: Axis, n_points: int, level: float, family_wise: bool, said: _Remarks
) -> list[dict[str, Any]]:
    """Both sides' mean at `n_points` equal values of the axis over the span every run covers, with the interval of
    their difference; none (and a warning) where a run has no values on the axis or the spans do not overlap."""
    column = AXIS_COLUMN[at]
    usable = [r for r in sides.runs if sides.curve(r)[column].notna().sum() >= 2]
    lo = max((float(sides.curve(r)[column].min()) for r in usable), default=math.nan)
    hi = min((float(sides.curve(r)[column].max()) for r in usable), default=math.nan)
    if len(usable) < len(sides.runs):
        lacking = [r.name for r in sides.runs if r not in usable]
        said.warnings.append(
            f"no aligned points at equal {at}: {', '.join(lacking)} lack {_LACKING.get(at, 'token counts')}"
        )
        return []
    if hi < lo:
        spans = "; ".join(
            f"{r.name} {sides.curve(r)[column].min():.6g}-{sides.curve(r)[column].max():.6g}" for r in sides.runs
        )
        said.warnings.append(
            f"no overlap on {at}: the runs' evaluations span {spans}; nothing can be compared at equal {at}"
        )
        return []
    grid = np.linspace(lo, hi, n_points) if hi > lo else np.array([lo])
    exact = all(set(np.round(grid, 6)) <= set(np.round(sides.curve(r)[column].dropna(), 6)) for r in sides.runs)
    if not exact:
        said.notes.append(f"losses at equal {at} are interpolated linearly between each run's evaluations")
    values = [
        (
            np.array([np.interp(x, *_xy(sides.curve(r), column)) for r in sides.a]),
            np.array([np.interp(x, *_xy(sides.curve(r), column)) for r in sides.b]),
        )
        for x in grid
    ]
    # The untrained model (every run at 0 on the axis: no token, step or second of training yet) and points
    # where no seed varies are the same on both sides by construction, or differ only by the seeds'
    # initialisations: they say nothing about what the runs learned and are left out of the verdicts (and of
    # the family the level is held over).
    same = [x <= 0 or stats.identical(va, vb) for x, (va, vb) in zip(grid, values, strict=True)]
    family = max(sum(not s for s in same), 1) if family_wise else 1
    points = [
        _point(at, float(x), va, vb, skip, level, family) for x, (va, vb), skip in zip(grid, values, same, strict=True)
    ]
    if any(same):
        said.notes.append(
            f"{sum(same)} point(s) where every run is identical by construction (the untrained model) "
            "are left out of the verdict"
        )
    return points


def _point(at: str, x: float, va: np.ndarray, vb: np.ndarray, skip: bool, level: float, family: int) -> dict[str, Any]:
    """One aligned point: the sides' means at `x` on the axis `at`, and the interval of their difference (none for a
    point identical by construction)."""
    iv = None if skip else stats.difference(va, vb, level, family=family)
    spread = [v.var(ddof=1) for v in (va, vb) if len(v) >= 2]
    return {
        at: x,
        "a": float(va.mean()),
        "b": float(vb.mean()),
        "diff": float(vb.mean() - va.mean()),
        "interval": None if iv is None else [iv.low, iv.high],
        "level": level,
        "family": family,
        "interval_kind": stats.KINDS["difference"],
        "noise_floor": math.sqrt(float(np.mean(spread))) if spread else None,
        "identical_by_construction": skip,
        "within_noise": None if iv is None else stats.verdict(iv) == "within noise",
    }


def _to_target(
    side: str,
    group: list[RunData],
    sides: _Sides,
    target: float,
    hib: bool,
    target_label: str,
    at: Axis,
    said: _Remarks,
) -> _ToTarget:
    """One side's tokens, steps and wall time to `target`, each the mean over its seeds. Without token counts the
    time is read at the step the run reached the target."""
    curves = [sides.curve(r) for r in group]
    tokens = [crossing(c["tokens"].to_numpy(), c["loss"].to_numpy(), target, hib) for c in curves]
    steps = [crossing(c["step"].to_numpy(dtype=float), c["loss"].to_numpy(), target, hib) for c in curves]
    times = [
        time_at(r, c, "tokens", t) if t is not None else None if s is None else time_at(r, c, "step", s)
        for r, c, t, s in zip(group, curves, tokens, steps, strict=True)
    ]
    costs = [
        None if s is None else time_at(r, c, "step", s, "cost_usd")
        for r, c, s in zip(group, curves, steps, strict=True)
    ]
    if any(s is None for s in steps):
        said.warnings.append(f"{side} does not reach the target {target_label} in every run")
    elif any(t is None for t in times):
        said.warnings.append(f"{side} lacks wall-clock time: its time to target is unknown")
    return _ToTarget(tokens=_mean(tokens), time=_mean(times), steps=_mean(steps), cost=_mean(costs))


def _speedup(
    ta: _ToTarget, tb: _ToTarget, manifests: tuple[Manifest | None, Manifest | None], at: Axis, said: _Remarks
) -> dict[str, float | None]:
    """The time speedup and its split (module docstring), the cost ratio beside it."""
    return {
        "time": _ratio(ta.time, tb.time),
        "throughput": _ratio(_ratio(tb.tokens, tb.time), _ratio(ta.tokens, ta.time)),
        "sample_efficiency": _ratio(ta.tokens, tb.tokens),
        "cost": _ratio(ta.cost, tb.cost),
        **_step_split(ta, tb, manifests, at, said),
    }


def _step_split(
    ta: _ToTarget, tb: _ToTarget, manifests: tuple[Manifest | None, Manifest | None], at: Axis, said: _Remarks
) -> dict[str, float | None]:
    """Without token counts, the time speedup split into steps/s x steps to target (`step_efficiency`: A's steps
    over B's), where a step is the same amount of data on both sides (`confounders.step_data_differences`); empty
    (the speedup keeps its three keys) with token counts, where the split is throughput x sample efficiency."""
    if (ta.tokens is not None and tb.tokens is not None) or None in (ta.steps, tb.steps, ta.time, tb.time):
        return {}
    unit = "epochs" if at == "epochs" else "steps"
    differ = step_data_differences(*manifests)
    if differ:
        said.notes.append(
            f"no split of the time speedup into {unit} x {unit}/s: the sides differ in {', '.join(differ)}, so one "
            f"of their {unit} is not the same amount of data"
        )
        return {}
    basis = (
        "only at equal batch size and sequence length, which the manifests do not record"
        if differ is None
        else "here: the manifests give both sides the same batch size, sequence length and data"
    )
    said.notes.append(
        f"no token counts: the time speedup is split into {unit}/s x {unit} to target; equal {unit} are equal data "
        f"{basis}"
    )
    return {
        "steps_per_s": _ratio(_ratio(tb.steps, tb.time), _ratio(ta.steps, ta.time)),
        "step_efficiency": _ratio(ta.steps, tb.steps),
    }


def _effective_multiplier(sides: _Sides, names: tuple[str, str], hib: bool, what: str, said: _Remarks) -> float | None:
    """How many times B's tokens A needs to reach B's last value (None, with a note, where it never does or a run
    counts no tokens)."""
    b_last = [sides.curve(r).dropna(subset=["tokens", "loss"]) for r in sides.b]
    if not all(len(c) for c in b_last):
        said.notes.append("no token counts: no effective token multiplier")
        return None
    b_loss = float(np.mean([c["loss"].iloc[-1] for c in b_last]))
    b_tokens = float(np.mean([c["tokens"].iloc[-1] for c in b_last]))
    a_need = [
        crossing(sides.curve(r)["tokens"].to_numpy(), sides.curve(r)["loss"].to_numpy(), b_loss, hib) for r in sides.a
    ]
    multiplier = _ratio(_mean(a_need), b_tokens)
    if multiplier is None:
        said.notes.append(
            f"{names[0]} never reaches {names[1]}'s last {what} ({b_loss:.6g}): no effective token multiplier"
        )
    return multiplier


def _xy(curve: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    sub = curve[[column, "loss"]].dropna().sort_values(column)
    return sub[column].to_numpy(), sub["loss"].to_numpy()
