"""The dashboard's HTML pages: server-rendered tables around plots that `static/app.js` draws from the JSON API.

Every user string (run names, sources, event bodies, manifest values, error messages) passes through
`html.escape`, in text and in attribute values alike; the plots escape their own (`report/figures/`), and the
page script writes text with `textContent` only. No inline script anywhere: the Content-Security-Policy
(`app.CSP`) allows scripts from this server's own `/static/` only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly

from yieldgate._version import __version__
from yieldgate.analysis.compare import Comparison
from yieldgate.ledger import Ledger
from yieldgate.report.console import (
    CHECK_RESULT,
    accuracy_lines,
    evidence_lines,
    forecast_lines,
    policy_label,
    ranking_tables,
    when,
)
from yieldgate.report.html import CSS, RawCell, comparison_html, notes_html, table_html

__all__ = [
    "PLOTLY_JS",
    "page",
    "runs_page",
    "run_page",
    "compare_page",
    "error_page",
    "campaigns_page",
    "campaign_page",
    "decisions_page",
    "decision_page",
    "SMOOTHING",
]

PLOTLY_JS = f"/static/plotly-{plotly.__version__}.min.js"
"""Where the pages load plotly.js from: the installed package's bundle, its version in the address (cached for good)."""

SMOOTHING = (0.0, 0.6, 0.9, 0.99)
"""The throughput smoothing a run page offers (`report.figures.base.smoothed`: 0 draws tokens/s as logged)."""

EXTRA_CSS = """
nav { margin-bottom: 1rem; } nav a { margin-right: 1rem; }
.status { font-weight: bold; } .status-running { color: #0969da; } .status-finished { color: #1a7f37; }
.status-failed, .status-crashed, .status-killed { color: #cf222e; } .status-stale { color: #9a6700; }
#runs th { cursor: pointer; user-select: none; } #filter { padding: 0.3rem; width: 20rem; }
.plot { min-height: 420px; } .error { color: #cf222e; }
.check-pass { color: #1a7f37; } .check-fail { color: #cf222e; font-weight: bold; } .check-note { color: #777; }
details pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.8rem; }
"""


def page(title: str, body: str, *, scripts: tuple[str, ...] = (), preload: str | None = None) -> str:
    """A whole page: escaped title, the report's CSS, the body as given (already escaped), scripts from /static.
    `preload`: JSON the page's script will fetch, asked for at once (the server computes it while the browser
    loads plotly.js) instead of after the scripts ran."""
    tags = "".join(f'<script src="{escape(s)}" defer></script>' for s in scripts)  # drawn after the HTML shows
    if preload:
        # crossorigin="anonymous" is the mode of app.js's fetch (same-origin credentials): the browser reuses it.
        tags = f'<link rel="preload" href="{escape(preload)}" as="fetch" crossorigin="anonymous">' + tags
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        # No favicon: without this the browser asks for /favicon.ico, and a 404 is a console error.
        f'<title>{escape(title)}</title><link rel="icon" href="data:,"><style>{CSS}{EXTRA_CSS}</style>{tags}'
        "</head><body>"
        '<nav><a href="/">runs</a><a href="/campaigns">campaigns</a><a href="/decisions">decisions</a>'
        '<span class="muted">yieldgate serve '
        f"{escape(__version__)} &middot; read-only</span></nav>{body}</body></html>\n"
    )


def runs_page(location: str) -> str:
    """The runs table: filled, filtered, sorted and refreshed by app.js from /api/runs."""
    headers = "".join(
        f'<th data-key="{k}">{escape(label)}</th>'
        for k, label in (
            ("select", "compare"),
            ("name", "run"),
            ("status", "status"),
            ("tags", "tags"),
            ("tokens", "tokens"),
            ("steps", "steps"),
            ("last_eval", "last eval"),
            ("manifest_hash", "manifest"),
            ("updated_at", "updated (UTC)"),
        )
    )
    body = (
        f'<h1>Runs</h1><p class="muted">{escape(location)}</p>'
        '<p><input id="filter" type="search" placeholder="filter by name, status, tag or source" autofocus> '
        '<a id="compare-link" class="muted">select two runs to compare</a> <span id="count" class="muted">'
        "</span></p>"
        f'<table id="runs"><thead><tr>{headers}</tr></thead><tbody></tbody></table>'
    )
    return page("yieldgate: runs", body, scripts=("/static/app.js",))  # a table: no plotly.js to parse


def _when(ts: Any) -> str:
    return "-" if ts is None or pd.isna(ts) else datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _events_table(events: pd.DataFrame) -> str:
    if events.empty:
        return '<p class="note">No events recorded.</p>'
    rows = []
    for _, e in events.iterrows():
        span = "-".join(dict.fromkeys(str(int(s)) for s in (e["start_step"], e["end_step"]) if pd.notna(s))) or "-"
        body = e["body"] if isinstance(e["body"], dict) else {"body": e["body"]}
        rows.append(
            [
                e["kind"],
                body.get("cause", "-") if e["kind"] == "diagnosis" else "-",
                span,
                e["state"],
                body,
                _when(e["created_at"]),
            ]
        )
    return table_html(["kind", "cause", "steps", "state", "body", "recorded (UTC)"], rows, "events")


def _fields_table(body: dict[str, Any], what: str) -> str:
    if not body:
        return f'<p class="note">No {escape(what)} recorded.</p>'
    lines = evidence_lines(body, limit=10_000)
    return table_html(["field", "value"], [list(line.partition(": ")[::2]) for line in lines], what)


def run_page(ledger: Ledger, run: str, *, metric: str = "val/loss", smooth: float = 0.0) -> str:
    """One run: status, plots (drawn and kept live by app.js), events and diagnoses, manifest and run notes."""
    info = ledger.run_info(run)
    manifest = ledger.manifest(run)
    status = str(info["status"])
    head = (
        f'<h1>{escape(run)}</h1><p>status <span id="status" class="status status-{escape(status)}">'
        f'{escape(status)}</span> &middot; <span id="steps">{int(info["steps"]):,}</span> steps &middot; '
        f'source {escape(str(info["source"]))} &middot; <span id="live" class="muted">live: polling</span></p>'
    )
    src = "/api/run/figures?" + urlencode({"name": run, "metric": metric, "smooth": smooth})
    options = "".join(f'<option value="{w}"{" selected" if w == smooth else ""}>{w:g}</option>' for w in SMOOTHING)
    figures = (
        '<p><label>throughput smoothing (moving-average weight) <select id="smooth">'
        f"{options}</select></label></p>"
        f'<div id="figures" data-kind="run" data-run="{escape(run)}" data-metric="{escape(metric)}" '
        f'data-src="{escape(src)}">'
        '<p class="note" id="loading">drawing...</p></div>'
    )
    sections = [
        "<h2>Events and diagnoses</h2>",
        '<p class="note">Diagnoses are also drawn as shaded spans on the loss-against-tokens plot.</p>',
        _events_table(ledger.events(run)),
        "<h2>Manifest</h2>",
        _fields_table(manifest.model_dump(mode="json") if manifest is not None else {}, "manifest"),
        "<h2>Run notes</h2>",
        '<p class="note">What the writer recorded about how values were measured (MFU formula, devices, imports).</p>',
        _fields_table(ledger.meta(run), "run notes"),
    ]
    return page(
        f"yieldgate: {run}", head + figures + "".join(sections), scripts=(PLOTLY_JS, "/static/app.js"), preload=src
    )


def compare_page(result: Comparison, query: dict[str, str], *, per: str, note: str | None) -> str:
    """A comparison's tables (`report.html.comparison_html`: the numbers of `yieldgate compare`, per byte when the
    tokenizers differ, said in `note`) and both groups' plots (drawn by app.js from /api/compare/figures)."""
    groups: dict[str, str] = {k: query[k] for k in ("a", "b", "metric") if k in query}
    src = "/api/compare/figures?" + urlencode({**groups, "per": per})
    command = "yieldgate compare" + (" --per byte" if per == "byte" else "")
    body = (
        f'<h1>Comparison</h1><p class="muted">aligned on {escape(result.aligned_on)}; the same numbers as '
        f'<code>{command}</code> (JSON: <a href="/api/compare?{escape(urlencode({**query, "per": per}))}">'
        f"here</a>)</p>{notes_html([note] if note else [])}"
        f"{comparison_html(result, amount='bytes' if per == 'byte' else 'tokens')}<h2>Plots</h2>"
        f'<div id="figures" data-kind="compare" data-src="{escape(src)}"><p class="note" id="loading">drawing...'
        "</p></div>"
    )
    return page(f"yieldgate: {result.a} vs {result.b}", body, scripts=(PLOTLY_JS, "/static/app.js"))


def error_page(message: str) -> str:
    return page(
        "yieldgate: error",
        f'<h1>Not shown</h1><p class="error">{escape(message)}</p>'
        + notes_html(["The runs page lists what the ledger holds."]),
    )


# -- campaigns and gate decisions: what `yieldgate campaign` and `yieldgate decisions` print, as stored --------------

_JSON_LINK = '<p class="muted">as JSON: <a href="{href}">{text}</a></p>'


def _json_details(label: str, value: Any) -> str:
    """The whole stored body, one click away."""
    return (
        f"<details><summary>{escape(label)}</summary><pre>{escape(json.dumps(value, indent=2, sort_keys=True))}"
        "</pre></details>"
    )


def _link(path: str, text: str, **query: Any) -> RawCell:
    return RawCell(f'<td><a href="{escape(path + "?" + urlencode(query))}">{escape(text)}</a></td>')


def campaigns_page(records: list[dict[str, Any]]) -> str:
    """Every campaign of the ledger (`Ledger.campaign` records), oldest first: recipes, budgets, probes by status."""
    rows = []
    for r in records:
        summary = r["summary"] or {}
        rows.append(
            [
                _link("/campaign", r["name"], name=r["name"]),
                len(r["spec"].get("recipes", {})),
                ", ".join(f"{int(b):,}" for b in summary.get("budgets", [])) or "-",
                ", ".join(f"{n} {s}" for s, n in sorted(summary.get("probes", {}).items())) or "not summarised",
                r["spec_hash"][:12],
                when(r["updated_at"]),
            ]
        )
    table = (
        table_html(["campaign", "recipes", "budgets (tokens)", "probes", "spec", "updated (UTC)"], rows, "campaigns")
        if rows
        else notes_html(["No campaigns in this ledger: `yieldgate probe CAMPAIGN.yaml` runs one."])
    )
    return page(
        "yieldgate: campaigns", "<h1>Campaigns</h1>" + _JSON_LINK.format(href="/api/campaigns", text="names") + table
    )


def campaign_page(record: dict[str, Any], decisions: list[dict[str, Any]]) -> str:
    """One campaign as `yieldgate campaign NAME` prints it (`report.console`'s tables and lines, from the summary
    `yieldgate probe` stored): rankings per budget with their ties, decision accuracy, forecasts, notes; then the
    gate decisions on its recipes and its spec."""
    name, summary = record["name"], record["summary"]
    parts = [
        f"<h1>Campaign {escape(name)}</h1>",
        _JSON_LINK.format(href=escape("/api/campaign?" + urlencode({"name": name})), text="the stored record"),
    ]
    if summary is None:
        parts.append(notes_html([f"campaign {name!r} has no stored results yet; run `yieldgate probe` on its file"]))
    else:
        probes = ", ".join(f"{n} {s}" for s, n in sorted(summary["probes"].items()))
        parts.append(f"<p>probes: {escape(probes)} &middot; level {summary['level']:.0%}</p>")
        parts.append(
            "<h2>Rankings</h2>"
            + notes_html(
                [
                    "Best first, with the interval over seeds; ties: recipes the "
                    "seeds do not tell apart (paired by seed)."
                ]
            )
        )
        for title, headers, rows in ranking_tables(summary):
            parts.append(f"<h3>{escape(title)}</h3>" + table_html(headers, rows, "ranking"))
        accuracy = accuracy_lines(summary)
        if accuracy:
            parts.append("<h2>Decision accuracy</h2>" + notes_html(accuracy))
        forecasts = forecast_lines(summary)
        if forecasts:
            parts.append("<h2>Forecasts</h2>" + notes_html(forecasts))
        if summary["failed"]:
            parts.append("<h2>Failed probes</h2>" + table_html(["run", "error"], list(summary["failed"].items())))
        parts.append(notes_html([f"note: {n}" for n in summary["notes"]]))
    if decisions:
        parts.append("<h2>Gate decisions on its recipes</h2>" + _decisions_table(decisions))
    parts.append("<h2>Spec</h2>" + _json_details("the campaign file as stored", record["spec"]))
    return page(f"yieldgate: campaign {name}", "".join(parts))


def _decisions_table(rows: list[dict[str, Any]]) -> str:
    return table_html(
        ["id", "decided (UTC)", "target", "stage", "decision", "policy", "rationale"],
        [
            [
                _link("/decision", f"#{r['id']}", id=r["id"]),
                r["created_at"][:16].replace("T", " "),
                r["target"],
                r["stage"] or "-",
                _verdict(r["decision"]),
                policy_label(r),
                r["rationale"],
            ]
            for r in rows
        ],
        "decisions",
    )


def _verdict(decision: str) -> RawCell:
    # The ledger stores only approve / hold / reject (`Ledger.add_decision` refuses anything else).
    return RawCell(f'<td class="{escape(decision)}">{escape(decision)}</td>')


def decisions_page(rows: list[dict[str, Any]], target: str | None) -> str:
    """The audit trail (`yieldgate decisions [TARGET]`), oldest first; each row opens its checks and evidence."""
    query = {"target": target} if target else {}
    head = "<h1>Gate decisions</h1>" + (f"<p>on <code>{escape(target)}</code></p>" if target else "")
    body = _decisions_table(rows) if rows else notes_html(["No decisions" + (f" on {target}" if target else "") + "."])
    return page(
        "yieldgate: decisions",
        head
        + _JSON_LINK.format(
            href=escape("/api/decisions" + ("?" + urlencode(query) if query else "")), text="the audit trail"
        )
        + body,
    )


DECISION_FIELDS = ("checks", "what_to_run_next", "axis", "reached_stage", "policy_name", "policy_version")
"""What `gate.gate.record` adds to a decision's evidence beside the numbers: shown in their own places."""


def decision_page(row: dict[str, Any]) -> str:
    """One gate decision as stored (`gate.gate.record`): rationale, each check (as `yieldgate gate` prints them),
    what to run next, the evidence summarised field by field and the runs it cites; the full evidence and the
    policy as JSON one click away."""
    evidence = row["evidence"]
    checks = [
        [
            c["name"],
            RawCell(f'<td class="check-{CHECK_RESULT[c["passed"]].lower()}">{CHECK_RESULT[c["passed"]]}</td>'),
            c["detail"],
        ]
        for c in evidence.get("checks", [])
    ]
    facts = [
        ["target", row["target"]],
        ["decision", _verdict(row["decision"])],
        ["stage decided", row["stage"] or "-"],
        ["stage reached", evidence.get("reached_stage") or "-"],
        ["decided on", evidence.get("axis", "-")],
        ["policy", policy_label(row)],
        ["decided (UTC)", row["created_at"].replace("T", " ")],
    ]
    runs = [r for r in evidence.get("runs", []) if isinstance(r, str)]
    numbers = {k: v for k, v in evidence.items() if k not in (*DECISION_FIELDS, "runs")}
    parts = [
        f"<h1>Decision #{int(row['id'])}: {escape(row['decision'])}</h1>",
        f'<p class="verdict">{escape(row["rationale"])}</p>',
        _JSON_LINK.format(
            href=escape("/api/decisions?" + urlencode({"target": row["target"]})), text="the decisions on this target"
        ),
        table_html(["field", "value"], facts, "facts"),
    ]
    if checks:
        parts.append("<h2>Checks</h2>" + table_html(["check", "result", "detail"], checks, "checks"))
    if evidence.get("what_to_run_next"):
        parts.append(f"<h2>What to run next</h2><p>{escape(evidence['what_to_run_next'])}</p>")
    parts.append(
        "<h2>Evidence</h2>"
        + table_html(
            ["field", "value"],
            [list(line.partition(": ")[::2]) for line in evidence_lines(numbers, limit=200)],
            "evidence",
        )
    )
    if runs:
        parts.append(
            "<h3>Runs</h3><p>"
            + ", ".join(f'<a href="{escape("/run?" + urlencode({"name": r}))}">{escape(r)}</a>' for r in runs)
            + "</p>"
        )
    parts.append(
        _json_details("the full evidence (JSON)", evidence) + _json_details("the policy (JSON)", row["policy"])
    )
    return page(f"yieldgate: decision #{int(row['id'])}", "".join(parts))
