"""The one number formatter of the console, the HTML report and the notebook (`fmt`), and a stored body as
`name: value` lines for a table cell (`evidence_lines`), which both the console and the report draw."""

from __future__ import annotations

from typing import Any

from yieldgate.util.jsonsafe import json_safe

__all__ = ["evidence_lines", "fmt"]


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


def evidence_lines(body: Any, limit: int = 10) -> list[str]:
    """A stored body (a diagnosis's or a decision's evidence) as `name: value` lines for a table cell:
    nested fields dotted, numbers formatted, a long list counted; past `limit` lines, how many more."""
    lines: list[str] = []

    def walk(name: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, v in value.items():
                walk(f"{name}.{key}" if name else str(key), v)
        elif isinstance(value, (list, tuple)) and (len(value) > 4 or any(isinstance(v, (dict, list)) for v in value)):
            lines.append(f"{name}: {len(value)} values")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{name}: {', '.join(fmt(v) for v in value) or '-'}")
        else:
            lines.append(f"{name}: {fmt(value)}" if name else fmt(value))

    walk("", json_safe(body))
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])
