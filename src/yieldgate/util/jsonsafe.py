"""NaN and infinity in JSON, which has neither: the one policy.

What is written for people and programs to read (`yieldgate ... --json`, the dashboard's /api) carries null for
NaN and ±inf, so that every JSON parser reads it. What is stored to be read back (a ledger's bodies: evidence,
meta) carries them as the text `nan`, `inf`, `-inf` (`as_text=True`), so that the value is not lost. Either way
numpy scalars become Python numbers, tuples lists, and nothing non-finite reaches `json.dumps` (which would write
the invalid `NaN`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["json_safe"]


def json_safe(value: Any, *, as_text: bool = False) -> Any:
    """`value` made JSON-safe through mappings, lists and tuples: NaN and ±inf as None, or with `as_text` as
    `str(value)` (`nan`, `inf`, `-inf`, and mapping keys as text too); numpy scalars (anything with `.item()`) as
    Python values."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value) if as_text else None
    if isinstance(value, Mapping):
        return {(str(k) if as_text else k): json_safe(v, as_text=as_text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, as_text=as_text) for v in value]
    return value
