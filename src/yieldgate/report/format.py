"""The one number formatter of the console, the HTML report and the notebook: `fmt`."""

from __future__ import annotations

from typing import Any

from yieldgate.util.jsonsafe import json_safe

__all__ = ["fmt"]


def fmt(value: Any, digits: int = 4) -> str:
    """A value as a reader sees it: `-` for None, NaN and ±inf; whole numbers (and any of 10,000 or more) with
    thousands separators and no decimals; other floats to `digits` significant digits; booleans as `true`/`false`;
    anything else as `str`."""
    value = json_safe(value)
    if value is None:
        return "-"
    if isinstance(value, bool):  # before int: True is an int to Python, not to a reader
        return str(value).lower()
    if isinstance(value, float):
        if value.is_integer() or abs(value) >= 1e4:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
