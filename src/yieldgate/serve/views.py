"""The dashboard's HTML pages: server-rendered tables around plots that `static/app.js` draws from the JSON API.

The pages are the templates under `report/templates/dashboard/`, rendered through the report's environment
(`report.jinja.ENV`, autoescape): every user string (run names, sources, event bodies, manifest values, error
messages) is escaped, in text and in attribute values alike; the plots escape their own (`report/figures/`), and
the page script writes text with `textContent` only. No inline script anywhere: the Content-Security-Policy
(`app.CSP`) allows scripts from this server's own `/static/` only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly
from markupsafe import Markup

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
    steps_taken,
    when,
)
from yieldgate.report.html import CSS, comparison_view
from yieldgate.report.jinja import Cell, Table, render, table

__all__ = [
    "PLOTLY_JS",
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


def _page(template: str, *, scripts: tuple[str, ...] = (), preload: str | None = None, **values: Any) -> str:
    """`report/templates/dashboard/<template>` in the dashboard's frame (`page.html`): the report's CSS, the nav bar,
    `scripts` from /static. `preload`: JSON the page's script will fetch, asked for at once (the server computes it
    while the browser loads plotly.js) instead of after the scripts ran."""
    return render(
        f"dashboard/{template}",
        scripts=scripts,
        preload=preload,
        version=__version__,
        css=Markup(CSS + EXTRA_CSS),  # safe as HTML: the report's style sheet and this module's, no user text
        **values,
    )


RUN_COLUMNS = (
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
"""The runs table's columns: the key app.js fills each from (/api/runs) and its heading."""


def runs_page(location: str) -> str:
    """The runs table: filled, filtered, sorted and refreshed by app.js from /api/runs."""
    return _page("runs.html", scripts=("/static/app.js",), location=location, columns=RUN_COLUMNS)  # no plotly.js


def _when(ts: Any) -> str:
    return "-" if ts is None or pd.isna(ts) else datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _events_table(events: pd.DataFrame) -> Table | None:
    if events.empty:
        return None
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
    return table(["kind", "cause", "steps", "state", "body", "recorded (UTC)"], rows, "events")


def _fields(body: dict[str, Any], what: str, limit: int = 10_000) -> Table:
    """A stored body field by field (`evidence_lines`), one row each."""
    lines = evidence_lines(body, limit=limit)
    return table(["field", "value"], [list(line.partition(": ")[::2]) for line in lines], what)


def run_page(ledger: Ledger, run: str, *, metric: str = "val/loss", smooth: float = 0.0) -> str:
    """One run: status, plots (drawn and kept live by app.js), events and diagnoses, manifest and run notes."""
    info, manifest, meta = ledger.run_info(run), ledger.manifest(run), ledger.meta(run)
    src = "/api/run/figures?" + urlencode({"name": run, "metric": metric, "smooth": smooth})
    return _page(
        "run.html",
        scripts=(PLOTLY_JS, "/static/app.js"),
        preload=src,
        run=run,
        status=str(info["status"]),
        steps=f"{steps_taken(info) or 0:,}",  # the last step, as app.js updates it
        source=str(info["source"]),
        smoothing=SMOOTHING,
        smooth=smooth,
        metric=metric,
        src=src,
        events=_events_table(ledger.events(run)),
        manifest=_fields(manifest.model_dump(mode="json"), "manifest") if manifest is not None else None,
        notes=_fields(meta, "run notes") if meta else None,
    )


def compare_page(result: Comparison, query: dict[str, str], *, per: str, note: str | None) -> str:
    """A comparison's tables (`report.html.comparison_view`: the numbers of `yieldgate compare`, per byte when the
    tokenizers differ, said in `note`) and both groups' plots (drawn by app.js from /api/compare/figures)."""
    groups: dict[str, str] = {k: query[k] for k in ("a", "b", "metric") if k in query}
    return _page(
        "compare.html",
        scripts=(PLOTLY_JS, "/static/app.js"),
        comparison=comparison_view(result, amount="bytes" if per == "byte" else "tokens"),
        aligned_on=result.aligned_on,
        command="yieldgate compare" + (" --per byte" if per == "byte" else ""),
        json_href="/api/compare?" + urlencode({**query, "per": per}),
        notes=[note] if note else [],
        src="/api/compare/figures?" + urlencode({**groups, "per": per}),
    )


def error_page(message: str) -> str:
    return _page("error.html", message=message)


# -- campaigns and gate decisions: what `yieldgate campaign` and `yieldgate decisions` print, as stored --------------


def _link(path: str, text: str, **query: Any) -> Cell:
    return Cell(text, href=path + "?" + urlencode(query))


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
    headers = ["campaign", "recipes", "budgets (tokens)", "probes", "spec", "updated (UTC)"]
    return _page("campaigns.html", campaigns=table(headers, rows, "campaigns") if rows else None)


def campaign_page(record: dict[str, Any], decisions: list[dict[str, Any]]) -> str:
    """One campaign as `yieldgate campaign NAME` prints it (`report.console`'s tables and lines, from the summary
    `yieldgate probe` stored): rankings per budget with their ties, decision accuracy, forecasts, notes; then the
    gate decisions on its recipes and its spec."""
    name, summary = record["name"], record["summary"]
    values: dict[str, Any] = {
        "summary": summary,
        "notes": [f"campaign {name!r} has no stored results yet; run `yieldgate probe` on its file"],
    }
    if summary is not None and summary.get("kind") == "results":  # imported results: its lines, no probe tables
        from yieldgate.report.console.results import results_lines

        values.update(
            probes=f"{summary['runs']:,} imported runs",
            level=f"{summary['level']:.0%}",
            rankings=[],
            accuracy=results_lines(summary),
            forecasts=[],
            failed=None,
            notes=[],
        )
    elif summary is not None:
        values.update(
            probes=", ".join(f"{n} {s}" for s, n in sorted(summary["probes"].items())),
            level=f"{summary['level']:.0%}",
            rankings=[(title, table(headers, rows, "ranking")) for title, headers, rows in ranking_tables(summary)],
            accuracy=accuracy_lines(summary),
            forecasts=forecast_lines(summary),
            failed=table(["run", "error"], list(summary["failed"].items())) if summary["failed"] else None,
            notes=[f"note: {n}" for n in summary["notes"]],
        )
    return _page(
        "campaign.html",
        name=name,
        json_href="/api/campaign?" + urlencode({"name": name}),
        decisions=_decisions_table(decisions) if decisions else None,
        spec=record["spec"],
        **values,
    )


def _decisions_table(rows: list[dict[str, Any]]) -> Table:
    return table(
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


def _verdict(decision: str) -> Cell:
    """approve, hold or reject (`Ledger.add_decision` refuses anything else), styled by the report's CSS."""
    return Cell(decision, cls=decision)


def decisions_page(rows: list[dict[str, Any]], target: str | None) -> str:
    """The audit trail (`yieldgate decisions [TARGET]`), oldest first; each row opens its checks and evidence."""
    query = {"target": target} if target else {}
    return _page(
        "decisions.html",
        target=target,
        json_href="/api/decisions" + ("?" + urlencode(query) if query else ""),
        decisions=_decisions_table(rows) if rows else None,
    )


DECISION_FIELDS = ("checks", "what_to_run_next", "axis", "reached_stage", "policy_name", "policy_version")
"""What `gate.gate.record` adds to a decision's evidence beside the numbers: shown in their own places."""


def decision_page(row: dict[str, Any]) -> str:
    """One gate decision as stored (`gate.gate.record`): rationale, each check (as `yieldgate gate` prints them),
    what to run next, the evidence summarised field by field and the runs it cites; the full evidence and the
    policy as JSON one click away."""
    evidence = row["evidence"]
    checks = [
        [c["name"], Cell(CHECK_RESULT[c["passed"]], cls=f"check-{CHECK_RESULT[c['passed']].lower()}"), c["detail"]]
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
    numbers = {k: v for k, v in evidence.items() if k not in (*DECISION_FIELDS, "runs")}
    return _page(
        "decision.html",
        id=int(row["id"]),
        decision=row["decision"],
        rationale=row["rationale"],
        json_href="/api/decisions?" + urlencode({"target": row["target"]}),
        facts=table(["field", "value"], facts, "facts"),
        checks=table(["check", "result", "detail"], checks, "checks") if checks else None,
        next=evidence.get("what_to_run_next"),
        evidence=_fields(numbers, "evidence", limit=200),
        runs=[_link("/run", r, name=r) for r in evidence.get("runs", []) if isinstance(r, str)],
        full_evidence=evidence,
        policy=row["policy"],
    )
