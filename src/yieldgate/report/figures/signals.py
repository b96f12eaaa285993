"""The learning-signal plots of a run page and the report, with `base.py`'s helpers: the gradient noise scale,
the median update/weight ratio with its ~1e-3 reference, both per layer as small multiples (a row per run, a line
per layer), and gradient clipping beside the loss scale (a panel only for what some run recorded). Every series is
drawn against accepted tokens and downsampled min/max per pixel column (`figures.downsample`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from yieldgate.report.figures.base import PALETTE, Figure, RunStyle, downsample, esc, set_axes
from yieldgate.report.sections import ReportData, tokens_at_steps

__all__ = ["signal_figures", "per_layer_figure", "UPDATE_RATIO_REFERENCE", "CLIP_WINDOW", "PER_LAYER", "LAYER_RUNS"]

UPDATE_RATIO_REFERENCE = 1e-3
"""The usual size of |update|/|weight| per step for Adam-trained transformers (Karpathy's "~1e-3" rule of
thumb); far below it a layer barely learns, far above it the step is too large."""

CLIP_WINDOW = 100
"""Clipping is drawn as the share of the last this many logged steps that were clipped (one point per step)."""

PER_LAYER = {
    "signals/gns/": ("gradient noise scale per layer", "B_simple (tokens, log)"),
    "signals/update_ratio/": ("update/weight ratio per layer", "|update| / |weight| (log)"),
}
"""The per-layer signals drawn as small multiples (key prefix -> panel title, y axis)."""
LAYER_RUNS = 4
"""Runs drawn in the per-layer panel (a row each): past a few, the rows are too small to read a layer in."""


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
    layered = per_layer_figure(data)
    return out + [f for f in (layered, clipping) if f is not None]


def _layer_series(signals: pd.DataFrame) -> dict[str, dict[str, pd.DataFrame]]:
    """A run's per-layer signals: {kind (a `PER_LAYER` prefix): {layer: its (step, value) rows, downsampled}}."""
    out: dict[str, dict[str, pd.DataFrame]] = {}
    sig = signals.dropna(subset=["value"])
    for prefix in PER_LAYER:
        mine = sig[sig["key"].str.startswith(prefix)]
        for key, rows in mine.groupby("key", sort=True):
            layer = str(key)[len(prefix) :]
            out.setdefault(prefix, {})[layer] = downsample(rows.sort_values("step"), "step", "value")
    return out


def per_layer_figure(data: ReportData) -> Figure | None:
    """Small multiples of the per-layer signals: a row per run (the first `LAYER_RUNS` that recorded any), a column
    per signal (`PER_LAYER`: the gradient noise scale, the update/weight ratio), one line per layer, each layer one
    colour in every panel. A layer whose noise scale or update ratio parts from the others is the one to look at: a
    layer gone quiet, or one taking steps far larger than the rest."""
    runs = [(v, series) for v in data.runs if (series := _layer_series(v.signals))][:LAYER_RUNS]
    if not runs:
        return None
    kinds = [k for k in PER_LAYER if any(k in series for _, series in runs)]
    layers = sorted({layer for _, series in runs for kind in series.values() for layer in kind})
    colour = {layer: PALETTE[i % len(PALETTE)] for i, layer in enumerate(layers)}
    titles = [f"{esc(v.name)}: {PER_LAYER[k][0]}" for v, _ in runs for k in kinds]
    fig = make_subplots(rows=len(runs), cols=len(kinds), subplot_titles=titles, vertical_spacing=0.3 / len(runs))
    shown: set[str] = set()
    for row, (v, series) in enumerate(runs, start=1):
        for col, kind in enumerate(kinds, start=1):
            for layer, rows in series.get(kind, {}).items():
                trace = go.Scatter(
                    x=tokens_at_steps(v.data.steps, rows["step"]),
                    y=rows["value"].to_numpy(),
                    name=esc(layer),
                    legendgroup=esc(layer),
                    showlegend=layer not in shown,
                    mode="lines",
                    line={"color": colour[layer]},
                    meta={"series": f"{kind}{layer}", "run": v.name},
                )
                fig.add_trace(trace, row=row, col=col)
                shown.add(layer)
            fig.update_yaxes(title_text=PER_LAYER[kind][1], type="log", row=row, col=col)
    set_axes(fig, "", "", height=max(360, 300 * len(runs)))
    fig.update_layout(legend_title_text="layer")
    fig.update_xaxes(title_text=f"accepted {data.amount} ({data.amount})", row=len(runs))
    with_layers = sum(1 for v in data.runs if _layer_series(v.signals))
    notes = [
        f"one line per layer ({', '.join(f'{k}<layer>' for k in kinds)}), each layer one colour in every panel; "
        f"{len(layers)} layers"
    ]
    if with_layers > len(runs):
        notes.append(
            f"the first {len(runs)} of the {with_layers} runs with per-layer signals; a report of one run draws its own"
        )
    return Figure("signals-layers", "learning signals per layer", fig, notes, main=False)


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
