"""Modules loaded at their first use, for a command line that starts fast.

pandas takes ~0.4 s to import: more than half of what `yieldgate runs` may take in all (< 1 s over 10,000 runs,
interpreter start included). The ledger builds DataFrames in most of its methods but not in the ones that list
runs, so it binds pandas through `module("pandas")`: the module's code runs at its first attribute access
(`importlib.util.LazyLoader`, the standard library's recipe), once, for the whole process.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["module"]


def module(name: str) -> ModuleType:
    """The module `name`, imported already or loaded at its first attribute access. Any later `import name`
    elsewhere loads it at once (it sits in `sys.modules`), so there is never a second copy."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    lazy = importlib.util.module_from_spec(spec)
    sys.modules[name] = lazy
    spec.loader.exec_module(lazy)
    return lazy
