"""Console rendering shared by the CLI and the demo: one `render_<result>(result, console, ...)` per result, in
modules by result family (runs, yields, compare, probe, campaign, gate, data, ingest, ledger), numbers formatted by
`report.format.fmt`. The CLI parses its arguments and prints either `--json` or one of these; nothing here knows
typer or the command line beyond the words it prints."""

from __future__ import annotations

from yieldgate.report.console.attribution import render_attribution
from yieldgate.report.console.campaign import (
    accuracy_lines,
    forecast_lines,
    ranking_tables,
    render_campaign,
    render_campaigns,
    scaling_lines,
    transfer_lines,
    with_interval,
)
from yieldgate.report.console.compare import (
    render_comparison,
    render_manifest_check,
    render_manifest_diff,
    render_pipelines,
    render_report,
)
from yieldgate.report.console.data import render_audit, render_audit_pair, render_dedup
from yieldgate.report.console.gate import (
    CHECK_RESULT,
    decision_record,
    policy_label,
    render_decision,
    render_decisions,
    render_plan,
    sizing_lines,
)
from yieldgate.report.console.ingest import render_explanations, render_export, render_imports
from yieldgate.report.console.ledger import render_check, render_copy, render_merge
from yieldgate.report.console.lines import clean, evidence_lines, fmt, say
from yieldgate.report.console.probe import (
    CampaignProgress,
    render_batch_check,
    render_campaign_probes,
    render_campaign_run,
    render_campaign_status,
    render_diagnosis,
    render_training,
)
from yieldgate.report.console.progress import WorkProgress
from yieldgate.report.console.results import render_proposals, render_results
from yieldgate.report.console.runs import (
    TABLE_COLUMNS,
    duration,
    render_no_runs,
    render_removed,
    render_runs,
    render_show,
    render_tags,
    run_record,
    steps_taken,
    when,
    write_table,
)
from yieldgate.report.console.waste import render_waste
from yieldgate.report.console.yields import render_forecast, render_yields

__all__ = [
    "render_proposals",
    "render_results",
    # shared pieces
    "clean",
    "evidence_lines",
    "fmt",
    "say",
    # runs
    "TABLE_COLUMNS",
    "duration",
    "run_record",
    "steps_taken",
    "when",
    "write_table",
    "render_runs",
    "render_no_runs",
    "render_removed",
    "render_tags",
    "render_show",
    # yields and comparisons
    "render_waste",
    "render_yields",
    "render_forecast",
    "render_comparison",
    "render_manifest_check",
    "render_manifest_diff",
    "render_pipelines",
    "render_report",
    # probes and campaigns
    "render_diagnosis",
    "render_training",
    "render_batch_check",
    "render_campaign_run",
    "render_campaign_probes",
    "render_campaign_status",
    "CampaignProgress",
    "WorkProgress",
    "render_campaign",
    "render_campaigns",
    "render_attribution",
    "with_interval",
    "ranking_tables",
    "accuracy_lines",
    "forecast_lines",
    "scaling_lines",
    "transfer_lines",
    # the gate
    "CHECK_RESULT",
    "decision_record",
    "policy_label",
    "render_decision",
    "render_decisions",
    "render_plan",
    "sizing_lines",
    # data, ingest, whole ledgers
    "render_dedup",
    "render_audit",
    "render_audit_pair",
    "render_explanations",
    "render_imports",
    "render_export",
    "render_check",
    "render_merge",
    "render_copy",
]
