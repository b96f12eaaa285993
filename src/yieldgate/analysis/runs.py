"""A run's yields and the check of its forecast, read from the ledger: the analyses that the report, the export and
the benchmarks share with the commands (`api.yields` is `yield_report`; `api.forecast` is the forecast that
`forecast_check` checks). The ledger is read through `analysis.load`.
"""

from __future__ import annotations

import math
from typing import Any

from yieldgate.analysis.batch import batch_advice
from yieldgate.analysis.compare import RunData
from yieldgate.analysis.curriculum import stage_yields
from yieldgate.analysis.fit import PowerLaw, fit_power_law, forecast, learning_noise, stable_phase
from yieldgate.analysis.load import default_metric, devices_of, load_run, metric_key, objective_note, stable_points
from yieldgate.analysis.points import eval_points
from yieldgate.analysis.yields import YieldReport, tranche_yields
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

__all__ = ["yield_report", "expected_law", "forecast_check"]


def expected_law(data: RunData, task: str, metric: str) -> PowerLaw:
    """loss(tokens) = E + B * tokens^-beta fitted to the run's evaluations of `task`/`metric` in its stable-LR phase
    (all of them when fewer than 3 are): the yield a tranche of it is expected to buy (`Tranche.vs_expected`)."""
    points = eval_points(data.evals, data.steps, task, metric).dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    if points.empty:
        raise InputError(f"run {data.name!r} has no evaluations of {task}/{metric} with a token count to fit a law to")
    if bool(points["higher_is_better"].iloc[0]):
        raise InputError(f"{task}/{metric} rises as the model learns; the law fits losses (lower is better)")
    mask, _ = stable_phase(data.steps, points["step"].to_numpy())
    used = points[mask] if mask.sum() >= 3 else points
    law = fit_power_law(used["tokens"].to_numpy(), used["value"].to_numpy())
    if len(used) > mask.sum() and law.poor is None:
        law.poor = "fewer than 3 evaluations before the LR decays: fitted across the decay, which it mixes in"
    return law


def yield_report(
    ledger: Ledger,
    run: str,
    *,
    tranche_tokens: float | None = None,
    metric: str = "val/loss",
    per: str = "token",
    data: RunData | None = None,
    expected_from: str | None = None,
) -> YieldReport:
    """`data`: the run as `load_run(ledger, run, per=per)` returns it, when the caller has it already (the report
    draws a million-step run from one read). Each tranche's yield is also set against a fitted law (`vs_expected`):
    the law of `expected_from` (a reference run: learning against a baseline), else the run's own (learning against
    its own trend; where it cannot be fitted, `missing` says why)."""
    data = load_run(ledger, run, per=per) if data is None else data
    metric, note = default_metric(data, metric, per)
    task, name = metric_key(metric, per)
    hw = data.manifest.hardware if data.manifest else None
    law, why = None, None
    if task:
        try:
            reference = data if expected_from is None else load_run(ledger, expected_from, per=per)
            law = expected_law(reference, task, name)
        except InputError as exc:
            if expected_from is not None:
                raise InputError(f"expected_from {expected_from!r}: {exc}") from None
            why = str(exc)
    else:
        why = "the training loss is not held out: no law is fitted to it"
    report = tranche_yields(
        run,
        data.steps,
        data.evals,
        task=task,
        metric=name,
        tranche_tokens=tranche_tokens,
        devices=devices_of(ledger, run, data.manifest),
        price_per_device_hour=hw.price_per_device_hour if hw else None,
        law=law,
        law_is_baseline=expected_from is not None and expected_from != run,
        epochs=data.epochs,
    )
    if law is not None:
        report.law = {"run": expected_from or run, **law.to_dict()}
        if law.poor and not law.flat:  # a flat law sets nothing against: `missing` says why
            report.notes.append(f"the law each tranche is set against is poor ({law.poor}): read vs_expected with care")
    elif why is not None and report.axis == "tokens":
        report.missing["vs_expected"] = why
    report.stages = _curriculum_stages(data, task, name, report)
    if note:
        report.notes.insert(0, note)
    objective = objective_note(data, name)
    if objective is not None:
        report.notes.insert(0, objective)
        report.unit = "the objective as logged, not nats/token"
    if "signals/gns" in ledger.extra_keys(run):
        report.batch = batch_advice(data.steps, ledger.extras(run, ["signals/gns"]), data.manifest)
        if report.batch and report.batch["advice"]:
            report.notes.append(f"batch: {report.batch['advice']}")
    if per == "byte":
        report.unit = "bits/byte, per billion bytes"
    return report


def forecast_check(
    ledger: Ledger, run: str, *, fraction: float = 0.6, metric: str = "val/loss", level: float = 0.8
) -> dict[str, float | bool]:
    """Check a forecast against what the run then measured: fit the first `fraction` of its stable-phase
    evaluations, forecast the next tranche (up to the following stable-phase evaluation) and say whether the
    `level` interval holds the gain measured there."""
    points, mask, _ = stable_points(ledger, run, metric)
    stable = points[mask]
    n = int(len(stable) * fraction)
    if n < 3 or n >= len(stable):
        raise InputError(
            f"run {run!r}: {len(stable)} stable-phase evaluations leave no tranche to check a fit "
            f"on {fraction:.0%} of them against"
        )
    x, y = stable["tokens"].to_numpy(), stable["value"].to_numpy()
    result = forecast(x[:n], y[:n], next_tokens=float(x[n] - x[n - 1]), at_tokens=float(x[n - 1]), level=level)
    measured = float(y[n - 1] - y[n])  # a loss: the gain is its decrease
    lo, hi = result.interval
    return {
        "fitted": n,
        "stable": len(stable),
        "at_tokens": float(x[n - 1]),
        "next_tokens": float(x[n] - x[n - 1]),
        "forecast": result.gain,
        "low": lo,
        "high": hi,
        "measured": measured,
        "held": bool(lo <= measured <= hi),
    }


def _curriculum_stages(data: RunData, task: str, metric: str, report: YieldReport) -> list[dict[str, Any]]:
    """The yield of each stage of the run's staged curriculum (`curriculum.stage_yields`), on the report's noise."""
    recipe = data.manifest.data if data.manifest else None
    if recipe is None or recipe.curriculum.kind != "staged" or report.axis != "tokens" or not task:
        return []
    points = eval_points(data.evals, data.steps, task, metric).dropna(subset=["tokens"])
    tokens = data.steps["tokens"].max() if "tokens" in data.steps else math.nan
    x, steps = points["tokens"].to_numpy(dtype=float), points["step"].to_numpy(dtype=float)
    noise, dof, _ = learning_noise(x, points["value"].to_numpy(dtype=float), steps, data.steps)
    return stage_yields(points, recipe.curriculum, float(tokens), noise=noise, noise_dof=dof, level=report.level)
