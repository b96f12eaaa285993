"""The learning-signal plots of a run page and the report, with `base.py`'s helpers: the gradient noise scale,
the median update/weight ratio with its ~1e-3 reference, and gradient clipping beside the loss scale (a panel only
for what some run recorded). Every series is drawn against accepted tokens and downsampled min/max per pixel column
(`figures.downsample`).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from yieldgate.report.figures.base import Figure, RunStyle, downsample, esc, set_axes
from yieldgate.report.sections import ReportData, tokens_at_steps

__all__ = ["signal_figures", "UPDATE_RATIO_REFERENCE", "CLIP_WINDOW"]

UPDATE_RATIO_REFERENCE = 1e-3
"""The usual size of |update|/|weight| per step for Adam-trained transformers (Karpathy's "~1e-3" rule of
thumb); far below it a layer barely learns, far above it the step is too large."""

CLIP_WINDOW = 100
"""Clipping is drawn as the share of the last this many logged steps that were clipped (one point per step)."""


def signal_figures(data: ReportData, style: RunStyle) -> list[Figure]:
    gns, ratio = go.Figure(), go.Figure()
    layers: set[str] = set()
    for v in data.runs:
        sig = v.signals.dropna(subset=["value"])
        g = downsample(sig[sig["key"] == "signals/gns"].sort_values("step"), "step", "value")
        if len(g):
            gns.add_trace(
                style.trace(
                    v.name, tokens_at_steps(v.data.steps, g["step"]), g["value"].to_numpy(), "signals/gns", mode="lines"
                )
            )
        u = sig[sig["key"].str.startswith("signals/update_ratio/")]
        layers.update(u["key"])
        # The median over layers per logged step: one line per run; a layer gone quiet shows in its table.
        med = downsample(u.groupby("step", as_index=False)["value"].median(), "step", "value")
        if len(med):
            ratio.add_trace(
                style.trace(
                    v.name,
                    tokens_at_steps(v.data.steps, med["step"]),
                    med["value"].to_numpy(),
                    "signals/update_ratio/<median>",
                    mode="lines+markers",
                )
            )
    out = []
    if gns.data:
        set_axes(gns, f"accepted {data.amount} ({data.amount})", "B_simple (tokens, log)").update_yaxes(type="log")
        out.append(Figure("signals-gns", "gradient noise scale (signals/gns)", gns, main=False))
    if ratio.data:
        set_axes(ratio, f"accepted {data.amount} ({data.amount})", "|update| / |weight| (ratio, log)").update_yaxes(
            type="log"
        )
        ratio.add_hline(
            y=UPDATE_RATIO_REFERENCE,
            line_dash="dot",
            line_color="#888",
            annotation_text="~1e-3 reference",
            annotation_position="bottom right",
        )
        out.append(
            Figure(
                "signals-update-ratio",
                "update/weight ratio, median over layers",
                ratio,
                [
                    f"median over the {len(layers)} recorded layer keys (signals/update_ratio/<layer>) "
                    "at each logged step; dotted: the usual ~1e-3 of a healthy Adam step"
                ],
                main=False,
            )
        )
    clipping = _clipping(data, style)
    return out + ([clipping] if clipping else [])


def _clipping_traces(data: ReportData, style: RunStyle) -> tuple[list[go.Scatter], list[go.Scatter]]:
    """Each run's clipped share (`clipped`, 0/1, as the share of the last CLIP_WINDOW logged steps) and its loss
    scale (`signals/loss_scale`), downsampled."""
    clipped, scales = [], []
    for v in data.runs:
        steps = v.data.steps
        if "clipped" in steps and steps["clipped"].notna().any():
            logged = steps[["step", "clipped"]].dropna()
            share = logged.assign(clipped=logged["clipped"].rolling(CLIP_WINDOW, min_periods=1).mean() * 100)
            share = downsample(share, "step", "clipped")
            x = tokens_at_steps(steps, share["step"])
            clipped.append(style.trace(v.name, x, share["clipped"].to_numpy(), "clipped_share", mode="lines"))
        scale = v.signals[v.signals["key"] == "signals/loss_scale"].dropna(subset=["value"]).sort_values("step")
        scale = downsample(scale, "step", "value")
        if len(scale):
            x = tokens_at_steps(steps, scale["step"])
            first = not clipped or clipped[-1].name != esc(v.name)
            scales.append(
                style.trace(v.name, x, scale["value"].to_numpy(), "signals/loss_scale", mode="lines", first=first)
            )
    return clipped, scales


def _clipping(data: ReportData, style: RunStyle) -> Figure | None:
    """Gradient clipping beside the mixed-precision loss scale (which backs off at each overflow): a panel only for
    what some run recorded, so a run without a loss scale (no mixed precision) gets no empty panel."""
    clipped, scales = _clipping_traces(data, style)
    panels = [
        (traces, title, axis, note)
        for traces, title, axis, note in (
            (
                clipped,
                "gradient clipping",
                f"clipped, of the last {CLIP_WINDOW} logged steps (%)",
                f"the share of the last {CLIP_WINDOW} logged steps whose gradient norm was clipped",
            ),
            (
                scales,
                "loss scale",
                "loss scale (factor, log)",
                "the loss scale, halved at each overflow (a skipped step)",
            ),
        )
        if traces
    ]
    if not panels:
        return None
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels])
    set_axes(fig, f"accepted {data.amount} ({data.amount})", "")
    for col, (traces, _, axis, _) in enumerate(panels, start=1):
        for trace in traces:
            fig.add_trace(trace, row=1, col=col)
        fig.update_yaxes(title_text=axis, row=1, col=col, **({"type": "log"} if traces is scales else {}))
    if len(panels) == 1:
        note = panels[0][3]
    else:
        note = f"left: {panels[0][3]}; right: {panels[1][3]}"
    title = "gradient clipping and the loss scale" if len(panels) == 2 else panels[0][1]
    return Figure("signals-clipping", title, fig, [note], main=False)
