"""`yieldgate report`: one self-contained HTML file (plotly.js inlined once, no network needed to open it).

`collect` (sections.py) reads the ledger, `build_figures` (figures.py) turns that into plots, and this module
renders the page. Every user string that goes into the page's HTML — run names, patterns, sources, tasks,
diagnosis and decision bodies, manifest values — passes through `html.escape`; the plots escape their own
(see figures.py). `--png DIR` writes the main plots as PNG files with kaleido, which drives a local
Chrome/Chromium.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from yieldgate._version import __version__
from yieldgate.analysis.compare import Comparison
from yieldgate.errors import InputError, YieldgateError
from yieldgate.ledger import Ledger
from yieldgate.report.console import evidence_lines
from yieldgate.report.figures.base import Figure, figure_dict
from yieldgate.report.figures.runs import build_figures
from yieldgate.report.format import fmt
from yieldgate.report.sections import ReportData, collect, tokens_at_steps

__all__ = [
    "ReportResult",
    "write_report",
    "render_html",
    "write_pngs",
    "comparison_html",
    "table_html",
    "notes_html",
    "RawCell",
    "CSS",
]

PNG_WIDTH = 1100
PNG_TITLE_PX = 40
"""Room for a PNG's title above the plot (the file's height grows by it)."""
PLOT_CONFIG = {"displaylogo": False, "responsive": True}

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


@dataclass
class ReportResult:
    """What `write_report` wrote: the file, the runs it covers, its plots, and any PNG files."""

    path: str
    runs: list[str]
    figures: list[str]
    pngs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    per: str = "token"
    """The unit the report drew in: `token`, or `byte` (bits per byte)."""
    frontier: dict[str, Any] | None = None
    """With two runs or more: each run's tokens/s and tokens to target, the Pareto front (`Frontier.to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RawCell(str):
    """A table cell this module wrote itself (no user text inside): inserted as HTML, not escaped."""


def _compact_json(value: Any) -> str:
    """A stored body (evidence, policy) as one line of JSON for a table cell."""
    return json.dumps(value, sort_keys=True, default=str)


def _cell(value: Any) -> str:
    """One table cell: numbers right-aligned, structures as compact JSON, text escaped."""
    if isinstance(value, RawCell):
        return str(value)
    if isinstance(value, bool):
        return f"<td>{str(value).lower()}</td>"
    if value is None or isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f'<td class="num">{fmt(value)}</td>'
    if isinstance(value, (dict, list)):
        # readable lines, and the whole body as JSON one click away
        lines = "<br>".join(escape(line) for line in evidence_lines(value))
        return f'<td class="json">{lines}<details><summary>JSON</summary>{escape(_compact_json(value))}</details></td>'
    return f"<td>{escape(str(value))}</td>"


def table_html(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    """A table: headers and cells escaped (a `RawCell` cell excepted), numbers formatted, bodies as lines + JSON."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def notes_html(lines: list[str]) -> str:
    """One escaped paragraph per note."""
    return "".join(f'<p class="note">{escape(line)}</p>' for line in lines)


def _runs_section(data: ReportData) -> str:
    rows = []
    for v in data.runs:
        steps, curve = v.data.steps, v.curve
        final = curve["loss"].dropna()
        tps = steps["tokens_per_s"].dropna()
        manifest = v.data.manifest
        rows.append(
            [
                v.name,
                int(len(steps)),
                float(steps["tokens"].max()) if len(steps) else None,
                float(final.iloc[-1]) if len(final) else None,
                float(np.median(tps)) if len(tps) else None,
                int(len(v.diagnoses)),
                manifest.content_hash()[:12] if manifest else "-",
            ]
        )
    return "<h2>Runs</h2>" + table_html(
        ["run", "steps", data.amount, f"last {data.metric}", "median tokens/s", "diagnoses", "manifest"], rows
    )


def _comparison_section(data: ReportData) -> str:
    if not data.comparisons:
        return ""
    return (
        "<h2>Comparison</h2>"
        '<p class="note">Each later pattern against the first. Speedup (B over A) at the target loss: '
        "time = throughput &times; sample efficiency.</p>"
        + "".join(comparison_html(c, amount=data.amount) for c in data.comparisons)
    )


def _manifest_value(value: Any) -> Any:
    """A manifest value for a table cell: text as text (not quoted JSON), structures as lines with the JSON one
    click away (`_cell`), nothing as `-`."""
    return "-" if value is None else value


def comparison_html(c: Comparison, *, amount: str = "tokens") -> str:
    """One comparison as tables (the numbers `yieldgate compare` prints, from the same `Comparison`): speedup
    split, aligned points, verdict, confounders (one row per manifest field) and notes. Shared with `yieldgate
    serve`. `amount`: what the token counts count (`bytes` for a comparison per byte)."""
    a, b = c.a, c.b
    parts = [f"<h3>{escape(a)} (A) vs {escape(b)} (B)</h3>"]
    parts.append(
        table_html(
            ["", "A", "B", "B over A"],
            [
                ["runs (seeds)", ", ".join(c.runs.get(a, [])), ", ".join(c.runs.get(b, [])), ""],
                [f"{amount} to target", c.tokens_to_target[a], c.tokens_to_target[b], c.speedup["sample_efficiency"]],
                ["time to target (s)", c.time_to_target_s[a], c.time_to_target_s[b], c.speedup["time"]],
                [f"throughput ({amount}/s to target)", "", "", c.speedup["throughput"]],
                ["effective token multiplier", "", "", c.effective_token_multiplier],
            ],
            "speedup",
        )
    )
    parts.append(
        f'<p class="note">target {escape(c.metric)} = {fmt(c.target_loss)}; speedup.time '
        f"{fmt(c.speedup['time'])} = throughput {fmt(c.speedup['throughput'])} &times; sample "
        f"efficiency {fmt(c.speedup['sample_efficiency'])}</p>"
    )
    if c.points:
        parts.append(
            table_html(
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
        )
    parts.append(f'<p class="verdict"><strong>{escape(c.verdict)}</strong></p>')
    if c.confounders:
        parts.append(
            '<p class="note">Confounders: the manifest fields in which the sides differ.</p>'
            + table_html(
                ["field", "A", "B"],
                [[d["field"], _manifest_value(d["a"]), _manifest_value(d["b"])] for d in c.confounders],
                "confounders",
            )
        )
    parts.append(notes_html(c.warnings + c.notes))
    return "".join(parts)


def _span(values: list[Any], show: Any) -> str:
    """`a-b`, or `a` when both ends are equal, or `-` when none is recorded."""
    return "-".join(dict.fromkeys(show(v) for v in values)) or "-"


def _diagnoses_section(data: ReportData) -> str:
    """One row per diagnosis event; bodies are rendered generically (cause, confidence, evidence, advice), and
    a body without an `evidence` field shows its remaining fields as the evidence."""
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
    if not rows:
        return ""
    return "<h2>Diagnoses</h2>" + table_html(
        ["run", "cause", "steps", "tokens", "confidence", "state", "evidence", "advice"], rows, "diagnoses"
    )


def _decisions_section(data: ReportData) -> str:
    frame = data.decisions
    if frame is None or frame.empty:
        return ""
    rows = []
    for _, d in frame.iterrows():
        # The ledger only stores approve / hold / reject, so the class name is ours, not user text.
        verdict = RawCell(f'<td class="{d["decision"]}">{escape(d["decision"])}</td>')
        rows.append(
            [
                d["target"],
                d["stage"] or "-",
                verdict,
                d["rationale"],
                d["evidence"],
                (d["policy_hash"] or "-")[:12],
                datetime.fromtimestamp(d["created_at"], tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
            ]
        )
    return "<h2>Gate decisions</h2>" + table_html(
        ["target", "stage", "decision", "rationale", "evidence", "policy", "decided"], rows, "decisions"
    )


def _manifest_section(data: ReportData) -> str:
    names = [v.name for v in data.runs if v.data.manifest is not None]
    if len(names) < 2:
        return ""
    if not data.manifest_diff:
        return f'<h2>Manifest diff</h2><p class="note">The {len(names)} manifests are identical.</p>'
    rows = [[d["field"], *[_manifest_value(d["values"][n]) for n in names]] for d in data.manifest_diff]
    return (
        "<h2>Manifest diff</h2><p class=\"note\">Fields in which any run's manifest differs from the first's "
        "(the confounders of any comparison between them).</p>" + table_html(["field", *names], rows, "manifest")
    )


def _figure_html(fig: Figure) -> str:
    plot = pio.to_html(
        figure_dict(fig), include_plotlyjs=False, full_html=False, div_id=fig.id, config=PLOT_CONFIG, validate=False
    )
    return f"<h3>{escape(fig.title)}</h3>{plot}{notes_html(fig.notes)}"


def render_html(data: ReportData, figures: list[Figure]) -> str:
    """The whole page: plotly.js once in the head, then the sections; every user string escaped. A section with
    nothing to show is left out, heading and all."""
    by_id = {f.id: f for f in figures}

    def plots(title: str, *ids: str) -> str:
        drawn = "".join(_figure_html(by_id[i]) for i in ids if i in by_id)
        return f"<h2>{escape(title)}</h2>{drawn}" if drawn else ""

    generated = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(
        [
            "<h1>yieldgate report</h1>",
            f'<p class="muted">{escape(" ".join(data.patterns))} &middot; metric {escape(data.metric)} &middot; '
            f"generated {generated} by yieldgate {escape(__version__)}</p>",
            notes_html(data.notes),
            _runs_section(data),
            plots(
                f"Learning against {data.amount}, time and cost", "loss-steps", "loss-tokens", "loss-time", "loss-cost"
            ),
            plots("Throughput and learning", "throughput-learning", "frontier"),
            _comparison_section(data),
            plots("Yields", "tranche-yields", "yield-per-source", "yield-capability"),
            plots("Learning signals", "signals-gns", "signals-update-ratio", "signals-clipping"),
            _diagnoses_section(data),
            _decisions_section(data),
            _manifest_section(data),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>yieldgate report: {escape(' '.join(data.patterns))}</title>"
        f'<style>{CSS}</style><script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body>{body}</body></html>\n"
    )


def _titled(fig: Figure) -> dict[str, Any]:
    """A figure for a PNG file: its heading drawn as the plot's title (on the page it is the h3 above the plot),
    escaped as plotly draws a subset of HTML, with the room it needs at the top."""
    out = figure_dict(fig)
    out["layout"]["title"] = {"text": escape(fig.title), "x": 0.01, "xanchor": "left"}
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
            f"-o {path}: cannot write the report there (not a writable file in an existing folder); pick another path"
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
    data = collect(ledger, patterns, metric=metric, per=per, target=target)
    figures = build_figures(data, smooth=smooth)
    page = render_html(data, figures)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"-o {path}: cannot write the report ({exc.strerror}); pick another path") from None
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
