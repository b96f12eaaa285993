"""The training loss as a reader of TensorBoard or W&B expects it (`train_loss_figure`): the loss logged at each step
against steps, tokens and wall-clock time, one panel per axis a run has, each run's moving average (`smoothed`)
drawn as a line over its logged points drawn faint, with the report's evaluations as markers where they are a loss
in the same unit. Both series are downsampled min/max per pixel column (`downsample`), so a million-step run stays
light and a spike stays visible.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from yieldgate.names import LOSS_METRIC
from yieldgate.report.figures.base import (
    MAX_POINTS,
    Figure,
    RunStyle,
    downsample,
    esc,
    metric_title,
    set_axes,
    smoothed,
)
from yieldgate.report.sections import ReportData, RunView

__all__ = ["train_loss_figure", "loss_weight", "RAW_OPACITY", "PANEL_POINTS"]

RAW_OPACITY = 0.25
"""How faint the logged points are drawn under their moving average."""
PANEL_POINTS = MAX_POINTS // 3
"""Points per trace: each of the three panels is a third of the plot's width, so a third of `MAX_POINTS` keeps one
smallest and one largest value per pixel column and a million-step run's page light."""


def loss_weight(points: int) -> float:
    """The moving average's weight for a run of this many logged losses: a window of about 2% of the run
    (1 - 50 / points), at least TensorBoard's default 0.6 and at most its 0.999, so 300 steps and a million steps
    both read as a curve."""
    return float(np.clip(1 - 50 / max(points, 1), 0.6, 0.999))


def _axes(amount: str) -> tuple[tuple[str, str], ...]:
    return (
        ("step", "optimizer steps (steps)"),
        ("tokens", f"accepted {amount} ({amount})"),
        ("wall_s", "wall-clock (s)"),
    )


def _logged(v: RunView) -> pd.DataFrame:
    """The run's logged training losses in step order, with the moving average (`ema`) over all of them."""
    steps = v.data.steps
    if LOSS_METRIC not in steps:
        return pd.DataFrame(columns=["step", "tokens", "wall_s", "loss", "ema"])
    logged = steps[[c for c in ("step", "tokens", "wall_s", "loss") if c in steps]].dropna(subset=["loss"])
    logged = logged.sort_values("step")
    return logged.assign(ema=smoothed(logged["loss"], loss_weight(len(logged))))


def _overlay(data: ReportData) -> bool:
    """Whether the report's evaluations share the training loss's unit: a held-out loss per token."""
    return data.per == "token" and data.metric.endswith("/" + LOSS_METRIC)


def _panel_traces(
    v: RunView, logged: pd.DataFrame, column: str, style: RunStyle, overlay: str | None
) -> list[go.Scatter]:
    """One run's traces on one axis: its faint logged losses, its moving average, its evaluations (`overlay`: the
    metric drawn, else None)."""
    points = logged.dropna(subset=[column]) if column in logged else logged.iloc[0:0]
    if points.empty:
        return []
    raw, ema = downsample(points, column, "loss", PANEL_POINTS), downsample(points, column, "ema", PANEL_POINTS)
    faint = style.trace(v.name, raw[column].to_numpy(), raw["loss"].to_numpy(), f"loss@{column}", mode="lines")
    faint.update(opacity=RAW_OPACITY, showlegend=False, hoverinfo="skip")
    line = style.trace(v.name, ema[column].to_numpy(), ema["ema"].to_numpy(), f"loss:ema@{column}", mode="lines")
    out = [faint, line]
    if overlay is not None:
        evals = v.curve[[column, "loss"]].dropna() if column in v.curve else v.curve.iloc[0:0]
        if len(evals):
            marks = style.trace(v.name, evals[column].to_numpy(), evals["loss"].to_numpy(), f"{overlay}@{column}")
            marks.update(mode="markers", marker={"symbol": "diamond", "size": 7, "color": style.colour[v.name]})
            out.append(marks)
    return out


def train_loss_figure(data: ReportData, style: RunStyle) -> Figure | None:
    """The training loss against steps, tokens and wall-clock time (a panel only for an axis some run recorded);
    None where no run logged a training loss, or where the report's metric is the training loss itself (the loss
    plots above draw it)."""
    if data.metric == LOSS_METRIC:
        return None
    overlay = data.metric if _overlay(data) else None
    logged = {v.name: _logged(v) for v in data.runs}
    panels = []
    for column, title in _axes(data.amount):
        traces = [t for v in data.runs for t in _panel_traces(v, logged[v.name], column, style, overlay)]
        if traces:
            panels.append((title, traces))
    if not panels:
        return None
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[t.split(" (")[0] for t, _ in panels])
    set_axes(fig, "", "")
    shown: set[str] = set()
    for col, (title, traces) in enumerate(panels, start=1):
        for t in traces:
            t.showlegend = t.name not in shown and t.meta["series"].startswith("loss:ema")
            shown.update([t.name] if t.showlegend else [])
            fig.add_trace(t, row=1, col=col)
        fig.update_xaxes(title_text=title, row=1, col=col)
    tokens = any(v.data.steps["tokens"].notna().any() for v in data.runs if "tokens" in v.data.steps)
    fig.update_yaxes(title_text="training " + metric_title(LOSS_METRIC, tokens=tokens), row=1, col=1)
    notes = [
        "lines: a moving average of each run's logged training loss (weight 1 - 50 / logged steps, from 0.6 to "
        "0.999); faint: the logged values (both downsampled to the smallest and largest per pixel column)"
    ]
    if overlay is not None:
        notes.append(f"diamonds: the evaluations of {esc(overlay)}")
    return Figure("train-loss", "training loss vs steps, tokens and time", fig, notes)
