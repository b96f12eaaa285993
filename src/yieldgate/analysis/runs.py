"""Reading runs out of the ledger for analysis: one function per CLI question, each returning plain data.

The analysis modules take DataFrames; this is the one place that knows how a run's steps, evals, manifest
and measurement notes come out of the ledger.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.batch import batch_advice
from yieldgate.analysis.compare import Axis, Comparison, RunData, compare, unit_for
from yieldgate.analysis.fit import Forecast, PowerLaw, fit_power_law, forecast, stable_phase
from yieldgate.analysis.listing import (
    SORT_KEYS,
    match_patterns,
    match_runs,
    select_runs,
)
from yieldgate.analysis.objective import not_cross_entropy
from yieldgate.analysis.yields import (
    TRAIN_LOSS,
    YieldReport,
    eval_points,
    to_per_byte,
    tranche_yields,
)
from yieldgate.errors import InputError, check_choice
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest
from yieldgate.names import LOSS_METRIC, PER_UNITS, STEP_UNIT, split_eval_key, stderr_of

__all__ = [
    "load_run",
    "match_runs",
    "match_patterns",
    "select_runs",
    "SORT_KEYS",  # the first four from listing
    "yield_report",
    "compare_groups",
    "stable_points",
    "forecast_run",
    "forecast_check",
    "metric_key",
    "default_metric",
    "devices_of",
]


def load_run(ledger: Ledger, name: str, *, per: str = "token") -> RunData:
    steps, evals, manifest = ledger.steps(name), ledger.evals(name), ledger.manifest(name)
    logged = [*ledger.extra_keys(name), *(f"{t}/{m}" for t, m in zip(evals["task"], evals["metric"], strict=True))]
    objective = not_cross_entropy(logged, steps["loss"].to_numpy(dtype=float) if "loss" in steps else None)
    check_choice("per", per, PER_UNITS)
    if per == "byte" and objective is not None:
        raise InputError(f"run {name!r}: its loss is not a cross-entropy ({objective}), so it has no bits per byte")
    if per == "byte":
        tokenizer = manifest.data.tokenizer if manifest and manifest.data else None
        bpt = tokenizer.bytes_per_token if tokenizer else None
        evals, steps = to_per_byte(evals, steps, bpt, name)
    meta = ledger.meta(name)
    fpt = meta.get("mfu", {}).get("flops_per_token")
    if fpt is None and manifest and manifest.model:
        fpt = manifest.model.flops_per_token
    epochs = meta.get(STEP_UNIT) == "epoch"
    return RunData(
        name=name, steps=steps, evals=evals, manifest=manifest, flops_per_token=fpt, epochs=epochs, objective=objective
    )


def objective_note(data: RunData, metric: str) -> str | None:
    """What a yield or forecast of the loss `metric` of a run whose loss is not a cross-entropy must say; None for any
    other metric or run."""
    if data.objective is None or metric != LOSS_METRIC:
        return None
    return (
        f"{data.name}'s loss is not a cross-entropy ({data.objective}): it is the fine-tuning objective as logged, not "
        "nats per token; a fall in it is the policy moving, not learning per token, and it has no perplexity or bits "
        "per byte"
    )


def metric_key(metric: str, per: str) -> tuple[str, str]:
    """(task, metric) of a `metric` argument: `val/loss`, `arc_easy/acc`, or `loss` (the training loss: task
    empty)."""
    if metric == TRAIN_LOSS:
        return "", TRAIN_LOSS
    try:
        task, name = split_eval_key(metric)
    except ValueError:
        raise InputError(
            f"metric must be an eval key '<task>/<metric>' (val/loss, arc_easy/acc) or 'loss' (the "
            f"training loss), got {metric!r}"
        ) from None
    measured = stderr_of(name)
    if measured is not None:
        raise InputError(
            f"{metric} is the standard error of {task}/{measured}, kept beside its values, not a metric of its own; "
            f"use {task}/{measured}"
        )
    return task, ("bpb" if per == "byte" and name == "loss" else name)


def devices_of(ledger: Ledger, run: str, manifest: Manifest | None) -> int | None:
    """The run's device count: the manifest's `hardware.device_count` when it sets one, else the count its import
    read from the log (or was given), else a Tracker's world size; None when nothing says."""
    hw = manifest.hardware if manifest else None
    if hw is not None and ("device_count" in hw.model_fields_set or hw.device_count > 1):
        return hw.device_count
    meta = ledger.meta(run)
    if isinstance(meta.get("devices"), dict) and isinstance(meta["devices"].get("count"), int):
        return int(meta["devices"]["count"])
    return hw.device_count if hw is not None else None


def default_metric(data: RunData, metric: str, per: str = "token") -> tuple[str, str | None]:
    """The metric a command uses when the user asked for the default `val/loss` and the run has none: the first
    held-out loss (`val/<source>/loss`, `test/loss`), else the first capability evaluation, else the training
    loss; with a note saying so. Any other `metric` is used as asked. `per`: how `data` was read (`load_run`):
    per byte its val/loss reads as val/bpb."""
    if metric != "val/loss":
        return metric, None
    keys = sorted({f"{t}/{m}" for t, m in zip(data.evals["task"], data.evals["metric"], strict=True)})
    trained = "loss" in data.steps and data.steps["loss"].notna().any()
    if ("val/bpb" if per == "byte" else "val/loss") in keys or (not keys and not trained):
        return metric, None
    held_out = [k for k in keys if k.endswith("/loss") and k.split("/")[0] in ("val", "test")]
    chosen = (held_out or keys or [TRAIN_LOSS])[0]
    return chosen, f"{data.name} has no val/loss evaluations; using {chosen}" + (
        " (the training loss)" if chosen == TRAIN_LOSS else ""
    ) + " (choose with metric=...)"


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
        epochs=data.epochs,
    )
    if law is not None:
        report.law = {"run": expected_from or run, **law.to_dict()}
        if law.poor:
            report.notes.append(f"the law each tranche is set against is poor ({law.poor}): read vs_expected with care")
    elif why is not None and report.axis == "tokens":
        report.missing["vs_expected"] = why
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


def comparison_unit(ledger: Ledger, a: str, b: str, per: str | None = None) -> tuple[str, str | None]:
    """`per` as asked, else the unit the two groups compare in (`compare.unit_for`: bytes when their tokenizers
    differ), with the note that says so."""
    if per is not None:
        return per, None
    names = dict.fromkeys(n for pattern in (a, b) for n in match_runs(ledger, pattern))
    return unit_for({n: ledger.manifest(n) for n in names})


def compare_groups(
    ledger: Ledger,
    a: str,
    b: str,
    *,
    at: Axis = "tokens",
    target_loss: float | None = None,
    metric: str = "val/loss",
    primary: str = "learning",
    per: str | None = "token",
) -> Comparison:
    """`per` None: bytes when the groups' tokenizers differ (`comparison_unit`), said in the notes."""
    per, unit_note = comparison_unit(ledger, a, b, per)
    groups = [[load_run(ledger, n, per=per) for n in match_runs(ledger, p)] for p in (a, b)]
    metric, note = default_metric(groups[0][0], metric, per)
    task, name = metric_key(metric, per)
    result = compare(
        groups[0],
        groups[1],
        names=(a, b),
        at=at,
        target_loss=target_loss,
        task=task,
        metric=name,
        primary=primary,  # type: ignore[arg-type]
    )
    if note:
        result.notes.insert(0, note)
    if unit_note:
        result.notes.insert(0, unit_note)
    if not task:
        result.notes.insert(0, "compared on the training loss, which is not held out")
    for data in groups[0] + groups[1]:
        objective = objective_note(data, name)
        if objective is not None:
            result.notes.insert(0, objective)
    return result


def stable_points(ledger: Ledger, run: str, metric: str = "val/loss") -> tuple[pd.DataFrame, np.ndarray, str | None]:
    """The run's evaluations of `metric` after the first token, the mask of those in its stable-LR phase
    (`fit.stable_phase`) and that function's note."""
    data = load_run(ledger, run)
    task, name = metric_key(metric, "token")
    points = eval_points(data.evals, data.steps, task, name).dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    mask, note = stable_phase(data.steps, points["step"].to_numpy())
    return points, mask, note


def _divergence(ledger: Ledger, run: str, points: pd.DataFrame) -> str | None:
    """Where the run diverged (a logged training loss or evaluation that is NaN or infinite), with the count
    and the span: "non-finite training loss at 6 logged steps, 1,200-1,250"."""
    steps = ledger.steps(run, nullable=True)
    logged = steps.dropna(subset=["loss"]) if "loss" in steps else steps.iloc[:0]
    for what, step, values in (
        ("training loss", logged["step"], logged.get("loss")),
        ("evaluation", points["step"], points["value"]),
    ):
        if values is None:
            continue
        bad = step.to_numpy()[~np.isfinite(values.to_numpy(dtype=float, na_value=np.nan))]
        if len(bad):
            span = f"step {bad[0]:,}" if len(bad) == 1 else f"{len(bad):,} logged steps, {bad[0]:,}-{bad[-1]:,}"
            return f"non-finite {what} at {span}"
    return None


def forecast_run(
    ledger: Ledger,
    run: str,
    *,
    next_tokens: float | None = None,
    next_steps: float | None = None,
    threshold_per_btok: float | None = None,
    metric: str = "val/loss",
    level: float = 0.8,
) -> Forecast:
    """Forecast the next tranche from the run's stable-LR phase (see `fit.stable_phase`): `next_tokens` on
    its token counts, or `next_steps` on its steps (a run without token counts). Refused past a divergence."""
    stats.check_level(level)
    data = load_run(ledger, run)
    metric, default_note = default_metric(data, metric)
    task, name = metric_key(metric, "token")
    if not task:
        raise InputError(
            f"run {run!r}: a forecast needs held-out evaluations; the training loss (metric 'loss') "
            "falls on memorised data too"
        )
    points = eval_points(data.evals, data.steps, task, name)
    if points.empty:
        known = sorted({f"{t}/{m}" for t, m in zip(data.evals["task"], data.evals["metric"], strict=True)})
        raise InputError(f"run {run!r} has no evaluations of {metric}; it has: {', '.join(known) or 'none'}")
    diverged = _divergence(ledger, run, points)
    if diverged:
        raise InputError(f"run {run!r} diverged ({diverged}): a curve fitted across a divergence forecasts nothing")
    by_steps = points["tokens"].isna().all()
    if by_steps:
        if next_steps is None:
            raise InputError(
                f"run {run!r} has no token counts: forecast on its steps with next_steps=N, "
                "or import it with tokens_per_step"
            )
        if not (math.isfinite(next_steps) and next_steps > 0):
            raise InputError(f"next_steps must be a number > 0, got {next_steps}")
        points = points.assign(tokens=points["step"].astype(float))
        size = next_steps
    else:
        if next_tokens is None:
            given = " (next_steps is for a run without token counts)" if next_steps is not None else ""
            raise InputError(f"next_tokens is needed: the size of the next tranche in tokens{given}")
        size = next_tokens
    points = points.dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    mask, note = stable_phase(data.steps, points["step"].to_numpy())
    used = points[mask] if mask.sum() >= 3 else points
    if len(used) < 3:
        raise InputError(f"run {run!r} has {len(used)} evaluations of {metric} to fit; a forecast needs 3 or more")
    hib = bool(used["higher_is_better"].iloc[0])
    if hib:
        raise InputError(
            f"{metric} rises as the model learns; the power-law forecast fits losses (lower is better): "
            "forecast a loss, e.g. metric val/loss"
        )
    result = forecast(
        used["tokens"].to_numpy(),
        used["value"].to_numpy(),
        next_tokens=size,
        at_tokens=float(used["tokens"].iloc[-1]),
        level=level,
        threshold_per_btok=None if by_steps else threshold_per_btok,
    )
    result.axis = ("epochs" if data.epochs else "steps") if by_steps else "tokens"
    at = ", ".join(map(str, used["step"].astype(int)))
    result.notes.insert(
        0,
        f"fitted on evaluations at {'epochs' if data.epochs else 'steps'} {at}"
        + (f" against {result.axis} (no token counts)" if by_steps else ""),
    )
    if note:
        result.notes.insert(1, note)
    if default_note:
        result.notes.insert(0, default_note)
    objective = objective_note(data, name)
    if objective is not None:
        result.notes.insert(0, objective)
    return result


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
