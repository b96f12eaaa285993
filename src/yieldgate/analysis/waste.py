"""Wasted compute as a number: what a run spent on work that bought no learning, beside its goodput.

Three kinds, each priced in device-hours, dollars and kWh where the run recorded what that needs:

- **flat tranches**: the stable-phase tranches of `yield` (outside an LR decay, where a cooldown's gain is no data
  yield) from the point where the run stopped learning on its own law (`plateau.plateau`): the compute of the stretch
  that learned nothing measurable. Not each tranche against the noise band alone: a short tranche of a curve that
  still learns gains less than the noise, so that judgement called more of a learning run wasted the more often it
  was evaluated; the plateau is read from the whole curve and moves by one evaluation interval at most with the
  cadence. Fewer than `plateau.MIN_EVALS` evaluations after any candidate start leave it unresolved (`missing`);
- **restarts**: the work a restart threw away and redid (`goodput`: the set-apart steps' time, and the time the job
  was down where a log's clock shows it);
- **diverged steps**: steps whose loss was recorded as NaN or infinite, at the run's median seconds per step.

Seconds become device-hours with the run's device count (`load.devices_of`; one where nothing says), dollars with
the manifest's `hardware.price_per_device_hour`, and kWh with the run's recorded energy per second of wall time
(`energy_j`). A figure that cannot be had is None, and `missing` says why. A campaign's waste is the sum over its
probes (`total`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from yieldgate.analysis.fit import warmup_end
from yieldgate.analysis.goodput import goodput_of
from yieldgate.analysis.load import devices_of
from yieldgate.analysis.plateau import Plateau, plateau
from yieldgate.analysis.runs import yield_report
from yieldgate.analysis.yields import Tranche, YieldReport
from yieldgate.errors import InputError
from yieldgate.names import metric_direction

if TYPE_CHECKING:
    from yieldgate.ledger import Ledger

__all__ = ["Spend", "Waste", "WasteReport", "waste", "total", "waste_report"]

KINDS = ("flat_tranches", "restarts", "diverged_steps")


@dataclass
class Spend:
    """Compute spent: wall seconds of the job, and what they come to where the run says."""

    seconds: float = 0.0
    device_hours: float | None = 0.0
    usd: float | None = 0.0
    kwh: float | None = 0.0

    def __add__(self, other: Spend) -> Spend:
        def plus(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        return Spend(
            self.seconds + other.seconds,
            plus(self.device_hours, other.device_hours),
            plus(self.usd, other.usd),
            plus(self.kwh, other.kwh),
        )


@dataclass
class Waste:
    """One run's (or, from `total`, several runs') wasted compute, by kind, and its goodput."""

    run: str
    flat_tranches: Spend
    restarts: Spend
    diverged_steps: Spend
    counts: dict[str, int]
    """Tranches within noise, restarts, diverged steps."""
    wall_s: float | None
    goodput: float | None
    """The share of wall time that went into training that counts (`goodput`); None without a clock."""
    missing: dict[str, str] = field(default_factory=dict)
    plateau: Plateau | None = None
    """Where the run stopped learning on its own law (`plateau.plateau`); None where no tranche was read."""

    @property
    def wasted(self) -> Spend:
        return self.flat_tranches + self.restarts + self.diverged_steps

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run}
        for kind in KINDS:
            out[kind] = {**getattr(self, kind).__dict__, "count": self.counts.get(kind, 0)}
        return {
            **out,
            "wasted": self.wasted.__dict__,
            "wall_s": self.wall_s,
            "goodput": self.goodput,
            "missing": self.missing,
            "plateau": None if self.plateau is None else self.plateau.to_dict(),
        }


def _pricer(ledger: Ledger, run: str, steps: Any) -> tuple[Any, dict[str, str]]:
    """A function from wall seconds to a `Spend`, and what it cannot price."""
    manifest = ledger.manifest(run)
    devices = devices_of(ledger, run, manifest)
    price = manifest.hardware.price_per_device_hour if manifest and manifest.hardware else None
    missing: dict[str, str] = {}
    if devices is None:
        missing["device_hours"] = "device count unknown: counted as one device"
    if price is None:
        missing["usd"] = "no price: set hardware.price_per_device_hour in the manifest"
    watts = None
    if "energy_j" in steps and "wall_s" in steps:
        known = steps[["wall_s", "energy_j"]].dropna()
        if len(known) >= 2 and known["wall_s"].iloc[-1] > known["wall_s"].iloc[0]:
            spent = known["energy_j"].iloc[-1] - known["energy_j"].iloc[0]
            watts = float(spent / (known["wall_s"].iloc[-1] - known["wall_s"].iloc[0]))
    if watts is None:
        missing["kwh"] = "no energy recorded (energy_j)"

    def spend(seconds: float) -> Spend:
        hours = seconds / 3600 * (devices or 1)
        return Spend(
            seconds,
            hours,
            None if price is None else hours * price,
            None if watts is None else watts * seconds / 3.6e6,
        )

    return spend, missing


def _flat_seconds(
    ledger: Ledger, run: str, steps: Any, report: YieldReport | None
) -> tuple[float, int, Plateau | None, str | None]:
    """Wall seconds of the stable-phase tranches on the run's plateau (`plateau.plateau`), their count, the plateau,
    and why none are read. `report`: the run's `yield_report`, where the caller has it."""
    if report is None:
        try:
            report = yield_report(ledger, run)
        except InputError as exc:
            return 0.0, 0, None, f"no tranches: {exc}"
    clock = steps[["step", "wall_s"]].dropna() if "wall_s" in steps else steps.iloc[:0]
    if len(clock) < 2:
        return 0.0, 0, None, "no wall clock recorded"
    stable = [t for t in report.tranches if not t.spans_lr_decay]
    found = _plateau_of(report, stable, steps)
    if found.unresolved is not None or found.start is None:
        return 0.0, 0, found, None if found.unresolved is None else f"unresolved: {found.unresolved}"
    start = found.start
    flat = [t for t in stable if _at(report, t, "start") >= start]
    at = clock["step"].to_numpy(float)
    wall = clock["wall_s"].to_numpy(float)
    seconds = sum(float(np.interp(t.end_step, at, wall) - np.interp(t.start_step, at, wall)) for t in flat)
    return seconds, len(flat), found, None


def _at(report: YieldReport, t: Tranche, end: str) -> float:
    """A tranche's start or end on the report's axis (tokens, else steps)."""
    return float(getattr(t, f"{end}_tokens" if report.axis == "tokens" else f"{end}_step"))


def _plateau_of(report: YieldReport, stable: list[Tranche], steps: Any) -> Plateau:
    """The plateau of the stable-phase evaluations after warm-up, as a loss (a score that rises is turned over)."""
    if report.eval_noise is None:
        return Plateau(start=None, statistic=None, evaluations=0, unresolved="no evaluation noise: too few evaluations")
    seen: dict[float, tuple[float, int]] = {}
    for t in stable:
        seen.setdefault(_at(report, t, "start"), (t.loss_start, t.start_step))
        seen.setdefault(_at(report, t, "end"), (t.loss_end, t.end_step))
    warm = warmup_end(steps) or 0
    kept = sorted((x, v) for x, (v, step) in seen.items() if x > 0 and step >= warm and math.isfinite(v))
    x = np.array([k[0] for k in kept], dtype=float)
    y = np.array([k[1] for k in kept], dtype=float)
    if len(y) and metric_direction(report.metric):  # a score: its shortfall from the best falls as a loss does
        y = float(y.max()) - y + max(float(y.max() - y.min()), 1e-9)
    return replace(plateau(x, y, report.eval_noise), axis="tokens" if report.axis == "tokens" else "steps")


def _diverged(steps: Any) -> tuple[int, float]:
    """Steps with a recorded NaN or infinite loss, and their seconds at the median seconds per step."""
    if "loss" not in steps:
        return 0, 0.0
    loss = steps["loss"]
    recorded = loss.notna().to_numpy() if hasattr(loss, "isna") else np.ones(len(loss), dtype=bool)
    values = np.asarray(loss.to_numpy(dtype=float, na_value=np.nan), dtype=float)
    bad = recorded & ~np.isfinite(values)
    if not bad.any():
        return 0, 0.0
    clock = steps[["step", "wall_s"]].dropna() if "wall_s" in steps else steps.iloc[:0]
    rates = np.diff(clock["wall_s"].to_numpy(float)) / np.diff(clock["step"].to_numpy(float)) if len(clock) > 1 else []
    rates = [r for r in rates if math.isfinite(r) and r > 0]
    per_step = float(np.median(rates)) if rates else 0.0
    return int(bad.sum()), int(bad.sum()) * per_step


STEP_COLUMNS = ("wall_s", "energy_j", "loss", "lr")
"""The step columns waste reads: the clock, the energy meter, the loss (diverged steps) and the LR (warm-up's end).
Reading only these keeps a million-step run's waste, as the dashboard draws it, from holding every column twice."""


def waste(ledger: Ledger, run: str, *, report: YieldReport | None = None) -> Waste:
    """The compute `run` spent on flat tranches, restarts and diverged steps, priced (see the module docstring).
    `report`: the run's `yield_report` on the validation loss, where the caller has it (the HTML report)."""
    steps = ledger.steps(run, list(STEP_COLUMNS), nullable=True)
    spend, missing = _pricer(ledger, run, steps)
    flat_s, flat_n, found, why = _flat_seconds(ledger, run, steps, report)
    if why is not None:
        missing["flat_tranches"] = why
    good = goodput_of(ledger, run)
    diverged_n, diverged_s = _diverged(steps)
    return Waste(
        run=run,
        flat_tranches=spend(flat_s),
        restarts=spend(0.0 if good is None else good.lost_s + good.down_s),
        diverged_steps=spend(diverged_s),
        counts={
            "flat_tranches": flat_n,
            "restarts": 0 if good is None else good.restarts,
            "diverged_steps": diverged_n,
        },
        wall_s=None if good is None else good.wall_s,
        goodput=None if good is None else good.share,
        missing=missing,
        plateau=found,
    )


def total(wastes: Sequence[Waste], name: str) -> Waste:
    """Several runs' waste summed (a campaign's probes): goodput weighted by wall time."""
    sum_of: dict[str, Spend] = {kind: sum((getattr(w, kind) for w in wastes), Spend()) for kind in KINDS}
    walls = [w.wall_s for w in wastes if w.wall_s]
    wall = float(sum(walls)) if walls else None
    good = [(w.goodput, w.wall_s) for w in wastes if w.goodput is not None and w.wall_s]
    share = sum(g * s for g, s in good) / sum(s for _, s in good) if good else None
    missing = {k: f"{v} (in {w.run})" for w in wastes for k, v in w.missing.items()}
    return Waste(
        run=name,
        flat_tranches=sum_of["flat_tranches"],
        restarts=sum_of["restarts"],
        diverged_steps=sum_of["diverged_steps"],
        counts={kind: sum(w.counts[kind] for w in wastes) for kind in KINDS},
        wall_s=wall,
        goodput=share,
        missing=missing,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WasteReport:
    """`yieldgate waste TARGET`: each run's waste and their sum."""

    target: str
    runs: list[Waste]
    total: Waste

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [w.to_dict() for w in self.runs], "total": self.total.to_dict()}


def waste_report(ledger: Ledger, runs: Sequence[str], target: str) -> WasteReport:
    """The waste of each of `runs` (a run, a seed group, a campaign's probes) and their sum, named `target`."""
    each = [waste(ledger, run) for run in runs]
    return WasteReport(target=target, runs=each, total=total(each, target))
