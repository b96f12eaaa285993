"""`yieldgate demo`: the main job on the built-in corpus, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import app, console


@app.command()
def demo(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="A smaller, faster version (about a minute).")] = False,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="HTML report to write (default: beside the ledger, LEDGER.html)."),
    ] = None,
) -> None:
    """The main job on the built-in corpus, with real trainings: pipeline A (dedup + filters) against pipeline B
    (everything, a bigger batch) at equal tokens and time, a mixture campaign with its ranking and decision
    accuracy, a gate decision on the best recipe's next stage, and the HTML report.

    Example: yieldgate --ledger demo.db demo --quick
    """
    from yieldgate.demo import run_demo

    run_demo(ctx.find_root().obj["ledger"], quick=quick, console=console, report=None if out is None else str(out))
