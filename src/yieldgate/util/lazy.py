"""Modules loaded at their first use, for a command line that starts fast.

pandas takes ~0.4 s to import: more than half of what `yieldgate runs` may take in all (< 1 s over 10,000 runs,
interpreter start included). The ledger builds DataFrames in most of its methods but not in the ones that list
runs, so it binds pandas through `module("pandas")`: a stand-in whose first attribute access imports the module
(through the import system, which is thread-safe) and takes over its names. Nothing is put in `sys.modules`, so
no other code's `import pandas` is changed.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["module"]


class _OnFirstUse(ModuleType):
    def __getattr__(self, attr: str) -> Any:  # only for names not taken over yet
        real = importlib.import_module(self.__name__)
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)


def module(name: str) -> ModuleType:
    """A stand-in for the module `name` that imports it at its first attribute access."""
    return _OnFirstUse(name)
