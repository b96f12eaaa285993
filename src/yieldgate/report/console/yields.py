"""A run's yields and forecast on the console: the tranche table with its noise bands and law (`yieldgate yield`),
and what the next tranche buys (`yieldgate forecast`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.lines import say
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

if TYPE_CHECKING:
    from yieldgate.analysis.fit import Forecast
    from yieldgate.analysis.yields import YieldReport

__all__ = ["render_forecast", "render_yields"]


def render_yields(report: YieldReport, console: Console, run: str) -> None:
    """`yieldgate yield`: the notes, one row per tranche (span, loss, yield per token, device-hour, dollar and kWh,
    noise band, against the law), then the noise, the law and each disagreement and unknown explained."""
    from yieldgate.analysis.yields import DEVICE_HOUR

    what = f"{report.task}/{report.metric}" if report.task else f"training {report.metric}"
    say(console, f"{run}: yield of {what} ({report.unit})")
    for note in report.notes:
        say(console, f"note: {note}")
    by_steps = report.axis != "tokens"
    per_time = "per device-h" if report.time_unit == DEVICE_HOUR else "per wall-h"
    law = report.law is not None
    table = Table(
        report.axis,
        f"{report.metric} start",
        "end",
        report.per,
        f"noise band ({report.level:.0%})",
        *(["vs law"] if law else []),
        per_time,
        "per $",
        "per kWh",
        "note",
    )
    for t in report.tranches:
        span = f"{t.start_step:,}-{t.end_step:,}" if by_steps else f"{fmt(t.start_tokens)}-{fmt(t.end_tokens)}"
        band = f"{fmt(t.yield_band[0])} to {fmt(t.yield_band[1])}" if t.yield_band else "-"
        note = ", ".join([w for w, on in (("within noise", t.within_noise), ("LR decay", t.spans_lr_decay)) if on])
        vs = [f"{fmt(t.vs_expected)}x" if t.vs_expected is not None else "-"] if law else []
        rates = (t.yield_per_device_hour, t.yield_per_dollar, t.yield_per_kwh)
        table.add_row(span, fmt(t.loss_start), fmt(t.loss_end), fmt(report.rate(t)), band, *vs, *map(fmt, rates), note)
    # The cost yields go first when the numbers do not fit (energy, then money, then time), then the law's ratio.
    print_table(console, table, drop=("per kWh", "per $", per_time, "vs law"))
    _render_yield_notes(report, console, run)


def _render_yield_notes(report: YieldReport, console: Console, run: str) -> None:
    if report.eval_noise is not None and not any(t.band_from == "reported" for t in report.tranches):
        say(
            console,
            f"evaluation noise: {fmt(report.eval_noise)} (one evaluation's standard deviation around the "
            "curve); a tranche whose band holds 0 is within noise",
        )
    if report.law is not None:
        whose = "its own" if report.law["run"] == run else f"{report.law['run']}'s"
        say(
            console,
            f"vs law: the tranche's improvement over what {whose} law loss = {fmt(report.law['E'])} + "
            f"{fmt(report.law['B'])} * tokens^-{fmt(report.law['beta'])} expects over the same tokens "
            "(1: on the law)",
        )
    for t in report.tranches:
        for d in t.disagreements:
            where = "epochs" if report.axis == "epochs" else "steps"
            say(console, f"{where} {t.start_step}-{t.end_step}: {d}")
    for stage in report.stages:
        span = f"{fmt(stage['start_tokens'])}-{fmt(stage['end_tokens'])} tokens"
        if stage["yield_per_btok"] is None:
            say(console, f"curriculum {stage['stage']} ({span}): no yield ({stage['missing']})")
            continue
        band = f", band {fmt(stage['band'][0])} to {fmt(stage['band'][1])}" if stage["band"] else ""
        noise = " (within noise)" if stage.get("within_noise") else ""
        measured = f", measured {fmt(stage['measured_from'])}-{fmt(stage['measured_to'])}"
        say(
            console,
            f"curriculum {stage['stage']} ({span}{measured}): {fmt(stage['yield_per_btok'])} {report.per}{band}{noise}",
        )
    for what, why in report.missing.items():
        say(console, f"{what}: unknown ({why})")


def render_forecast(result: Forecast, console: Console, threshold: float | None = None) -> None:
    """`yieldgate forecast`: the fitted law, the next tranche's gain with its intervals and yield, where the
    marginal yield falls below `threshold` (per billion tokens), and the notes."""
    from yieldgate.analysis.yields import AXES

    f, x = result.fit, result.axis
    label, _, span = AXES[x]
    per = (
        f"{fmt(result.yield_per_btok)} per billion tokens"
        if x == "tokens"
        else f"{fmt(result.gain / result.next_tokens * span)} {label}"
    )
    say(
        console,
        f"fit: loss = {fmt(f.E)} + {fmt(f.B)} * {x}^-{fmt(f.beta)}  (R^2 {fmt(f.r2)}, {len(f.tokens)} evaluations)",
    )
    say(
        console,
        f"next {fmt(result.next_tokens)} {x} after {fmt(result.at_tokens)}: gain {fmt(result.gain)} "
        f"[{fmt(result.interval[0])}, {fmt(result.interval[1])}] ({result.level:.0%} interval, with "
        f"evaluation noise {fmt(result.eval_noise)}; the curve alone [{fmt(result.fit_interval[0])}, "
        f"{fmt(result.fit_interval[1])}]), {per}",
    )
    if result.threshold_tokens is not None:
        say(
            console,
            f"marginal yield falls below {fmt(threshold)} per billion tokens at {fmt(result.threshold_tokens)} tokens",
        )
    for note in result.notes:
        say(console, f"note: {note}")
