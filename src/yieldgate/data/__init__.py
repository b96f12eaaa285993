"""Data: the built-in corpus, recipe resolution, sources on disk and their measured supply, dedup, pipeline audit,
the stream-duplicate counter, and a recipe's stream for a team's own training script.

`open_recipe` and `RecipeDataset` (which need torch) are imported on first use; `import yieldgate.data` loads
neither torch nor tokenizers."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["open_recipe", "RecipeDataset", "recipe_weights", "check_source"]

_HOMES = {
    "open_recipe": "torch_dataset",
    "RecipeDataset": "torch_dataset",
    "recipe_weights": "supply",
    "check_source": "sources",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'yieldgate.data' has no attribute {name!r}")
    try:
        home = importlib.import_module(f"yieldgate.data.{_HOMES[name]}")
    except ModuleNotFoundError as exc:
        from yieldgate.util.extras import missing_extra

        named = missing_extra(exc, f"yieldgate.data.{name}")
        if named is None:
            raise
        raise named from None
    return getattr(home, name)
