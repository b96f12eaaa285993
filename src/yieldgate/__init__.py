"""yieldgate: how much a training run learns for what it spends, and whether the next stage has earned it.

The public API: `Tracker` (in the training loop), `Ledger` (the store), and one function per command
(`yields`, `compare`, `forecast`, `diagnose`, `gate`, `import_run`, `export_run`, `report`, `runs`, `remove_runs`,
`rename_run`, `tag_runs`, `untag_runs`, `note_run`: see
`yieldgate.api`). `Tracker` imports torch when first used, so `import yieldgate` does not.
"""

from __future__ import annotations

__version__ = "0.1.0"

from yieldgate.api import (  # noqa: E402
    compare,
    diagnose,
    export_run,
    forecast,
    gate,
    import_run,
    note_run,
    plan,
    remove_runs,
    rename_run,
    report,
    runs,
    tag_runs,
    untag_runs,
    yields,
)
from yieldgate.errors import (  # noqa: E402
    BlockDamaged,
    InputError,
    LedgerError,
    LedgerRefused,
    ManifestError,
    RunInUse,
    RunNotFound,
    RunReferenced,
    SchemaVersionError,
    YieldgateError,
)
from yieldgate.ledger import EvalRecord, Ledger  # noqa: E402
from yieldgate.ledger_check import CheckResult, check_ledger  # noqa: E402
from yieldgate.ledger_copy import CopyResult, copy_ledger  # noqa: E402
from yieldgate.manifest import Manifest, load_manifest  # noqa: E402

__all__ = [
    "__version__",
    "Tracker",
    "TrackerConfig",
    "Ledger",
    "EvalRecord",
    "check_ledger",
    "CheckResult",
    "copy_ledger",
    "CopyResult",
    "Manifest",
    "load_manifest",
    "YieldgateError",
    "InputError",
    "ManifestError",
    "LedgerError",
    "LedgerRefused",
    "SchemaVersionError",
    "RunNotFound",
    "RunInUse",
    "RunReferenced",
    "runs",
    "remove_runs",
    "rename_run",
    "tag_runs",
    "untag_runs",
    "note_run",
    "yields",
    "compare",
    "forecast",
    "diagnose",
    "gate",
    "plan",
    "import_run",
    "export_run",
    "report",
    "BlockDamaged",
]


def __getattr__(name: str) -> object:
    """`Tracker` and `TrackerConfig` on first use: they import torch, which `import yieldgate` alone does not."""
    if name in ("Tracker", "TrackerConfig"):
        from yieldgate import track

        return getattr(track, name)
    raise AttributeError(f"module 'yieldgate' has no attribute {name!r}")
