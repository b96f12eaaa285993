"""Figures of one result object, drawn with the report's figure code (`base.py`: its look, units on every axis,
every user string escaped, `meta.series` on each trace): a comparison's aligned points, a forecast's fit, a
diagnosis's findings over their steps. The notebook HTML of those results (`notebook.py`) draws them; a yield
report draws `figures.tranche_yields_figure`, the report's and the dashboard's own.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from yieldgate.analysis.compare import Comparison
from yieldgate.analysis.detectors import SEVERITY
from yieldgate.analysis.diagnose import Diagnosis
from yieldgate.analysis.fit import Forecast
from yieldgate.analysis.frontier import Frontier
from yieldgate.report.figures.base import Figure, RunStyle, esc, metric_title, set_axes

__all__ = ["comparison_figure", "forecast_figure", "diagnosis_figure", "frontier_figure", "AXIS_TITLES"]

AXIS_TITLES = {
    "tokens": "accepted tokens (tokens)",
    "time": "wall-clock (s)",
    "compute": "compute (FLOPs)",
    "cost": "cost (USD)",
    "steps": "optimizer steps (steps)",
}
"""The axis a comparison is aligned on (`Comparison.aligned_on`), titled with its unit."""


def comparison_figure(c: Comparison) -> Figure | None:
    """Left: both sides' mean of the metric at each aligned point; right: B - A with its interval over seeds
    (family-wise, as the verdict holds it), 0 dotted: a bar that crosses 0 is within noise."""
    if not c.points:
        return None
    style = RunStyle([c.a, c.b])
    x = np.array([p[c.aligned_on] for p in c.points], dtype=float)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=(f"{esc(c.metric)} of each side", "B - A, with its interval over seeds")
    )
    for side in (c.a, c.b):
        key = "a" if side == c.a else "b"
        fig.add_trace(
            style.trace(side, x, np.array([p[key] for p in c.points], dtype=float), f"compare:{key}"), row=1, col=1
        )
    diff = np.array([p["diff"] for p in c.points], dtype=float)
    low = np.array([np.nan if p["interval"] is None else p["interval"][0] for p in c.points], dtype=float)
    high = np.array([np.nan if p["interval"] is None else p["interval"][1] for p in c.points], dtype=float)
    trace = go.Scatter(
        x=x,
        y=diff,
        name="B - A",
        mode="markers",
        marker={"size": 7, "color": "#444"},
        meta={"series": "compare:diff"},
        error_y={"type": "data", "symmetric": False, "array": high - diff, "arrayminus": diff - low},
    )
    fig.add_trace(trace, row=1, col=2)
    fig.add_hline(y=0, line_dash="dot", line_color="#888", row=1, col=2)
    set_axes(fig, AXIS_TITLES.get(c.aligned_on, esc(c.aligned_on)), "")
    fig.update_yaxes(title_text=metric_title(c.metric), row=1, col=1)
    fig.update_yaxes(title_text=f"B - A ({metric_title(c.metric).rpartition('(')[2]}", row=1, col=2)
    return Figure(
        "comparison-points",
        f"{c.a} (A) vs {c.b} (B), aligned on {c.aligned_on}",
        fig,
        ["right: no bar where a point is identical by construction (the untrained model)"],
    )


def forecast_figure(f: Forecast) -> Figure:
    """The evaluations the law was fitted on, the fitted curve out to the end of the next tranche, and the loss
    it forecasts there with the interval a measured tranche should fall in."""
    law, end = f.fit, f.at_tokens + f.next_tokens
    style = RunStyle(["fitted on", "forecast"])
    fig = go.Figure()
    fig.add_trace(
        style.trace("fitted on", np.array(law.tokens), np.array(law.losses), "forecast:points", mode="markers")
    )
    grid = np.geomspace(min(law.tokens), end, 200) if min(law.tokens) > 0 else np.linspace(min(law.tokens), end, 200)
    curve = go.Scatter(
        x=grid,
        y=law(grid),
        name=f"E + B x^-beta (R^2 {law.r2:.3f})",
        mode="lines",
        line={"color": "#888", "dash": "dash"},
        meta={"series": "forecast:law"},
    )
    fig.add_trace(curve)
    start = float(law(f.at_tokens))
    at_end = start - f.gain
    point = style.trace("forecast", np.array([end]), np.array([at_end]), "forecast:next", mode="markers")
    point.error_y = {
        "type": "data",
        "symmetric": False,
        "array": [at_end - (start - f.interval[1])],
        "arrayminus": [(start - f.interval[0]) - at_end],
    }
    fig.add_trace(point)
    axis = {"steps": "optimizer steps (steps)", "epochs": "epochs (epochs)"}.get(f.axis, "accepted tokens (tokens)")
    set_axes(fig, axis, "loss fitted (the metric's unit)")
    return Figure(
        "forecast",
        f"the next {f.next_tokens:,.0f} {f.axis} after {f.at_tokens:,.0f}",
        fig,
        [
            f"bar: the {f.level:.0%} interval of the loss after the next tranche, the fit's uncertainty and "
            "the evaluation noise together"
        ],
    )


def diagnosis_figure(d: Diagnosis) -> Figure | None:
    """Each finding as a bar over its step span, one row per cause, shaded by confidence; high-severity findings
    red, notes grey."""
    if not d.findings:
        return None
    fig = go.Figure()
    for k, f in enumerate(d.findings):
        colour = "#cf222e" if SEVERITY.get(f.cause, "high") == "high" else "#888888"
        fig.add_trace(
            go.Bar(
                x=[max(f.end_step - f.start_step, 1)],
                base=[f.start_step],
                y=[esc(f.cause)],
                orientation="h",
                name=esc(f.cause),
                showlegend=False,
                opacity=0.3 + 0.7 * f.confidence,
                marker={"color": colour},
                meta={"series": f"finding:{k}"},
                hovertext=f"{esc(f.cause)} ({f.confidence:.2f}): {esc(f.advice)}",
            )
        )
    set_axes(fig, "optimizer steps (steps)", "", height=max(200, 60 + 40 * len({f.cause for f in d.findings})))
    return Figure(
        "diagnosis",
        f"findings of {d.run}",
        fig,
        ["each bar: one finding's step span; darker: more confident; red: a cause, grey: a note"],
    )


def frontier_figure(f: Frontier, amount: str = "tokens", style: RunStyle | None = None) -> Figure | None:
    """Each run's tokens/s against its tokens to the target, one marker per run, the Pareto front joined by a line
    (ringed markers on it); the runs without a point are named in the notes with the reason."""
    if not f.points:
        return None
    style = style or RunStyle(list(f.points))
    fig = go.Figure()
    for run, p in f.points.items():
        trace = style.trace(
            run, np.array([p["tokens_to_target"]]), np.array([p["tokens_per_s"]]), "frontier:point", mode="markers"
        )
        on = run in f.front
        trace.marker = {"size": 12 if on else 8, "line": {"width": 2 if on else 0, "color": "#222"}}
        fig.add_trace(trace)
    front = sorted(f.front, key=lambda r: f.points[r]["tokens_to_target"])
    fig.add_trace(
        go.Scatter(
            x=[f.points[r]["tokens_to_target"] for r in front],
            y=[f.points[r]["tokens_per_s"] for r in front],
            name="Pareto front",
            mode="lines",
            line={"color": "#222", "dash": "dot"},
            meta={"series": "frontier:front"},
        )
    )
    target = "-" if f.target is None else f"{f.target:.4g}"
    set_axes(fig, f"{amount} to reach {esc(f.metric)} {target} ({amount})", f"{amount}/s to target ({amount}/s)")
    notes = [
        f"up and to the left is better; ringed and joined: the Pareto front (no other run is as fast and needs as few "
        f"{amount}); time to target = {amount} to target / {amount} per second"
    ]
    notes += [f"not placed: {run}: {why}" for run, why in f.unplaced.items()]
    return Figure("frontier", f"frontier: {amount}/s against {amount} to target", fig, notes + f.notes)
