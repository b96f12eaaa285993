"""What the analysis commands return: tranche yields, wasted compute, comparisons, forecasts, diagnoses, the HTML
report."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

if TYPE_CHECKING:
    import pandas as pd

    from yieldgate.analysis.compare import Comparison, RunData
    from yieldgate.analysis.diagnose import Diagnosis
    from yieldgate.analysis.fit import Forecast
    from yieldgate.analysis.waste import WasteReport
    from yieldgate.analysis.yields import YieldReport
    from yieldgate.report.sections import ReportResult


from yieldgate.api._common import LedgerArg, _open


def yields(
    run: str,
    *,
    ledger: LedgerArg = None,
    tranche_tokens: float | None = None,
    metric: str = "val/loss",
    per: str = "token",
    expected_from: str | None = None,
) -> YieldReport:
    """Tranche yields of a run (`yieldgate yield`), each also against a fitted law: the run's own, or that of the
    reference run `expected_from` (`Tranche.vs_expected`)."""
    from yieldgate.analysis.runs import yield_report

    with _open(ledger, readonly=True) as led:
        return yield_report(
            led, run, tranche_tokens=tranche_tokens, metric=metric, per=per, expected_from=expected_from
        )


def waste(target: str, *, ledger: LedgerArg = None) -> WasteReport:
    """The compute a run, a seed group or a campaign's probes (a glob: `camp/*`) spent on work that bought no
    learning (`analysis.waste`): the stretch after the run stopped learning on its own law, restarts' redone work,
    diverged steps, each in device-hours, dollars and kWh where recorded, beside goodput; each run's and their sum."""
    from yieldgate.analysis.listing import match_runs
    from yieldgate.analysis.waste import waste_report

    with _open(ledger, readonly=True) as led:
        return waste_report(led, match_runs(led, target), target)


def compare(
    a: str,
    b: str,
    *,
    ledger: LedgerArg = None,
    at: str = "tokens",
    target: float | None = None,
    metric: str = "val/loss",
    primary: str = "learning",
    per: str | None = None,
) -> Comparison:
    """Two runs or seed groups (globs) aligned at equal tokens, time, compute or cost (`yieldgate compare`); `per`
    None: bits per byte when their tokenizers differ, per token otherwise (said in the notes)."""
    from yieldgate.analysis.compare import compare as aligned
    from yieldgate.analysis.listing import match_runs
    from yieldgate.analysis.load import comparison_unit, default_metric, load_run, metric_key, objective_note

    with _open(ledger, readonly=True) as led:
        per, unit_note = comparison_unit(led, a, b, per)
        groups = [[load_run(led, n, per=per) for n in match_runs(led, p)] for p in (a, b)]
    metric, note = default_metric(groups[0][0], metric, per)
    task, name = metric_key(metric, per)
    result = aligned(
        groups[0],
        groups[1],
        names=(a, b),
        at=at,  # type: ignore[arg-type]  # checked there
        target_loss=target,
        task=task,
        metric=name,
        primary=primary,  # type: ignore[arg-type]  # checked there
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


def forecast(
    run: str,
    *,
    ledger: LedgerArg = None,
    next_tokens: float | None = None,
    next_steps: float | None = None,
    threshold_per_btok: float | None = None,
    metric: str = "val/loss",
    level: float = 0.8,
) -> Forecast:
    """The next tranche's gain from the run's stable-LR evaluations (`yieldgate forecast`; `fit.stable_phase`):
    `next_tokens` on its token counts, or `next_steps` on its steps (a run without token counts). Refused past a
    divergence."""
    from yieldgate.analysis import stats
    from yieldgate.analysis.fit import forecast as fitted
    from yieldgate.analysis.load import default_metric, load_run, metric_key, objective_note
    from yieldgate.analysis.points import eval_points

    stats.check_level(level)
    with _open(ledger, readonly=True) as led:
        data = load_run(led, run)
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
        diverged = _divergence(led, run, points)
    if diverged:
        raise InputError(f"run {run!r} diverged ({diverged}): a curve fitted across a divergence forecasts nothing")
    used, size, by_steps, note = _tranche_points(data, points, metric, next_tokens, next_steps)
    result = fitted(
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


def _tranche_points(
    data: RunData, points: pd.DataFrame, metric: str, next_tokens: float | None, next_steps: float | None
) -> tuple[pd.DataFrame, float, bool, str | None]:
    """What `forecast` fits and forecasts: the evaluations of the run's stable-LR phase (all, when fewer than 3
    are), the next tranche's size, whether on steps (no token counts), and `fit.stable_phase`'s note."""
    import math

    from yieldgate.analysis.fit import stable_phase

    by_steps = bool(points["tokens"].isna().all())
    if by_steps:
        if next_steps is None:
            raise InputError(
                f"run {data.name!r} has no token counts: forecast on its steps with next_steps=N, "
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
        raise InputError(
            f"run {data.name!r} has {len(used)} evaluations of {metric} to fit; a forecast needs 3 or more"
        )
    if bool(used["higher_is_better"].iloc[0]):
        raise InputError(
            f"{metric} rises as the model learns; the power-law forecast fits losses (lower is better): "
            "forecast a loss, e.g. metric val/loss"
        )
    return used, size, by_steps, note


def _divergence(ledger: Ledger, run: str, points: pd.DataFrame) -> str | None:
    """Where the run diverged (a logged training loss or evaluation that is NaN or infinite), with the count
    and the span: "non-finite training loss at 6 logged steps, 1,200-1,250"."""
    import numpy as np

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


def diagnose(run: str, *, ledger: LedgerArg = None, against: Sequence[str] = (), store: bool = True) -> Diagnosis:
    """Causes with evidence (`yieldgate diagnose`); the findings are kept as open events unless `store` is off."""
    from yieldgate.analysis.diagnose import diagnose as run_diagnosis

    with _open(ledger, readonly=True) as led:
        for name in (run, *against):
            led.run_id(name)  # a missing run fails here, before a ledger file is made for the write
    with _open(ledger, readonly=not store) as led:
        return run_diagnosis(led, run, against=against, store=store)


def report(
    patterns: str | Sequence[str],
    output: str | os.PathLike[str],
    *,
    ledger: LedgerArg = None,
    metric: str = "val/loss",
    per: str | None = None,
    png_dir: str | os.PathLike[str] | None = None,
    smooth: float = 0.0,
    target: float | None = None,
) -> ReportResult:
    """The self-contained HTML report of runs or seed groups (`yieldgate report`), and its main plots as PNG files
    in `png_dir`; `per` None: bits per byte when their tokenizers differ, per token otherwise; `smooth`: the weight
    of the moving average drawn for tokens/s; `target`: the metric's value the frontier counts tokens to."""
    from yieldgate.report.html import write_report

    groups = [patterns] if isinstance(patterns, str) else list(patterns)
    with _open(ledger, readonly=True) as led:
        return write_report(led, groups, output, metric=metric, png_dir=png_dir, per=per, smooth=smooth, target=target)
