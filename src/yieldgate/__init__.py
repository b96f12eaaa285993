"""yieldgate: how much a training run learns for what it spends, and whether the next stage has earned it."""

from __future__ import annotations

__version__ = "0.1.0"

from yieldgate.errors import (  # noqa: E402
    InputError,
    LedgerError,
    ManifestError,
    RunNotFound,
    SchemaVersionError,
    YieldgateError,
)
from yieldgate.ledger import EvalRecord, Ledger  # noqa: E402
from yieldgate.manifest import Manifest, load_manifest  # noqa: E402

__all__ = [
    "__version__",
    "Ledger",
    "EvalRecord",
    "Manifest",
    "load_manifest",
    "YieldgateError",
    "InputError",
    "ManifestError",
    "LedgerError",
    "SchemaVersionError",
    "RunNotFound",
]
