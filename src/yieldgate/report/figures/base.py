"""The report's figure code: the `Figure` type, downsampling and smoothing, titles with units, escaping, one colour
per run (`RunStyle`), axes and the look every plot shares. The plots themselves are in `runs.py` (a report's runs),
`results.py` (one result object) and `signals.py` (learning signals), all built from `sections.ReportData`.

One trace per run per plot (per panel, in the faceted ones), named after the run, in one colour per run
across every figure. Every user string that plotly draws (run, source and task names, diagnosis causes) is
HTML-escaped first: plotly renders a subset of HTML in trace names and annotations, and a run named
`<b>x</b>` must show those characters, not bold text. Each trace carries `meta.series`, the ledger series
it plots, so a reader (the report test) can check the points against the ledger.

The same figures draw the static report (`html.py`) and the live dashboard (`yieldgate.serve`). Every axis
says its unit (a log axis says "log"); step-level series are downsampled for display with `downsample` (the
smallest and largest value per pixel column, so a spike is never thinned away); evaluations are never dropped.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from yieldgate.errors import InputError

__all__ = [
    "Figure",
    "downsample",
    "smoothed",
    "figure_dict",
    "metric_title",
    "gain_title",
    "RunStyle",
    "set_axes",
    "esc",
    "warm_up",
    "MAX_POINTS",
]

MAX_POINTS = 2000
"""Step-level series (tokens/s, signals) are downsampled to at most this many points per trace (`downsample`):
a million-step run would otherwise put tens of MB of JSON into the page. Evaluations are never dropped."""

PALETTE = qualitative.Plotly + qualitative.D3
FACET_COLUMNS = 3


@dataclass
class Figure:
    """One plot of the report: its div id (and PNG file stem), heading, plotly figure and notes."""

    id: str
    title: str
    figure: go.Figure
    notes: list[str] = field(default_factory=list)
    main: bool = True
    """Written by `--png` (the figures for slides and issues)."""


def downsample(frame: pd.DataFrame, x: str, y: str, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """At most `max_points` rows of `frame` (sorted by `x`) for a line of `y` against `x`: the x range is cut into
    `max_points // 2 - 1` equal columns (the plot's pixel columns) and each keeps its rows with the smallest and
    the largest `y`, in x order, beside the first and the last row. A spike or a dip survives at any length;
    an evenly spaced pick would step over it. Of equal smallest values the first row is kept, of equal largest
    the last; a NaN is neither while the column holds a number."""
    n = len(frame)
    if n <= max_points:
        return frame
    columns = max(max_points // 2 - 1, 1)
    xs, ys = frame[x].to_numpy(dtype=float), frame[y].to_numpy(dtype=float)
    lo, span = xs[0], xs[-1] - xs[0]
    if span > 0 and np.isfinite(span):
        bucket = np.clip(((xs - lo) / span * columns).astype(np.int64), 0, columns - 1)
    else:  # one x for every row: columns by position
        bucket = np.arange(n) * columns // n
    if np.all(bucket[1:] >= bucket[:-1]):  # x sorted: each column is one stretch of rows (no sort needed)
        keep = np.unique(
            np.r_[_extreme(ys, bucket, np.fmin, first=True), _extreme(ys, bucket, np.fmax, first=False), 0, n - 1]
        )
        return frame.iloc[keep]
    order = np.lexsort((ys, bucket))  # by column, then by y within it (NaN last)
    sorted_bucket = bucket[order]
    starts = np.flatnonzero(np.r_[True, sorted_bucket[1:] != sorted_bucket[:-1]])
    ends = np.r_[starts[1:] - 1, n - 1]
    keep = np.unique(np.r_[order[starts], order[ends], 0, n - 1])
    return frame.iloc[keep]


def _extreme(ys: np.ndarray, bucket: np.ndarray, reduce: np.ufunc, *, first: bool) -> np.ndarray:
    """Per stretch of equal `bucket` (sorted), the row holding the stretch's `reduce` (fmin/fmax: NaN skipped) of
    `ys`: the first such row, or the last; the stretch's first row where it holds only NaN."""
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    value = reduce.reduceat(ys, starts)
    ids = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(ys)]))
    hit = np.flatnonzero(ys == value[ids])
    found = np.full(len(starts), -1)
    # `hit` ascends: writing every hit into its stretch leaves the last; writing them reversed leaves the first
    order = hit[::-1] if first else hit
    found[ids[order]] = order
    return np.where(found < 0, starts, found)


def _check_smooth(weight: float) -> None:
    if not 0 <= weight < 1:
        raise InputError(f"smooth must be at least 0 and below 1, got {weight}")


def smoothed(values: pd.Series, weight: float, start: float | None = None) -> pd.Series:
    """An exponential moving average over the logged points, as TensorBoard's smoothing slider draws one:
    s[0] = y[0] (or continues from `start`, the value drawn last), s[i] = weight * s[i-1] + (1 - weight) * y[i].
    `weight` 0 returns the values as they are; it must be in [0, 1)."""
    _check_smooth(weight)
    if weight == 0 or values.empty:
        return values
    if start is None:
        return values.ewm(alpha=1 - weight, adjust=False).mean()
    return (
        pd.concat([pd.Series([start]), values], ignore_index=True)
        .ewm(alpha=1 - weight, adjust=False)
        .mean()
        .iloc[1:]
        .set_axis(values.index)
    )


def _unit(metric: str, tokens: bool = True) -> str:
    name = metric.rpartition("/")[2]
    if name == "loss" and not tokens:
        return "as logged"  # no token count: a Keras or YOLO loss is whatever the model minimises (yields.py)
    return {"loss": "nats/token", "bpb": "bits/byte"}.get(name, "score")


def metric_title(metric: str, tokens: bool = True) -> str:
    """An axis title for a metric with its unit: a loss in nats/token (as logged where a run counts no tokens),
    bits per byte, else a score."""
    return f"{esc(metric)} ({_unit(metric, tokens)})"


def gain_title(metric: str, amount: str) -> str:
    """An axis title for a yield: the metric's gain per billion tokens (bytes), in the metric's unit."""
    return f"{esc(metric)} gain per B {amount} ({_unit(metric)})"


def esc(text: str) -> str:
    return html.escape(str(text))


class RunStyle:
    """Colour per run, and a legend entry only at a run's first trace in a figure."""

    def __init__(self, names: list[str]) -> None:
        self.colour = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}

    def trace(
        self, run: str, x: np.ndarray, y: np.ndarray, series: str, *, first: bool = True, mode: str = "lines+markers"
    ) -> go.Scatter:
        return go.Scatter(
            x=x,
            y=y,
            name=esc(run),
            legendgroup=esc(run),
            showlegend=first,
            mode=mode,
            line={"color": self.colour[run]},
            marker={"size": 5},
            meta={"series": series},
        )


def set_axes(fig: go.Figure, x: str, y: str, *, height: int = 420) -> go.Figure:
    fig.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 40, "b": 50},
        legend_title_text="run",
        template="none",
        hovermode="closest",
    )  # the look comes with `figure_dict`
    fig.update_xaxes(title_text=x)
    fig.update_yaxes(title_text=y)
    return fig


@functools.cache
def _look() -> dict[str, Any]:
    """plotly_white's layout (light grid on white), as JSON, read once."""
    return {"layout": pio.templates["plotly_white"].layout.to_plotly_json()}


def figure_dict(fig: Figure) -> dict[str, Any]:
    """A figure as plotly's JSON structure with the report's look (plotly_white's layout), for the page and the PNG
    files alike. The figures are built without a template and the look is added here: setting a template through
    plotly's validators costs ~0.1 s a figure, which a live page paid again at each new evaluation."""
    out = fig.figure.to_plotly_json()
    out["layout"]["template"] = _look()
    return out


def warm_up() -> None:
    """Build and serialise one small figure the way the plots are built (subplots, error bars, a shaded span, a
    line): plotly builds its validators on first use (~0.3 s), which a server pays now rather than in its first
    page."""
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], error_y={"type": "data", "array": [0, 0]}), row=1, col=1)
    fig.add_trace(go.Bar(x=[1], base=[0], y=["a"], orientation="h"), row=1, col=2)
    set_axes(fig, "x", "y").add_vrect(x0=0, x1=1, annotation_text="a")
    fig.add_hline(y=0)
    figure_dict(Figure("warm-up", "", fig))
