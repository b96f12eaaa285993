"""What every console view shares: a plain line (`say`), a stored body as `name: value` lines (`evidence_lines`),
and the one number formatter (`report.format.fmt`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from yieldgate.report.format import fmt
from yieldgate.util.jsonsafe import json_safe

__all__ = ["clean", "evidence_lines", "fmt", "say"]

clean = json_safe  # the name the CLI imports it by


def say(console: Console, text: str, **kwargs: Any) -> None:
    """One line as written: no markup, no highlighting (a run name with `[/]` prints as it is)."""
    console.print(text, markup=False, highlight=False, **kwargs)


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
