"""What every console view shares: a plain line (`say`), and, from `report.format`, a stored body as `name: value`
lines (`evidence_lines`) and the one number formatter (`fmt`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from yieldgate.report.format import evidence_lines, fmt
from yieldgate.util.jsonsafe import json_safe

__all__ = ["clean", "evidence_lines", "fmt", "say"]

clean = json_safe  # the name the CLI imports it by


def say(console: Console, text: str, **kwargs: Any) -> None:
    """One line as written: no markup, no highlighting (a run name with `[/]` prints as it is)."""
    console.print(text, markup=False, highlight=False, **kwargs)
