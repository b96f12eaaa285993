"""Wasted compute on the console (`yieldgate waste`): per run, what it spent on the stretch after it stopped learning,
on restarts and on diverged steps, priced, beside goodput; then the sum and what could not be priced."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from yieldgate.report.console.lines import say
from yieldgate.report.format import fmt

if TYPE_CHECKING:
    from yieldgate.analysis.plateau import Plateau
    from yieldgate.analysis.waste import Spend, Waste, WasteReport

__all__ = ["render_waste", "waste_line"]


def _priced(spend: Spend) -> str:
    hours = "? device-hours" if spend.device_hours is None else f"{spend.device_hours:.3g} device-hours"
    money = "" if not spend.usd else f", ${spend.usd:.3g}"
    energy = "" if not spend.kwh else f", {spend.kwh:.3g} kWh"
    return f"{hours}{money}{energy}"


def waste_line(w: Waste) -> str:
    """One line: the wasted total, its share of the wall time, and goodput."""
    share = f" ({w.wasted.seconds / w.wall_s:.1%} of the wall time)" if w.wall_s else ""
    good = "" if w.goodput is None else f"; goodput {w.goodput:.1%}"
    return f"wasted {_priced(w.wasted)}{share}{good}"


def _plateau_line(w: Waste) -> str:
    p: Plateau | None = w.plateau
    flat = f"{w.counts['flat_tranches']} tranches, {fmt(w.flat_tranches.seconds)} s"
    if p is None or p.unresolved is not None:
        return "stopped learning: not judged"
    if p.start is None:
        return "stopped learning: no, it kept to its own law"
    if p.statistic is None:
        return f"stopped learning: it never learned measurably (its law is flat): {flat}"
    return f"stopped learning at {fmt(p.start)} {p.axis} ({p.evaluations} evaluations from there on): {flat}"


def render_waste(result: WasteReport, console: Console) -> None:
    """`yieldgate waste`: each run's waste by kind, then the total over several runs and what is missing."""
    for w in result.runs:
        say(console, f"{w.run}: {waste_line(w)}")
        say(console, f"  {_plateau_line(w)}")
        say(
            console,
            f"  restarts {w.counts['restarts']} ({fmt(w.restarts.seconds)} s), diverged steps "
            f"{w.counts['diverged_steps']} ({fmt(w.diverged_steps.seconds)} s)",
        )
        for kind, why in w.missing.items():
            say(console, f"  {kind.replace('_', ' ')}: {why}")
    if len(result.runs) > 1:
        say(console, f"total ({len(result.runs)} runs): {waste_line(result.total)}")
