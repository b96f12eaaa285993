"""yieldgate: how much a training run learns for what it spends, and whether the next stage has earned it.

The public API: `Tracker` (in the training loop), `Ledger` (the store), and one function per command
(`yields`, `compare`, `forecast`, `diagnose`, `gate`, `import_run`, `export_run`, `report`, `runs`, `remove_runs`,
`rename_run`, `tag_runs`, `untag_runs`, `note_run`, `waste`: see
`yieldgate.api`). Each is imported when first used: `import yieldgate` alone loads neither pandas nor torch.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from yieldgate._version import __version__
from yieldgate.errors import (
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

if TYPE_CHECKING:
    from yieldgate.api import (
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
        waste,
        yields,
    )
    from yieldgate.ledger import EvalRecord, Ledger
    from yieldgate.ledger.check import CheckResult, check_ledger
    from yieldgate.ledger.copy import CopyResult, copy_ledger
    from yieldgate.manifest import Manifest, load_manifest
    from yieldgate.track import Tracker, TrackerConfig

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
    "waste",
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


# Where each public name lives. They are imported on first use: a command such as `yieldgate runs` needs neither
# pandas nor pydantic, and `Tracker` imports torch.
_HOMES = {
    **dict.fromkeys(
        (
            "compare",
            "diagnose",
            "export_run",
            "forecast",
            "gate",
            "import_run",
            "note_run",
            "plan",
            "remove_runs",
            "rename_run",
            "report",
            "runs",
            "tag_runs",
            "untag_runs",
            "waste",
            "yields",
        ),
        "api",
    ),
    "Ledger": "ledger",
    "EvalRecord": "ledger",
    "CheckResult": "ledger.check",
    "check_ledger": "ledger.check",
    "CopyResult": "ledger.copy",
    "copy_ledger": "ledger.copy",
    "Manifest": "manifest",
    "load_manifest": "manifest",
    "Tracker": "track",
    "TrackerConfig": "track",
}


def _show_results_in_notebooks() -> None:
    """In a running IPython shell (Jupyter), results of `compare`, `yields`, `diagnose` and `forecast` are shown as
    the report draws them: the report registers its renderers with the shell (`report.notebook.register`). Outside
    one, nothing is imported."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "display_formatter", None) is not None:
        from yieldgate.report.notebook import register

        register(shell)


_show_results_in_notebooks()


class _Package(types.ModuleType):
    """The package, whose public names are functions: `yieldgate.report` stays the API's `report` after the
    `yieldgate.report` subpackage is imported. (The import system sets a subpackage as an attribute of its parent
    when it loads it, which shadowed the function: `yieldgate.report(...)` raised "module is not callable". The
    subpackage is reached through `from yieldgate.report import ...`, which reads `sys.modules`.)"""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    """The public names of `_HOMES`, imported on first use."""
    if name in _HOMES:
        import importlib

        try:
            home = importlib.import_module(f"yieldgate.{_HOMES[name]}")
        except ModuleNotFoundError as exc:
            from yieldgate.util.extras import missing_extra

            named = missing_extra(exc, f"yieldgate.{name}")
            if named is None:
                raise
            raise named from None
        return getattr(home, name)
    raise AttributeError(f"module 'yieldgate' has no attribute {name!r}")
