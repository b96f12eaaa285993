"""The report's plots of its runs, in page order (`build_figures`): the loss against steps, tokens and time with the
diagnoses over it (a span shaded, a finding of the whole run a label), the training loss
(`training.train_loss_figure`), throughput against learning, tranche yields (with their noise band), per source
and per task, the frontier (`results.frontier_figure`) and the learning signals (`signals.signal_figures`). The
static report (`html.py`) and the live dashboard (`yieldgate.serve`) draw the same figures.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from yieldgate.analysis.yields import YieldReport
from yieldgate.report.figures.base import (
    FACET_COLUMNS,
    Figure,
    RunStyle,
    _check_smooth,
    downsample,
    esc,
    gain_title,
    metric_title,
    set_axes,
    smoothed,
)
from yieldgate.report.figures.results import frontier_figure
from yieldgate.report.figures.signals import signal_figures
from yieldgate.report.figures.training import train_loss_figure
from yieldgate.report.sections import ReportData, RunView, tokens_at_steps

__all__ = ["build_figures", "tranche_yields_figure"]


def _loss_range(runs: list[RunView]) -> list[float] | None:
    values = np.concatenate([v.curve["loss"].dropna().to_numpy(dtype=float) for v in runs] or [np.empty(0)])
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    lo, hi = float(values.min()), float(values.max())
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 0.1
    return [lo - pad, hi + pad]


LABEL_PX_PER_CHAR, PLOT_PX = 7.0, 900.0
"""A span label's width is estimated at 7 px per character on a plot ~900 px wide (plotly's 12 px sans-serif;
the report's plots are 1,100 px wide less the legend)."""


WHOLE_RUN = 0.9
"""A diagnosis whose span covers at least this share of its run's tokens is a finding of the whole run: a label on
the plot, not a shading of all of it."""


def _spans(runs: list[RunView]) -> tuple[list[tuple[float, float, str, str]], list[tuple[str, str]]]:
    """Each diagnosis with a step span, in tokens: (x0, x1, cause, run) for a span, and (cause, run) for a finding
    that spans the whole run (`WHOLE_RUN`)."""
    spans, whole = [], []
    for v in runs:
        tokens = v.data.steps["tokens"].dropna()
        extent = float(tokens.max() - tokens.min()) if len(tokens) else math.nan
        for _, event in v.diagnoses.iterrows():
            if pd.isna(event["start_step"]):
                continue
            end = event["start_step"] if pd.isna(event["end_step"]) else event["end_step"]
            x0, x1 = tokens_at_steps(v.data.steps, [event["start_step"], end])
            if math.isfinite(x0) and math.isfinite(x1):
                body = event["body"] if isinstance(event["body"], dict) else {}
                cause = str(body.get("cause", "diagnosis"))
                if extent > 0 and (x1 - x0) >= WHOLE_RUN * extent:
                    whole.append((cause, v.name))
                else:
                    spans.append((float(x0), float(max(x1, x0)), cause, v.name))
    return spans, whole


def _diagnosis_spans(fig: go.Figure, style: RunStyle, runs: list[RunView]) -> None:
    """Shade each diagnosis's step span (in tokens) on the loss-vs-tokens plot, labelled with its cause; a finding
    that spans the whole run is a label at the plot's top right, in its run's colour. Labels never print over each
    other: each goes on the highest line (16 px apart) where it clears the labels already there, at its estimated
    width."""
    spans, whole = _spans(runs)
    for line, (cause, run) in enumerate(whole):
        fig.add_annotation(
            text=f"{esc(cause)}: the whole run ({esc(run)})",
            xref="paper",
            yref="paper",
            x=1,
            y=1,
            xanchor="right",
            yanchor="top",
            yshift=-16 * line,
            showarrow=False,
            font={"color": style.colour[run]},
        )
    if not spans:
        return
    xs = np.concatenate([[x for s in spans for x in s[:2]], *[v.curve["tokens"].dropna().to_numpy() for v in runs]])
    per_px = (float(xs.max() - xs.min()) or 1.0) / PLOT_PX
    line_ends: list[float] = []  # where the last label on each line ends, in tokens
    for x0, x1, cause, run in sorted(spans):
        line = next((k for k, end in enumerate(line_ends) if end < x0), len(line_ends))
        end = x0 + (len(cause) * LABEL_PX_PER_CHAR + 8) * per_px
        line_ends[line : line + 1] = [end]
        fig.add_vrect(
            x0=x0,
            x1=x1,
            fillcolor=style.colour[run],
            opacity=0.15,
            line_width=1,
            line_color=style.colour[run],
            annotation_text=esc(cause),
            annotation_position="top left",
            annotation_yshift=-16 * line,
        )


def _loss_figures(data: ReportData, style: RunStyle) -> list[Figure]:
    y_range, out = _loss_range(data.runs), []
    axes = (
        ("step", "loss-steps", "optimizer steps (steps)", "steps"),
        ("tokens", "loss-tokens", f"accepted {data.amount} ({data.amount})", data.amount),
        ("wall_s", "loss-time", "wall-clock (s)", "wall-clock time"),
        ("cost_usd", "loss-cost", "cost (USD)", "cost"),
    )
    no_tokens = any(v.curve["tokens"].isna().all() for v in data.runs)
    for column, fig_id, x_title, what in axes:
        if column == "step" and not no_tokens:
            continue  # against steps only where a run has no token counts to draw against
        fig = go.Figure()
        lacking = []
        for v in data.runs:
            points = v.curve[[column, "loss"]].dropna()
            if len(points) == 0:
                lacking.append(v.name)
                continue
            fig.add_trace(
                style.trace(v.name, points[column].to_numpy(), points["loss"].to_numpy(), f"{data.metric}@{column}")
            )
        if not fig.data:
            continue
        if column == "tokens":
            _diagnosis_spans(fig, style, data.runs)
        set_axes(fig, x_title, metric_title(data.metric, tokens=not no_tokens)).update_yaxes(range=y_range)
        notes = [f"not drawn, no {what} recorded: {', '.join(lacking)}"] if lacking else []
        if column == "tokens" and any(len(v.diagnoses) for v in data.runs):
            notes.append(
                "shaded: the step spans of diagnoses (table below); at the top right: findings of the whole run"
            )
        out.append(Figure(fig_id, f"{data.metric} vs {what}", fig, notes))
    return out


def _throughput_learning_traces(
    data: ReportData, style: RunStyle, smooth: float
) -> tuple[list[go.Scatter], list[go.Scatter]]:
    """Each run's tokens/s over wall-clock time (smoothed by `smooth`, downsampled) and its tranche yields at each
    tranche's end."""
    throughput, learning = [], []
    for v in data.runs:
        steps = v.data.steps
        tps = steps[["wall_s", "tokens_per_s"]].dropna()
        tps = downsample(tps.assign(tokens_per_s=smoothed(tps["tokens_per_s"], smooth)), "wall_s", "tokens_per_s")
        first = True
        if len(tps):
            x, y = tps["wall_s"].to_numpy(), tps["tokens_per_s"].to_numpy()
            throughput.append(style.trace(v.name, x, y, "tokens_per_s", mode="lines"))
            first = False
        if v.yields is None:
            continue
        wall = steps.set_index("step")["wall_s"]
        points = [(wall.get(t.end_step, np.nan), t.yield_per_btok) for t in v.yields.tranches]
        points = [(x, y) for x, y in points if y is not None and math.isfinite(x)]
        if points:
            xs, ys = zip(*points, strict=True)
            learning.append(
                style.trace(v.name, np.array(xs), np.array(ys), f"yield_per_btok:{data.metric}", first=first)
            )
    return throughput, learning


def _throughput_learning(data: ReportData, style: RunStyle, smooth: float) -> Figure | None:
    """Throughput over time beside learning over time: two axes, never folded into one number; a panel only for
    what some run has (a run before its second evaluation has no yields yet). `smooth`: the weight of the moving
    average drawn for tokens/s (`smoothed`; 0: as logged)."""
    throughput, learning = _throughput_learning_traces(data, style, smooth)
    panels = [
        (traces, title, axis, note)
        for traces, title, axis, note in (
            (
                throughput,
                "throughput: tokens/s",
                "tokens/s",
                f"tokens/s smoothed, a moving average of weight {smooth:g} over the logged steps (0: as logged)"
                if smooth
                else None,
            ),
            (
                learning,
                f"learning: yield per billion {data.amount}",
                gain_title(data.metric, data.amount),
                f"the {data.metric} improvement of each tranche (between evaluations) per billion "
                f"{data.amount}, at the tranche's end",
            ),
        )
        if traces
    ]
    if not panels:
        return None
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels])
    set_axes(fig, "wall-clock (s)", "")
    for col, (traces, _, axis, _) in enumerate(panels, start=1):
        for trace in traces:
            fig.add_trace(trace, row=1, col=col)
        fig.update_yaxes(title_text=axis, row=1, col=col)
    sides = ("left: ", "right: ") if len(panels) == 2 else ("",)
    notes = [side + note for side, (_, _, _, note) in zip(sides, panels, strict=True) if note]
    title = "throughput beside learning" if len(panels) == 2 else panels[0][1].partition(":")[0]
    return Figure("throughput-learning", f"{title}, over wall-clock time", fig, notes)


def _tranche_yields(data: ReportData, style: RunStyle) -> Figure | None:
    return tranche_yields_figure([v.yields for v in data.runs if v.yields], data.metric, data.amount, style)


def tranche_yields_figure(
    reports: list[YieldReport], metric: str, amount: str = "tokens", style: RunStyle | None = None
) -> Figure | None:
    """Each tranche's yield at its end in tokens, with the band the evaluation noise allows as error bars: a
    tranche whose bar crosses 0 is not told from noise (`YieldReport.eval_noise`, `Tranche.yield_band`). One trace
    per run (`YieldReport.run`); the report's, the dashboard's and a notebook's (`YieldReport._repr_html_`)."""
    style = style or RunStyle([r.run for r in reports])
    fig, level = go.Figure(), None
    for report in reports:
        rows = [
            (t.end_tokens, t.yield_per_btok, t.yield_band, t.vs_expected)
            for t in report.tranches
            if t.yield_per_btok is not None and math.isfinite(t.end_tokens)
        ]
        if not rows:
            continue
        level = report.level
        x = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows], dtype=float)
        low = np.array([np.nan if r[2] is None else r[2][0] for r in rows], dtype=float)
        high = np.array([np.nan if r[2] is None else r[2][1] for r in rows], dtype=float)
        trace = style.trace(report.run, x, y, f"tranche_yield:{metric}")
        trace.error_y = {
            "type": "data",
            "symmetric": False,
            "array": high - y,
            "arrayminus": y - low,
            "color": style.colour[report.run],
            "thickness": 1,
        }
        if report.law is not None:  # each point's learning against the law (`Tranche.vs_expected`), on hover
            whose = "its own" if report.law["run"] == report.run else esc(report.law["run"]) + "'s"
            trace.text = ["" if r[3] is None else f"{r[3]:.2f}x what {whose} law expects" for r in rows]
        fig.add_trace(trace)
    if not fig.data:
        return None
    set_axes(fig, f"accepted {amount} at the tranche's end ({amount})", gain_title(metric, amount))
    fig.add_hline(y=0, line_dash="dot", line_color="#888")
    band = "" if level is None else f" ({level:.0%})"
    return Figure(
        "tranche-yields",
        "tranche yields with their noise band",
        fig,
        [
            f"bars: the band{band} the evaluation noise allows around each tranche's yield; a bar that "
            "crosses 0 is within noise (no bar: fewer than three evaluations to estimate the noise)"
        ],
    )


def _facets(data: ReportData, style: RunStyle, fig_id: str, title: str, kind: str) -> Figure | None:
    """One panel per source (`per_source`) or per eval task (`capability`), one trace per run."""
    series: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for v in data.runs:
        for t in v.yields.tranches if v.yields else []:
            for key, entry in getattr(t, kind).items():
                if entry["yield_per_btok"] is not None:
                    xs, ys = series.setdefault(key, {}).setdefault(v.name, ([], []))
                    xs.append(t.end_tokens)
                    ys.append(entry["yield_per_btok"])
    if not series:
        return None
    keys = sorted(series)
    cols = min(len(keys), FACET_COLUMNS)
    rows = math.ceil(len(keys) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[esc(k) for k in keys], vertical_spacing=0.3 / rows)
    shown: set[str] = set()
    for i, key in enumerate(keys):
        for run, (xs, ys) in series[key].items():
            fig.add_trace(
                style.trace(run, np.array(xs), np.array(ys), f"{kind}:{key}", first=run not in shown),
                row=i // cols + 1,
                col=i % cols + 1,
            )
            shown.add(run)
    set_axes(fig, "", "", height=max(320, 280 * rows))
    fig.update_xaxes(title_text=f"accepted {data.amount} ({data.amount})", row=rows)
    fig.update_yaxes(title_text=f"gain per B {data.amount} (the task's unit)", col=1)
    return Figure(
        fig_id,
        title,
        fig,
        ["each point: one tranche (between two evaluations), at its end; a negative value means that score got worse"],
    )


def build_figures(data: ReportData, *, smooth: float = 0.0) -> list[Figure]:
    """Every plot of the report, in page order; a plot no run has data for is left out. `smooth`: the weight of
    the moving average drawn for throughput (`smoothed`; 0: as logged)."""
    _check_smooth(smooth)
    style = RunStyle([v.name for v in data.runs])
    figures = _loss_figures(data, style)
    extra = [
        train_loss_figure(data, style),
        _throughput_learning(data, style, smooth),
        _tranche_yields(data, style),
        _facets(
            data, style, "yield-per-source", "tranche yield per source (validation loss of each source)", "per_source"
        ),
        _facets(data, style, "yield-capability", "capability yield per task", "capability"),
    ]
    if data.frontier is not None:
        extra.append(frontier_figure(data.frontier, data.amount, style))
    figures += [f for f in extra if f is not None]
    return figures + signal_figures(data, style)
