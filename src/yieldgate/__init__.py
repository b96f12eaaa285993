"""yieldgate: how much a training run learns for what it spends, and whether the next stage has earned it."""

from __future__ import annotations

__version__ = "0.1.0"

from yieldgate.errors import (  # noqa: E402
    InputError,
    LedgerError,
    BlockDamaged,
    ManifestError,
    RunNotFound,
    SchemaVersionError,
    YieldgateError,
)
from yieldgate.ledger import EvalRecord, Ledger  # noqa: E402
from yieldgate.ledger_check import CheckResult, check_ledger  # noqa: E402
from yieldgate.manifest import Manifest, load_manifest  # noqa: E402

__all__ = [
    "__version__",
    "Ledger",
    "EvalRecord",
    "check_ledger",
    "CheckResult",
    "Manifest",
    "load_manifest",
    "YieldgateError",
    "InputError",
    "ManifestError",
    "LedgerError",
    "SchemaVersionError",
    "RunNotFound",
    "BlockDamaged",
]
