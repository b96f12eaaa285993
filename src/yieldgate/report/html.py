"""`yieldgate report`: one self-contained HTML file (plotly.js inlined once, no network needed to open it).

`collect` (sections.py) reads the ledger, `build_figures` (figures/) turns that into plots, and this module fills
in `templates/report.html` through the pages' one environment (`jinja.py`, autoescape: every user string reaches
the page as text; the plots escape their own, `figures.base.esc`). Its style sheet and its tables of a comparison
(`comparison_view`) are shared with the notebook and the dashboard. `--png DIR` writes the main plots as PNG
files with kaleido, which drives a local Chrome/Chromium.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.io as pio
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from yieldgate._version import __version__
from yieldgate.analysis.compare import Comparison
from yieldgate.analysis.frontier import rates_to_target
from yieldgate.errors import InputError, YieldgateError
from yieldgate.ledger import Ledger
from yieldgate.ledger.file import holds_database
from yieldgate.report.figures.base import Figure, esc, figure_dict
from yieldgate.report.figures.runs import build_figures
from yieldgate.report.format import fmt
from yieldgate.report.jinja import Cell, Table, plot, render, table
from yieldgate.report.sections import ReportData, ReportResult, collect, tokens_at_steps

__all__ = [
    "ReportResult",
    "write_report",
    "render_html",
    "write_pngs",
    "ComparisonView",
    "comparison_view",
    "CSS",
]

PNG_WIDTH = 1100
PNG_TITLE_PX = 40
"""Room for a PNG's title above the plot (the file's height grows by it)."""

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, td.json { font-family: ui-monospace, monospace; font-size: 0.8rem; word-break: break-word; }
td.json details { color: #666; } td.json summary { cursor: pointer; }
.note { color: #555; font-size: 0.9rem; margin: 0.2rem 0; } .muted { color: #777; }
.approve { color: #1a7f37; font-weight: bold; } .hold { color: #9a6700; font-weight: bold; }
.reject { color: #cf222e; font-weight: bold; }
table.manifest td, table.confounders td { overflow-wrap: anywhere; max-width: 36rem; }
"""


@dataclass(frozen=True)
class ComparisonView:
    """One comparison as `_macros.html`'s `comparison` draws it: the numbers `yieldgate compare` prints."""

    result: Comparison
    speedup: Table
    points: Table | None
    confounders: Table | None


def _manifest_value(value: Any) -> Any:
    """A manifest value for a table cell: text as text (not quoted JSON), structures as lines with the JSON one
    click away (`cell`), nothing as `-`."""
    return "-" if value is None else value


def comparison_view(c: Comparison, *, amount: str = "tokens") -> ComparisonView:
    """One comparison as tables (the numbers `yieldgate compare` prints, from the same `Comparison`): speedup
    split, aligned points, verdict, confounders (one row per manifest field) and notes. Shared with the notebook
    and `yieldgate serve`. `amount`: what the token counts count (`bytes` for a comparison per byte)."""
    a, b = c.a, c.b
    # Without token counts the time speedup splits on steps (epochs): steps/s x steps to target.
    on_steps = c.speedup.get("step_efficiency") is not None
    unit = ("epochs" if c.aligned_on == "epochs" else "steps") if on_steps else amount
    need, rate = (c.steps_to_target if on_steps else c.tokens_to_target), rates_to_target(c, steps=on_steps)
    efficiency, throughput = ("step_efficiency", "steps_per_s") if on_steps else ("sample_efficiency", "throughput")
    speedup = table(
        ["", "A", "B", "B over A"],
        [
            ["runs (seeds)", ", ".join(c.runs.get(a, [])), ", ".join(c.runs.get(b, [])), ""],
            [f"{unit} to target", need[a], need[b], c.speedup[efficiency]],
            ["time to target (s)", c.time_to_target_s[a], c.time_to_target_s[b], c.speedup["time"]],
            # The page's one throughput: the runs table and the frontier give each run's the same way.
            [f"throughput ({unit}/s to target: {unit} over time to it)", rate[a], rate[b], c.speedup[throughput]],
            ["effective token multiplier", "", "", c.effective_token_multiplier],
        ],
        "speedup",
    )
    points = None
    if c.points:
        points = table(
            [c.aligned_on, f"{c.metric} A", "B", "B - A", "interval", "within noise"],
            [
                [
                    p[c.aligned_on],
                    p["a"],
                    p["b"],
                    p["diff"],
                    "-" if p["interval"] is None else f"[{fmt(p['interval'][0])}, {fmt(p['interval'][1])}]",
                    "-" if p["within_noise"] is None else ("yes" if p["within_noise"] else "no"),
                ]
                for p in c.points
            ],
            "points",
        )
    confounders = None
    if c.confounders:
        confounders = table(
            ["field", "A", "B"],
            [[d["field"], _manifest_value(d["a"]), _manifest_value(d["b"])] for d in c.confounders],
            "confounders",
        )
    return ComparisonView(c, speedup, points, confounders)


def _runs_table(data: ReportData) -> Table:
    """One row per run. Its throughput is the page's one (`throughput_column`): with a frontier, the run's tokens to
    the target over its time to it, as the frontier and the comparison give it; one run alone, the median of its
    logged tokens/s."""
    header, rates = throughput_column(data)
    rows = []
    for v in data.runs:
        steps, curve = v.data.steps, v.curve
        final = curve["loss"].dropna()
        manifest = v.data.manifest
        rows.append(
            [
                v.name,
                int(steps["step"].max()) if len(steps) else 0,  # the last step, as `yieldgate runs` shows steps
                float(steps["tokens"].max()) if len(steps) else None,
                float(final.iloc[-1]) if len(final) else None,
                rates.get(v.name),
                v.diagnosis_count,
                manifest.content_hash()[:12] if manifest else "-",
            ]
        )
    return table(["run", "steps", data.amount, f"last {data.metric}", header, "diagnoses", "manifest"], rows)


def throughput_column(data: ReportData) -> tuple[str, dict[str, float | None]]:
    """The runs table's throughput: its header, saying what it is, and each run's value. With two runs or more, the
    frontier's tokens/s to its target (a run that never reaches it: none); one run, the median over its steps."""
    amount = data.amount
    if data.frontier is not None and data.frontier.target is not None:
        target = f"{data.frontier.metric} {fmt(data.frontier.target)}"
        return (
            f"{amount}/s to target ({amount} over time to {target})",
            {run: point["tokens_per_s"] for run, point in data.frontier.points.items()},
        )
    rates: dict[str, float | None] = {}
    for v in data.runs:
        logged = v.data.steps["tokens_per_s"].dropna() if "tokens_per_s" in v.data.steps else []
        rates[v.name] = float(np.median(logged)) if len(logged) else None
    return "tokens/s (median of the logged tokens/s)", rates  # as logged: never converted to bytes


def _span(values: list[Any], fmt: Any) -> str:
    """`a-b`, or `a` when both ends are equal, or `-` when none is recorded."""
    return "-".join(dict.fromkeys(fmt(v) for v in values)) or "-"


def _waste_table(data: ReportData) -> Table | None:
    """One row per run with a clock: wasted compute by kind (`yieldgate waste`), where it stopped learning, goodput."""
    rows = []
    for v in data.runs:
        w = v.waste
        if w is None or not w.wall_s:
            continue
        p = w.plateau
        stopped = (
            "not judged"
            if p is None or p.unresolved is not None
            else "no: it kept to its own law"
            if p.start is None
            else f"at {fmt(p.start)} {p.axis}"
        )
        rows.append(
            [
                v.name,
                w.wasted.device_hours,
                w.wasted.usd,
                w.wasted.kwh,
                f"{w.wasted.seconds / w.wall_s:.1%}",
                stopped,
                f"{w.counts['restarts']} ({fmt(w.restarts.seconds)} s)",
                f"{w.counts['diverged_steps']} ({fmt(w.diverged_steps.seconds)} s)",
                None if w.goodput is None else f"{w.goodput:.1%}",
            ]
        )
    if not rows:
        return None
    heads = ["run", "device-hours", "$", "kWh", "of the wall time", "stopped learning", "restarts", "NaN steps"]
    return table([*heads, "goodput"], rows)


def _diagnoses_table(data: ReportData) -> Table | None:
    """One row per diagnosis event, then one per finding the detectors make now that no open event holds; bodies are
    rendered generically (cause, confidence, evidence, advice), and a body without an `evidence` field shows its
    remaining fields as the evidence."""
    rows = []
    for v in data.runs:
        for _, e in v.diagnoses.iterrows():
            body = e["body"] if isinstance(e["body"], dict) else {"body": e["body"]}
            steps = [int(s) for s in (e["start_step"], e["end_step"]) if pd.notna(s)]
            tokens = tokens_at_steps(v.data.steps, steps) if steps else np.empty(0)
            evidence = body.get(
                "evidence", {k: x for k, x in body.items() if k not in ("cause", "confidence", "advice")}
            )
            rows.append(
                [
                    v.name,
                    body.get("cause", "-"),
                    _span(steps, str),
                    _span(list(tokens), fmt),
                    body.get("confidence"),
                    e["state"],
                    evidence,
                    body.get("advice", "-"),
                ]
            )
        for f in v.unstored():  # found by the detectors now, never stored: the runs table counts it
            steps = [f["start_step"], f["end_step"]]
            rows.append(
                [
                    v.name,
                    f["cause"],
                    _span(steps, str),
                    _span(list(tokens_at_steps(v.data.steps, steps)), fmt),
                    f["confidence"],
                    f"found now, not stored (`yieldgate diagnose {v.name}` keeps it)",
                    f["evidence"],
                    f["advice"],
                ]
            )
    if not rows:
        return None
    return table(["run", "cause", "steps", "tokens", "confidence", "state", "evidence", "advice"], rows, "diagnoses")


def _decisions_table(data: ReportData) -> Table | None:
    frame = data.decisions
    if frame is None or frame.empty:
        return None
    rows = [
        [
            d["target"],
            d["stage"] or "-",
            Cell(d["decision"], cls=d["decision"]),  # approve, hold or reject: styled by the report's CSS
            d["rationale"],
            d["evidence"],
            (d["policy_hash"] or "-")[:12],
            datetime.fromtimestamp(d["created_at"], tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
        ]
        for _, d in frame.iterrows()
    ]
    return table(["target", "stage", "decision", "rationale", "evidence", "policy", "decided"], rows, "decisions")


def _manifest_table(data: ReportData, names: list[str]) -> Table | None:
    """The fields in which the runs' manifests differ, one column per run with a manifest."""
    if not data.manifest_diff:
        return None
    rows = [[d["field"], *[_manifest_value(d["values"][n]) for n in names]] for d in data.manifest_diff]
    return table(["field", *names], rows, "manifest")


def render_html(data: ReportData, figures: list[Figure]) -> str:
    """The whole page (`templates/report.html`): plotly.js once in the head, then the sections. A section with
    nothing to show is left out, heading and all."""
    manifests = [v.name for v in data.runs if v.data.manifest is not None]
    return render(
        "report.html",
        patterns=" ".join(data.patterns),
        metric=data.metric,
        amount=data.amount,
        generated=datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__,
        notes=data.notes,
        runs=_runs_table(data),
        figures={f.id: plot(f, div_id=f.id) for f in figures},
        comparisons=[comparison_view(c, amount=data.amount) for c in data.comparisons],
        diagnoses=_diagnoses_table(data),
        waste=_waste_table(data),
        decisions=_decisions_table(data),
        manifests=len(manifests),
        manifest=_manifest_table(data, manifests),
        # Safe as HTML: this module's own style sheet, and plotly.js from the installed plotly package.
        css=Markup(CSS),
        plotly_js=Markup(get_plotlyjs()),
    )


def _titled(fig: Figure) -> dict[str, Any]:
    """A figure for a PNG file: its heading drawn as the plot's title (on the page it is the h3 above the plot),
    escaped as plotly draws a subset of HTML, with the room it needs at the top."""
    out = figure_dict(fig)
    out["layout"]["title"] = {"text": esc(fig.title), "x": 0.01, "xanchor": "left"}
    margin = dict(out["layout"].get("margin") or {})
    margin["t"] = int(margin.get("t") or 40) + PNG_TITLE_PX
    out["layout"]["margin"] = margin
    return out


def write_pngs(figures: list[Figure], directory: str | os.PathLike[str]) -> list[str]:
    """Write the main figures as `<id>.png` into `directory` (created if missing) with kaleido."""
    try:
        import kaleido  # noqa: F401  (optional: the `report` extra; plotly's static export runs through it)
        from choreographer.errors import ChromeNotFoundError
    except ImportError:
        raise YieldgateError("PNG figures need kaleido >= 1: pip install 'yieldgate[report]'") from None

    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"{directory}: cannot create the folder for the PNG figures ({exc.strerror}); pick a writable path"
        ) from None
    main = [f for f in figures if f.main]
    paths = [str(out / f"{f.id}.png") for f in main]
    try:
        pio.write_images(
            [_titled(f) for f in main],
            paths,
            width=PNG_WIDTH,
            validate=False,
            height=[(f.figure.layout.height or 450) + PNG_TITLE_PX for f in main],
        )
    except ChromeNotFoundError:
        raise YieldgateError(
            "PNG figures need Chrome or Chromium to be drawn: install it (Debian: "
            "`apt-get install chromium`) or run `plotly_get_chrome`"
        ) from None
    return paths


def _check_writable(path: Path) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if (
        path.is_dir()
        or not parent.is_dir()
        or not os.access(parent, os.W_OK)
        or (path.exists() and not os.access(path, os.W_OK))
    ):
        raise InputError(
            f"out {path}: cannot write the report there (not a writable file in an existing folder); pick another path",
            parameter="out",
        )
    if holds_database(path):
        raise InputError(
            f"out {path}: an SQLite database or its log (a ledger?) is there, which the report would replace; "
            "pick another path",
            parameter="out",
        )


def write_report(
    ledger: Ledger,
    patterns: list[str],
    out: str | os.PathLike[str],
    *,
    metric: str = "val/loss",
    png_dir: str | os.PathLike[str] | None = None,
    per: str | None = None,
    smooth: float = 0.0,
    target: float | None = None,
) -> ReportResult:
    """Write the HTML report of the runs matching `patterns` to `out` (and the main plots as PNG files into
    `png_dir`). Each pattern is a group of seeds; every later group is compared with the first. `per`: `token` or
    `byte`; None: bytes when the runs' tokenizers differ (`sections.per_for`). `smooth`: the weight of the moving
    average drawn for throughput (`figures.smoothed`; 0: as logged). `target`: the metric's value the frontier
    measures tokens to (None: the worst best across the runs)."""
    path = Path(out)
    _check_writable(path)
    data = collect(ledger, patterns, metric=metric, per=per, target=target, detect=True)
    figures = build_figures(data, smooth=smooth)
    page = render_html(data, figures)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"out {path}: cannot write the report ({exc.strerror}); pick another path", parameter="out"
        ) from None
    pngs = write_pngs(figures, png_dir) if png_dir is not None else []
    return ReportResult(
        path=str(path),
        runs=[v.name for v in data.runs],
        figures=[f.id for f in figures],
        pngs=pngs,
        notes=data.notes,
        per=data.per,
        frontier=None if data.frontier is None else data.frontier.to_dict(),
    )
