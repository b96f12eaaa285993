"""The Python API: one function per `yieldgate` command, each returning a typed result with `to_dict()`.

Each takes the ledger as a `Ledger`, a path or URL, or nothing (`$YIELDGATE_LEDGER`, else `./yieldgate.db`), opens
it for the call (read-only where the command only reads) and calls the library function the CLI calls, so
Python and the command line give the same numbers:

    from yieldgate import yields, compare, diagnose
    report = yields("bs64-fp16", ledger="runs.db")
    print(compare("bs64-seed*", "bs256-seed*", at="time").verdict)

Errors are `YieldgateError`s that speak of the arguments (`metric must be ...`).

The functions live in this package's modules by command family (`_ledger`, `_analysis`, `_gate`, `_io`,
`_probes`, `_data`); import them from here.
"""

from __future__ import annotations

from yieldgate.api._analysis import (
    compare,
    diagnose,
    forecast,
    report,
    waste,
    yields,
)
from yieldgate.api._common import (
    LedgerArg as LedgerArg,
)
from yieldgate.api._common import (
    LocationArg as LocationArg,
)
from yieldgate.api._data import (
    audit,
    audit_pair,
    dedup,
)
from yieldgate.api._gate import (
    decisions,
    gate,
    plan,
)
from yieldgate.api._io import (
    explain_import,
    export_run,
    import_results,
    import_run,
    manifest_diff,
    validate_manifest,
)
from yieldgate.api._ledger import (
    RemovedRun,
    RunListing,
    check,
    copy_ledger,
    list_runs,
    matching_runs,
    merge,
    note_run,
    remove_runs,
    rename_run,
    runs,
    show,
    tag_runs,
    untag_runs,
)
from yieldgate.api._probes import (
    CampaignDisplay as CampaignDisplay,
)
from yieldgate.api._probes import (
    batch_check,
    campaign,
    campaign_attribution,
    campaign_progress,
    campaign_proposals,
    campaigns,
    probe,
    train,
)

__all__ = [
    "runs",
    "list_runs",
    "RunListing",
    "matching_runs",
    "remove_runs",
    "rename_run",
    "tag_runs",
    "untag_runs",
    "note_run",
    "RemovedRun",
    "show",
    "yields",
    "waste",
    "compare",
    "forecast",
    "diagnose",
    "gate",
    "plan",
    "import_run",
    "explain_import",
    "import_results",
    "campaign_proposals",
    "campaign_progress",
    "campaign_attribution",
    "export_run",
    "report",
    "decisions",
    "campaigns",
    "campaign",
    "check",
    "merge",
    "copy_ledger",
    "validate_manifest",
    "manifest_diff",
    "train",
    "batch_check",
    "probe",
    "dedup",
    "audit",
    "audit_pair",
]
