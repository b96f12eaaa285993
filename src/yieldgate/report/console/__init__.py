"""Console rendering shared by the CLI and the demo: one `render_<result>(result, console, ...)` per result, by
result family (runs, yields, compare, probe, gate, ingest, data, ledger), numbers formatted by `report.format.fmt`.
The CLI parses and picks `--json` or these; nothing here knows typer or the command line's flags."""

from __future__ import annotations

from yieldgate.report.console.campaign import (
    accuracy_lines,
    forecast_lines,
    ranking_tables,
    render_campaign,
    scaling_lines,
    transfer_lines,
    with_interval,
)
from yieldgate.report.console.compare import render_comparison, render_manifest_diff, render_report
from yieldgate.report.console.gate import (
    CHECK_RESULT,
    decision_record,
    policy_label,
    render_decision,
    render_plan,
    sizing_lines,
)
from yieldgate.report.console.lines import clean, evidence_lines, fmt, say
from yieldgate.report.console.runs import (
    TABLE_COLUMNS,
    duration,
    render_no_runs,
    render_removed,
    render_runs,
    render_show,
    render_tags,
    run_record,
    when,
    write_table,
)
from yieldgate.report.console.yields import render_forecast, render_yields

__all__ = [
    "clean",
    "evidence_lines",
    "fmt",
    "say",
    "render_campaign",
    "render_comparison",
    "render_forecast",
    "render_manifest_diff",
    "render_report",
    "render_yields",
    "render_decision",
    "render_plan",
    "with_interval",
    "ranking_tables",
    "accuracy_lines",
    "forecast_lines",
    "scaling_lines",
    "sizing_lines",
    "transfer_lines",
    "CHECK_RESULT",
    "decision_record",
    "policy_label",
    "TABLE_COLUMNS",
    "duration",
    "render_no_runs",
    "render_removed",
    "render_runs",
    "render_show",
    "render_tags",
    "run_record",
    "when",
    "write_table",
]
