"""The dashboard's HTML pages: server-rendered tables around plots that `static/app.js` draws from the JSON API.

Every user string (run names, sources, event bodies, manifest values, error messages) passes through
`html.escape`, in text and in attribute values alike; the plots escape their own (`report/figures.py`), and the
page script writes text with `textContent` only. No inline script anywhere: the Content-Security-Policy
(`app.CSP`) allows scripts from this server's own `/static/` only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

import pandas as pd

from yieldgate import __version__
from yieldgate.analysis.compare import Comparison
from yieldgate.ledger import Ledger
from yieldgate.report.console import evidence_lines
from yieldgate.report.html import CSS, comparison_html, notes_html, table_html

__all__ = ["page", "runs_page", "run_page", "compare_page", "error_page"]

EXTRA_CSS = """
nav { margin-bottom: 1rem; } nav a { margin-right: 1rem; }
.status { font-weight: bold; } .status-running { color: #0969da; } .status-finished { color: #1a7f37; }
.status-failed, .status-crashed, .status-killed { color: #cf222e; } .status-stale { color: #9a6700; }
#runs th { cursor: pointer; user-select: none; } #filter { padding: 0.3rem; width: 20rem; }
.plot { min-height: 420px; } .error { color: #cf222e; }
"""


def page(title: str, body: str, *, scripts: tuple[str, ...] = ()) -> str:
    """A whole page: escaped title, the report's CSS, the body as given (already escaped), scripts from /static."""
    tags = "".join(f'<script src="{escape(s)}"></script>' for s in scripts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}{EXTRA_CSS}</style>{tags}</head><body>"
            '<nav><a href="/">runs</a><span class="muted">yieldgate serve '
            f"{escape(__version__)} &middot; read-only</span></nav>{body}</body></html>\n")


def runs_page(location: str) -> str:
    """The runs table: filled, filtered, sorted and refreshed by app.js from /api/runs."""
    headers = "".join(f'<th data-key="{k}">{escape(label)}</th>' for k, label in (
        ("select", "compare"), ("name", "run"), ("status", "status"), ("tokens", "tokens"), ("steps", "steps"),
        ("last_eval", "last eval"), ("manifest_hash", "manifest"), ("updated_at", "updated (UTC)")))
    body = (f"<h1>Runs</h1><p class=\"muted\">{escape(location)}</p>"
            '<p><input id="filter" type="search" placeholder="filter by name, status or source" autofocus> '
            '<a id="compare-link" class="muted">select two runs to compare</a> <span id="count" class="muted">'
            "</span></p>"
            f'<table id="runs"><thead><tr>{headers}</tr></thead><tbody></tbody></table>')
    return page("yieldgate: runs", body, scripts=("/static/plotly.min.js", "/static/app.js"))


def _when(ts: Any) -> str:
    return "-" if ts is None or pd.isna(ts) else datetime.fromtimestamp(float(ts), tz=UTC).strftime(
        "%Y-%m-%d %H:%M:%S")


def _events_table(events: pd.DataFrame) -> str:
    if events.empty:
        return '<p class="note">No events recorded.</p>'
    rows = []
    for _, e in events.iterrows():
        span = "-".join(dict.fromkeys(str(int(s)) for s in (e["start_step"], e["end_step"]) if pd.notna(s))) or "-"
        body = e["body"] if isinstance(e["body"], dict) else {"body": e["body"]}
        rows.append([e["kind"], body.get("cause", "-") if e["kind"] == "diagnosis" else "-", span, e["state"],
                     body, _when(e["created_at"])])
    return table_html(["kind", "cause", "steps", "state", "body", "recorded (UTC)"], rows, "events")


def _fields_table(body: dict[str, Any], what: str) -> str:
    if not body:
        return f'<p class="note">No {escape(what)} recorded.</p>'
    lines = evidence_lines(body, limit=10_000)
    return table_html(["field", "value"], [list(line.partition(": ")[::2]) for line in lines], what)


def run_page(ledger: Ledger, run: str, *, metric: str = "val/loss") -> str:
    """One run: status, plots (drawn and kept live by app.js), events and diagnoses, manifest and run notes."""
    info = ledger.run_info(run)
    manifest = ledger.manifest(run)
    status = str(info["status"])
    head = (f"<h1>{escape(run)}</h1><p>status <span id=\"status\" class=\"status status-{escape(status)}\">"
            f"{escape(status)}</span> &middot; <span id=\"steps\">{int(info['steps']):,}</span> steps &middot; "
            f"source {escape(str(info['source']))} &middot; <span id=\"live\" class=\"muted\">live: polling</span></p>")
    figures = (f'<div id="figures" data-kind="run" data-run="{escape(run)}" data-metric="{escape(metric)}">'
               '<p class="note" id="loading">drawing...</p></div>')
    sections = [
        "<h2>Events and diagnoses</h2>",
        '<p class="note">Diagnoses are also drawn as shaded spans on the loss-against-tokens plot.</p>',
        _events_table(ledger.events(run)),
        "<h2>Manifest</h2>",
        _fields_table(manifest.model_dump(mode="json") if manifest is not None else {}, "manifest"),
        "<h2>Run notes</h2>",
        '<p class="note">What the writer recorded about how values were measured (MFU formula, devices, '
        "imports).</p>",
        _fields_table(ledger.meta(run), "run notes"),
    ]
    return page(f"yieldgate: {run}", head + figures + "".join(sections),
                scripts=("/static/plotly.min.js", "/static/app.js"))


def compare_page(result: Comparison, query: dict[str, str]) -> str:
    """A comparison's tables (`report.html.comparison_html`: the numbers of `yieldgate compare`) and both groups'
    plots (drawn by app.js from /api/compare/figures)."""
    groups: dict[str, str] = {k: query[k] for k in ("a", "b", "metric") if k in query}
    src = "/api/compare/figures?" + urlencode(groups)
    body = (f"<h1>Comparison</h1><p class=\"muted\">aligned on {escape(result.aligned_on)}; the same numbers as "
            f"<code>yieldgate compare</code> (JSON: <a href=\"/api/compare?{escape(urlencode(query))}\">here</a>)"
            f"</p>{comparison_html(result)}<h2>Plots</h2>"
            f'<div id="figures" data-kind="compare" data-src="{escape(src)}"><p class="note" id="loading">drawing...'
            "</p></div>")
    return page(f"yieldgate: {result.a} vs {result.b}", body, scripts=("/static/plotly.min.js", "/static/app.js"))


def error_page(message: str) -> str:
    return page("yieldgate: error", f'<h1>Not shown</h1><p class="error">{escape(message)}</p>' + notes_html(
        ["The runs page lists what the ledger holds."]))
